package hook_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/reinhq/rein/hook"
)

func writeFile(t *testing.T, path, text string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

func ids(c *hook.Config, event string) []string {
	var out []string
	for _, h := range c.Commands(event) {
		out = append(out, h.ID+"="+h.Command)
	}
	return out
}

func TestLoad(t *testing.T) {
	proj, user, home := t.TempDir(), t.TempDir(), t.TempDir()
	writeFile(t, filepath.Join(user, "rein", "settings.json"),
		`{"model":"x","hooks":{"PreToolUse":[{"matcher":"Bash","hooks":[{"type":"command","command":"user-check","timeout":5}]}]}}`)
	writeFile(t, filepath.Join(home, ".claude", "settings.json"),
		`{"permissions":{"allow":["Bash(ls)"]},"hooks":{"PreToolUse":[{"hooks":[{"type":"command","command":"claude-user-check"}]}]}}`)
	writeFile(t, filepath.Join(proj, ".rein", "settings.json"),
		`{"hooks":{"PreToolUse":[{"hooks":[{"type":"command","command":"project-check"}]}],
		  "SubagentStop":[{"hooks":[{"type":"command","command":"notify-send hi"}]}],
		  "PreToolUSe":[{"hooks":[{"type":"command","command":"typo"}]}]}}`)
	writeFile(t, filepath.Join(proj, ".claude", "settings.json"),
		`{"permissions":{},"hooks":{"PreToolUse":[{"matcher":"Edit|Write","hooks":[
		   {"type":"command","command":"claude-check"},{"type":"prompt","prompt":"is it ok?"}]}]}}`)
	writeFile(t, filepath.Join(proj, ".claude", "settings.local.json"),
		`{"hooks":{"PreToolUse":[{"hooks":[{"type":"command","command":"claude-local-check"}]}]}}`)

	// Claude Code's files load unchanged, the user's before the
	// workspace's, and the workspace's in Claude Code's order.
	c, err := hook.Load(hook.LoadOptions{ProjectDir: proj, UserConfigDir: user, Home: home})
	if err != nil {
		t.Fatal(err)
	}
	want := "claude-code:PreToolUse#1=user-check claude-code:PreToolUse#2=claude-user-check claude-code:PreToolUse#3=project-check " +
		"claude-code:PreToolUse#4=claude-check claude-code:PreToolUse#5=claude-local-check"
	if got := strings.Join(ids(c, hook.PreToolUse), " "); got != want {
		t.Errorf("hooks:\n got %s\nwant %s", got, want)
	}
	if len(c.Warnings) != 3 || !strings.Contains(c.Warnings[0], `unknown hook event "PreToolUSe" (did you mean "PreToolUse"?); its hooks are ignored`) ||
		!strings.Contains(c.Warnings[1], `hook event "SubagentStop" is not supported by rein`) ||
		!strings.Contains(c.Warnings[2], `hook type "prompt" is not supported`) {
		t.Errorf("warnings %q", c.Warnings)
	}
	if h := c.Commands(hook.PreToolUse)[0]; h.Timeout != 5*time.Second || h.File != filepath.Join(user, "rein", "settings.json") {
		t.Errorf("user hook %+v", h)
	}
	if len(c.Files) != 5 {
		t.Errorf("files %q", c.Files)
	}

	// An untrusted workspace: only the user's own hooks, same IDs.
	var proj1 []string
	for _, h := range c.ProjectCommands() {
		proj1 = append(proj1, h.Command)
	}
	if strings.Join(proj1, ",") != "project-check,claude-check,claude-local-check" {
		t.Errorf("ProjectCommands = %q", proj1)
	}
	u := c.WithoutProject()
	if got := strings.Join(ids(u, hook.PreToolUse), " "); got != "claude-code:PreToolUse#1=user-check claude-code:PreToolUse#2=claude-user-check" ||
		len(u.Files) != 2 || len(u.ProjectCommands()) != 0 {
		t.Errorf("WithoutProject: %s, files %q", got, u.Files)
	}
	if c.Len(hook.PreToolUse) != 5 {
		t.Error("WithoutProject changed its receiver")
	}

	// "-" skips the user's files.
	c, err = hook.Load(hook.LoadOptions{ProjectDir: proj, UserConfigDir: "-", Home: "-"})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(ids(c, hook.PreToolUse), " "); got != "claude-code:PreToolUse#1=project-check claude-code:PreToolUse#2=claude-check claude-code:PreToolUse#3=claude-local-check" {
		t.Errorf("without the user's files: %s", got)
	}

	// No files at all: an empty config.
	c, err = hook.Load(hook.LoadOptions{ProjectDir: t.TempDir(), UserConfigDir: t.TempDir(), Home: t.TempDir()})
	if err != nil || c.Len(hook.PreToolUse) != 0 || len(c.Files) != 0 {
		t.Errorf("empty: %v %+v", err, c)
	}
}

func TestLoadErrors(t *testing.T) {
	for _, tc := range []struct{ name, text, want string }{
		{"malformed", `{"hooks": {`, "unexpected end of JSON input"},
		{"shape", `{"hooks": {"Stop": {"hooks": []}}}`, "hooks.Stop: want a list"},
		{"unknown-type", `{"hooks":{"Stop":[{"hooks":[{"type":"script","command":"x"}]}]}}`, `hooks.Stop[0].hooks[0]: unknown hook type "script"`},
		{"missing-type", `{"hooks":{"Stop":[{"hooks":[{"command":"x"}]}]}}`, `missing "type"`},
		{"no-command", `{"hooks":{"Stop":[{"hooks":[{"type":"command"}]}]}}`, `non-empty "command"`},
		{"bad-timeout", `{"hooks":{"Stop":[{"hooks":[{"type":"command","command":"x","timeout":-1}]}]}}`, "timeout must be a positive"},
		{"bad-regex", `{"hooks":{"PreToolUse":[{"matcher":"Edit(","hooks":[{"type":"command","command":"x"}]}]}}`, `hooks.PreToolUse[0].matcher "Edit("`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			proj := t.TempDir()
			path := filepath.Join(proj, ".rein", "settings.json")
			writeFile(t, path, tc.text)
			_, err := hook.Load(hook.LoadOptions{ProjectDir: proj, UserConfigDir: "-", Home: "-"})
			if !errors.Is(err, hook.ErrConfig) || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want ErrConfig naming %s and %q", err, path, tc.want)
			}
		})
	}
}

