package tui

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
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
	e := newEnv(t)
	s, err := e.open(context.Background(), OpenRequest{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Agent.Close(context.Background())
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
