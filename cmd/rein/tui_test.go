package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/reinhq/rein/config"
	"github.com/reinhq/rein/llm"
	"github.com/reinhq/rein/redact"
	"github.com/reinhq/rein/session"
	"github.com/reinhq/rein/store"
	"github.com/reinhq/rein/store/jsonl"
	"github.com/reinhq/rein/trust"
	"github.com/reinhq/rein/tui"
)

// tmuxTerm is a real terminal: a tmux server of the test's own, one
// window running a command.
type tmuxTerm struct {
	t    *testing.T
	sock string
	name string
}

// newTmux starts cmd (a shell command line) in a w×h tmux window. Without
// tmux the test skips, unless REIN_TEST_TMUX_REQUIRED is set (CI installs
// tmux and sets it).
func newTmux(t *testing.T, dir string, env []string, w, h int, cmd string) *tmuxTerm {
	t.Helper()
	if _, err := exec.LookPath("tmux"); err != nil {
		if os.Getenv("REIN_TEST_TMUX_REQUIRED") != "" {
			t.Fatal("tmux is required (REIN_TEST_TMUX_REQUIRED) but not installed")
		}
		t.Skip("tmux is not installed; .ci/run installs it and runs this test")
	}
	tm := &tmuxTerm{t: t, sock: filepath.Join(t.TempDir(), "tmux.sock"), name: "rein"}
	var b strings.Builder
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		fmt.Fprintf(&b, "%s=%s ", k, shellQuote(v))
	}
	// The window stays after rein exits, so the last screen (and the
	// exit code) can still be read.
	line := fmt.Sprintf("cd %s && env %s %s; echo \"[exit $?]\"; sleep 600", shellQuote(dir), b.String(), cmd)
	tm.run("new-session", "-d", "-s", tm.name, "-x", fmt.Sprint(w), "-y", fmt.Sprint(h), line)
	t.Cleanup(func() { _ = exec.Command("tmux", "-S", tm.sock, "kill-server").Run() })
	return tm
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

