package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/reinhq/rein/llm"
	"github.com/reinhq/rein/session"
	"github.com/reinhq/rein/tool"
)

// AdditionalContext is supplementary model input: content and who produced
// it, nothing more. Each one becomes its own user/message.
type AdditionalContext struct {
	Content []llm.Part
	Source  session.Source
}

// Message is a prompt or steering message handed to Send or Steer.
type Message struct {
	// ID is unique within the session; the agent mints one when empty.
	ID      string
	Content []llm.Part
	// Source defaults to {kind: user}.
	Source session.Source
}

// Hook is one function of an extension point's chain. It receives the
// point's input and next, the rest of the chain; it may call next and
// adjust its result, or return its own. A function that delegates must keep
// the downstream content and additional contexts unless it means to
// replace them. Hooks run on the agent's turn driver, never on the owner
// goroutine, so they may call the agent's methods.
type Hook[In, Out any] func(ctx context.Context, in In, next func(context.Context, In) (Out, error)) (Out, error)

// run runs chain over in, ending with final.
// A hook that panics is reported as an error of the chain (the callers
// treat hook errors as their point says), never as a crash of the agent.
func run[In, Out any](ctx context.Context, chain []Hook[In, Out], in In, final func(context.Context, In) (Out, error)) (out Out, err error) {
	if len(chain) == 0 {
		return final(ctx, in)
	}
	defer func() {
		if r := recover(); r != nil {
			var zero Out
			out, err = zero, fmt.Errorf("agent: hook panicked: %v", r)
		}
	}()
	var step func(i int) func(context.Context, In) (Out, error)
	step = func(i int) func(context.Context, In) (Out, error) {
		if i == len(chain) {
			return final
		}
		return func(ctx context.Context, in In) (Out, error) { return chain[i](ctx, in, step(i+1)) }
	}
	return step(0)(ctx, in)
}

// Hooks are the extension points (docs/semantics.md), each an ordered chain.
type Hooks struct {
	// PromptAdmission runs before a turn opens, once per queued prompt.
	// The end of the chain allows the prompt unchanged.
	PromptAdmission []Hook[Prompt, Admission]
	// BeforeStep runs before each step's outbox drain. Its additional
	// contexts are staged in the outbox, so the coming step sees them.
	BeforeStep []Hook[StepInfo, []AdditionalContext]
	// Request adjusts the model parameters of a derived request. Messages
	// stay derived from the log.
	Request []Hook[RequestInfo, llm.Params]
	// RequestError decides whether a failed model request is retried
	// inside the same step. The end of the chain gives up.
	RequestError []Hook[RequestErrorInfo, Retry]
	// ToolPre runs before a call starts. The end of the chain allows.
	ToolPre []Hook[ToolCallInfo, ToolDecision]
	// ToolPost runs after a call's body, in model order. The end of the
	// chain keeps the result.
	ToolPost []Hook[ToolPostInfo, ToolPostDecision]
	// TurnStopping runs when a turn would stop. Steering it returns (or
	// that it submits with Agent.Steer) makes the turn run another step.
	TurnStopping []Hook[StopInfo, StopDecision]
	// SessionStart runs on create, resume and fork. Its contexts are
	// awaited and committed before the first request.
	SessionStart []Hook[SessionStartInfo, []AdditionalContext]
	// PreCompact runs before a compaction; it may block it or add
	// instructions for the summary.
	PreCompact []Hook[CompactInfo, CompactDecision]
}

// Prompt is a queued message under admission.
type Prompt struct {
	Agent   *Agent
	Message Message
	// Steer is true for a Steer that arrived while idle (it runs as its
	// own turn).
	Steer bool
}

// Admission is a PromptAdmission decision: allow (optionally replacing the
// content and adding contexts) or block with a reason.
type Admission struct {
	Block  bool
	Reason string
	// Content, when non-nil, replaces the prompt's content (same id and
	// source).
	Content            []llm.Part
	AdditionalContexts []AdditionalContext
}

// StepInfo describes the coming step.
type StepInfo struct {
	Agent *Agent
	Turn  int
	Step  int
}

