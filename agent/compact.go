package agent

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/reinhq/rein/llm"
	"github.com/reinhq/rein/session"
)

// CompactionSystemPrompt is the system prompt of a compaction's summary
// request. The request is this prompt, a prefix of the projection, and
// CompactionInstruction as the last user message: a pure function of the
// log and this code, like every request.
const CompactionSystemPrompt = "You write faithful, compact summaries of agent sessions so that the work can continue without the full history."

// CompactionInstruction asks for the summary.
const CompactionInstruction = `Summarize the conversation so far for your own later use. Keep: the user's goals and constraints, decisions made and why, files and commands involved, facts learned from tool results, open questions, and what remains to do. Be concise; do not invent anything.`

// SummaryPrefix starts every compaction summary message.
const SummaryPrefix = "Summary of the earlier conversation:\n\n"

// Errors of Compact.
var (
	// ErrNothingToCompact: the history is too short to compact.
	ErrNothingToCompact = errors.New("agent: nothing to compact")
	// ErrBusy: a turn is running; compact from a BeforeStep or
	// RequestError hook, or when idle.
	ErrBusy = errors.New("agent: busy")
)

// CompactOptions tune Compact.
type CompactOptions struct {
	// Reason is recorded in compaction/start: session.CompactManual (the
	// default), CompactPressure or CompactOverflow.
	Reason string
	// Keep is how many of the most recent model messages stay verbatim at
	// least (default 4). The cut always falls before a user-role message,
	// so tool call/result pairs are never split.
	Keep int
	// Instructions are added to the summary request (e.g. a PreCompact
	// hook's custom instructions).
	Instructions string
}

// CompactInfo describes a compaction about to run.
type CompactInfo struct {
	Agent  *Agent
	Reason string
	// Turn is the open turn, or 0 between turns.
	Turn int
}

// CompactDecision is a PreCompact decision.
type CompactDecision struct {
	Block  bool
	Reason string
	// Instructions are added to the summary request.
	Instructions string
}

type driverKey struct{}

// Compact replaces a prefix of the model's history with a summary written
// by the same model (docs/semantics.md, "The model's view of the log"): compaction/start, a summary user/message
// (source system:compaction) whose replaces lists every shadowed seq,
// compaction/end. Humans' transcripts still show the originals. The
// PreCompact chain runs first and may block; SessionStart runs after with
// source "compact".
//
// Call it when the agent is idle (it then holds off new turns until done;
// ErrBusy while a turn runs), or from a BeforeStep or RequestError hook
// with the context the hook received (it then runs inside the turn).
func (a *Agent) Compact(ctx context.Context, opts CompactOptions) error {
	if opts.Reason == "" {
		opts.Reason = session.CompactManual
	}
	if opts.Keep <= 0 {
		opts.Keep = 4
	}
	if ctx.Value(driverKey{}) == a {
		// From a hook: only between a step's tool batch and the next
		// request (BeforeStep, RequestError), never inside a batch, whose
		// results must follow its calls.
		var busy bool
		a.do(func() { busy = a.batchOpen })
		if busy {
			return ErrBusy
		}
		turn, _ := a.turnOf()
		return a.compact(ctx, turn, opts)
	}
	var err error
	var act *activity
	var actx context.Context
	if xerr := a.exec(func() {
		switch {
		case a.closed:
			err = ErrClosed
		case a.driving:
			err = ErrBusy
		default:
			a.driving = true
			a.busy.Add(1)
			var cancel context.CancelCauseFunc
			actx, cancel = context.WithCancelCause(ctx)
			act = &activity{cancel: cancel}
			a.act = act
		}
	}); xerr != nil {
		return xerr
	}
	if err != nil {
		return err
	}
	defer a.busy.Done()
	err = a.compact(actx, 0, opts)
	a.do(func() {
		act.cancel(nil)
		a.act = nil
		a.driving = false
		if len(a.queue) > 0 && !a.parked && !a.closed {
			a.driving = true
			a.busy.Add(1)
			a.setStatus(Running)
			go a.drive()
		}
		a.checkIdle()
	})
	return err
}

func (a *Agent) turnOf() (int, bool) {
	var turn int
	var open bool
	a.do(func() { turn, open = a.log.Turn() })
	if !open {
		return 0, false
	}
	return turn, true
}

