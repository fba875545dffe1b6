package agent_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/reinhq/rein/agent"
	"github.com/reinhq/rein/llm"
	"github.com/reinhq/rein/llm/scripted"
	"github.com/reinhq/rein/session"
	"github.com/reinhq/rein/store/memstore"
	"github.com/reinhq/rein/tool"
)

func withMaxSteps(n int) option { return func(x *harness) { x.cfg.MaxSteps = n } }

func TestMaxStepsEndsTheTurnWhenMoreIsOwed(t *testing.T) {
	h := newHarness(t, []scripted.Call{
		scripted.UseTools(scripted.ToolCall{ID: "k1", Name: "p"}),
		scripted.UseTools(scripted.ToolCall{ID: "k2", Name: "p"}),
		// The next turn sees the last step's results: nothing dangles.
		{Match: wantTexts("user:P", "assistant:[k1]", "tool:k1", "assistant:[k2]", "tool:k2", "user:Q"), Reply: scripted.Reply{Text: []string{"ok"}}},
	}, withTools(probe("p", tool.Exclusive, nil)), withMaxSteps(2))
	h.send("P")
	h.idle()
	evs := h.events()
	if end := evs[len(evs)-1].MustDecode().(*session.TurnEnd); end.Reason.Kind != session.ReasonMaxSteps {
		t.Fatalf("turn reason %v, want max-steps", end.Reason)
	}
	settled := h.lives(agent.LiveSettled)
	if len(settled) != 1 || settled[0].TurnReason.Kind != session.ReasonMaxSteps {
		t.Errorf("agent/settled %+v, want max-steps", settled)
	}
	h.send("Q")
	h.idle()
	evs = h.events()
	if end := evs[len(evs)-1].MustDecode().(*session.TurnEnd); end.Reason.Kind != session.ReasonCompleted {
		t.Errorf("second turn reason %v, want completed", end.Reason)
	}
	h.golden("max-steps")
}

func TestMaxStepsDoesNotCutAnAnswerThatOwesNothing(t *testing.T) {
	h := newHarness(t, []scripted.Call{
		scripted.UseTools(scripted.ToolCall{ID: "k1", Name: "p"}),
		scripted.Answer("done"),
	}, withTools(probe("p", tool.Exclusive, nil)), withMaxSteps(2))
	h.send("P")
	h.idle()
	evs := h.events()
	if end := evs[len(evs)-1].MustDecode().(*session.TurnEnd); end.Reason.Kind != session.ReasonCompleted {
		t.Errorf("turn reason %v, want completed: step 2 of 2 owed nothing", end.Reason)
	}
}

func TestMaxStepsStopsForcedContinuations(t *testing.T) {
	stop := func(ctx context.Context, in agent.StopInfo, next func(context.Context, agent.StopInfo) (agent.StopDecision, error)) (agent.StopDecision, error) {
		return agent.StopDecision{Steer: []agent.Message{{Content: llm.Text("again")}}}, nil
	}
	h := newHarness(t, []scripted.Call{scripted.Answer("one"), scripted.Answer("two")},
		withHooks(agent.Hooks{TurnStopping: []agent.Hook[agent.StopInfo, agent.StopDecision]{stop}}), withMaxSteps(2))
	h.send("P")
	h.idle()
	evs := h.events()
	if end := evs[len(evs)-1].MustDecode().(*session.TurnEnd); end.Reason.Kind != session.ReasonMaxSteps {
		t.Errorf("turn reason %v, want max-steps", end.Reason)
	}
}

func TestRetryIsAnnouncedWithTheSeqAfterTheFailedAttempt(t *testing.T) {
	retry := func(ctx context.Context, in agent.RequestErrorInfo, next func(context.Context, agent.RequestErrorInfo) (agent.Retry, error)) (agent.Retry, error) {
		return agent.Retry{Retry: in.Attempt == 1, Wait: 3 * time.Millisecond}, nil
	}
	h := newHarness(t, []scripted.Call{
		{Reply: scripted.Reply{Text: []string{"par", "tial"}}, Err: &scripted.ErrorReply{Code: llm.CodeNetwork, Message: "reset"}},
		scripted.Answer("whole"),
	}, withHooks(agent.Hooks{RequestError: []agent.Hook[agent.RequestErrorInfo, agent.Retry]{retry}}))
	h.send("P")
	h.idle()
	rs := h.lives(agent.LiveRetry)
	if len(rs) != 1 {
		t.Fatalf("%d agent/retry events, want 1", len(rs))
	}
	r := rs[0]
	if r.Turn != 1 || r.Step != 1 || r.Attempt != 1 || r.Wait != 3*time.Millisecond || r.Err == nil || !errors.Is(r.Err, r.Err) {
		t.Errorf("agent/retry %+v", r)
	}
	var le *llm.Error
	if !errors.As(r.Err, &le) || le.Code != llm.CodeNetwork {
		t.Errorf("agent/retry error %v, want network", r.Err)
	}
	evs := h.events()
	var failed, final []int64
	for _, ev := range evs {
		if ev.Type == session.TypeAssistantChunk {
			if ev.Seq < r.Seq {
				failed = append(failed, ev.Seq)
			} else {
				final = append(final, ev.Seq)
			}
		}
	}
	am := evs[findIndex(evs, session.TypeAssistantMessage)].MustDecode().(*session.AssistantMessage)
	if len(failed) != 2 || len(final) != 1 || len(am.ChunkSeqs) != 1 || am.ChunkSeqs[0] != final[0] {
		t.Errorf("seq %d splits chunks into %v and %v; the message cites %v", r.Seq, failed, final, am.ChunkSeqs)
	}
}