// RequestInfo describes a derived request.
type RequestInfo struct {
	Turn, Step int
	Model      string
	Params     llm.Params
	Messages   []llm.Message // read-only
}

// RequestErrorInfo describes a failed model request.
type RequestErrorInfo struct {
	Turn, Step int
	// Attempt counts failed attempts of this step's request, from 1.
	Attempt int
	Err     *llm.Error
}

// Retry is a RequestError decision: Retry after Wait (the wait honours
// cancellation).
type Retry struct {
	Retry bool
	Wait  time.Duration
}

// ToolCallInfo describes a call before it starts.
type ToolCallInfo struct {
	Agent     *Agent
	Turn      int
	Step      int
	CallID    string
	Name      string
	Arguments string
	// Mode is the tool's execution mode ("" for an unknown tool).
	Mode tool.Mode
}

// Decision kinds of ToolPre.
const (
	Allow = "allow"
	Deny  = "deny"
	Ask   = "ask"
)

// ToolDecision is a ToolPre decision.
type ToolDecision struct {
	// Kind is Allow (the zero value counts as Allow), Deny or Ask.
	Kind string
	// UpdatedInput, when set on Allow, replaces the call's arguments; the
	// log records both.
	UpdatedInput json.RawMessage
	Reason       string
	// By names who decided, recorded in tool/approval (e.g.
	// "rule:bash(git*)", "hook:PreToolUse#1"). Empty: no approval record for
	// a plain allow.
	By string
	// AdditionalContexts land after the call's tool/result, like a
	// ToolPost hook's.
	AdditionalContexts []AdditionalContext
}

// RetryWith adapts a retry policy (such as llm/retry's) to the
// RequestError point: policy gets the attempt number (from 1) and the
// failure and says whether, and after how long, to retry.
func RetryWith(policy func(attempt int, err *llm.Error) (time.Duration, bool)) Hook[RequestErrorInfo, Retry] {
	return func(ctx context.Context, in RequestErrorInfo, next func(context.Context, RequestErrorInfo) (Retry, error)) (Retry, error) {
		if wait, ok := policy(in.Attempt, in.Err); ok {
			return Retry{Retry: true, Wait: wait}, nil
		}
		return next(ctx, in)
	}
}

// ToolPostInfo describes a finished call.
type ToolPostInfo struct {
	Agent     *Agent
	Turn      int
	Step      int
	CallID    string
	Name      string
	Arguments string
	Result    tool.Result
}

// ToolPostDecision is a ToolPost decision.
type ToolPostDecision struct {
	// Result, when set, replaces the call's result.
	Result *tool.Result
	// Block turns the result into an error the model sees, with Feedback
	// appended.
	Block              bool
	Feedback           string
	AdditionalContexts []AdditionalContext
}

// StopInfo describes a turn about to stop.
type StopInfo struct {
	Agent *Agent
	Turn  int
	// Forced counts consecutive continuations forced by TurnStopping in
	// this turn (Claude Code's stop_hook_active is Forced > 0).
	Forced int
	// LastAssistantText is the text of the turn's last assistant message
	// ("" when it had none).
	LastAssistantText string
}

// StopDecision is a TurnStopping decision.
type StopDecision struct {
	// Steer continues the turn with these messages as steering.
	Steer              []Message
	AdditionalContexts []AdditionalContext
}

// Session start sources.
const (
	StartStartup = "startup"
	StartResume  = "resume"
	StartFork    = "fork"
	StartCompact = "compact"
)

// SessionStartInfo describes why a session (re)started.
type SessionStartInfo struct {
	Agent     *Agent
	SessionID string
	Source    string
}

// Approver decides calls that a ToolPre hook answered with Ask. The TUI and
// ACP ask a human; headless runs deny unless told otherwise.
type Approver interface {
	Approve(ctx context.Context, req ApprovalRequest) (Approval, error)
}

// ApprovalRequest is a call awaiting a decision.
type ApprovalRequest struct {
	CallID    string
	Name      string
	Arguments string
	Reason    string
}

// Approval is an Approver's decision and who made it ("user", "flag:--yes").
type Approval struct {
	Allow  bool
	By     string
	Reason string
}
