package hook_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/reinhq/rein/hook"
	"github.com/reinhq/rein/llm/scripted"
	"github.com/reinhq/rein/session"
)

// The hook matrix: each event × allow / block / context / error / timeout,
// with real shell scripts from testdata, run through a real agent.

const shortTimeout = 0.3 // seconds, for the timeout cases

// checkResult checks one hook/result record.
func checkResult(t *testing.T, r *session.HookResult, point, hookID, decision string, exit int) {
	t.Helper()
	if r.Point != point || r.Hook != hookID || r.Decision != decision {
		t.Errorf("hook/result = %s, want point %s hook %s decision %s", js(r), point, hookID, decision)
	}
	switch {
	case exit < 0 && r.ExitCode != nil:
		t.Errorf("hook/result exit code %d, want none", *r.ExitCode)
	case exit >= 0 && (r.ExitCode == nil || *r.ExitCode != exit):
		t.Errorf("hook/result exit code %v, want %d", r.ExitCode, exit)
	}
}

func expectNote(t *testing.T, e *env, sub string) {
	t.Helper()
	if !strings.Contains(e.notesText(), sub) {
		t.Errorf("notifications %q lack %q", e.notesText(), sub)
	}
}

func TestSessionStart(t *testing.T) {
	turn := []string{"turn/start", "u:hi", "step/start", "assistant/message", "step/end", "turn/end{completed}"}
	t.Run("allow", func(t *testing.T) {
		e := newEnv(t, config(t, hk{event: hook.SessionStart, matcher: "startup", command: script(t, "allow.sh")}), []scripted.Call{say("ok")})
		e.send("hi")
		expectKinds(t, e.events(), append([]string{"hook/result claude-code:SessionStart#1 pass"}, turn...)...)
		checkResult(t, e.only(), "SessionStart", "claude-code:SessionStart#1", hook.DecPass, 0)
	})
	t.Run("block", func(t *testing.T) {
		// SessionStart cannot block: stderr is shown to the user.
		e := newEnv(t, config(t, hk{event: hook.SessionStart, command: script(t, "block.sh")}), []scripted.Call{say("ok")})
		e.send("hi")
		expectKinds(t, e.events(), append([]string{"hook/result claude-code:SessionStart#1 block"}, turn...)...)
		checkResult(t, e.only(), "SessionStart", "claude-code:SessionStart#1", hook.DecBlock, 2)
		expectNote(t, e, "blocked by block.sh on SessionStart")
	})
	t.Run("context", func(t *testing.T) {
		e := newEnv(t, config(t,
			hk{event: hook.SessionStart, matcher: "startup|resume", command: script(t, "context.sh")},
			hk{event: hook.SessionStart, matcher: "resume", command: script(t, "context.sh", "not-startup")},
			hk{event: hook.SessionStart, command: script(t, "plain.sh")},
		), []scripted.Call{{Match: lastUser("hi"), Reply: scripted.Reply{Text: []string{"ok"}}}})
		e.send("hi")
		e.golden("sessionstart-context")
		expectKinds(t, e.events(), append([]string{
			"hook/result claude-code:SessionStart#1 context",
			"hook/result claude-code:SessionStart#3 context",
			"c:hook:claude-code:SessionStart#1:context.sh for SessionStart",
			"c:hook:claude-code:SessionStart#3:plain context from plain.sh",
		}, turn...)...)
	})
	t.Run("error", func(t *testing.T) {
		e := newEnv(t, config(t, hk{event: hook.SessionStart, command: script(t, "error.sh")}), []scripted.Call{say("ok")})
		e.send("hi")
		checkResult(t, e.only(), "SessionStart", "claude-code:SessionStart#1", hook.DecError, 1)
		expectNote(t, e, "exited with status 1: error.sh: something broke")
		if got := e.only().Stderr; got != "error.sh: something broke" {
			t.Errorf("recorded stderr %q", got)
		}
	})
	t.Run("timeout", func(t *testing.T) {
		start := time.Now()
		e := newEnv(t, config(t, hk{event: hook.SessionStart, command: script(t, "sleep.sh"), timeout: shortTimeout}), []scripted.Call{say("ok")})
		e.send("hi")
		checkResult(t, e.only(), "SessionStart", "claude-code:SessionStart#1", hook.DecTimeout, -1)
		expectNote(t, e, "timed out after 300ms")
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("took %s", d)
		}
	})
}

