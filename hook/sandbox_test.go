package hook

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/reinhq/rein/sandbox"
)

// TestMain lets this test binary act as the sandbox launcher, as rein does.
func TestMain(m *testing.M) {
	sandbox.Launch()
	os.Exit(m.Run())
}

// TestHookSandbox: hooks run sandboxed; the user's own settings may take
// one out ("sandbox": false), a project's settings may not.
func TestHookSandbox(t *testing.T) {
	user, proj, out := t.TempDir(), t.TempDir(), t.TempDir()
	sb := sandbox.New(sandbox.Launcher{}, sandbox.Policy{Write: []string{proj}})
	defer sb.Close()
	if st := sb.Probe(); !st.Available() {
		t.Skipf("no OS sandbox here: %s", st.Why)
	}
	settings := func(file, name string) {
		t.Helper()
		doc := fmt.Sprintf(`{"hooks": {"SessionStart": [{"hooks": [
			{"type": "command", "command": "echo x > %s/%s-free", "sandbox": false},
			{"type": "command", "command": "echo x > %s/%s-boxed"}]}]}}`, out, name, out, name)
		if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(file, []byte(doc), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	settings(filepath.Join(user, "rein", "settings.json"), "user")
	settings(filepath.Join(proj, ".rein", "settings.json"), "project")
	c, err := Load(LoadOptions{ProjectDir: proj, UserConfigDir: user})
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Warnings) != 1 || !strings.Contains(c.Warnings[0], `"sandbox": false is ignored`) || !strings.Contains(c.Warnings[0], ".rein") {
		t.Errorf("warnings: %q", c.Warnings)
	}
	rt := Runtime{Sandbox: sb}
	for _, h := range c.Commands(SessionStart) {
		r := execHook(context.Background(), h, nil, proj, []string{"PATH=" + os.Getenv("PATH")}, 10*time.Second, rt.sandboxFor(h))
		t.Logf("%s unsandboxed=%v %s", h.Command, h.Unsandboxed, r.Stderr)
	}
	for name, want := range map[string]bool{"user-free": true, "user-boxed": false, "project-free": false, "project-boxed": false} {
		_, err := os.Stat(filepath.Join(out, name))
		if (err == nil) != want {
			t.Errorf("%s written: %v, want %v", name, err == nil, want)
		}
	}
}

// A session whose mode changes while it runs (rein acp's session/set_mode)
// gives the hooks a Mode function: each run takes the sandbox and the
// permission_mode in force then, not those of the session's start.
func TestRuntimeModeFollowsTheSession(t *testing.T) {
	strict, loose := &sandbox.Sandbox{}, (*sandbox.Sandbox)(nil)
	mode, sb := "default", strict
	rt := Runtime{Sandbox: loose, PermissionMode: "bypassPermissions", Mode: func() (string, *sandbox.Sandbox) { return mode, sb }}
	if got := rt.sandboxFor(&Command{}); got != strict || rt.permissionMode() != "default" {
		t.Fatalf("sandbox %p, mode %q: want the session's current ones", got, rt.permissionMode())
	}
	mode, sb = "bypassPermissions", nil
	if got := rt.sandboxFor(&Command{}); got != nil || rt.permissionMode() != "bypassPermissions" {
		t.Fatalf("after the switch: sandbox %p, mode %q", got, rt.permissionMode())
	}
	mode, sb = "default", strict
	if got := rt.sandboxFor(&Command{Unsandboxed: true}); got != nil {
		t.Fatal("a hook the user marked unsandboxed got a sandbox")
	}
}

// A sandboxed hook has no controlling terminal to type into, and its
// timeout still kills what it started.
func TestSandboxedHookSession(t *testing.T) {
	dir := t.TempDir()
	sb := sandbox.New(sandbox.Launcher{}, sandbox.Policy{Write: []string{dir}})
	defer sb.Close()
	if st := sb.Probe(); !st.Available() {
		t.Skipf("no OS sandbox here: %s", st.Why)
	}
	env := []string{"PATH=" + os.Getenv("PATH")}
	r := execHook(context.Background(), &Command{Command: "ps -o pgid=,tty= -p $$; echo $$"}, nil, dir, env, 10*time.Second, sb)
	if f := strings.Fields(r.Stdout); len(f) != 3 || f[0] != f[2] || f[1] != "?" {
		t.Errorf("want the hook leading its own process group, without a terminal: %q %s", r.Stdout, r.Stderr)
	}
	start := time.Now()
	r = execHook(context.Background(), &Command{Command: "sleep 30 & echo $! > child; wait"}, nil, dir, env, 500*time.Millisecond, sb)
	if r.Decision != DecTimeout || time.Since(start) > 5*time.Second {
		t.Fatalf("decision %q after %v", r.Decision, time.Since(start))
	}
	b, _ := os.ReadFile(filepath.Join(dir, "child"))
	var pid int
	fmt.Sscan(string(b), &pid)
	for i := 0; pid > 0 && i < 200; i++ {
		if syscall.Kill(pid, 0) != nil {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("the hook's child %d survived its timeout", pid)
}
