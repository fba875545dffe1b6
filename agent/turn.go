package agent

import (
	"context"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/reinhq/rein/llm"
	"github.com/reinhq/rein/llm/wire"
	"github.com/reinhq/rein/session"
)

// drive is the turn driver: it runs the pending SessionStart chain, then
// takes queued prompts one at a time until none is left (or the agent is
// parked or closed). Only one driver runs at a time. It holds no state: it
// asks the owner for every change.
func (a *Agent) drive() {
	defer a.busy.Done()
	for {
		var (
			q   queued
			src string
			act *activity
			ctx context.Context
			ok  bool
		)
		a.do(func() {
			if a.startSource != "" && !a.closed {
				src, a.startSource = a.startSource, ""
			} else if a.closed || a.parked || len(a.queue) == 0 {
				a.driving = false
				a.setStatus(Idle)
				a.checkIdle()
				return
			} else {
				q = a.queue[0]
				a.queue = a.queue[1:]
				a.window = true
				a.setStatus(Running)
				m := q.msg
				a.emit(Live{Type: LiveDequeued, Message: &m})
			}
			var cancel context.CancelCauseFunc
			ctx, cancel = context.WithCancelCause(context.WithValue(context.Background(), driverKey{}, a))
			act = &activity{cancel: cancel}
			if src != "" {
				// SessionStart is no admission or turn: a Cancel while
				// idle must not abort it; only Close does.
				a.startCancel = cancel
			} else {
				a.act = act
			}
			ok = true
		})
		if !ok {
			return
		}
		if src != "" {
			a.sessionStart(ctx, src)
		} else {
			a.runPrompt(ctx, q)
		}
		a.do(func() {
			act.cancel(nil)
			if a.act == act {
				a.act = nil
			}
			a.startCancel = nil
		})
	}
}

// sessionStart runs the SessionStart chain and commits its contexts as
// out-of-turn messages, flushed before anything else runs.
func (a *Agent) sessionStart(ctx context.Context, src string) {
	ctxs, err := run(ctx, a.cfg.Hooks.SessionStart, SessionStartInfo{Agent: a, SessionID: a.id, Source: src},
		func(context.Context, SessionStartInfo) ([]AdditionalContext, error) { return nil, nil })
	if err != nil {
		a.cfg.Logger.Warn("agent: SessionStart hook failed", "session", a.id, "err", err)
	}
	var upTo int64
	a.do(func() {
		for _, c := range ctxs {
			if !validContent(c.Content) {
				continue
			}
			if c.Source.Kind == "" {
				c.Source = session.Source{Kind: session.SourceHook, Name: "SessionStart"}
			}
			_, _ = a.appendMsg(c)
		}
		upTo = a.log.Len()
	})
	if err := a.p.flush(context.Background(), upTo); err != nil {
		a.do(func() { a.flushFailed(err) })
	}
}

// runPrompt admits one prompt and, when allowed, runs its turn.
func (a *Agent) runPrompt(ctx context.Context, q queued) {
	adm, err := run(ctx, a.cfg.Hooks.PromptAdmission, Prompt{Agent: a, Message: q.msg, Steer: q.steer},
		func(context.Context, Prompt) (Admission, error) { return Admission{}, nil })
	cancelled := ctx.Err() != nil
	if err != nil || adm.Block || cancelled {
		if err != nil && !cancelled {
			a.cfg.Logger.Warn("agent: prompt admission failed; prompt not run", "session", a.id, "message", q.msg.ID, "err", err)
		}
		a.do(func() {
			a.window = false
			// Context staged during admission was injected independently:
			// it becomes history now. Steering waits for the next
			// admitted prompt.
			a.commitStagedContext()
			delete(a.pendingIDs, q.msg.ID)
			m := q.msg
			if cancelled {
				a.emit(Live{Type: LiveDiscarded, Messages: []Message{m}})
				return
			}
			reason := adm.Reason
			if err != nil {
				reason = "admission failed: " + err.Error()
			}
			a.emit(Live{Type: LiveBlocked, Message: &m, Reason: reason})
		})
		return
	}
	var turn int
	a.do(func() {
		last, _ := a.log.Turn()
		turn = last + 1
		kind := session.TriggerSend
		if q.steer {
			kind = session.TriggerSteer
		}
		content := q.msg.Content
		if adm.Content != nil && validContent(adm.Content) {
			content = adm.Content
		}
		if _, err := a.append(&session.TurnStart{Turn: turn, Trigger: session.Trigger{Kind: kind, MessageID: q.msg.ID}}); err != nil {
			return
		}
		_, _ = a.append(&session.UserMessage{ID: q.msg.ID, Content: content, Source: q.msg.Source})
		delete(a.pendingIDs, q.msg.ID)
		a.stage(adm.AdditionalContexts, session.Source{Kind: session.SourceHook, Name: "PromptAdmission"})
		// The admission contexts come first, then what was staged during
		// admission: put them at the front of the outbox.
		n := len(a.outbox) - countValid(adm.AdditionalContexts)
		a.outbox = slices.Concat(a.outbox[n:], a.outbox[:n])
		a.drain(turn)
	})
	a.runTurn(ctx, turn)
}

