package hook

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/reinhq/rein/agent"
	"github.com/reinhq/rein/llm"
	"github.com/reinhq/rein/sandbox"
	"github.com/reinhq/rein/session"
)

// Defaults of Runtime.
const (
	DefaultTimeout         = 60 * time.Second
	DefaultMaxStopForced   = 8
	DefaultMaxContextBytes = 64 << 10
	// StderrRecordCap bounds the stderr kept in a hook/result event.
	StderrRecordCap = 1000
)

// sandboxFor is the sandbox hook h runs in (nil: none).
func (rt Runtime) sandboxFor(h *Command) *sandbox.Sandbox {
	if h.Unsandboxed {
		return nil
	}
	if rt.Mode != nil {
		_, sb := rt.Mode()
		return sb
	}
	return rt.Sandbox
}

// permissionMode is the payload's permission_mode ("" leaves it out).
func (rt Runtime) permissionMode() string {
	if rt.Mode != nil {
		m, _ := rt.Mode()
		return m
	}
	return rt.PermissionMode
}

// Runtime is what hook processes run with and report to.
type Runtime struct {
	// SessionID for the payload; default: the agent's id.
	SessionID string
	// TranscriptPath returns the session's log file for the payload's
	// transcript_path ("" when nil or unknown).
	TranscriptPath func(sessionID string) string
	// Cwd is the hooks' working directory and the payload's cwd; relative
	// paths in tool_input are made absolute against it.
	Cwd string
	// PermissionMode is the payload's permission_mode, in Claude Code's
	// terms (ClaudePermissionMode maps rein's modes); "" leaves it out.
	PermissionMode string
	// ProjectDir is exported as CLAUDE_PROJECT_DIR; default Cwd.
	ProjectDir string
	// Env is the complete environment of hook processes. The caller
	// removes provider keys and other secrets. Nil gives hooks PATH and
	// HOME only.
	Env []string
	// Tools adds to or overrides DefaultTools (rein tool name -> Claude
	// Code name and input shape).
	Tools map[string]ToolMapping
	// Sandbox, when set, runs every hook under the OS sandbox, but those
	// the user's own settings file marks "sandbox": false (Command.
	// Unsandboxed). Where the sandbox is unavailable hooks run unconfined.
	Sandbox *sandbox.Sandbox
	// Mode, when set, gives the permission mode in force (in Claude Code's
	// terms) and its sandbox at each hook run, for a session whose mode
	// changes while it runs (rein acp's session/set_mode); PermissionMode
	// and Sandbox are then not used.
	Mode func() (permissionMode string, sb *sandbox.Sandbox)
	// Timeout is the per-hook timeout when a hook sets none (default 60 s).
	Timeout time.Duration
	// MaxStopContinuations caps consecutive continuations forced by Stop
	// hooks in one turn (default 8); beyond it a block is ignored and the
	// user notified. The agent's own MaxForcedContinuations also applies.
	MaxStopContinuations int
	// MaxContextBytes caps each additional context a hook produces
	// (default 64 KiB); longer ones are cut with a note.
	MaxContextBytes int
	// Notify shows a message to the user: non-blocking hook errors,
	// timeouts, systemMessage, stopReason. It may be called from any
	// goroutine. Default: Logger at warn level.
	Notify func(msg string)
	// Logger defaults to slog.Default().
	Logger *slog.Logger
}

func (rt Runtime) withDefaults() Runtime {
	if rt.ProjectDir == "" {
		rt.ProjectDir = rt.Cwd
	}
	if rt.Timeout <= 0 {
		rt.Timeout = DefaultTimeout
	}
	if rt.MaxStopContinuations <= 0 {
		rt.MaxStopContinuations = DefaultMaxStopForced
	}
	if rt.MaxContextBytes <= 0 {
		rt.MaxContextBytes = DefaultMaxContextBytes
	}
	if rt.Logger == nil {
		rt.Logger = slog.Default()
	}
	if rt.Notify == nil {
		l := rt.Logger
		rt.Notify = func(msg string) { l.Warn(msg) }
	}
	if rt.Env == nil {
		rt.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}
	}
	tools := maps.Clone(DefaultTools)
	maps.Copy(tools, rt.Tools)
	rt.Tools = tools
	return rt
}