// gate is a store whose appends wait until released, so a test can watch
// what is accepted but not yet durable.
type gate struct {
	mu      sync.Mutex
	blocked bool
	open    chan struct{}
}

func (g *gate) hold() {
	g.mu.Lock()
	g.blocked, g.open = true, make(chan struct{})
	g.mu.Unlock()
}

func (g *gate) release() {
	g.mu.Lock()
	if g.blocked {
		g.blocked = false
		close(g.open)
	}
	g.mu.Unlock()
}

func (g *gate) wait(ctx context.Context) error {
	g.mu.Lock()
	ch, b := g.open, g.blocked
	g.mu.Unlock()
	if !b {
		return nil
	}
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func TestDurableEventsYieldsOnlyWhatIsDurable(t *testing.T) {
	g := &gate{}
	var stored atomic.Int64
	st := memstore.New(memstore.Options{BeforeAppend: func(ctx context.Context, id string, b []session.Event) error {
		if err := g.wait(ctx); err != nil {
			return err
		}
		stored.Store(b[len(b)-1].Seq + 1)
		return nil
	}})
	h := newHarness(t, nil, withStore(st))
	t.Cleanup(g.release) // before the harness closes the agent
	var mu sync.Mutex
	var got []int64
	var bad []int64
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev, err := range h.a.DurableEvents(context.Background(), 0) {
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			if ev.Seq >= stored.Load() {
				bad = append(bad, ev.Seq)
			}
			got = append(got, ev.Seq)
			mu.Unlock()
		}
	}()
	g.hold()
	h.inject("ci", "A") // accepted at once; its flush waits at the gate
	accepted := false
	for ev := range h.a.Events(context.Background(), 0) {
		accepted = ev.Seq == 0
		break
	}
	time.Sleep(20 * time.Millisecond)
	mu.Lock()
	early := len(got)
	mu.Unlock()
	if !accepted || early != 0 {
		t.Fatalf("accepted=%v; %d events yielded before their flush", accepted, early)
	}
	g.release()
	h.inject("ci", "B")
	h.idle()
	if err := h.a.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	select { // it ends once the agent is closed
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("DurableEvents did not end after Close")
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 2 || got[0] != 0 || got[1] != 1 || len(bad) != 0 {
		t.Errorf("durable events %v (not yet stored when yielded: %v), want [0 1]", got, bad)
	}
}

func TestDurableEventsNeverYieldsWhatFailedToFlush(t *testing.T) {
	var fail atomic.Bool
	st := memstore.New(memstore.Options{BeforeAppend: func(ctx context.Context, id string, b []session.Event) error {
		if fail.Load() {
			return errors.New("disk full")
		}
		return nil
	}})
	h := newHarness(t, nil, withStore(st))
	h.inject("ci", "kept")
	h.idle()
	fail.Store(true)
	h.inject("ci", "lost")
	h.idle()
	_ = h.a.Close(context.Background())
	var got []string
	for ev, err := range h.a.DurableEvents(context.Background(), 0) {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, llm.PlainText(ev.MustDecode().(*session.UserMessage).Content))
	}
	if len(got) != 1 || got[0] != "kept" {
		t.Errorf("durable events %q, want only the flushed one", got)
	}
}

func TestDurableEventsHoldsWhatANewSessionHasNotStored(t *testing.T) {
	h := newHarness(t, nil)
	if err := h.a.RecordHookResult(session.HookResult{Point: "PromptAdmission", Hook: "h#1", Decision: "block"}); err != nil {
		t.Fatal(err)
	}
	h.idle()
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	for ev, err := range h.a.DurableEvents(ctx, 0) {
		if err == nil {
			t.Fatalf("yielded %s before the session exists", ev.Type)
		}
	}
	// The first event that is not a log-only record creates the session,
	// with the held record ahead of it: now both are durable.
	h.inject("ci", "A")
	h.idle()
	if !h.a.Stored() {
		t.Fatal("not stored after an inject")
	}
	_ = h.a.Close(context.Background())
	var got []session.Type
	for ev, err := range h.a.DurableEvents(context.Background(), 0) {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, ev.Type)
	}
	if len(got) != 2 || got[0] != session.TypeHookResult || got[1] != session.TypeUserMessage {
		t.Errorf("durable events %v, want the hook/result and the user/message", got)
	}
}
