package tui

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/reinhq/rein/agent"
	"github.com/reinhq/rein/llm"
	"github.com/reinhq/rein/llm/scripted"
	"github.com/reinhq/rein/session"
)

// TestLiveSocket: context sent to the socket of a live session is written
// at once when it is idle (durably, at the seq answered) and staged for
// the running turn otherwise; a user source and garbage are refused; the
// file is 0600 and goes away with the session.
func TestLiveSocket(t *testing.T) {
	open, wait := gate()
	e := newEnv(t, scripted.Call{Reply: scripted.Reply{Text: []string{"done"}}, BeforeChunk: wait})
	ag, err := e.open(context.Background(), OpenRequest{})
	if err != nil {
		t.Fatal(err)
	}
	defer ag.Agent.Close(context.Background())
	path := filepath.Join(t.TempDir(), ".s.sock")
	sock, err := ServeInject(path, ag.Agent)
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 || fi.Mode()&os.ModeSocket == 0 {
		t.Fatalf("socket file: %v %v", fi.Mode(), err)
	}
	if _, err := ServeInject(path, ag.Agent); !errors.Is(err, ErrSocketInUse) {
		t.Errorf("a second server on the same path: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	r, err := SendInject(ctx, path, InjectRequest{Text: "CI is red", Source: session.Source{Kind: "plugin", Name: "ci"}})
	if err != nil || r.Placement != Written || r.Seq != 0 {
		t.Fatalf("idle inject: %+v %v", r, err)
	}
	stored := e.logOf(ag.Agent.ID()) // durable before the answer
	wantMessages(t, stored, "user/message plugin:ci: CI is red")

	if _, err := ag.Agent.Send(agent.Message{Content: llm.Text("go")}); err != nil {
		t.Fatal(err)
	}
	for ag.Agent.Status() != agent.Running {
		time.Sleep(time.Millisecond)
	}
	r, err = SendInject(ctx, path, InjectRequest{Text: "and lint", Source: session.Source{Kind: "user-context", Name: "cli"}})
	if err != nil || r.Placement != Staged {
		t.Fatalf("inject during a turn: %+v %v", r, err)
	}
	close(open)
	if err := ag.Agent.WhenIdle(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := SendInject(ctx, path, InjectRequest{Text: "x", Source: session.Source{Kind: session.SourceUser}}); err == nil || !strings.Contains(err.Error(), "source other than user") {
		t.Errorf("a user source: %v", err)
	}
	c, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	c.Write([]byte("not json\n"))
	buf := make([]byte, 256)
	n, _ := c.Read(buf)
	c.Close()
	if !strings.Contains(string(buf[:n]), `"ok":false`) || !strings.Contains(string(buf[:n]), "bad request") {
		t.Errorf("garbage answered %q", buf[:n])
	}
	if err := sock.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("the socket file stayed: %v", err)
	}
	if _, err := SendInject(ctx, path, InjectRequest{Text: "x", Source: session.Source{Kind: "plugin"}}); !errors.Is(err, ErrNoLiveSession) {
		t.Errorf("after close: %v", err)
	}
	if err := ag.Agent.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	wantMessages(t, e.logOf(ag.Agent.ID()), "user/message plugin:ci: CI is red", "user/message user: go", "user/message user-context:cli: and lint")
}

// TestStaleSocket: a socket file left by a process that died is replaced.
func TestStaleSocket(t *testing.T) {
	_, s := openedEnv(t)
	path := filepath.Join(t.TempDir(), ".s.sock")
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	ln.(*net.UnixListener).SetUnlinkOnClose(false)
	ln.Close() // the file stays; nobody listens
	sock, err := ServeInject(path, s.Agent)
	if err != nil {
		t.Fatalf("over a stale socket: %v", err)
	}
	sock.Close()
}

// A sandboxed command (it runs with no_new_privs) cannot use the socket,
// though it is of the same user and, with the network allowed, may
// connect to unix sockets: it would put words into any live session. The
// same client without no_new_privs gets in.
func TestSocketRefusesSandboxedPeers(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("no_new_privs is Linux's")
	}
	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		t.Skip("setpriv (util-linux) is not installed")
	}
	e, s := openedEnv(t)
	path := filepath.Join(t.TempDir(), ".s.sock")
	sock, err := ServeInject(path, s.Agent)
	if err != nil {
		t.Fatal(err)
	}
	defer sock.Close()
	client := func(wrap ...string) string {
		t.Helper()
		args := append(wrap, os.Args[0], "-test.run=^TestHelperSendInject$")
		cmd := exec.Command(args[0], args[1:]...)
		cmd.Env = append(os.Environ(), "REIN_TUI_TEST_SOCKET="+path)
		out, _ := cmd.CombinedOutput()
		return string(out)
	}
	if out := client(); !strings.Contains(out, "RESULT: ok") {
		t.Fatalf("control: a plain client of the same user: %s", out)
	}
	if out := client(setpriv, "--no-new-privs"); !strings.Contains(out, "no_new_privs") {
		t.Errorf("a client with no_new_privs: %s", out)
	}
	wantMessages(t, e.logOf(s.Agent.ID()), "user/message plugin:helper: from the helper")
}

// TestHelperSendInject is the client of TestSocketRefusesSandboxedPeers.
func TestHelperSendInject(t *testing.T) {
	path := os.Getenv("REIN_TUI_TEST_SOCKET")
	if path == "" {
		t.Skip("a helper process of TestSocketRefusesSandboxedPeers")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := SendInject(ctx, path, InjectRequest{Text: "from the helper", Source: session.Source{Kind: "plugin", Name: "helper"}}); err != nil {
		fmt.Println("RESULT:", err)
		return
	}
	fmt.Println("RESULT: ok")
}

// The socket's directory must be the user's and written by no one else:
// in a shared place another user could have made it and swap the sockets.
// Neither side uses a socket in such a directory, nor behind a symlink.
func TestSocketDirectoryIsPrivate(t *testing.T) {
	_, s := openedEnv(t)
	open := filepath.Join(t.TempDir(), "open")
	if err := os.Mkdir(open, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(open, 0o777); err != nil {
		t.Fatal(err)
	}
	if _, err := ServeInject(filepath.Join(open, "s.sock"), s.Agent); err == nil || !strings.Contains(err.Error(), "written by others") {
		t.Errorf("served in a 0777 directory: %v", err)
	}
	ctx := context.Background()
	if _, err := SendInject(ctx, filepath.Join(open, "s.sock"), InjectRequest{Text: "x", Source: session.Source{Kind: "plugin"}}); err == nil || errors.Is(err, ErrNoLiveSession) {
		t.Errorf("sent to a 0777 directory: %v", err)
	}
	private := filepath.Join(t.TempDir(), "private")
	if err := os.Mkdir(private, 0o700); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(t.TempDir(), "link")
	if err := os.Symlink(private, link); err != nil {
		t.Fatal(err)
	}
	if _, err := ServeInject(filepath.Join(link, "s.sock"), s.Agent); err == nil {
		t.Errorf("served behind a symlink")
	}
}

// openedEnv is an env with a new session open, closed when the test ends.
func openedEnv(t *testing.T) (*env, *Session) {
	t.Helper()
	e := newEnv(t)
	s, err := e.open(context.Background(), OpenRequest{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Agent.Close(context.Background()) })
	return e, s
}