// env is the hook processes' environment: Env plus CLAUDE_PROJECT_DIR.
func (rt *Runtime) env() []string {
	out := make([]string, 0, len(rt.Env)+1)
	for _, kv := range rt.Env {
		if !strings.HasPrefix(kv, "CLAUDE_PROJECT_DIR=") {
			out = append(out, kv)
		}
	}
	return append(out, "CLAUDE_PROJECT_DIR="+rt.ProjectDir)
}

// Recorder receives hook/result records; *agent.Agent is one.
type Recorder interface {
	ID() string
	RecordHookResult(session.HookResult) error
}

// Hooks returns the extension-point functions for the configured events:
// one function per point that has hooks, to be added to the agent's
// chains. Events without hooks contribute nothing.
func (c *Config) Hooks(rt Runtime) agent.Hooks {
	b := &bridge{c: c, rt: rt.withDefaults()}
	var h agent.Hooks
	if c.Len(UserPromptSubmit) > 0 {
		h.PromptAdmission = []agent.Hook[agent.Prompt, agent.Admission]{b.promptAdmission}
	}
	if c.Len(PreToolUse) > 0 {
		h.ToolPre = []agent.Hook[agent.ToolCallInfo, agent.ToolDecision]{b.toolPre}
	}
	if c.Len(PostToolUse) > 0 {
		h.ToolPost = []agent.Hook[agent.ToolPostInfo, agent.ToolPostDecision]{b.toolPost}
	}
	if c.Len(Stop) > 0 {
		h.TurnStopping = []agent.Hook[agent.StopInfo, agent.StopDecision]{b.turnStopping}
	}
	if c.Len(SessionStart) > 0 {
		h.SessionStart = []agent.Hook[agent.SessionStartInfo, []agent.AdditionalContext]{b.sessionStart}
	}
	return h
}

type bridge struct {
	c  *Config
	rt Runtime
}

// merged is the combined outcome of one event's hooks, in config order.
type merged struct {
	results []*result
	// decision is the strongest: deny/block > ask > allow > "".
	decision string
	by       *Command // first hook at the winning rank
	reason   string   // reasons at the winning rank, joined
	stop     bool     // some hook said continue:false
	stopBy   *Command
	stopMsg  string
	contexts []agent.AdditionalContext
	updated  json.RawMessage // updatedInput of the hook that finished last
	updBy    *Command
	updAt    time.Time
}

func rank(d string) int {
	switch d {
	case DecDeny, DecBlock:
		return 3
	case DecAsk:
		return 2
	case DecAllow:
		return 1
	}
	return 0
}