// compact runs one compaction; turn is 0 between turns.
func (a *Agent) compact(ctx context.Context, turn int, opts CompactOptions) error {
	dec, err := run(ctx, a.cfg.Hooks.PreCompact, CompactInfo{Agent: a, Reason: opts.Reason, Turn: turn},
		func(context.Context, CompactInfo) (CompactDecision, error) { return CompactDecision{}, nil })
	if err != nil {
		return fmt.Errorf("agent: PreCompact: %w", err)
	}
	if dec.Block {
		return fmt.Errorf("agent: compaction blocked by a PreCompact hook: %s", dec.Reason)
	}
	// Extra instructions are logged in compaction/start: every byte of the
	// summary request must be reconstructable from the log.
	extra := strings.TrimSpace(strings.TrimSpace(opts.Instructions) + "\n" + strings.TrimSpace(dec.Instructions))
	var (
		prefix []llm.Message
		seqs   []int64
		id     string
		upTo   int64
	)
	a.do(func() {
		msgs := a.log.Messages()
		pseqs := a.log.Projection().Seqs()
		b := cutPoint(msgs, pseqs, opts.Keep)
		if b <= 0 {
			return
		}
		lo, hi := slices.Min(pseqs[:b]), slices.Max(pseqs[:b])
		seqs = a.log.LiveSurface(lo, hi)
		prefix = msgs[:b]
		id = a.cfg.NewID("c")
		_, err = a.append(&session.CompactionStart{Turn: turnPtr(turn), ID: id, Reason: opts.Reason, Instructions: extra})
		upTo = a.log.Len()
	})
	if len(seqs) == 0 {
		return ErrNothingToCompact
	}
	if err != nil {
		return err
	}
	if err := a.p.flush(context.Background(), upTo); err != nil {
		a.do(func() {
			a.flushFailed(err)
			_, _ = a.append(&session.CompactionEnd{Turn: turnPtr(turn), ID: id, Reason: opts.Reason, Error: "persistence: " + err.Error()})
		})
		return err
	}
	instr := CompactionInstruction
	if extra != "" {
		instr += "\n\nAlso: " + extra
	}
	req := &llm.Request{Model: modelName(a.cfg.Model), System: CompactionSystemPrompt, Params: a.cfg.Params,
		Messages: append(slices.Clip(prefix), llm.Message{Role: llm.RoleUser, Content: llm.Text(instr)})}
	var text strings.Builder
	var ferr *llm.Error
	for ev := range a.cfg.Provider.Stream(ctx, req) {
		switch ev.Type {
		case llm.EventDelta:
			text.WriteString(ev.Delta.Text)
		case llm.EventError:
			ferr = ev.Err
		}
	}
	if ferr == nil && strings.TrimSpace(text.String()) == "" {
		ferr = &llm.Error{Code: llm.CodeEmptyResponse, Message: "the model returned an empty summary"}
	}
	if ferr == nil && ctx.Err() != nil {
		ferr = &llm.Error{Code: llm.CodeCanceled, Message: "cancelled"}
	}
	a.do(func() {
		if ferr != nil {
			_, _ = a.append(&session.CompactionEnd{Turn: turnPtr(turn), ID: id, Reason: opts.Reason, Error: ferr.Error()})
			upTo = a.log.Len()
			return
		}
		_, err = a.append(&session.UserMessage{ID: a.mintID(), Content: llm.Text(SummaryPrefix + text.String()),
			Source:   session.Source{Kind: session.SourceSystem, Name: "compaction"},
			Replaces: &session.Replaces{Start: seqs[0], End: seqs[len(seqs)-1], Seqs: seqs}})
		end := &session.CompactionEnd{Turn: turnPtr(turn), ID: id, Reason: opts.Reason}
		if err != nil {
			end.Error = "summary refused: " + err.Error()
		}
		_, _ = a.append(end)
		a.lastTokens = 0
		a.sent.compacted = a.sent.compacted || err == nil
		upTo = a.log.Len()
	})
	if err := a.p.flush(context.Background(), upTo); err != nil {
		a.do(func() { a.flushFailed(err) })
	}
	if ferr != nil {
		return fmt.Errorf("agent: compaction: %w", ferr)
	}
	if err != nil {
		return err
	}
	// SessionStart with source compact: its contexts land before the next
	// request (staged in the open turn, or appended between turns).
	ctxs, herr := run(ctx, a.cfg.Hooks.SessionStart, SessionStartInfo{Agent: a, SessionID: a.id, Source: StartCompact},
		func(context.Context, SessionStartInfo) ([]AdditionalContext, error) { return nil, nil })
	if herr != nil {
		a.cfg.Logger.Warn("agent: SessionStart(compact) hook failed", "session", a.id, "err", herr)
	}
	// They are appended at once, in or between turns: a compaction runs at
	// a safe boundary (no tool batch open), and they must reach the very
	// next request, also the retry of a failed one.
	a.do(func() {
		def := session.Source{Kind: session.SourceHook, Name: "SessionStart"}
		for _, c := range ctxs {
			if validContent(c.Content) {
				if c.Source.Kind == "" {
					c.Source = def
				}
				_, _ = a.appendMsg(c)
			}
		}
		upTo = a.log.Len()
	})
	if err := a.p.flush(context.Background(), upTo); err != nil {
		a.do(func() { a.flushFailed(err) })
	}
	return nil
}

// cutPoint returns how many leading messages to summarise: the largest b
// with at least keep messages after it, msgs[b] a user message (so no tool
// call/result pair is split), and every seq before the cut below every seq
// after it (so the shadowed range is contiguous). 0 when there is none.
func cutPoint(msgs []llm.Message, seqs []int64, keep int) int {
	if len(msgs) <= keep {
		return 0
	}
	// suffixMin[i] = min(seqs[i:]).
	suffixMin := make([]int64, len(seqs)+1)
	suffixMin[len(seqs)] = 1<<62 - 1
	for i := len(seqs) - 1; i >= 0; i-- {
		suffixMin[i] = min(seqs[i], suffixMin[i+1])
	}
	prefixMax := make([]int64, len(seqs)+1)
	prefixMax[0] = -1
	for i, s := range seqs {
		prefixMax[i+1] = max(prefixMax[i], s)
	}
	for b := len(msgs) - keep; b > 0; b-- {
		if msgs[b].Role == llm.RoleUser && prefixMax[b] < suffixMin[b] {
			return b
		}
	}
	return 0
}

func turnPtr(turn int) *int {
	if turn == 0 {
		return nil
	}
	return &turn
}
