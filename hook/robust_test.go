package hook_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/reinhq/rein/agent"
	"github.com/reinhq/rein/hook"
	"github.com/reinhq/rein/llm"
	"github.com/reinhq/rein/llm/scripted"
	"github.com/reinhq/rein/session"
)

// Failure modes: each is logged, reported and non-fatal.

func TestMalformedOutput(t *testing.T) {
	e := newEnv(t, config(t, hk{event: hook.UserPromptSubmit, command: script(t, "malformed.sh")}),
		[]scripted.Call{{Match: lastUser("hi"), Reply: scripted.Reply{Text: []string{"ok"}}}})
	e.send("hi")
	checkResult(t, e.only(), "PromptAdmission", "claude-code:UserPromptSubmit#1", hook.DecError, 0)
	expectNote(t, e, "malformed JSON output")
}

func TestMissingCommand(t *testing.T) {
	e := newEnv(t, config(t, hk{event: hook.PreToolUse, command: "/nonexistent/rein-hook-xyz --check"}),
		[]scripted.Call{callWrite("a.txt"), say("done")})
	e.send("hi")
	checkResult(t, e.only(), "ToolPre", "claude-code:PreToolUse#1", hook.DecError, 127)
	expectNote(t, e, "exited with status 127")
	expectKinds(t, e.events(), append(toolTurn("tool/result{}:wrote a.txt", "hook/result claude-code:PreToolUse#1 error"), endTurn...)...)
}

func TestMissingWorkingDirectory(t *testing.T) {
	e := newEnv(t, config(t, hk{event: hook.PreCompact, command: script(t, "block.sh")}), nil)
	rt := e.rt
	rt.Cwd = filepath.Join(t.TempDir(), "gone")
	d := e.cfg.PreCompact(context.Background(), e.a, rt, "manual", "")
	e.close()
	if d.Block {
		t.Errorf("a hook that could not start blocked: %+v", d)
	}
	checkResult(t, e.only(), "PreCompact", "claude-code:PreCompact#1", hook.DecError, -1)
	expectNote(t, e, "could not start")
}

func TestFloodStdout(t *testing.T) {
	// 3 MB of plain stdout: kept up to 1 MiB, the context cut at
	// MaxContextBytes, the user told.
	e := newEnv(t, config(t, hk{event: hook.UserPromptSubmit, command: script(t, "flood.sh")}), []scripted.Call{say("ok")})
	e.send("hi")
	checkResult(t, e.only(), "PromptAdmission", "claude-code:UserPromptSubmit#1", hook.DecContext, 0)
	expectNote(t, e, "stdout exceeded 1048576 bytes")
	var ctx string
	for _, ev := range e.events() {
		if ev.Type == session.TypeUserMessage {
			if m := ev.MustDecode().(*session.UserMessage); m.Source.Kind == session.SourceHook {
				ctx = llm.PlainText(m.Content)
			}
		}
	}
	if len(ctx) < hook.DefaultMaxContextBytes-10 || len(ctx) > hook.DefaultMaxContextBytes+100 || !strings.HasSuffix(ctx, "bytes]") {
		t.Errorf("context of %d bytes ending %q", len(ctx), ctx[max(0, len(ctx)-40):])
	}
}

func TestFloodStderr(t *testing.T) {
	// 3 MB on stderr with exit 2: the deny reason is bounded, the record
	// keeps StderrRecordCap bytes.
	e := newEnv(t, config(t, hk{event: hook.PreToolUse, command: script(t, "flood.sh", "stderr", "2")}),
		[]scripted.Call{callWrite("a.txt"), say("done")})
	e.send("hi")
	r := e.only()
	checkResult(t, r, "ToolPre", "claude-code:PreToolUse#1", hook.DecDeny, 2)
	if len(r.Stderr) > hook.StderrRecordCap+40 {
		t.Errorf("recorded stderr of %d bytes", len(r.Stderr))
	}
	expectNote(t, e, "stderr exceeded 1048576 bytes")
	for _, ev := range e.events() {
		if ev.Type == session.TypeToolResult {
			res := ev.MustDecode().(*session.ToolResult)
			if n := len(llm.PlainText(res.Content)); res.Code != "denied" || n > hook.DefaultMaxContextBytes+200 {
				t.Errorf("tool result %s with %d bytes", res.Code, n)
			}
		}
	}
}