// fire runs the hooks of event that match subject (any of subjects),
// deduplicated by command, in parallel; decodes, reports and records each
// run in config order; and merges the outcomes.
func (b *bridge) fire(ctx context.Context, rec Recorder, event, point string, subjects []string, fields map[string]any) *merged {
	var run []*Command
	seen := map[string]bool{}
	for _, h := range b.c.active(event) {
		if seen[h.Command] || !slices.ContainsFunc(subjects, h.Matches) {
			continue
		}
		seen[h.Command] = true
		run = append(run, h)
	}
	m := &merged{}
	if len(run) == 0 {
		return m
	}
	sid := b.rt.SessionID
	if sid == "" && rec != nil {
		sid = rec.ID()
	}
	tp := ""
	if b.rt.TranscriptPath != nil {
		tp = b.rt.TranscriptPath(sid)
	}
	payload := map[string]any{"session_id": sid, "transcript_path": tp, "cwd": b.rt.Cwd, "hook_event_name": event}
	if pm := b.rt.permissionMode(); pm != "" {
		payload["permission_mode"] = pm
	}
	maps.Copy(payload, fields)
	in, err := json.Marshal(payload)
	if err != nil {
		b.rt.Notify(fmt.Sprintf("hook: %s payload: %v", event, err))
		return m
	}
	in = append(in, '\n')
	env := b.rt.env()
	m.results = make([]*result, len(run))
	var wg sync.WaitGroup
	for i, h := range run {
		wg.Go(func() { m.results[i] = execHook(ctx, h, in, b.rt.Cwd, env, b.rt.Timeout, b.rt.sandboxFor(h)) })
	}
	wg.Wait()
	for _, r := range m.results {
		r.decode(event)
		b.report(event, r)
		if rec != nil {
			hr := session.HookResult{Point: point, Hook: r.Hook.ID, Decision: r.Decision, ExitCode: r.ExitCode,
				DurationMs: r.Duration.Milliseconds(), Stderr: clip(strings.TrimSpace(r.Stderr), StderrRecordCap)}
			if err := rec.RecordHookResult(hr); err != nil {
				b.rt.Logger.Debug("hook: record result", "hook", r.Hook.ID, "err", err)
			}
		}
		if r.Stop && !m.stop {
			m.stop, m.stopBy, m.stopMsg = true, r.Hook, r.StopReason
		}
		// Reasons reach the model (or the user): bound them like contexts.
		reason := clip(r.Reason, b.rt.MaxContextBytes)
		switch rk := rank(r.Decision); {
		case rk == 0:
		case rk > rank(m.decision):
			m.decision, m.by, m.reason = r.Decision, r.Hook, reason
		case rk == rank(m.decision) && reason != "":
			if m.reason != "" {
				m.reason += "\n\n"
			}
			m.reason += reason
		}
		// Claude Code: when several hooks rewrite the input, the last to
		// finish wins (each replaces the whole input).
		if r.UpdatedInput != nil && rank(r.Decision) < 3 && (m.updated == nil || r.Finished.After(m.updAt)) {
			m.updated, m.updBy, m.updAt = r.UpdatedInput, r.Hook, r.Finished
		}
		for _, s := range r.Contexts {
			m.contexts = append(m.contexts, agent.AdditionalContext{
				Content: llm.Text(clip(s, b.rt.MaxContextBytes)),
				Source:  session.Source{Kind: session.SourceHook, Name: r.Hook.ID},
			})
		}
	}
	return m
}

// report tells the user what they should see of one run.
func (b *bridge) report(event string, r *result) {
	who := fmt.Sprintf("%s hook %s (%s)", event, r.Hook.ID, clip(r.Hook.Command, 80))
	switch r.Decision {
	case DecError, DecTimeout:
		b.rt.Notify(fmt.Sprintf("%s: %s", who, r.Reason))
	case DecBlock:
		if event == SessionStart || event == SessionEnd || event == Notification {
			// These cannot block: the stderr is for the user.
			b.rt.Notify(fmt.Sprintf("%s: %s", who, r.Reason))
		}
	}
	if r.StdoutCut {
		b.rt.Notify(fmt.Sprintf("%s: stdout exceeded %d bytes; the rest was discarded", who, OutputCap))
	}
	if r.StderrCut {
		b.rt.Notify(fmt.Sprintf("%s: stderr exceeded %d bytes; the rest was discarded", who, OutputCap))
	}
	for _, w := range r.Warnings {
		b.rt.Notify(fmt.Sprintf("%s: %s", who, w))
	}
	if r.SystemMessage != "" {
		b.rt.Notify(r.SystemMessage)
	}
	if r.Stop && r.StopReason != "" {
		b.rt.Notify(fmt.Sprintf("%s stopped: %s", who, r.StopReason))
	}
}

func orDefault(s, def string) string {
	if strings.TrimSpace(s) == "" {
		return def
	}
	return s
}

// stopTurn cancels the running turn for a continue:false (queued prompts
// are kept for the next Send).
func stopTurn(a *agent.Agent) {
	if a != nil {
		a.Cancel(session.CauseHook, agent.CancelOptions{KeepInbox: true})
	}
}