func countValid(cs []AdditionalContext) int {
	n := 0
	for _, c := range cs {
		if validContent(c.Content) {
			n++
		}
	}
	return n
}

// stepResult is how a step ended.
type stepResult struct {
	owed      bool            // the model is owed another step
	maxTokens bool            // the response hit the output limit
	fail      *session.Reason // the turn must end with this error
	text      *string         // the response's text, when a response was recorded
}

func (a *Agent) runTurn(ctx context.Context, turn int) {
	var (
		owed      = true
		maxTokens bool
		maxSteps  bool
		fail      *session.Reason
		forced    int
		step      int
		lastText  string // of the turn's last assistant message
	)
	for ctx.Err() == nil {
		if !owed {
			dec, err := run(ctx, a.cfg.Hooks.TurnStopping, StopInfo{Agent: a, Turn: turn, Forced: forced, LastAssistantText: lastText},
				func(context.Context, StopInfo) (StopDecision, error) { return StopDecision{}, nil })
			if err != nil {
				a.cfg.Logger.Warn("agent: TurnStopping hook failed", "session", a.id, "turn", turn, "err", err)
			}
			if len(dec.Steer) > 0 && forced >= a.cfg.MaxForcedContinuations {
				a.cfg.Logger.Warn("agent: TurnStopping continuation cap reached; stopping", "session", a.id, "turn", turn, "cap", a.cfg.MaxForcedContinuations)
				dec.Steer = nil
			}
			var steered bool
			a.do(func() {
				for _, m := range dec.Steer {
					if !validContent(m.Content) {
						continue
					}
					if m.ID == "" || a.idTaken(m.ID) {
						m.ID = a.mintID()
					}
					if m.Source.Kind == "" {
						m.Source = session.Source{Kind: session.SourceHook, Name: "TurnStopping"}
					}
					a.outbox = append(a.outbox, staged{steering: true, msg: m})
				}
				a.stage(dec.AdditionalContexts, session.Source{Kind: session.SourceHook, Name: "TurnStopping"})
				steered = a.drain(turn)
				if !steered && ctx.Err() == nil {
					// The turn ends here: close the window in this same
					// step, so a Steer arriving now becomes its own turn
					// instead of being staged for a turn that will not
					// look again.
					a.window = false
				}
			})
			if len(dec.Steer) > 0 {
				forced++
			}
			if !steered || ctx.Err() != nil {
				break
			}
		}
		if a.cfg.MaxSteps > 0 && step >= a.cfg.MaxSteps {
			// The model is owed another step (tool results, or steering
			// the stop hooks drained) but the limit says no.
			maxSteps = true
			break
		}
		step++
		res := a.runStep(ctx, turn, step)
		if res.text != nil {
			lastText = *res.text
		}
		if res.fail != nil {
			fail = res.fail
			break
		}
		maxTokens = maxTokens || res.maxTokens
		owed = res.owed
	}
	reason := session.Reason{Kind: session.ReasonCompleted}
	switch {
	case ctx.Err() != nil:
		reason = session.Reason{Kind: session.ReasonAborted, Cause: causeOf(ctx)}
	case fail != nil:
		reason = *fail
	case maxSteps:
		reason = session.Reason{Kind: session.ReasonMaxSteps}
	case maxTokens:
		reason = session.Reason{Kind: session.ReasonMaxTokens}
	}
	var upTo int64
	a.do(func() {
		a.window = false
		// Leftover context is an independent commit: it is never dropped.
		// Leftover steering (a cancel with KeepInbox, or a failed turn)
		// waits for the next admitted prompt.
		var kept []staged
		for _, s := range a.outbox {
			if s.steering {
				kept = append(kept, s)
				continue
			}
			_, _ = a.appendMsg(s.ctx)
		}
		a.outbox = kept
		_, _ = a.append(&session.TurnEnd{Turn: turn, Reason: reason})
		upTo = a.log.Len()
	})
	if err := a.p.flush(context.Background(), upTo); err != nil {
		a.do(func() { a.flushFailed(err) })
	}
	a.do(func() { a.emit(Live{Type: LiveSettled, Turn: turn, TurnReason: reason}) })
}