func (tm *tmuxTerm) run(args ...string) string {
	tm.t.Helper()
	out, err := exec.Command("tmux", append([]string{"-S", tm.sock}, args...)...).CombinedOutput()
	if err != nil {
		tm.t.Fatalf("tmux %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// keys types literal text; key sends named keys (Enter, Escape, C-s).
func (tm *tmuxTerm) keys(text string) { tm.run("send-keys", "-t", tm.name, "-l", text) }
func (tm *tmuxTerm) key(names ...string) {
	tm.run(append([]string{"send-keys", "-t", tm.name}, names...)...)
}

func (tm *tmuxTerm) screen() string { return tm.run("capture-pane", "-p", "-t", tm.name) }

// waitFor waits until the screen shows want and returns it.
func (tm *tmuxTerm) waitFor(want string) string {
	tm.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	s := ""
	for time.Now().Before(deadline) {
		if s = tm.screen(); strings.Contains(s, want) {
			return s
		}
		time.Sleep(50 * time.Millisecond)
	}
	tm.t.Fatalf("the terminal never showed %q:\n%s", want, s)
	return ""
}

// TestTUIInTmux runs rein's terminal UI in a real terminal (tmux, 100×30)
// with the scripted model: a prompt, a steer while a slow tool runs, a
// context injected by another process through the live-session socket, a
// turn cancelled with esc; then checks the screen and the session's log.
// A second run resumes a session a crash left open.
func TestTUIInTmux(t *testing.T) {
	e := newACPEnv(t)
	e.write(".git/HEAD", "ref: refs/heads/main\n")
	e.write("main.go", "package main\n")
	e.write("script.json", `{"calls": [
 {"expect": {"lastUser": "list the files"},
  "reply": {"text": ["Let me look."], "toolCalls": [{"id": "c1", "name": "bash", "arguments": {"command": "sleep 2; ls"}}]}},
 {"expect": {"contains": ["only the go files", "main.go"]}, "reply": {"text": ["Only **main.go** is Go."]}},
 {"expect": {"lastUser": "now wait", "contains": ["CI is red"]}, "reply": {"text": ["Waiting for CI"]}, "hang": true}
]}`)
	rein, err := exec.LookPath("rein")
	if err != nil {
		t.Fatal(err)
	}
	env := []string{"REIN_HOME=" + e.home, "XDG_CONFIG_HOME=" + filepath.Join(e.root, "config"), "HOME=" + e.root, "TERM=xterm-256color"}
	tm := newTmux(t, e.work, env, 100, 30, shellQuote(rein)+" --model scripted:script.json")
	tm.waitFor("Ask rein…")

	tm.keys("list the files")
	tm.key("Enter")
	tm.waitFor("◐ bash: sleep 2; ls")
	tm.keys("only the go files")
	tm.key("C-s")
	s := tm.waitFor("Only main.go is Go.")
	for _, want := range []string{"› list the files", "Let me look.", "✓ bash: sleep 2; ls  exit 0", "↪ steering: only the go files"} {
		if !strings.Contains(s, want) {
			t.Errorf("screen lacks %q:\n%s", want, s)
		}
	}

	// Another process feeds context into the live session.
	st, err := jsonl.Open(e.home)
	if err != nil {
		t.Fatal(err)
	}
	infos, err := st.List(context.Background())
	if err != nil || len(infos) != 1 {
		t.Fatalf("sessions: %v %v", infos, err)
	}
	id := infos[0].ID
	inj := exec.Command(rein, "inject", "--session", id, "--source", "plugin:ci", "CI is red on main")
	inj.Dir, inj.Env = e.work, append(os.Environ(), env...)
	out, err := inj.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "injected into "+id) {
		t.Fatalf("rein inject into the live session: %v\n%s", err, out)
	}
	tm.waitFor("⊕ context · plugin ci")

	tm.keys("now wait")
	tm.key("Enter")
	tm.waitFor("Waiting for CI")
	tm.key("Escape")
	tm.waitFor("turn 2 ended: aborted (user)")
	tm.waitFor("› Ask rein…") // idle again: the input says so
	tm.key("C-c")
	s = tm.waitFor("[exit 0]")
	if !strings.Contains(s, "continue with: rein --session "+id) {
		t.Errorf("no resume hint after exit:\n%s", s)
	}

	// The log holds what the screen showed.
	ld, err := st.Load(context.Background(), id, store.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	evs := ld.Log.Events(0)
	if vs := session.Check(evs); len(vs) > 0 {
		t.Errorf("invariant: %v", vs)
	}
	var got []string
	for _, ev := range evs {
		p, err := ev.Decode()
		if err != nil {
			t.Fatal(err)
		}
		switch p := p.(type) {
		case *session.UserMessage:
			got = append(got, "user "+p.Source.String()+": "+llm.PlainText(p.Content))
		case *session.SteeringMessage:
			got = append(got, "steering: "+llm.PlainText(p.Content))
		case *session.TurnEnd:
			got = append(got, fmt.Sprintf("turn %d %s", p.Turn, p.Reason.Kind+" "+p.Reason.Cause))
		}
	}
	want := []string{"user user: list the files", "steering: only the go files", "turn 1 completed ", "user plugin:ci: CI is red on main",
		"user user: now wait", "turn 2 aborted user"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("log:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	// A session a crash left open: the UI shows it repaired.
	crashed := writeCrashedSession(t, e.home, e.work)
	e.write("none.json", `{"calls": []}`)
	tm2 := newTmux(t, e.work, env, 100, 30, shellQuote(rein)+" --model scripted:none.json --session "+crashed)
	s = tm2.waitFor("recovered: turn 1 was interrupted")
	for _, want := range []string{"⊕ context · session-ref s0@12", "› list the files", "Listing.", "✗ ls", "✗ read hello.txt"} {
		if !strings.Contains(s, want) {
			t.Errorf("repaired session: screen lacks %q:\n%s", want, s)
		}
	}
	tm2.key("C-c")
	tm2.waitFor("[exit 0]")
}

// setupApp is rein set up in dir as by the command line args, its stderr
// going to stderr: what the UI's and rein acp's openers work with.
func setupApp(t *testing.T, dir string, stderr io.Writer, args ...string) *app {
	t.Helper()
	a := &app{stdin: strings.NewReader(""), stdout: io.Discard, stderr: stderr, getenv: os.Getenv, red: redact.New(), proc: &procState{}}
	root := a.rootCmd()
	if err := root.ParseFlags(args); err != nil {
		t.Fatal(err)
	}
	a.cwd = dir // after the flags are defined (their default is "")
	if err := a.setup(root); err != nil {
		t.Fatal(err)
	}
	return a
}

// askTrust answers the trust question with a function.
type askTrust func(trust.Question) trust.Answer

func (f askTrust) AskTrust(_ context.Context, q trust.Question) (trust.Answer, error) {
	return f(q), nil
}

// /trust in the UI decides for the rest of the run: a session opened after
// it (/new, /resume) gets the workspace settings the answer allows, though
// the run decided otherwise when it started, and is not asked again.
func TestTUITrustAppliesToLaterSessions(t *testing.T) {
	repo := secureEnv(t)
	script := filepath.Join(t.TempDir(), "none.json")
	writeFile(t, script, `{"calls": []}`)
	t.Setenv("REIN_MODEL", "scripted:"+script)
	writeFile(t, filepath.Join(repo, ".rein", "config.toml"), "system_prompt = \"the project's prompt\"\n")
	var stderr bytes.Buffer
	a := setupApp(t, repo, &stderr)
	st, err := a.openStore()
	if err != nil {
		t.Fatal(err)
	}
	o := &tuiOpener{a: a, st: st, rules: &alwaysRules{a: a, face: "the terminal UI"}, ws: newWorkspaces(a)}
	ctx := context.Background()
	open := func(ask trust.Asker) string {
		t.Helper()
		s, err := o.open(ctx, tui.OpenRequest{Ask: ask})
		if err != nil {
			t.Fatalf("open: %v\n%s", err, stderr.String())
		}
		defer s.Close()
		if err := s.Agent.Close(ctx); err != nil {
			t.Fatal(err)
		}
		return o.ws.views[trust.Key(repo)].cfg.SystemPrompt
	}
	if got := open(askTrust(func(trust.Question) trust.Answer { return trust.No })); got != "" {
		t.Fatalf("untrusted: system prompt %q", got)
	}
	msg, err := o.trust(ctx, askTrust(func(trust.Question) trust.Answer { return trust.Once }))
	if err != nil || !strings.Contains(msg, "opened from now on") {
		t.Fatalf("/trust: %q, %v", msg, err)
	}
	got := open(askTrust(func(q trust.Question) trust.Answer {
		t.Errorf("asked again after /trust: %s", q.Text())
		return trust.No
	}))
	if got != "the project's prompt" {
		t.Errorf("after /trust: system prompt %q", got)
	}
}

// A closed session releases its sandboxes: the descriptors of the launcher
// and the write roots its mode views opened are closed, so a long-lived
// rein acp or UI does not gather them session after session.
func TestClosedSessionClosesItsSandboxes(t *testing.T) {
	repo := secureEnv(t)
	a := setupApp(t, repo, io.Discard)
	rules := &alwaysRules{a: a, face: "the terminal UI"}
	// The descriptors of this test's workspace, which its sessions'
	// sandboxes hold as a write root: other tests' sandboxes (holding the
	// launcher, this same test binary) are closed by the collector at
	// any time, so only the workspace, this test's own, is counted.
	fds := func() int {
		t.Helper()
		ents, err := os.ReadDir("/proc/self/fd")
		if err != nil {
			t.Skip("no /proc/self/fd:", err)
		}
		n := 0
		for _, e := range ents {
			if l, err := os.Readlink("/proc/self/fd/" + e.Name()); err == nil && l == repo {
				n++
			}
		}
		return n
	}
	before := fds()
	for range 3 {
		ps, err := rules.session(a, repo, config.WorkspaceWrite)
		if err != nil {
			t.Fatal(err)
		}
		opened := 0
		for _, v := range ps.byMode {
			if v.sandbox(repo) != nil {
				opened++
			}
		}
		if opened == 0 || fds() <= before {
			t.Fatalf("no sandbox held a descriptor (%d opened)", opened)
		}
		rules.drop(ps)
	}
	if after := fds(); after > before {
		t.Errorf("%d descriptors before three sessions, %d after they closed", before, after)
	}
}
