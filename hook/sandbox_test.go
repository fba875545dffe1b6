package hook

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
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
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	sb := &sandbox.Sandbox{Launcher: sandbox.Launcher{Path: exe}, Policy: sandbox.Policy{Write: []string{proj}}}
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