// recorder returns a as a Recorder, or nil for a nil agent (a nil
// *agent.Agent in an interface would not compare equal to nil).
func recorder(a *agent.Agent) Recorder {
	if a == nil {
		return nil
	}
	return a
}

// promptAdmission runs UserPromptSubmit for prompts a human wrote. A block
// (exit 2, decision block) or continue:false blocks the prompt without
// consulting the rest of the chain; otherwise the rest of the chain runs and
// the hooks' contexts follow its contexts.
func (b *bridge) promptAdmission(ctx context.Context, p agent.Prompt, next func(context.Context, agent.Prompt) (agent.Admission, error)) (agent.Admission, error) {
	if !p.Message.Source.IsUser() {
		return next(ctx, p)
	}
	m := b.fire(ctx, recorder(p.Agent), UserPromptSubmit, "PromptAdmission", []string{""},
		map[string]any{"prompt": llm.PlainText(p.Message.Content)})
	if err := ctx.Err(); err != nil {
		return agent.Admission{}, err
	}
	if m.stop {
		return agent.Admission{Block: true, Reason: orDefault(m.stopMsg, "stopped by UserPromptSubmit hook "+m.stopBy.ID)}, nil
	}
	if m.decision == DecBlock {
		return agent.Admission{Block: true, Reason: orDefault(m.reason, "blocked by UserPromptSubmit hook "+m.by.ID)}, nil
	}
	adm, err := next(ctx, p)
	if err != nil || adm.Block {
		return adm, err
	}
	adm.AdditionalContexts = slices.Concat(adm.AdditionalContexts, m.contexts)
	return adm, nil
}

// toolPre runs PreToolUse. deny (or exit 2) denies without consulting the
// rest of the chain; updatedInput rewrites the arguments the rest of the
// chain sees and the call runs with; ask asks unless the rest of the chain
// denies; allow does not override a downstream deny or ask (the most
// restrictive decision wins). continue:false denies and cancels the turn.
func (b *bridge) toolPre(ctx context.Context, in agent.ToolCallInfo, next func(context.Context, agent.ToolCallInfo) (agent.ToolDecision, error)) (agent.ToolDecision, error) {
	tm := toolMap(b.rt.Tools)
	cc := tm.name(in.Name)
	m := b.fire(ctx, recorder(in.Agent), PreToolUse, "ToolPre", []string{cc, in.Name}, map[string]any{
		"tool_name": cc, "tool_input": tm.toCC(in.Name, in.Arguments, b.rt.Cwd), "tool_use_id": in.CallID,
	})
	if err := ctx.Err(); err != nil {
		return agent.ToolDecision{}, err
	}
	if m.stop {
		stopTurn(in.Agent)
		return agent.ToolDecision{Kind: agent.Deny, Reason: orDefault(m.stopMsg, "stopped by PreToolUse hook"), By: "hook:" + m.stopBy.ID}, nil
	}
	if m.decision == DecDeny {
		return agent.ToolDecision{Kind: agent.Deny, Reason: orDefault(m.reason, "blocked by PreToolUse hook"), By: "hook:" + m.by.ID}, nil
	}
	var updated json.RawMessage
	if m.updated != nil {
		updated = tm.fromCC(in.Name, m.updated)
		in.Arguments = string(updated)
	}
	d, err := next(ctx, in)
	if err != nil || d.Kind == agent.Deny {
		return d, err
	}
	if updated != nil && len(d.UpdatedInput) == 0 {
		d.UpdatedInput = updated
	}
	switch {
	case m.decision == DecAsk && d.Kind != agent.Ask:
		d.Kind, d.Reason, d.By = agent.Ask, m.reason, "hook:"+m.by.ID
	case d.Kind == agent.Ask:
	case d.By != "":
	case m.decision == DecAllow:
		d.Kind, d.Reason, d.By = agent.Allow, m.reason, "hook:"+m.by.ID
	case updated != nil:
		d.Kind, d.By = agent.Allow, "hook:"+m.updBy.ID
	}
	return d, nil
}