func causeOf(ctx context.Context) string {
	var ec errCancel
	if errors.As(context.Cause(ctx), &ec) {
		return ec.cause
	}
	return session.CauseUser
}

// runStep runs one step: before-step hooks, drain, request, stream, tool
// batch.
func (a *Agent) runStep(ctx context.Context, turn, step int) stepResult {
	ctxs, err := run(ctx, a.cfg.Hooks.BeforeStep, StepInfo{Agent: a, Turn: turn, Step: step},
		func(context.Context, StepInfo) ([]AdditionalContext, error) { return nil, nil })
	if err != nil {
		a.cfg.Logger.Warn("agent: BeforeStep hook failed", "session", a.id, "turn", turn, "step", step, "err", err)
	}
	a.do(func() {
		a.stage(ctxs, session.Source{Kind: session.SourceHook, Name: "BeforeStep"})
		a.drain(turn)
	})
	if ctx.Err() != nil {
		return stepResult{}
	}
	if a.underPressure() {
		if err := a.compact(ctx, turn, CompactOptions{Reason: session.CompactPressure, Keep: 2}); err != nil && !errors.Is(err, ErrNothingToCompact) {
			a.cfg.Logger.Warn("agent: compaction under pressure failed; continuing", "session", a.id, "err", err)
		}
		if ctx.Err() != nil {
			return stepResult{}
		}
	}
	opened := false
	attempt := 0
	overflowCompacted := false
	for {
		req, upTo, err := a.prepare(ctx, turn, step, !opened)
		opened = true
		if err != nil {
			return a.endStep(turn, step, &session.Reason{Kind: session.ReasonError, Code: "request", Message: err.Error()})
		}
		// Checkpoint: everything the request is derived from is durable
		// before the model sees it.
		if err := a.p.flush(context.Background(), upTo); err != nil {
			a.do(func() { a.flushFailed(err) })
			return a.endStep(turn, step, &session.Reason{Kind: session.ReasonError, Code: "persistence", Message: err.Error()})
		}
		if ctx.Err() != nil {
			return a.endStep(turn, step, nil)
		}
		out := a.stream(ctx, turn, step, req)
		if out.err == nil {
			return a.finishStep(ctx, turn, step, out)
		}
		if ctx.Err() != nil {
			if out.hasText() {
				a.do(func() {
					_, _ = a.append(&session.AssistantMessage{Turn: turn, Step: step, Content: out.content(), ToolCalls: []llm.ToolCall{},
						Finish: llm.FinishStop, Usage: out.usage, ChunkSeqs: out.chunkSeqs, Interrupted: true})
				})
			}
			return a.endStep(turn, step, nil)
		}
		if out.err.Code == llm.CodeContextOverflow && a.cfg.ContextWindow > 0 && !overflowCompacted {
			overflowCompacted = true
			if err := a.compact(ctx, turn, CompactOptions{Reason: session.CompactOverflow, Keep: 2}); err == nil {
				continue
			} else {
				a.cfg.Logger.Warn("agent: compaction after context overflow failed", "session", a.id, "err", err)
			}
		}
		attempt++
		dec, herr := run(ctx, a.cfg.Hooks.RequestError, RequestErrorInfo{Turn: turn, Step: step, Attempt: attempt, Err: out.err},
			func(context.Context, RequestErrorInfo) (Retry, error) { return Retry{}, nil })
		if herr == nil && dec.Retry && ctx.Err() == nil {
			e := out.err
			a.do(func() {
				a.emit(Live{Type: LiveRetry, Turn: turn, Step: step, Attempt: attempt, Err: e, Wait: dec.Wait, Seq: a.log.Len()})
			})
			if dec.Wait > 0 {
				t := time.NewTimer(dec.Wait)
				select {
				case <-t.C:
				case <-ctx.Done():
					t.Stop()
				}
			}
			if ctx.Err() == nil {
				continue
			}
			return a.endStep(turn, step, nil)
		}
		if herr != nil {
			a.cfg.Logger.Warn("agent: RequestError hook failed; giving up", "session", a.id, "err", herr)
		}
		e := out.err
		a.do(func() { a.emit(Live{Type: LiveError, Turn: turn, Step: step, Err: e}) })
		return a.endStep(turn, step, &session.Reason{Kind: session.ReasonError, Code: string(e.Code), Message: e.Message})
	}
}

