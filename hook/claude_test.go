package hook_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/reinhq/rein/hook"
	"github.com/reinhq/rein/llm/scripted"
	"github.com/reinhq/rein/session"
)

// readPayload reads the one payload record.sh appended to path.
func readPayload(t *testing.T, path string) map[string]any {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var p map[string]any
	if err := json.Unmarshal(b, &p); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	return p
}

func TestPermissionModeInEveryPayload(t *testing.T) {
	f := filepath.Join(t.TempDir(), "p")
	e := newEnv(t, config(t, hk{event: hook.UserPromptSubmit, command: script(t, "record.sh", f)}), []scripted.Call{say("ok")},
		withRuntime(func(rt *hook.Runtime) { rt.PermissionMode = hook.ClaudePermissionMode("workspace-write") }))
	e.send("hi")
	if got := readPayload(t, f)["permission_mode"]; got != "acceptEdits" {
		t.Errorf("permission_mode %v, want acceptEdits", got)
	}
	for mode, want := range map[string]string{"read-only": "plan", "full-access": "bypassPermissions", "default": "default"} {
		if got := hook.ClaudePermissionMode(mode); got != want {
			t.Errorf("%s -> %s, want %s", mode, got, want)
		}
	}
}

func TestDisableAllHooks(t *testing.T) {
	proj, user := t.TempDir(), t.TempDir()
	writeFile(t, filepath.Join(user, "rein", "settings.json"),
		`{"hooks":{"PreToolUse":[{"hooks":[{"type":"command","command":"user-check"}]}]}}`)
	writeFile(t, filepath.Join(proj, ".rein", "settings.json"), `{"disableAllHooks":true}`)
	c, err := hook.Load(hook.LoadOptions{ProjectDir: proj, UserConfigDir: user, Home: "-"})
	if err != nil {
		t.Fatal(err)
	}
	if c.Len(hook.PreToolUse) != 0 || c.DisabledBy != filepath.Join(proj, ".rein", "settings.json") {
		t.Errorf("%d PreToolUse hooks, disabled by %q: disableAllHooks is ignored", c.Len(hook.PreToolUse), c.DisabledBy)
	}
	h := c.Hooks(hook.Runtime{Cwd: proj})
	if len(h.ToolPre)+len(h.PromptAdmission)+len(h.SessionStart) != 0 {
		t.Errorf("hooks still wired: %+v", h)
	}
	// It is the workspace's say (a trust item), and an untrusted
	// workspace's file has none: the user's hooks run.
	if d := c.ProjectDisablers(); len(d) != 1 || d[0] != filepath.Join(proj, ".rein", "settings.json") {
		t.Errorf("ProjectDisablers %q", d)
	}
	if u := c.WithoutProject(); u.DisabledBy != "" || u.Len(hook.PreToolUse) != 1 {
		t.Errorf("without the project: disabled by %q, %d PreToolUse hooks", u.DisabledBy, u.Len(hook.PreToolUse))
	}
	// The user's own file disables them everywhere.
	writeFile(t, filepath.Join(user, "rein", "settings.json"),
		`{"disableAllHooks":true,"hooks":{"PreToolUse":[{"hooks":[{"type":"command","command":"user-check"}]}]}}`)
	c, err = hook.Load(hook.LoadOptions{ProjectDir: proj, UserConfigDir: user, Home: "-"})
	if err != nil {
		t.Fatal(err)
	}
	if u := c.WithoutProject(); u.DisabledBy != filepath.Join(user, "rein", "settings.json") || u.Len(hook.PreToolUse) != 0 {
		t.Errorf("user's disableAllHooks: disabled by %q, %d PreToolUse hooks", u.DisabledBy, u.Len(hook.PreToolUse))
	}
	if d := c.ProjectDisablers(); len(d) != 1 {
		t.Errorf("the user's file is no project's: ProjectDisablers %q", d)
	}
}

func TestSessionEndAndNotification(t *testing.T) {
	dir := t.TempDir()
	end, note := filepath.Join(dir, "end"), filepath.Join(dir, "note")
	e := newEnv(t, config(t,
		hk{event: hook.SessionEnd, command: script(t, "record.sh", end)},
		hk{event: hook.Notification, matcher: "permission_prompt", command: script(t, "record.sh", note)},
		hk{event: hook.Notification, matcher: "idle_prompt", command: "echo never > " + shq(filepath.Join(dir, "idle"))},
	), nil)
	e.cfg.Notification(context.Background(), e.a, e.rt, hook.NotifyPermission, "rein needs your permission to use Bash")
	e.cfg.SessionEnd(context.Background(), e.a, e.rt, hook.EndOther)
	p := readPayload(t, note)
	if p["hook_event_name"] != "Notification" || p["notification_type"] != "permission_prompt" || p["message"] != "rein needs your permission to use Bash" {
		t.Errorf("Notification payload %s", js(p))
	}
	if _, err := os.Stat(filepath.Join(dir, "idle")); err == nil {
		t.Error("a Notification hook ran for another notification_type")
	}
	if p := readPayload(t, end); p["hook_event_name"] != "SessionEnd" || p["reason"] != "other" || p["session_id"] != "s1" {
		t.Errorf("SessionEnd payload %s", js(p))
	}
	var points []string
	for _, r := range e.hookResults() {
		points = append(points, r.Point+" "+r.Hook)
	}
	if strings.Join(points, ", ") != "Notification claude-code:Notification#1, SessionEnd claude-code:SessionEnd#1" {
		t.Errorf("recorded %q", points)
	}
	if vs := session.Check(e.events()); len(vs) > 0 {
		t.Errorf("invariant: %v", vs)
	}
}

func TestUpdatedInputOfTheLastHookToFinishWins(t *testing.T) {
	upd := func(path string) string {
		return `{"hookSpecificOutput":{"hookEventName":"PreToolUse","updatedInput":{"file_path":"` + path + `","content":"x"}}}`
	}
	// The middle hook in config order finishes last: its rewrite wins
	// (neither the first nor the last in order), and it replaces the whole
	// input.
	e := newEnv(t, config(t,
		hk{event: hook.PreToolUse, command: script(t, "json.sh", upd("first.txt"))},
		hk{event: hook.PreToolUse, command: "sleep 0.4; " + script(t, "json.sh", upd("slow.txt"))},
		hk{event: hook.PreToolUse, command: script(t, "json.sh", upd("last.txt"))},
	), []scripted.Call{callWrite("a.txt"), say("done")})
	e.send("hi")
	for _, ev := range e.events() {
		if ev.Type == session.TypeToolCall {
			c := ev.MustDecode().(*session.ToolCall)
			if c.Arguments != `{"file_path":"slow.txt","content":"x"}` || c.OriginalArguments != `{"file_path":"a.txt","content":"x"}` {
				t.Errorf("tool/call %s (original %s): want the slow hook's input", c.Arguments, c.OriginalArguments)
			}
		}
	}
}
