package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime/debug"
	"slices"
	"sync"

	"github.com/reinhq/rein/llm"
	"github.com/reinhq/rein/session"
	"github.com/reinhq/rein/store"
	"github.com/reinhq/rein/tool"
)

// call is one call of a tool batch.
type call struct {
	llm.ToolCall
	t        tool.Tool
	mode     tool.Mode
	args     string // what runs (after ToolPre)
	started  bool   // tool/call written
	running  bool   // body started
	finished bool
	res      tool.Result
	mu       sync.Mutex
	ctxs     []AdditionalContext // from the body
	preCtxs  []AdditionalContext // from ToolPre
}

// runTools runs a batch (docs/semantics.md, "Tool batches"): calls start in model order, parallel
// ones overlap in a bounded pool, exclusive ones are barriers, results are
// committed in model order. On cancel nothing new starts, started calls
// finish and commit, unstarted ones get not-run results. It returns a
// failure reason when the batch could not be persisted.
func (a *Agent) runTools(ctx context.Context, turn, step int, tcs []llm.ToolCall) *session.Reason {
	calls := make([]*call, len(tcs))
	for i, tc := range tcs {
		c := &call{ToolCall: tc, mode: tool.Exclusive}
		if t, ok := a.cfg.Tools.Lookup(tc.Name); ok {
			c.t, c.mode = t, t.Mode()
		}
		calls[i] = c
	}
	a.do(func() { a.batchOpen = true })
	defer a.do(func() { a.batchOpen = false })
	settled := make(chan *call, len(calls))
	var (
		inflight   int
		exclusive  bool // an exclusive call is running
		next       int  // next call to commit
		fail       *session.Reason
		persistErr bool
	)
	commit := func() {
		for next < len(calls) && calls[next].finished {
			a.commit(ctx, turn, step, calls[next])
			next++
		}
	}
	await := func() {
		c := <-settled
		c.finished = true
		inflight--
		if c.mode == tool.Exclusive {
			exclusive = false
		}
		commit()
	}
	for _, c := range calls {
		if ctx.Err() != nil || persistErr {
			break
		}
		if c.mode == tool.Exclusive {
			for inflight > 0 {
				await()
			}
		} else {
			for exclusive || inflight >= a.cfg.MaxParallelTools {
				await()
			}
		}
		if ctx.Err() != nil {
			break
		}
		if !a.start(ctx, turn, step, c) {
			persistErr = true
			fail = &session.Reason{Kind: session.ReasonError, Code: "persistence", Message: "the session could not be persisted before a tool ran"}
		}
		if c.running {
			inflight++
			if c.mode == tool.Exclusive {
				exclusive = true
			}
			go a.body(ctx, c, settled)
		}
		commit()
	}
	for inflight > 0 {
		await()
	}
	// Calls that never started.
	for _, c := range calls[next:] {
		if !c.started {
			c.res = tool.Errorf(tool.CodeNotRun, "Not run: the turn was cancelled before this call started.")
			if persistErr {
				c.res = tool.Errorf(tool.CodeNotRun, "Not run: the session could not be persisted.")
			}
			c.finished = true
		}
	}
	commit()
	return fail
}

