package shell

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/reinhq/rein/llm"
	"github.com/reinhq/rein/sandbox"
	"github.com/reinhq/rein/tool"
)

// TestMain lets this test binary act as the sandbox launcher, as rein does.
func TestMain(m *testing.M) {
	sandbox.Launch()
	os.Exit(m.Run())
}

func testSandbox(t *testing.T, write ...string) *sandbox.Sandbox {
	t.Helper()
	s := sandbox.New(sandbox.Launcher{}, sandbox.Policy{Write: write})
	t.Cleanup(func() { s.Close() })
	if st := s.Probe(); !st.Available() {
		t.Skipf("no OS sandbox here: %s", st.Why)
	}
	return s
}

func TestSandboxedCommands(t *testing.T) {
	e := env(t)
	outside := t.TempDir()
	b := Bash(Options{Sandbox: testSandbox(t, e.Dir)})
	// The bash tool's own control: the same escape works unsandboxed.
	plain := Bash(Options{})
	esc := "cd -P . && cp -t " + outside + " /etc/hostname"
	if r, _ := runBash(t, context.Background(), plain, e, map[string]any{"command": esc}); r.IsError {
		t.Fatalf("control failed: %s", text(r))
	}
	os.Remove(filepath.Join(outside, "hostname"))

	r, m := runBash(t, context.Background(), b, e, map[string]any{"command": "echo hi > in.txt && cat in.txt"})
	if r.IsError || !m.Sandboxed || !strings.Contains(text(r), "hi") {
		t.Fatalf("inside: %s %+v", text(r), m)
	}
	for _, cmd := range []string{esc, "ln -s " + outside + " o && echo x > o/f", "cat /proc/$PPID/environ"} {
		r, m := runBash(t, context.Background(), b, e, map[string]any{"command": cmd})
		if !r.IsError || !m.Sandboxed {
			t.Errorf("%s: not refused: %s", cmd, text(r))
		}
		if !strings.Contains(text(r), "[sandbox: writes outside "+e.Dir) {
			t.Errorf("%s: no sandbox note: %s", cmd, text(r))
		}
	}
	if ents, _ := os.ReadDir(outside); len(ents) != 0 {
		t.Errorf("outside holds %d entries", len(ents))
	}
}

// A sandboxed command has no controlling terminal and still leads its own
// process group: the timeout and cancel kills reach every process it
// started.
func TestSandboxedKillsProcessGroup(t *testing.T) {
	e := env(t)
	b := Bash(Options{KillGrace: 200 * time.Millisecond, Sandbox: testSandbox(t, e.Dir)})
	res, m := runBash(t, context.Background(), b, e, map[string]any{"command": spawn, "timeout_ms": 1000})
	if !res.IsError || res.Code != tool.CodeTimeout || !m.Sandboxed {
		t.Fatalf("result %+v meta %+v", res, m)
	}
	pidsGone(t, readPids(t, filepath.Join(e.Dir, "pids"), 3))

	os.Remove(filepath.Join(e.Dir, "pids"))
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		readPids(t, filepath.Join(e.Dir, "pids"), 3)
		cancel()
	}()
	res, m = runBash(t, ctx, b, e, map[string]any{"command": spawn})
	if !res.IsError || res.Code != tool.CodeAborted || !m.Sandboxed {
		t.Fatalf("result %+v meta %+v", res, m)
	}
	pidsGone(t, readPids(t, filepath.Join(e.Dir, "pids"), 3))

	r, _ := runBash(t, context.Background(), b, e, map[string]any{"command": "ps -o pgid=,tty= -p $$; echo $$"})
	if f := strings.Fields(text(r)); len(f) != 3 || f[0] != f[2] || f[1] != "?" {
		t.Errorf("want the command leading its own process group, without a terminal: %q", text(r))
	}
}

func text(r tool.Result) string { return llm.PlainText(r.Content) }