func TestUserPromptSubmit(t *testing.T) {
	turn := []string{"turn/start", "u:hi", "step/start", "assistant/message", "step/end", "turn/end{completed}"}
	t.Run("allow", func(t *testing.T) {
		e := newEnv(t, config(t, hk{event: hook.UserPromptSubmit, command: script(t, "allow.sh")}), []scripted.Call{say("ok")})
		e.send("hi")
		expectKinds(t, e.events(), append([]string{"hook/result claude-code:UserPromptSubmit#1 pass"}, turn...)...)
		checkResult(t, e.only(), "PromptAdmission", "claude-code:UserPromptSubmit#1", hook.DecPass, 0)
	})
	t.Run("block", func(t *testing.T) {
		e := newEnv(t, config(t, hk{event: hook.UserPromptSubmit, command: script(t, "block.sh")}), nil)
		e.send("hi")
		waitBlocked(t, e, "blocked by block.sh on UserPromptSubmit")
		e.close() // a hook/result between turns is durable at the next checkpoint
		e.golden("promptsubmit-block")
		expectKinds(t, e.events(), "hook/result claude-code:UserPromptSubmit#1 block")
	})
	t.Run("block-json", func(t *testing.T) {
		e := newEnv(t, config(t, hk{event: hook.UserPromptSubmit, command: script(t, "json.sh", `{"decision":"block","reason":"no secrets in prompts"}`)}), nil)
		e.send("hi")
		waitBlocked(t, e, "no secrets in prompts")
		e.close()
		expectKinds(t, e.events(), "hook/result claude-code:UserPromptSubmit#1 block")
	})
	t.Run("continue-false", func(t *testing.T) {
		e := newEnv(t, config(t, hk{event: hook.UserPromptSubmit, command: script(t, "json.sh", `{"continue":false,"stopReason":"maintenance window"}`)}), nil)
		e.send("hi")
		waitBlocked(t, e, "maintenance window")
		e.close()
		expectKinds(t, e.events(), "hook/result claude-code:UserPromptSubmit#1 stop")
	})
	t.Run("context", func(t *testing.T) {
		e := newEnv(t, config(t,
			hk{event: hook.UserPromptSubmit, command: script(t, "context.sh")},
			hk{event: hook.UserPromptSubmit, matcher: "ignored-for-this-event", command: script(t, "plain.sh")},
			hk{event: hook.UserPromptSubmit, command: script(t, "context.sh")}, // duplicate: runs once
		), []scripted.Call{{Match: lastUser("plain context from plain.sh"), Reply: scripted.Reply{Text: []string{"ok"}}}})
		e.send("hi")
		e.golden("promptsubmit-context")
		expectKinds(t, e.events(),
			"hook/result claude-code:UserPromptSubmit#1 context",
			"hook/result claude-code:UserPromptSubmit#2 context",
			"turn/start", "u:hi",
			"c:hook:claude-code:UserPromptSubmit#1:context.sh for UserPromptSubmit",
			"c:hook:claude-code:UserPromptSubmit#2:plain context from plain.sh",
			"step/start", "assistant/message", "step/end", "turn/end{completed}")
	})
	t.Run("error", func(t *testing.T) {
		e := newEnv(t, config(t, hk{event: hook.UserPromptSubmit, command: script(t, "error.sh")}), []scripted.Call{say("ok")})
		e.send("hi")
		expectKinds(t, e.events(), append([]string{"hook/result claude-code:UserPromptSubmit#1 error"}, turn...)...)
		expectNote(t, e, "something broke")
	})
	t.Run("timeout", func(t *testing.T) {
		e := newEnv(t, config(t, hk{event: hook.UserPromptSubmit, command: script(t, "sleep.sh"), timeout: shortTimeout}), []scripted.Call{say("ok")})
		e.send("hi")
		expectKinds(t, e.events(), append([]string{"hook/result claude-code:UserPromptSubmit#1 timeout"}, turn...)...)
		expectNote(t, e, "timed out")
	})
}