// start runs the pre-tool chain and records the call. A call that must not
// run (unknown tool, invalid arguments, denied) gets its result now and is
// finished. It returns false when the log could not be flushed before the
// body.
func (a *Agent) start(ctx context.Context, turn, step int, c *call) bool {
	c.args = c.Arguments
	if c.args == "" {
		c.args = "{}"
	}
	var approval *session.ToolApproval
	switch {
	case c.t == nil:
		c.res = tool.Errorf(tool.CodeUnknownTool, "Unknown tool %q. Available tools: %v.", c.Name, a.cfg.Tools.Names())
	case !json.Valid([]byte(c.args)):
		c.res = tool.Errorf(tool.CodeInvalidArguments, "The arguments are not valid JSON: %s", truncate(c.Arguments, 200))
	default:
		dec, err := run(ctx, a.cfg.Hooks.ToolPre, ToolCallInfo{Agent: a, Turn: turn, Step: step, CallID: c.ID, Name: c.Name, Arguments: c.args, Mode: c.mode},
			func(context.Context, ToolCallInfo) (ToolDecision, error) { return ToolDecision{Kind: Allow}, nil })
		// Cancelled while the pre-tool chain or a human was deciding: the
		// call never started, so it is settled as not-run. An explicit
		// deny (a hook may deny and cancel the turn) is still recorded.
		if err != nil {
			if ctx.Err() != nil {
				return true
			}
			dec = ToolDecision{Kind: Deny, Reason: "the pre-tool check failed: " + err.Error(), By: "hook:error"}
		}
		if dec.Kind != Deny && ctx.Err() != nil {
			return true
		}
		c.preCtxs = dec.AdditionalContexts
		if dec.Kind == Ask {
			dec = a.ask(ctx, c, dec)
			if ctx.Err() != nil {
				return true
			}
		}
		switch dec.Kind {
		case Deny:
			approval = &session.ToolApproval{Turn: turn, Step: step, CallID: c.ID, Decision: Deny, By: dec.By, Reason: dec.Reason}
			reason := dec.Reason
			if reason == "" {
				reason = "permission denied"
			}
			c.res = tool.Errorf(tool.CodeDenied, "Denied: %s", reason)
		default:
			if dec.By != "" {
				approval = &session.ToolApproval{Turn: turn, Step: step, CallID: c.ID, Decision: Allow, By: dec.By, Reason: dec.Reason}
			}
			if len(dec.UpdatedInput) > 0 {
				if json.Valid(dec.UpdatedInput) {
					c.args = string(dec.UpdatedInput)
				} else {
					c.res = tool.Errorf(tool.CodeInvalidArguments, "A hook rewrote the arguments into invalid JSON.")
				}
			}
			if c.res.Content == nil {
				c.running = true
			}
		}
	}
	if approval != nil && approval.By == "" {
		approval.By = "hook"
	}
	var upTo int64
	a.do(func() {
		if approval != nil {
			_, _ = a.append(approval)
		}
		tc := &session.ToolCall{Turn: turn, Step: step, CallID: c.ID, Name: c.Name, Arguments: c.args}
		if c.args != c.Arguments && c.Arguments != "" {
			tc.OriginalArguments = c.Arguments
		}
		_, _ = a.append(tc)
		upTo = a.log.Len()
	})
	c.started = true
	if !c.running {
		c.finished = true
		return true
	}
	// Checkpoint: the call is durable before its body runs.
	if err := a.p.flush(context.Background(), upTo); err != nil {
		a.do(func() { a.flushFailed(err) })
		c.running = false
		c.finished = true
		c.res = tool.Errorf(tool.CodeNotRun, "Not run: the session could not be persisted.")
		return false
	}
	return true
}

// ask consults the Approver for a call a hook answered with Ask.
func (a *Agent) ask(ctx context.Context, c *call, dec ToolDecision) ToolDecision {
	if a.cfg.Approver == nil {
		return ToolDecision{Kind: Deny, By: "no-approver", Reason: "approval required and no approver is available: " + dec.Reason}
	}
	ap, err := func() (ap Approval, err error) {
		defer func() {
			if r := recover(); r != nil {
				err = fmt.Errorf("approver panicked: %v", r)
			}
		}()
		return a.cfg.Approver.Approve(ctx, ApprovalRequest{CallID: c.ID, Name: c.Name, Arguments: c.args, Reason: dec.Reason})
	}()
	if err != nil {
		return ToolDecision{Kind: Deny, By: "approver", Reason: "approval failed: " + err.Error()}
	}
	by := ap.By
	if by == "" {
		by = "user"
	}
	if !ap.Allow {
		return ToolDecision{Kind: Deny, By: by, Reason: ap.Reason}
	}
	return ToolDecision{Kind: Allow, By: by, Reason: ap.Reason, UpdatedInput: dec.UpdatedInput}
}