// toolPost runs PostToolUse after the rest of the chain, on the result the
// model will see, for calls that succeeded (Claude Code does not fire it for
// failures). A block adds its reason as feedback; contexts follow the
// chain's. continue:false blocks and cancels the turn.
func (b *bridge) toolPost(ctx context.Context, in agent.ToolPostInfo, next func(context.Context, agent.ToolPostInfo) (agent.ToolPostDecision, error)) (agent.ToolPostDecision, error) {
	d, err := next(ctx, in)
	if err != nil {
		return d, err
	}
	res := in.Result
	if d.Result != nil {
		res = *d.Result
	}
	if res.IsError || d.Block {
		return d, nil
	}
	tm := toolMap(b.rt.Tools)
	cc := tm.name(in.Name)
	input := tm.toCC(in.Name, in.Arguments, b.rt.Cwd)
	resp := map[string]any{"success": true, "output": llm.PlainText(res.Content)}
	var obj map[string]any
	if json.Unmarshal(input, &obj) == nil {
		if fp, ok := obj["file_path"]; ok {
			resp["filePath"] = fp
		}
	}
	if cc == "Bash" {
		resp["stdout"], resp["stderr"], resp["interrupted"] = llm.PlainText(res.Content), "", false
	}
	if len(res.Meta) > 0 && json.Valid(res.Meta) {
		resp["meta"] = res.Meta
	}
	m := b.fire(ctx, recorder(in.Agent), PostToolUse, "ToolPost", []string{cc, in.Name}, map[string]any{
		"tool_name": cc, "tool_input": input, "tool_use_id": in.CallID, "tool_response": resp,
	})
	if ctx.Err() != nil {
		return d, nil
	}
	if m.stop {
		d.Block = true
		d.Feedback = joinFeedback(d.Feedback, orDefault(m.stopMsg, "stopped by PostToolUse hook"))
		stopTurn(in.Agent)
	} else if m.decision == DecBlock {
		d.Block = true
		d.Feedback = joinFeedback(d.Feedback, orDefault(m.reason, "blocked by PostToolUse hook"))
	}
	d.AdditionalContexts = slices.Concat(d.AdditionalContexts, m.contexts)
	return d, nil
}

func joinFeedback(a, b string) string {
	if a == "" {
		return b
	}
	return a + "\n\n" + b
}

// turnStopping runs Stop. A block steers the turn on with the reason as the
// steering message (source hook claude-code:Stop), up to
// MaxStopContinuations consecutive times; continue:false wins over a block
// and lets the turn stop.
func (b *bridge) turnStopping(ctx context.Context, in agent.StopInfo, next func(context.Context, agent.StopInfo) (agent.StopDecision, error)) (agent.StopDecision, error) {
	m := b.fire(ctx, recorder(in.Agent), Stop, "TurnStopping", []string{""},
		map[string]any{"stop_hook_active": in.Forced > 0, "last_assistant_message": in.LastAssistantText})
	d, err := next(ctx, in)
	if err != nil || ctx.Err() != nil || m.stop || m.decision != DecBlock {
		return d, err
	}
	if in.Forced >= b.rt.MaxStopContinuations {
		b.rt.Notify(fmt.Sprintf("Stop hook %s blocked the stop %d times in a row; the turn stops (cap %d)", m.by.ID, in.Forced+1, b.rt.MaxStopContinuations))
		return d, nil
	}
	d.Steer = append(d.Steer, agent.Message{
		Content: llm.Text(orDefault(m.reason, "continue: blocked by Stop hook")),
		Source:  session.Source{Kind: session.SourceHook, Name: "claude-code:Stop"},
	})
	return d, nil
}