// endStep appends step/end and reports fail.
func (a *Agent) endStep(turn, step int, fail *session.Reason) stepResult {
	a.do(func() { _, _ = a.append(&session.StepEnd{Turn: turn, Step: step}) })
	return stepResult{fail: fail}
}

// prepare derives the request from the log, opening the step (first) and
// recording a request/header when the request's shape changed or its
// prompt-cache prefix broke. It returns the request and the seq the log
// must be durable up to.
//
// The request is encoded (when the provider is an llm.Preparer) on the
// driver, outside the owner: only the new messages cost encoding, through
// the agent's llm.Cache, which only the driver touches.
func (a *Agent) prepare(ctx context.Context, turn, step int, first bool) (*llm.Request, int64, error) {
	var msgs []llm.Message
	var hdr *session.RequestHeader
	system := a.system
	a.do(func() {
		msgs, hdr = a.log.Messages(), a.hdr
		if a.dynamic {
			system = a.cfg.system() // dynamic sections run on the owner
		}
	})
	params, err := run(ctx, a.cfg.Hooks.Request, RequestInfo{Turn: turn, Step: step, Model: a.cfg.Model, Params: a.cfg.Params, Messages: msgs},
		func(_ context.Context, in RequestInfo) (llm.Params, error) { return in.Params, nil })
	if err != nil {
		if first {
			a.do(func() { _, _ = a.append(&session.StepStart{Turn: turn, Step: step}) })
		}
		return nil, 0, err
	}
	tools := a.cfg.Tools.Specs()
	if tools == nil {
		tools = []llm.ToolSpec{}
	}
	if hdr != nil && wire.SameTools(hdr.Tools, tools) {
		tools = hdr.Tools // the very slice: adapters know it
	}
	prep, _ := a.cfg.Provider.(llm.Preparer)
	for {
		req := &llm.Request{Model: modelName(a.cfg.Model), System: system, Tools: tools, Messages: msgs, Params: params, Cache: &a.wire}
		shared, measured := llm.Shared{}, false
		if prep != nil {
			var perr error
			shared, perr = prep.Prepare(req)
			measured = perr == nil
		}
		var upTo int64
		again := false
		a.do(func() {
			if cur := a.log.Messages(); !sameArray(cur, msgs) {
				// The history changed while the request was prepared
				// (a hook compacted): prepare it again.
				msgs, again = cur, true
				return
			}
			if first {
				_, _ = a.append(&session.StepStart{Turn: turn, Step: step})
				first = false
			}
			h := session.RequestHeader{Turn: turn, Step: step, Model: a.cfg.Model, System: system, Tools: tools, Params: params}
			h.Prefix = a.sent.prefix(&h, msgs, shared, measured)
			if a.hdr == nil || h.Prefix != nil || !sameShape(a.hdr, &h) {
				h.Reason = session.HeaderChange
				if a.hdr == nil {
					h.Reason = a.hdrReason
				}
				if _, err := a.append(&h); err == nil {
					a.hdr = &h
				}
			}
			a.sent = sentRequest{known: true, model: h.Model, system: h.System, tools: h.Tools, msgs: msgs, n: len(msgs), adapter: measured}
			upTo = a.log.Len()
		})
		if !again {
			return req, upTo, nil
		}
	}
}

// sentRequest is what the prompt-cache record compares a request with: the
// previous request's shape and messages. n is how many messages it had;
// msgs are those of them still known (all, except after a resume that
// follows a compaction).
type sentRequest struct {
	known         bool
	model, system string
	tools         []llm.ToolSpec
	msgs          []llm.Message
	n             int
	// compacted: a compaction completed since.
	compacted bool
	// adapter: the adapter's cache holds this request (it was prepared
	// through it), so what it measures next is relative to this one.
	adapter bool
}