func TestMatchers(t *testing.T) {
	for _, tc := range []struct {
		matcher string
		yes, no []string
	}{
		{"", []string{"Bash", "anything"}, nil},
		{"*", []string{"Bash", "Write"}, nil},
		{"Write", []string{"Write"}, []string{"WriteFile", "write", "Edit"}},
		{"Edit|Write", []string{"Edit", "Write"}, []string{"MultiEdit", "Read"}},
		{"Notebook.*", []string{"NotebookEdit", "NotebookRead"}, []string{"Write"}},
		{"mcp__memory__.*", []string{"mcp__memory__create"}, []string{"mcp__github__x"}},
		{"^Bash$", []string{"Bash"}, []string{"Bashful"}},
		{"startup", []string{"startup"}, []string{"resume"}},
	} {
		c, err := hook.Parse("m.json", []byte(`{"hooks":{"PreToolUse":[{"matcher":`+jsonString(tc.matcher)+`,"hooks":[{"type":"command","command":"x"}]}]}}`))
		if err != nil {
			t.Fatalf("%q: %v", tc.matcher, err)
		}
		h := c.Commands(hook.PreToolUse)[0]
		for _, s := range tc.yes {
			if !h.Matches(s) {
				t.Errorf("matcher %q does not match %q", tc.matcher, s)
			}
		}
		for _, s := range tc.no {
			if h.Matches(s) {
				t.Errorf("matcher %q matches %q", tc.matcher, s)
			}
		}
	}
	// UserPromptSubmit and Stop ignore their matcher.
	c, err := hook.Parse("m.json", []byte(`{"hooks":{"Stop":[{"matcher":"Bash","hooks":[{"type":"command","command":"x"}]}]}}`))
	if err != nil {
		t.Fatal(err)
	}
	if !c.Commands(hook.Stop)[0].Matches("") {
		t.Errorf("Stop hook with a matcher does not fire")
	}
}

func jsonString(s string) string { return js(s) }