func waitBlocked(t *testing.T, e *env, reason string) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Second)
	for time.Now().Before(deadline) {
		e.mu.Lock()
		n := len(e.blocked)
		var got string
		if n > 0 {
			got = e.blocked[0].Reason
		}
		e.mu.Unlock()
		if n > 0 {
			if got != reason {
				t.Errorf("blocked with %q, want %q", got, reason)
			}
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Errorf("no agent/blocked event")
}

func toolTurn(result string, extra ...string) []string {
	out := []string{"turn/start", "u:hi", "step/start", "assistant/message"}
	out = append(out, extra...)
	return append(out, "tool/call", result)
}

var endTurn = []string{"step/end", "step/start", "assistant/message", "step/end", "turn/end{completed}"}

func TestPreToolUse(t *testing.T) {
	calls := func() []scripted.Call { return []scripted.Call{callWrite("a.txt"), say("done")} }
	t.Run("allow", func(t *testing.T) {
		e := newEnv(t, config(t, hk{event: hook.PreToolUse, matcher: "Write", command: script(t, "json.sh",
			`{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"allow","permissionDecisionReason":"trusted path"}}`)}), calls())
		e.send("hi")
		want := append([]string{"turn/start", "u:hi", "step/start", "assistant/message", "hook/result claude-code:PreToolUse#1 allow",
			"tool/approval", "tool/call", "tool/result{}:wrote a.txt"}, endTurn...)
		expectKinds(t, e.events(), want...)
		for _, ev := range e.events() {
			if ev.Type == session.TypeToolApproval {
				ap := ev.MustDecode().(*session.ToolApproval)
				if ap.By != "hook:claude-code:PreToolUse#1" || ap.Decision != "allow" || ap.Reason != "trusted path" {
					t.Errorf("approval %s", js(ap))
				}
			}
		}
	})
	t.Run("block", func(t *testing.T) {
		e := newEnv(t, config(t, hk{event: hook.PreToolUse, matcher: "Edit|Write", command: script(t, "block.sh")}), calls())
		e.send("hi")
		want := append([]string{"turn/start", "u:hi", "step/start", "assistant/message", "hook/result claude-code:PreToolUse#1 deny",
			"tool/approval", "tool/call", "tool/result{denied}:Denied: blocked by block.sh on PreToolUse"}, endTurn...)
		expectKinds(t, e.events(), want...)
	})
	t.Run("matcher-miss", func(t *testing.T) {
		e := newEnv(t, config(t, hk{event: hook.PreToolUse, matcher: "Bash", command: script(t, "block.sh")}), calls())
		e.send("hi")
		expectKinds(t, e.events(), append(toolTurn("tool/result{}:wrote a.txt"), endTurn...)...)
	})
	t.Run("updated-input", func(t *testing.T) {
		e := newEnv(t, config(t, hk{event: hook.PreToolUse, matcher: "W.*e", command: script(t, "json.sh",
			`{"hookSpecificOutput":{"hookEventName":"PreToolUse","updatedInput":{"file_path":"b.txt","content":"x"}}}`)}), calls())
		e.send("hi")
		e.golden("pretool-updated-input")
		want := append([]string{"turn/start", "u:hi", "step/start", "assistant/message", "hook/result claude-code:PreToolUse#1 pass",
			"tool/approval", "tool/call", "tool/result{}:wrote b.txt"}, endTurn...)
		expectKinds(t, e.events(), want...)
	})
	t.Run("ask-without-approver", func(t *testing.T) {
		e := newEnv(t, config(t, hk{event: hook.PreToolUse, command: script(t, "json.sh",
			`{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"ask","permissionDecisionReason":"writes need a human"}}`)}), calls())
		e.send("hi")
		evs := e.events()
		expectKinds(t, evs, append([]string{"turn/start", "u:hi", "step/start", "assistant/message", "hook/result claude-code:PreToolUse#1 ask",
			"tool/approval", "tool/call", "tool/result{denied}:Denied: approval required and no approver is available: writes need a human"}, endTurn...)...)
	})
	t.Run("error", func(t *testing.T) {
		e := newEnv(t, config(t, hk{event: hook.PreToolUse, command: script(t, "error.sh")}), calls())
		e.send("hi")
		expectKinds(t, e.events(), append(toolTurn("tool/result{}:wrote a.txt", "hook/result claude-code:PreToolUse#1 error"), endTurn...)...)
		expectNote(t, e, "something broke")
	})
	t.Run("timeout", func(t *testing.T) {
		e := newEnv(t, config(t, hk{event: hook.PreToolUse, command: script(t, "sleep.sh"), timeout: shortTimeout}), calls())
		e.send("hi")
		expectKinds(t, e.events(), append(toolTurn("tool/result{}:wrote a.txt", "hook/result claude-code:PreToolUse#1 timeout"), endTurn...)...)
		expectNote(t, e, "timed out")
	})
}

func TestPostToolUse(t *testing.T) {
	calls := func() []scripted.Call { return []scripted.Call{callWrite("a.txt"), say("done")} }
	t.Run("allow", func(t *testing.T) {
		e := newEnv(t, config(t, hk{event: hook.PostToolUse, matcher: "Write", command: script(t, "allow.sh")}), calls())
		e.send("hi")
		expectKinds(t, e.events(), append(toolTurn("hook/result claude-code:PostToolUse#1 pass"), append([]string{"tool/result{}:wrote a.txt"}, endTurn...)...)...)
	})
	t.Run("block", func(t *testing.T) {
		e := newEnv(t, config(t, hk{event: hook.PostToolUse, command: script(t, "json.sh", `{"decision":"block","reason":"lint failed: line 1"}`)}), calls())
		e.send("hi")
		e.golden("posttool-block")
		expectKinds(t, e.events(), append(toolTurn("hook/result claude-code:PostToolUse#1 block"),
			append([]string{"tool/result{blocked}:wrote a.txt\nlint failed: line 1"}, endTurn...)...)...)
	})
	t.Run("block-exit2", func(t *testing.T) {
		e := newEnv(t, config(t, hk{event: hook.PostToolUse, command: script(t, "block.sh")}), calls())
		e.send("hi")
		expectKinds(t, e.events(), append(toolTurn("hook/result claude-code:PostToolUse#1 block"),
			append([]string{"tool/result{blocked}:wrote a.txt\nblocked by block.sh on PostToolUse"}, endTurn...)...)...)
	})
	t.Run("context", func(t *testing.T) {
		e := newEnv(t, config(t,
			hk{event: hook.PostToolUse, matcher: "*", command: script(t, "context.sh")},
			hk{event: hook.PostToolUse, matcher: "Write", command: script(t, "context.sh", "second")},
		), []scripted.Call{callWrite("a.txt"), {Match: lastUser("second for PostToolUse"), Reply: scripted.Reply{Text: []string{"done"}}}})
		e.send("hi")
		e.golden("posttool-context")
		expectKinds(t, e.events(), append([]string{"turn/start", "u:hi", "step/start", "assistant/message", "tool/call",
			"hook/result claude-code:PostToolUse#1 context", "hook/result claude-code:PostToolUse#2 context"},
			append([]string{"tool/result{}:wrote a.txt",
				"c:hook:claude-code:PostToolUse#1:context.sh for PostToolUse",
				"c:hook:claude-code:PostToolUse#2:second for PostToolUse"}, endTurn...)...)...)
	})
	t.Run("error", func(t *testing.T) {
		e := newEnv(t, config(t, hk{event: hook.PostToolUse, command: script(t, "error.sh")}), calls())
		e.send("hi")
		expectKinds(t, e.events(), append(toolTurn("hook/result claude-code:PostToolUse#1 error"), append([]string{"tool/result{}:wrote a.txt"}, endTurn...)...)...)
		expectNote(t, e, "something broke")
	})
	t.Run("timeout", func(t *testing.T) {
		e := newEnv(t, config(t, hk{event: hook.PostToolUse, command: script(t, "sleep.sh"), timeout: shortTimeout}), calls())
		e.send("hi")
		expectKinds(t, e.events(), append(toolTurn("hook/result claude-code:PostToolUse#1 timeout"), append([]string{"tool/result{}:wrote a.txt"}, endTurn...)...)...)
		expectNote(t, e, "timed out")
	})
}

func TestStop(t *testing.T) {
	turn := []string{"turn/start", "u:hi", "step/start", "assistant/message", "step/end"}
	t.Run("allow", func(t *testing.T) {
		e := newEnv(t, config(t, hk{event: hook.Stop, command: script(t, "allow.sh")}), []scripted.Call{say("ok")})
		e.send("hi")
		expectKinds(t, e.events(), append(turn, "hook/result claude-code:Stop#1 pass", "turn/end{completed}")...)
	})
	t.Run("block", func(t *testing.T) {
		// stop-once.sh blocks while stop_hook_active is false, so the
		// second stop goes through.
		e := newEnv(t, config(t, hk{event: hook.Stop, command: script(t, "stop-once.sh")}),
			[]scripted.Call{say("ok"), {Match: lastUser("run the tests before you stop"), Reply: scripted.Reply{Text: []string{"tests pass"}}}})
		e.send("hi")
		e.golden("stop-block")
		expectKinds(t, e.events(), append(turn, "hook/result claude-code:Stop#1 block",
			"s:hook:claude-code:Stop:run the tests before you stop",
			"step/start", "assistant/message", "step/end",
			"hook/result claude-code:Stop#1 pass", "turn/end{completed}")...)
	})
	t.Run("cap", func(t *testing.T) {
		e := newEnv(t, config(t, hk{event: hook.Stop, command: script(t, "json.sh", `{"decision":"block","reason":"again"}`)}),
			[]scripted.Call{say("1"), say("2"), say("3")},
			withRuntime(func(rt *hook.Runtime) { rt.MaxStopContinuations = 2 }))
		e.send("hi")
		n := 0
		for _, r := range e.hookResults() {
			if r.Decision == hook.DecBlock {
				n++
			}
		}
		if n != 3 {
			t.Errorf("%d blocking Stop runs, want 3", n)
		}
		expectNote(t, e, "the turn stops (cap 2)")
	})
	t.Run("continue-false-wins", func(t *testing.T) {
		e := newEnv(t, config(t, hk{event: hook.Stop, command: script(t, "json.sh", `{"continue":false,"stopReason":"enough","decision":"block","reason":"more"}`)}),
			[]scripted.Call{say("ok")})
		e.send("hi")
		expectKinds(t, e.events(), append(turn, "hook/result claude-code:Stop#1 block", "turn/end{completed}")...)
		expectNote(t, e, "stopped: enough")
	})
	t.Run("error", func(t *testing.T) {
		e := newEnv(t, config(t, hk{event: hook.Stop, command: script(t, "error.sh")}), []scripted.Call{say("ok")})
		e.send("hi")
		expectKinds(t, e.events(), append(turn, "hook/result claude-code:Stop#1 error", "turn/end{completed}")...)
		expectNote(t, e, "something broke")
	})
	t.Run("timeout", func(t *testing.T) {
		e := newEnv(t, config(t, hk{event: hook.Stop, command: script(t, "sleep.sh"), timeout: shortTimeout}), []scripted.Call{say("ok")})
		e.send("hi")
		expectKinds(t, e.events(), append(turn, "hook/result claude-code:Stop#1 timeout", "turn/end{completed}")...)
		expectNote(t, e, "timed out")
	})
}

func TestPreCompact(t *testing.T) {
	run := func(t *testing.T, h hk, trigger string) (hook.CompactDecision, *env) {
		t.Helper()
		h.event = hook.PreCompact
		e := newEnv(t, config(t, h), nil)
		d := e.cfg.PreCompact(context.Background(), e.a, e.rt, trigger, "keep the API notes")
		e.close()
		return d, e
	}
	t.Run("allow", func(t *testing.T) {
		d, e := run(t, hk{matcher: "manual", command: script(t, "allow.sh")}, "manual")
		if d.Block {
			t.Errorf("blocked: %+v", d)
		}
		checkResult(t, e.only(), "PreCompact", "claude-code:PreCompact#1", hook.DecPass, 0)
	})
	t.Run("block", func(t *testing.T) {
		d, e := run(t, hk{matcher: "auto", command: script(t, "block.sh")}, session.CompactPressure)
		if !d.Block || d.Reason != "blocked by block.sh on PreCompact" {
			t.Errorf("decision %+v", d)
		}
		checkResult(t, e.only(), "PreCompact", "claude-code:PreCompact#1", hook.DecBlock, 2)
	})
	t.Run("matcher-miss", func(t *testing.T) {
		d, e := run(t, hk{matcher: "auto", command: script(t, "block.sh")}, "manual")
		if d.Block || len(e.hookResults()) != 0 {
			t.Errorf("decision %+v, results %s", d, js(e.hookResults()))
		}
	})
	t.Run("context", func(t *testing.T) {
		// PreCompact has no context output: additionalContext is dropped.
		d, e := run(t, hk{command: script(t, "context.sh")}, "manual")
		if d.Block {
			t.Errorf("blocked: %+v", d)
		}
		expectKinds(t, e.events(), "hook/result claude-code:PreCompact#1 context")
	})
	t.Run("error", func(t *testing.T) {
		d, e := run(t, hk{command: script(t, "error.sh")}, "manual")
		if d.Block {
			t.Errorf("blocked: %+v", d)
		}
		checkResult(t, e.only(), "PreCompact", "claude-code:PreCompact#1", hook.DecError, 1)
	})
	t.Run("timeout", func(t *testing.T) {
		d, e := run(t, hk{command: script(t, "sleep.sh"), timeout: shortTimeout}, "manual")
		if d.Block {
			t.Errorf("blocked: %+v", d)
		}
		checkResult(t, e.only(), "PreCompact", "claude-code:PreCompact#1", hook.DecTimeout, -1)
	})
}