// prefix returns the record of a broken prefix for the request of header h
// and messages msgs, or nil when the request repeats the whole previous
// one ahead of its new messages. A change of model, tools or system prompt
// breaks the prefix at its start; a compaction or another change of
// history at the first message that differs. shared is what the adapter
// measured when it encoded the request after the previous one (measured).
// Otherwise the leading messages are compared by identity here, as
// adapters do, but only after a compaction: the projection changes
// messages it holds only then, so without one every previous message is
// still there.
func (s *sentRequest) prefix(h *session.RequestHeader, msgs []llm.Message, shared llm.Shared, measured bool) *session.Prefix {
	if !s.known {
		return nil
	}
	switch {
	case h.Model != s.model:
		return &session.Prefix{Break: session.BreakModel}
	case !wire.SameTools(h.Tools, s.tools):
		return &session.Prefix{Break: session.BreakTools}
	case h.System != s.system:
		return &session.Prefix{Break: session.BreakSystem}
	}
	k := 0
	switch {
	case measured && s.adapter:
		k = min(shared.Messages, len(s.msgs))
	case !s.compacted && len(msgs) >= s.n && len(s.msgs) == s.n:
		return nil
	default:
		for k < len(s.msgs) && k < len(msgs) && wire.Same(&s.msgs[k], &msgs[k]) {
			k++
		}
		measured = false
	}
	if k >= s.n {
		return nil
	}
	p := &session.Prefix{Messages: k, Break: session.BreakEdited}
	if s.compacted {
		p.Break = session.BreakCompaction
	}
	if measured {
		p.Bytes = shared.Bytes
	}
	return p
}

// sameArray reports whether a and b are the same slice of one array.
func sameArray(a, b []llm.Message) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}

// sameShape reports whether two headers shape requests alike: model,
// system prompt, tools and params.
func sameShape(a, b *session.RequestHeader) bool {
	return a.Model == b.Model && a.System == b.System && wire.SameTools(a.Tools, b.Tools) && sameParams(a.Params, b.Params)
}

func sameParams(a, b llm.Params) bool {
	eq := func(x, y *float64) bool { return x == y || x != nil && y != nil && *x == *y }
	return a.MaxTokens == b.MaxTokens && a.ReasoningEffort == b.ReasoningEffort && a.ThinkingBudget == b.ThinkingBudget &&
		eq(a.Temperature, b.Temperature) && eq(a.TopP, b.TopP)
}

// modelName strips the "provider:" prefix.
func modelName(spec string) string {
	if _, m, ok := strings.Cut(spec, ":"); ok {
		return m
	}
	return spec
}

// streamed is one attempt's response.
type streamed struct {
	text, reasoning, signature strings.Builder
	calls                      []llm.ToolCall
	callIndex                  map[int]int
	chunkSeqs                  []int64
	finish                     llm.Finish
	usage                      llm.Usage
	err                        *llm.Error
}

func (s *streamed) hasText() bool { return s.text.Len() > 0 || s.reasoning.Len() > 0 }

func (s *streamed) content() []llm.Part {
	parts := []llm.Part{}
	if s.reasoning.Len() > 0 {
		parts = append(parts, llm.Part{Type: llm.PartReasoning, Text: s.reasoning.String(), Signature: s.signature.String()})
	}
	if s.text.Len() > 0 {
		parts = append(parts, llm.Part{Type: llm.PartText, Text: s.text.String()})
	}
	return parts
}

