package hook

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestDecode(t *testing.T) {
	for _, tc := range []struct {
		name, event    string
		exit           int
		stdout, stderr string
		decision       string
		reason         string
		contexts       []string
		stop           bool
		updated        string
		warn           string
	}{
		{name: "exit0-silent", event: PreToolUse, decision: DecPass},
		{name: "exit2", event: PostToolUse, exit: 2, stdout: `{"decision":"approve"}`, stderr: " no \n", decision: DecBlock, reason: "no"},
		{name: "exit2-pretool", event: PreToolUse, exit: 2, stderr: "no", decision: DecDeny, reason: "no"},
		{name: "exit1", event: Stop, exit: 1, stderr: "oops", decision: DecError, reason: "exited with status 1: oops"},
		{name: "exit3-json-ignored", event: Stop, exit: 3, stdout: `{"decision":"block"}`, decision: DecError, reason: "exited with status 3"},
		{name: "plain-prompt", event: UserPromptSubmit, stdout: "ctx\n", decision: DecContext, contexts: []string{"ctx"}},
		{name: "plain-start", event: SessionStart, stdout: "ctx", decision: DecContext, contexts: []string{"ctx"}},
		{name: "plain-post-ignored", event: PostToolUse, stdout: "ctx", decision: DecPass},
		{name: "malformed", event: UserPromptSubmit, stdout: `{"a":`, decision: DecError, reason: "malformed JSON output"},
		{name: "legacy-approve", event: PreToolUse, stdout: `{"decision":"approve","reason":"ok"}`, decision: DecAllow, reason: "ok"},
		{name: "legacy-block", event: PreToolUse, stdout: `{"decision":"block","reason":"no"}`, decision: DecDeny, reason: "no"},
		{name: "approve-elsewhere", event: Stop, stdout: `{"decision":"approve"}`, decision: DecPass},
		{name: "unknown-decision", event: Stop, stdout: `{"decision":"deny"}`, decision: DecPass, warn: `unknown decision "deny"`},
		{name: "permission-overrides", event: PreToolUse,
			stdout:   `{"decision":"block","reason":"r1","hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"ask","permissionDecisionReason":"r2"}}`,
			decision: DecAsk, reason: "r2"},
		{name: "updated-input", event: PreToolUse,
			stdout:   `{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"allow","updatedInput":{"command":"ls"}}}`,
			decision: DecAllow, updated: `{"command":"ls"}`},
		{name: "updated-input-not-object", event: PreToolUse,
			stdout:   `{"hookSpecificOutput":{"hookEventName":"PreToolUse","updatedInput":"ls"}}`,
			decision: DecPass, warn: "not a JSON object"},
		{name: "event-mismatch", event: PostToolUse,
			stdout:   `{"reason":"x","decision":"block","hookSpecificOutput":{"hookEventName":"PreToolUse","additionalContext":"lost"}}`,
			decision: DecBlock, reason: "x", warn: "its fields are ignored"},
		{name: "context", event: PostToolUse,
			stdout:   `{"suppressOutput":true,"hookSpecificOutput":{"hookEventName":"PostToolUse","additionalContext":"more"}}`,
			decision: DecContext, contexts: []string{"more"}},
		{name: "continue-false", event: UserPromptSubmit, stdout: `{"continue":false,"stopReason":"halt"}`, decision: DecStop, stop: true},
		{name: "continue-false-with-block", event: Stop, stdout: `{"continue":false,"decision":"block","reason":"more"}`, decision: DecBlock, reason: "more", stop: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code := tc.exit
			r := &result{Hook: &Command{ID: "x"}, ExitCode: &code, Stdout: tc.stdout, Stderr: tc.stderr}
			r.decode(tc.event)
			if r.Decision != tc.decision || !strings.HasPrefix(r.Reason, tc.reason) || r.Stop != tc.stop {
				t.Errorf("got decision %q reason %q stop %v", r.Decision, r.Reason, r.Stop)
			}
			if js(r.Contexts) != js(tc.contexts) {
				t.Errorf("contexts %q, want %q", r.Contexts, tc.contexts)
			}
			if string(r.UpdatedInput) != tc.updated {
				t.Errorf("updatedInput %s, want %s", r.UpdatedInput, tc.updated)
			}
			if w := strings.Join(r.Warnings, "|"); (tc.warn == "") != (w == "") || !strings.Contains(w, tc.warn) {
				t.Errorf("warnings %q, want %q", w, tc.warn)
			}
		})
	}
}

func js(v any) string { b, _ := json.Marshal(v); return string(b) }

func TestToolMap(t *testing.T) {
	m := toolMap(DefaultTools)
	for rein, cc := range map[string]string{"bash": "Bash", "read": "Read", "write": "Write", "edit": "Edit",
		"glob": "Glob", "grep": "Grep", "ls": "LS", "todo": "TodoWrite", "mcp__x__y": "mcp__x__y"} {
		if got := m.name(rein); got != cc {
			t.Errorf("%s -> %s, want %s", rein, got, cc)
		}
	}
	in := `{"pattern":"a+","case_insensitive":true,"context":2,"output_mode":"files"}`
	got := m.toCC("grep", in, "")
	if want := `{"-C":2,"-i":true,"output_mode":"files_with_matches","pattern":"a+"}`; string(got) != want {
		t.Errorf("grep toCC %s, want %s", got, want)
	}
	back := m.fromCC("grep", got)
	var a, b map[string]any
	_ = json.Unmarshal([]byte(in), &a)
	_ = json.Unmarshal(back, &b)
	if js(a) != js(b) {
		t.Errorf("grep round trip %s, want %s", back, in)
	}
	if got := m.toCC("bash", `{"command":"ls","timeout_ms":5}`, "/w"); string(got) != `{"command":"ls","timeout":5}` {
		t.Errorf("bash toCC %s", got)
	}
	// Paths are absolute for hooks, as in Claude Code; an absolute one and
	// an input without paths stay byte for byte.
	for in, want := range map[string]string{
		`{"file_path":"a"}`:                    `{"file_path":"/w/a"}`,
		`{"file_path":"/abs/a","content":"x"}`: `{"file_path":"/abs/a","content":"x"}`,
		`{"pattern":"*.go","path":"src"}`:      `{"path":"/w/src","pattern":"*.go"}`,
		`{"path":"~/notes"}`:                   `{"path":"~/notes"}`,
		`{"todos":[]}`:                         `{"todos":[]}`,
	} {
		if got := m.toCC("write", in, "/w"); string(got) != want {
			t.Errorf("toCC %s = %s, want %s", in, got, want)
		}
	}
}

func TestClip(t *testing.T) {
	s := strings.Repeat("é", 10) // 20 bytes
	got := clip(s, 5)
	if !strings.HasPrefix(got, "éé…") || !strings.HasSuffix(got, "[20 bytes]") {
		t.Errorf("clip %q", got)
	}
	if clip("short", 10) != "short" {
		t.Errorf("clip changed a short string")
	}
}