// body runs a call's tool body on its own goroutine.
func (a *Agent) body(ctx context.Context, c *call, settled chan<- *call) {
	defer func() {
		if r := recover(); r != nil {
			a.cfg.Logger.Error("agent: tool panicked", "tool", c.Name, "panic", r, "stack", string(debug.Stack()))
			c.res = tool.Errorf(tool.CodeFailed, "The tool crashed: %v", r)
		}
		settled <- c
	}()
	env := tool.Env{SessionID: a.id, Dir: a.cfg.Cwd, State: &a.state, AddContext: func(content []llm.Part) {
		c.mu.Lock()
		c.ctxs = append(c.ctxs, AdditionalContext{Content: slices.Clone(content), Source: session.Source{Kind: session.SourceTool, Name: c.ID}})
		c.mu.Unlock()
	}}
	if ss, ok := a.cfg.Store.(store.ScratchStore); ok {
		env.ScratchDir = ss.ScratchDir(a.id)
	}
	res, err := c.t.Run(ctx, tool.Call{ID: c.ID, Arguments: json.RawMessage(c.args), Env: env})
	if err != nil {
		res = tool.Errorf(tool.CodeFailed, "The tool failed: %v", err)
	}
	if res.Content == nil {
		res.Content = []llm.Part{}
	}
	c.res = res
}

// commit runs the post-tool chain for a finished call and records its
// result, then stages its contexts. Calls are committed in model order.
func (a *Agent) commit(ctx context.Context, turn, step int, c *call) {
	res := c.res
	ctxs := slices.Clone(c.preCtxs)
	for i := range ctxs {
		if ctxs[i].Source.Kind == "" {
			ctxs[i].Source = session.Source{Kind: session.SourceHook, Name: "ToolPre"}
		}
	}
	c.mu.Lock()
	ctxs = append(ctxs, c.ctxs...)
	c.mu.Unlock()
	if c.running {
		dec, err := run(ctx, a.cfg.Hooks.ToolPost, ToolPostInfo{Agent: a, Turn: turn, Step: step, CallID: c.ID, Name: c.Name, Arguments: c.args, Result: res},
			func(context.Context, ToolPostInfo) (ToolPostDecision, error) { return ToolPostDecision{}, nil })
		if err != nil {
			a.cfg.Logger.Warn("agent: ToolPost hook failed; keeping the result", "tool", c.Name, "err", err)
		} else {
			if dec.Result != nil {
				res = *dec.Result
			}
			if dec.Block {
				res.IsError = true
				if res.Code == "" {
					res.Code = "blocked"
				}
				res.Content = append(slices.Clip(res.Content), llm.Part{Type: llm.PartText, Text: "\n" + dec.Feedback})
			}
			for _, x := range dec.AdditionalContexts {
				if x.Source.Kind == "" {
					x.Source = session.Source{Kind: session.SourceHook, Name: "ToolPost"}
				}
				ctxs = append(ctxs, x)
			}
		}
	}
	a.do(func() {
		if !c.started {
			_, _ = a.append(&session.ToolCall{Turn: turn, Step: step, CallID: c.ID, Name: c.Name, Arguments: c.Arguments})
			c.started = true
		}
		content := res.Content
		if content == nil {
			content = []llm.Part{}
		}
		_, _ = a.append(&session.ToolResult{Turn: turn, Step: step, CallID: c.ID, Content: content, IsError: res.IsError, Code: res.Code, Meta: res.Meta})
		a.stage(ctxs, session.Source{Kind: session.SourceTool, Name: c.ID})
	})
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return fmt.Sprintf("%s… (%d bytes)", s[:n], len(s))
}