// stream runs one attempt, logging each delta as an assistant/chunk.
func (a *Agent) stream(ctx context.Context, turn, step int, req *llm.Request) *streamed {
	out := &streamed{callIndex: map[int]int{}}
	terminal := false
	for ev := range a.cfg.Provider.Stream(ctx, req) {
		if terminal {
			continue
		}
		switch ev.Type {
		case llm.EventDelta:
			d := ev.Delta
			var seq int64
			a.do(func() {
				e, err := a.append(&session.AssistantChunk{Turn: turn, Step: step, Delta: d})
				if err == nil {
					seq = e.Seq
				}
			})
			out.chunkSeqs = append(out.chunkSeqs, seq)
			out.text.WriteString(d.Text)
			out.reasoning.WriteString(d.Reasoning)
			out.signature.WriteString(d.Signature)
			if tc := d.ToolCall; tc != nil {
				i, ok := out.callIndex[tc.Index]
				if !ok {
					i = len(out.calls)
					out.callIndex[tc.Index] = i
					out.calls = append(out.calls, llm.ToolCall{})
				}
				c := &out.calls[i]
				if tc.ID != "" {
					c.ID = tc.ID
				}
				if tc.Name != "" {
					c.Name = tc.Name
				}
				c.Arguments += tc.Arguments
			}
		case llm.EventDone:
			terminal = true
			out.finish, out.usage = ev.Finish, ev.Usage
		case llm.EventError:
			terminal = true
			out.err = ev.Err
			if out.err == nil {
				out.err = &llm.Error{Code: llm.CodeUnknown, Message: "provider reported an error without detail"}
			}
		}
	}
	if !terminal {
		out.err = &llm.Error{Code: llm.CodeMalformedStream, Message: "stream ended without a terminal event"}
	}
	if out.err == nil && ctx.Err() != nil {
		out.err = &llm.Error{Code: llm.CodeCanceled, Message: "cancelled"}
	}
	if out.err != nil && ctx.Err() != nil {
		out.err = &llm.Error{Code: llm.CodeCanceled, Message: context.Cause(ctx).Error()}
	}
	if out.err != nil && a.cfg.Redactor.Contains(out.err.Message) {
		// A provider may echo the key it refused: hooks, live events and
		// logs see the mask.
		e := *out.err
		e.Message = a.cfg.Redactor.String(e.Message)
		out.err = &e
	}
	return out
}

// finishStep records the response and runs its tool batch.
func (a *Agent) finishStep(ctx context.Context, turn, step int, out *streamed) stepResult {
	calls := out.calls
	finish := out.finish
	switch {
	case finish == llm.FinishMaxTokens:
		// Truncated calls are dropped; the text is kept.
		calls = nil
	case finish == "" || finish == llm.FinishError:
		finish = llm.FinishStop
		if len(calls) > 0 {
			finish = llm.FinishToolCalls
		}
	case finish == llm.FinishToolCalls && len(calls) == 0:
		finish = llm.FinishStop
	}
	if calls == nil {
		calls = []llm.ToolCall{}
	}
	var mintErr bool
	a.do(func() {
		// Every call needs an id unique in its message: mint one for a
		// missing or repeated id (the model's text keeps its own).
		seen := make(map[string]bool, len(calls))
		for i := range calls {
			for calls[i].ID == "" || seen[calls[i].ID] {
				calls[i].ID = a.cfg.NewID("call")
			}
			seen[calls[i].ID] = true
		}
		_, err := a.append(&session.AssistantMessage{Turn: turn, Step: step, Content: out.content(), ToolCalls: calls,
			Finish: finish, Usage: out.usage, ChunkSeqs: nonNil(out.chunkSeqs)})
		a.lastTokens = out.usage.Input + out.usage.Output
		mintErr = err != nil
	})
	if mintErr {
		return a.endStep(turn, step, &session.Reason{Kind: session.ReasonError, Code: "invariant", Message: "assistant message refused by the session invariant"})
	}
	text := out.text.String()
	if finish == llm.FinishMaxTokens {
		r := a.endStep(turn, step, nil)
		r.maxTokens, r.text = true, &text
		return r
	}
	if len(calls) == 0 {
		r := a.endStep(turn, step, nil)
		r.text = &text
		return r
	}
	fail := a.runTools(ctx, turn, step, calls)
	a.do(func() {
		a.drain(turn)
		_, _ = a.append(&session.StepEnd{Turn: turn, Step: step})
	})
	return stepResult{owed: true, fail: fail, text: &text}
}

func nonNil(s []int64) []int64 {
	if s == nil {
		return []int64{}
	}
	return s
}

// underPressure reports whether the last response used more of the context
// window than CompactAt allows. O(1): it reads the last reported usage.
func (a *Agent) underPressure() bool {
	if a.cfg.ContextWindow <= 0 {
		return false
	}
	var used int
	a.do(func() { used = a.lastTokens })
	return float64(used) > a.cfg.CompactAt*float64(a.cfg.ContextWindow)
}