// alive reports whether pid is a live (not zombie) process.
func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	return len(f) > 0 && f[0] != "Z" && f[0] != "X"
}

func readPid(t *testing.T, path string) int {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if b, err := os.ReadFile(path); err == nil && len(strings.TrimSpace(string(b))) > 0 {
			pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
			if err != nil {
				t.Fatal(err)
			}
			return pid
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("no pid in %s", path)
	return 0
}

func waitDead(t *testing.T, pid int) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Second)
	for alive(pid) {
		if time.Now().After(deadline) {
			t.Errorf("process %d (the hook's child) still runs", pid)
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestTimeoutKillsProcessGroup(t *testing.T) {
	pidfile := filepath.Join(t.TempDir(), "pid")
	e := newEnv(t, config(t, hk{event: hook.Stop, command: script(t, "sleep.sh", pidfile), timeout: shortTimeout}), []scripted.Call{say("ok")})
	e.send("hi")
	checkResult(t, e.only(), "TurnStopping", "claude-code:Stop#1", hook.DecTimeout, -1)
	waitDead(t, readPid(t, pidfile))
}

func TestCancelKillsHook(t *testing.T) {
	pidfile := filepath.Join(t.TempDir(), "pid")
	e := newEnv(t, config(t, hk{event: hook.UserPromptSubmit, command: script(t, "sleep.sh", pidfile)}), nil)
	if _, err := e.a.Send(agent.Message{Content: llm.Text("hi")}); err != nil {
		t.Fatal(err)
	}
	pid := readPid(t, pidfile)
	start := time.Now()
	e.a.Cancel(session.CauseUser, agent.CancelOptions{})
	e.idle()
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("cancel took %s", d)
	}
	waitDead(t, pid)
	e.close()
	expectKinds(t, e.events(), "hook/result claude-code:UserPromptSubmit#1 cancelled")
}

func TestParallelDedupeAndPayload(t *testing.T) {
	dir := t.TempDir()
	f1, f2 := filepath.Join(dir, "one"), filepath.Join(dir, "two")
	e := newEnv(t, config(t,
		hk{event: hook.UserPromptSubmit, command: script(t, "record.sh", f1, "0.6")},
		hk{event: hook.UserPromptSubmit, command: script(t, "record.sh", f2, "0.6")},
		hk{event: hook.UserPromptSubmit, command: script(t, "record.sh", f1, "0.6")},
	), []scripted.Call{say("ok")})
	start := time.Now()
	e.send("hello there")
	if d := time.Since(start); d > 1100*time.Millisecond {
		t.Errorf("two 0.6 s hooks took %s: not parallel", d)
	}
	b1, _ := os.ReadFile(f1)
	b2, _ := os.ReadFile(f2)
	if n := strings.Count(string(b1), "\n"); n != 1 {
		t.Errorf("deduplicated command ran %d times", n)
	}
	var p map[string]any
	if err := json.Unmarshal(b2, &p); err != nil {
		t.Fatalf("payload %q: %v", b2, err)
	}
	want := map[string]any{"session_id": "s1", "transcript_path": "/transcripts/s1.jsonl", "cwd": e.rt.Cwd,
		"hook_event_name": "UserPromptSubmit", "prompt": "hello there"}
	if js(p) != js(want) {
		t.Errorf("payload %s, want %s", js(p), js(want))
	}
	if rs := e.hookResults(); len(rs) != 2 || rs[0].Hook != "claude-code:UserPromptSubmit#1" || rs[1].Hook != "claude-code:UserPromptSubmit#2" {
		t.Errorf("results %s", js(rs))
	}
}

func TestToolPayloads(t *testing.T) {
	dir := t.TempDir()
	pre, post, stop, start := filepath.Join(dir, "pre"), filepath.Join(dir, "post"), filepath.Join(dir, "stop"), filepath.Join(dir, "start")
	e := newEnv(t, config(t,
		hk{event: hook.PreToolUse, matcher: "Write", command: script(t, "record.sh", pre)},
		hk{event: hook.PostToolUse, matcher: "Write", command: script(t, "record.sh", post)},
		hk{event: hook.Stop, command: script(t, "record.sh", stop)},
		hk{event: hook.SessionStart, command: script(t, "record.sh", start)},
	), []scripted.Call{callWrite("a.txt"), say("done")})
	e.send("hi")
	read := func(path string) map[string]any {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		var p map[string]any
		if err := json.Unmarshal(b, &p); err != nil {
			t.Fatalf("%s: %v", b, err)
		}
		delete(p, "cwd")
		delete(p, "session_id")
		delete(p, "transcript_path")
		return p
	}
	check := func(name string, got map[string]any, want string) {
		t.Helper()
		var w map[string]any
		if err := json.Unmarshal([]byte(want), &w); err != nil {
			t.Fatal(err)
		}
		if js(got) != js(w) {
			t.Errorf("%s payload %s\nwant %s", name, js(got), js(w))
		}
	}
	// Paths in tool_input are absolute, as Claude Code gives them.
	abs := filepath.Join(e.rt.Cwd, "a.txt")
	check("PreToolUse", read(pre), `{"hook_event_name":"PreToolUse","tool_name":"Write","tool_input":{"file_path":"`+abs+`","content":"x"},"tool_use_id":"c1"}`)
	check("PostToolUse", read(post), `{"hook_event_name":"PostToolUse","tool_name":"Write","tool_input":{"file_path":"`+abs+`","content":"x"},"tool_use_id":"c1",
		"tool_response":{"filePath":"`+abs+`","output":"wrote a.txt","success":true}}`)
	check("Stop", read(stop), `{"hook_event_name":"Stop","stop_hook_active":false,"last_assistant_message":"done"}`)
	check("SessionStart", read(start), `{"hook_event_name":"SessionStart","source":"startup"}`)
}

func TestPostToolUseSkipsFailedCalls(t *testing.T) {
	e := newEnv(t, config(t, hk{event: hook.PostToolUse, command: script(t, "block.sh")}), []scripted.Call{
		{Reply: scripted.Reply{ToolCalls: []scripted.ToolCall{{ID: "c1", Name: "fail", Arguments: `{}`}}}}, say("done")})
	e.send("hi")
	if rs := e.hookResults(); len(rs) != 0 {
		t.Errorf("PostToolUse ran for a failed call: %s", js(rs))
	}
}

func TestMergeDenyAskAllow(t *testing.T) {
	allow := script(t, "json.sh", `{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"allow","permissionDecisionReason":"fine"}}`)
	ask := script(t, "json.sh", `{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"ask","permissionDecisionReason":"check"}}`)
	deny1 := script(t, "json.sh", `{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"deny","permissionDecisionReason":"first no"}}`)
	deny2 := script(t, "block.sh")
	t.Run("deny-wins", func(t *testing.T) {
		e := newEnv(t, config(t,
			hk{event: hook.PreToolUse, command: allow}, hk{event: hook.PreToolUse, command: ask},
			hk{event: hook.PreToolUse, command: deny1}, hk{event: hook.PreToolUse, command: deny2},
		), []scripted.Call{callWrite("a.txt"), say("done")})
		e.send("hi")
		expectKinds(t, e.events(), append([]string{"turn/start", "u:hi", "step/start", "assistant/message",
			"hook/result claude-code:PreToolUse#1 allow", "hook/result claude-code:PreToolUse#2 ask",
			"hook/result claude-code:PreToolUse#3 deny", "hook/result claude-code:PreToolUse#4 deny",
			"tool/approval", "tool/call", "tool/result{denied}:Denied: first no\n\nblocked by block.sh on PreToolUse"}, endTurn...)...)
		for _, ev := range e.events() {
			if ev.Type == session.TypeToolApproval {
				if ap := ev.MustDecode().(*session.ToolApproval); ap.By != "hook:claude-code:PreToolUse#3" {
					t.Errorf("approval by %q", ap.By)
				}
			}
		}
	})
	t.Run("ask-beats-allow", func(t *testing.T) {
		approver := approverFunc(func(req agent.ApprovalRequest) agent.Approval {
			if req.Reason != "check" {
				t.Errorf("approval reason %q", req.Reason)
			}
			return agent.Approval{Allow: true, By: "tester"}
		})
		e := newEnv(t, config(t, hk{event: hook.PreToolUse, command: allow}, hk{event: hook.PreToolUse, command: ask}),
			[]scripted.Call{callWrite("a.txt"), say("done")},
			withAgentConfig(func(c *agent.Config) { c.Approver = approver }))
		e.send("hi")
		expectKinds(t, e.events(), append([]string{"turn/start", "u:hi", "step/start", "assistant/message",
			"hook/result claude-code:PreToolUse#1 allow", "hook/result claude-code:PreToolUse#2 ask",
			"tool/approval", "tool/call", "tool/result{}:wrote a.txt"}, endTurn...)...)
	})
}

type approverFunc func(agent.ApprovalRequest) agent.Approval

func (f approverFunc) Approve(_ context.Context, r agent.ApprovalRequest) (agent.Approval, error) {
	return f(r), nil
}

func TestContinueFalseCancelsTurn(t *testing.T) {
	e := newEnv(t, config(t, hk{event: hook.PreToolUse, command: script(t, "json.sh", `{"continue":false,"stopReason":"budget exhausted"}`)}),
		[]scripted.Call{callWrite("a.txt")})
	e.send("hi")
	expectKinds(t, e.events(), "turn/start", "u:hi", "step/start", "assistant/message",
		"hook/result claude-code:PreToolUse#1 stop", "tool/approval", "tool/call",
		"tool/result{denied}:Denied: budget exhausted", "step/end", "turn/end{aborted{hook}}")
	expectNote(t, e, "budget exhausted")
}

func TestEnvironment(t *testing.T) {
	t.Setenv("SECRET", "s3cret")
	e := newEnv(t, config(t, hk{event: hook.UserPromptSubmit, command: script(t, "env.sh")}),
		[]scripted.Call{{Match: lastUser("FOO=bar SECRET=unset PROJECT=set"), Reply: scripted.Reply{Text: []string{"ok"}}}},
		withRuntime(func(rt *hook.Runtime) { rt.Env = append(rt.Env, "FOO=bar") }))
	e.send("hi")
}

func TestNonUserPromptSkipsUserPromptSubmit(t *testing.T) {
	e := newEnv(t, config(t, hk{event: hook.UserPromptSubmit, command: script(t, "block.sh")}), []scripted.Call{say("ok")})
	if _, err := e.a.Send(agent.Message{Content: llm.Text("from a plugin"), Source: session.Source{Kind: session.SourcePlugin, Name: "p"}}); err != nil {
		t.Fatal(err)
	}
	e.idle()
	if rs := e.hookResults(); len(rs) != 0 {
		t.Errorf("UserPromptSubmit ran for a plugin prompt: %s", js(rs))
	}
}

// downstream contexts are kept: the bridge's contexts follow them.
func TestDelegationKeepsDownstream(t *testing.T) {
	down := func(name string) agent.AdditionalContext {
		return agent.AdditionalContext{Content: llm.Text("downstream " + name), Source: session.Source{Kind: session.SourcePlugin, Name: "down"}}
	}
	e := newEnv(t, config(t,
		hk{event: hook.UserPromptSubmit, command: script(t, "context.sh")},
		hk{event: hook.PostToolUse, command: script(t, "context.sh")},
		hk{event: hook.SessionStart, command: script(t, "context.sh")},
	), []scripted.Call{callWrite("a.txt"), say("done")},
		withExtraHooks(func(h *agent.Hooks) {
			h.PromptAdmission = append(h.PromptAdmission, func(ctx context.Context, p agent.Prompt, next func(context.Context, agent.Prompt) (agent.Admission, error)) (agent.Admission, error) {
				a, err := next(ctx, p)
				a.AdditionalContexts = append(a.AdditionalContexts, down("admission"))
				return a, err
			})
			h.ToolPost = append(h.ToolPost, func(ctx context.Context, in agent.ToolPostInfo, next func(context.Context, agent.ToolPostInfo) (agent.ToolPostDecision, error)) (agent.ToolPostDecision, error) {
				d, err := next(ctx, in)
				d.AdditionalContexts = append(d.AdditionalContexts, down("post"))
				return d, err
			})
			h.SessionStart = append(h.SessionStart, func(ctx context.Context, in agent.SessionStartInfo, next func(context.Context, agent.SessionStartInfo) ([]agent.AdditionalContext, error)) ([]agent.AdditionalContext, error) {
				cs, err := next(ctx, in)
				return append(cs, down("start")), err
			})
		}))
	e.send("hi")
	expectKinds(t, e.events(),
		"hook/result claude-code:SessionStart#1 context",
		"c:plugin:down:downstream start",
		"c:hook:claude-code:SessionStart#1:context.sh for SessionStart",
		"hook/result claude-code:UserPromptSubmit#1 context",
		"turn/start", "u:hi",
		"c:plugin:down:downstream admission",
		"c:hook:claude-code:UserPromptSubmit#1:context.sh for UserPromptSubmit",
		"step/start", "assistant/message", "tool/call",
		"hook/result claude-code:PostToolUse#1 context",
		"tool/result{}:wrote a.txt",
		"c:plugin:down:downstream post",
		"c:hook:claude-code:PostToolUse#1:context.sh for PostToolUse",
		"step/end", "step/start", "assistant/message", "step/end", "turn/end{completed}")
}

func TestSessionStartOnResume(t *testing.T) {
	cfg := config(t, hk{event: hook.SessionStart, matcher: "resume", command: script(t, "context.sh")})
	e := newEnv(t, cfg, nil)
	// Something to resume: a new session is stored with its first event.
	if err := e.a.Inject(agent.AdditionalContext{Content: llm.Text("seed"), Source: session.Source{Kind: session.SourcePlugin, Name: "t"}}); err != nil {
		t.Fatal(err)
	}
	e.close()
	if rs := e.hookResults(); len(rs) != 0 {
		t.Fatalf("a resume hook ran at startup: %s", js(rs))
	}
	a, err := agent.Resume(context.Background(), e.st, "s1", agent.Config{Provider: e.model, Cwd: e.rt.Cwd,
		NewID: agent.SequentialIDs(), Clock: agent.StepClock(t0.Add(time.Hour), time.Millisecond), Hooks: cfg.Hooks(e.rt)})
	if err != nil {
		t.Fatal(err)
	}
	e.a = a
	e.idle()
	e.close()
	expectKinds(t, e.events(), "c:plugin:t:seed", "hook/result claude-code:SessionStart#1 context",
		"c:hook:claude-code:SessionStart#1:context.sh for SessionStart")
}

// A Claude Code guard script that uses jq runs unchanged.
func TestClaudeCodeScriptUnchanged(t *testing.T) {
	if _, err := exec.LookPath("jq"); err != nil {
		t.Skip("jq not installed")
	}
	log := filepath.Join(t.TempDir(), "log")
	cmd := script(t, "protect-env.sh", log)
	e := newEnv(t, config(t,
		hk{event: hook.PreToolUse, matcher: "Edit|Write", command: cmd},
		hk{event: hook.PostToolUse, matcher: "Edit|Write", command: cmd},
	), []scripted.Call{
		{Reply: scripted.Reply{ToolCalls: []scripted.ToolCall{
			{ID: "c1", Name: "write", Arguments: `{"file_path":"prod.env","content":"x"}`},
			{ID: "c2", Name: "write", Arguments: `{"file_path":"notes.txt","content":"x"}`},
		}}},
		say("done"),
	})
	e.send("hi")
	var results []string
	for _, ev := range e.events() {
		if ev.Type == session.TypeToolResult {
			results = append(results, llm.PlainText(ev.MustDecode().(*session.ToolResult).Content))
		}
	}
	if js(results) != js([]string{"Denied: refusing to write " + filepath.Join(e.rt.Cwd, "prod.env") + ": secrets live there", "wrote notes.txt"}) {
		t.Errorf("results %q", results)
	}
	if b, _ := os.ReadFile(log); string(b) != filepath.Join(e.rt.Cwd, "notes.txt")+"\n" {
		t.Errorf("PostToolUse log %q", b)
	}
}