// sessionStart runs SessionStart with the source as matcher subject
// (startup, resume, compact; a fork is "resume"). Its contexts follow the
// chain's.
func (b *bridge) sessionStart(ctx context.Context, in agent.SessionStartInfo, next func(context.Context, agent.SessionStartInfo) ([]agent.AdditionalContext, error)) ([]agent.AdditionalContext, error) {
	src := in.Source
	if src == agent.StartFork {
		src = agent.StartResume
	}
	m := b.fire(ctx, recorder(in.Agent), SessionStart, "SessionStart", []string{src}, map[string]any{"source": src})
	d, err := next(ctx, in)
	if err != nil || ctx.Err() != nil {
		return d, err
	}
	return slices.Concat(d, m.contexts), nil
}

// CompactDecision is the outcome of PreCompact.
type CompactDecision struct {
	// Block asks the caller not to compact, for Reason.
	Block  bool
	Reason string
}

// PreCompact runs the PreCompact hooks before a compaction. trigger is
// Claude Code's "manual" or "auto" (rein's reasons "pressure" and
// "overflow" count as "auto") and is the matcher subject;
// customInstructions is what the user asked the summary to focus on. A
// block (exit 2, decision block) or continue:false asks the caller not to
// compact. Claude Code's PreCompact produces no context. rec may be nil
// (nothing is recorded).
func (c *Config) PreCompact(ctx context.Context, rec Recorder, rt Runtime, trigger, customInstructions string) CompactDecision {
	if c.Len(PreCompact) == 0 {
		return CompactDecision{}
	}
	switch trigger {
	case session.CompactPressure, session.CompactOverflow:
		trigger = "auto"
	}
	b := &bridge{c: c, rt: rt.withDefaults()}
	m := b.fire(ctx, rec, PreCompact, "PreCompact", []string{trigger},
		map[string]any{"trigger": trigger, "custom_instructions": customInstructions})
	switch {
	case m.stop:
		return CompactDecision{Block: true, Reason: orDefault(m.stopMsg, "stopped by PreCompact hook "+m.stopBy.ID)}
	case m.decision == DecBlock:
		return CompactDecision{Block: true, Reason: orDefault(m.reason, "blocked by PreCompact hook "+m.by.ID)}
	}
	return CompactDecision{}
}

// ClaudePermissionMode is Claude Code's name for a rein permission mode, as
// hooks see it in permission_mode: read-only is "plan" (nothing is
// changed), workspace-write is "acceptEdits" (edits in the workspace go
// through without asking), full-access is "bypassPermissions". Other
// values are passed as they are.
func ClaudePermissionMode(mode string) string {
	switch mode {
	case "read-only":
		return "plan"
	case "workspace-write":
		return "acceptEdits"
	case "full-access":
		return "bypassPermissions"
	}
	return mode
}

// EndOther is the SessionEnd reason rein sends: the session ended with
// the command that ran it (Claude Code's "other").
const EndOther = "other"

// SessionEnd runs the SessionEnd hooks when a session is about to be closed
// (reason is the matcher subject; Claude Code's values are "clear",
// "logout", "prompt_input_exit" and "other"). It cannot block anything:
// its output is only shown (systemMessage) and recorded. rec may be nil.
func (c *Config) SessionEnd(ctx context.Context, rec Recorder, rt Runtime, reason string) {
	if c.Len(SessionEnd) == 0 {
		return
	}
	b := &bridge{c: c, rt: rt.withDefaults()}
	b.fire(ctx, rec, SessionEnd, "SessionEnd", []string{reason}, map[string]any{"reason": reason})
}

// Notification types (the matcher subject) rein sends.
const (
	// NotifyPermission: rein needs a decision on a tool call.
	NotifyPermission = "permission_prompt"
)

// Notification runs the Notification hooks: rein has something to tell
// the person at the keyboard (kind is the notification_type, the matcher
// subject; message the text). Its output is only shown and recorded. rec
// may be nil.
func (c *Config) Notification(ctx context.Context, rec Recorder, rt Runtime, kind, message string) {
	if c.Len(Notification) == 0 {
		return
	}
	b := &bridge{c: c, rt: rt.withDefaults()}
	b.fire(ctx, rec, Notification, "Notification", []string{kind}, map[string]any{"message": message, "notification_type": kind})
}
