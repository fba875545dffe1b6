package agent_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/reinhq/rein/agent"
	"github.com/reinhq/rein/llm"
	"github.com/reinhq/rein/llm/scripted"
	"github.com/reinhq/rein/session"
	"github.com/reinhq/rein/store"
	"github.com/reinhq/rein/store/memstore"
	"github.com/reinhq/rein/tool"
)

// Regression tests for defects a review found: each failed before its fix.

// A Steer arriving while the turn decides to stop (after the TurnStopping
// drain found no steering) must not be stranded in the outbox of a turn
// that will not look again: it becomes its own turn.
func TestSteerWhileTheTurnStopsIsNotStranded(t *testing.T) {
	var armed atomic.Pointer[agent.Agent]
	var armOnce sync.Once
	steered := make(chan struct{})
	stop := func(ctx context.Context, in agent.StopInfo, next func(context.Context, agent.StopInfo) (agent.StopDecision, error)) (agent.StopDecision, error) {
		armOnce.Do(func() { armed.Store(in.Agent) })
		return agent.StopDecision{AdditionalContexts: []agent.AdditionalContext{ctxOf("stop", "note")}}, nil
	}
	base := agent.StepClock(t0, time.Millisecond)
	h := newHarness(t, []scripted.Call{scripted.Answer("a1"), scripted.Answer("a2")},
		withHooks(agent.Hooks{TurnStopping: []agent.Hook[agent.StopInfo, agent.StopDecision]{stop}}),
		func(x *harness) {
			x.cfg.Clock = func() time.Time {
				// Runs on the owner during the stopping drain; a user
				// steers at that moment from another goroutine.
				if a := armed.Swap(nil); a != nil {
					go func() {
						defer close(steered)
						if _, err := a.Steer(agent.Message{ID: "S", Content: llm.Text("S")}); err != nil {
							t.Error(err)
						}
					}()
					time.Sleep(30 * time.Millisecond)
				}
				return base()
			}
		})
	h.send("P")
	<-steered
	h.idle()
	found := false
	for _, ev := range findType(h.events(), session.TypeTurnStart) {
		if ts := ev.MustDecode().(*session.TurnStart); ts.Trigger.MessageID == "S" && ts.Trigger.Kind == session.TriggerSteer {
			found = true
		}
	}
	if !found {
		t.Errorf("the late steer did not run: %q", types(h.events()))
	}
}

// Close called from a subscriber, or from a tool body with its context,
// returns instead of waiting for itself.
func TestCloseFromASubscriberOrAToolBody(t *testing.T) {
	t.Run("subscriber", func(t *testing.T) {
		h := newHarness(t, []scripted.Call{scripted.Answer("a1")})
		done := make(chan error, 1)
		var once sync.Once
		h.a.Subscribe(context.Background(), func(l agent.Live) {
			if l.Type == agent.LiveSettled {
				once.Do(func() { done <- h.a.Close(context.Background()) })
			}
		})
		h.send("P")
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Close: %v", err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("Close from a subscriber deadlocked")
		}
	})
	t.Run("tool body", func(t *testing.T) {
		var h *harness
		done := make(chan error, 1)
		body := func(ctx context.Context, c tool.Call) (tool.Result, error) {
			done <- h.a.Close(ctx)
			if err := h.a.WhenIdle(ctx); !errors.Is(err, agent.ErrBusy) {
				t.Errorf("WhenIdle from a tool body: %v, want ErrBusy", err)
			}
			return tool.TextResult("bye"), nil
		}
		h = newHarness(t, []scripted.Call{scripted.UseTools(scripted.ToolCall{ID: "k1", Name: "p"})},
			withTools(probe("p", tool.Exclusive, body)))
		h.send("P")
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Close: %v", err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("Close from a tool body deadlocked")
		}
		// A second Close waits for the first to settle.
		if err := h.a.Close(context.Background()); !errors.Is(err, agent.ErrClosed) {
			t.Errorf("second Close: %v, want ErrClosed", err)
		}
		evs := h.events()
		expectTypes(t, evs[len(evs)-1:], "turn/end{aborted{closed}}")
	})
}

// A Cancel while idle must not abort a SessionStart hook that is still
// running: its contexts land before the first request.
func TestCancelWhileIdleLeavesSessionStartAlone(t *testing.T) {
	entered := make(chan struct{})
	release := make(chan struct{})
	ss := func(ctx context.Context, in agent.SessionStartInfo, next func(context.Context, agent.SessionStartInfo) ([]agent.AdditionalContext, error)) ([]agent.AdditionalContext, error) {
		close(entered)
		select {
		case <-release:
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		}
		return []agent.AdditionalContext{ctxOf("ss", "project rules")}, nil
	}
	h := newHarness(t, []scripted.Call{{Match: wantTexts("user:project rules", "user:P"), Reply: scripted.Reply{Text: []string{"a"}}}},
		withHooks(agent.Hooks{SessionStart: []agent.Hook[agent.SessionStartInfo, []agent.AdditionalContext]{ss}}))
	<-entered
	h.a.Cancel(session.CauseUser, agent.CancelOptions{})
	close(release)
	h.idle()
	h.send("P")
	h.idle()
}

// Cancel with KeepInbox while a prompt is queued but not yet taken (here:
// the driver is still running SessionStart) parks it instead of letting it
// run; the next Send wakes it.
func TestKeepInboxBeforeThePromptIsTakenParks(t *testing.T) {
	release := make(chan struct{})
	ss := func(ctx context.Context, in agent.SessionStartInfo, next func(context.Context, agent.SessionStartInfo) ([]agent.AdditionalContext, error)) ([]agent.AdditionalContext, error) {
		<-release
		return nil, nil
	}
	h := newHarness(t, []scripted.Call{
		{Match: wantTexts("user:P"), Reply: scripted.Reply{Text: []string{"a1"}}},
		{Match: wantTexts("user:P", "assistant:a1", "user:Q"), Reply: scripted.Reply{Text: []string{"a2"}}},
	}, withHooks(agent.Hooks{SessionStart: []agent.Hook[agent.SessionStartInfo, []agent.AdditionalContext]{ss}}))
	h.send("P")
	h.a.Cancel(session.CauseUser, agent.CancelOptions{KeepInbox: true})
	close(release)
	h.idle()
	if n := len(h.events()); n != 0 {
		t.Fatalf("a parked prompt ran: %q", types(h.events()))
	}
	h.send("Q")
	h.idle()
	if n := len(findType(h.events(), session.TypeTurnStart)); n != 2 {
		t.Errorf("%d turns after the wake, want 2 (P then Q)", n)
	}
}

// Compact from a hook inside a tool batch is refused (ErrBusy): the
// summary would sit between the calls and their results.
func TestCompactInsideAToolBatchIsRefused(t *testing.T) {
	var cerr error
	var once sync.Once
	post := func(ctx context.Context, in agent.ToolPostInfo, next func(context.Context, agent.ToolPostInfo) (agent.ToolPostDecision, error)) (agent.ToolPostDecision, error) {
		once.Do(func() { cerr = in.Agent.Compact(ctx, agent.CompactOptions{Keep: 1}) })
		return next(ctx, in)
	}
	h := newHarness(t, []scripted.Call{
		scripted.Answer("a1"),
		scripted.UseTools(scripted.ToolCall{ID: "k1", Name: "p"}),
		scripted.Answer("a2"),
	}, withTools(probe("p", tool.Parallel, nil)),
		withHooks(agent.Hooks{ToolPost: []agent.Hook[agent.ToolPostInfo, agent.ToolPostDecision]{post}}))
	h.send("u1")
	h.idle()
	h.send("u2")
	h.idle()
	if !errors.Is(cerr, agent.ErrBusy) {
		t.Errorf("Compact in a tool batch: %v, want ErrBusy", cerr)
	}
	if n := len(findType(h.events(), session.TypeCompactionStart)); n != 0 {
		t.Errorf("%d compactions written", n)
	}
}

// Subscribe racing Close: no data race, and no subscription after Close.
func TestSubscribeRacingClose(t *testing.T) {
	for range 100 {
		a, err := agent.New(context.Background(), agent.Config{Store: memstore.New(memstore.Options{}), Provider: scripted.New(), Model: "scripted:test"})
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		wg.Add(2)
		go func() { defer wg.Done(); a.Subscribe(context.Background(), func(agent.Live) {}) }()
		go func() { defer wg.Done(); _ = a.Close(context.Background()) }()
		wg.Wait()
	}
}

// A RequestError hook that compacts and retries: the SessionStart(compact)
// contexts reach the retried request.
func TestCompactFromRequestErrorFeedsTheRetry(t *testing.T) {
	var a *agent.Agent
	var once sync.Once
	reqErr := func(ctx context.Context, in agent.RequestErrorInfo, next func(context.Context, agent.RequestErrorInfo) (agent.Retry, error)) (agent.Retry, error) {
		retry := false
		once.Do(func() {
			if err := a.Compact(ctx, agent.CompactOptions{Keep: 1}); err != nil {
				t.Errorf("Compact: %v", err)
			}
			retry = true
		})
		if retry {
			return agent.Retry{Retry: true}, nil
		}
		return next(ctx, in)
	}
	ss := func(ctx context.Context, in agent.SessionStartInfo, next func(context.Context, agent.SessionStartInfo) ([]agent.AdditionalContext, error)) ([]agent.AdditionalContext, error) {
		if in.Source == agent.StartCompact {
			return []agent.AdditionalContext{ctxOf("ss", "rules again")}, nil
		}
		return nil, nil
	}
	h := newHarness(t, []scripted.Call{
		scripted.Answer("a1"),
		scripted.Failure(llm.CodeOverloaded, "busy"),
		scripted.Answer("S"),
		{Match: func(r *llm.Request) error {
			for _, m := range texts(r.Messages) {
				if m == "user:rules again" {
					return nil
				}
			}
			return errorsf("retried request lacks the SessionStart(compact) context: %q", texts(r.Messages))
		}, Reply: scripted.Reply{Text: []string{"a2"}}},
	}, withHooks(agent.Hooks{
		RequestError: []agent.Hook[agent.RequestErrorInfo, agent.Retry]{reqErr},
		SessionStart: []agent.Hook[agent.SessionStartInfo, []agent.AdditionalContext]{ss},
	}))
	a = h.a
	h.send("u1")
	h.idle()
	h.send("u2")
	h.idle()
}

// Steering staged before a Cancel with KeepInbox is kept for the next
// prompt, not written into the aborted turn.
func TestKeepInboxKeepsSteeringOutOfTheAbortedTurn(t *testing.T) {
	var h *harness
	body := func(ctx context.Context, c tool.Call) (tool.Result, error) {
		if _, err := h.a.Steer(agent.Message{ID: "S", Content: llm.Text("S")}); err != nil {
			t.Error(err)
		}
		h.a.Cancel(session.CauseUser, agent.CancelOptions{KeepInbox: true})
		return tool.TextResult("done"), nil
	}
	h = newHarness(t, []scripted.Call{
		scripted.UseTools(scripted.ToolCall{ID: "k1", Name: "p"}),
		{Match: wantTexts("user:P", "assistant:[k1]", "tool:k1", "user:Q", "user:S"), Reply: scripted.Reply{Text: []string{"a2"}}},
	}, withTools(probe("p", tool.Exclusive, body)))
	h.send("P")
	h.idle()
	h.send("Q")
	h.idle()
	evs := h.events()
	end := findIndex(evs, session.TypeTurnEnd)
	if n := len(findType(evs[:end], session.TypeSteeringMessage)); n != 0 {
		t.Errorf("steering written into the aborted turn: %q", types(evs[:end+1]))
	}
}

// A hook that panics is a failed hook, not a crashed agent.
func TestPanickingHookIsAnError(t *testing.T) {
	boom := func(ctx context.Context, p agent.Prompt, next func(context.Context, agent.Prompt) (agent.Admission, error)) (agent.Admission, error) {
		panic("plugin bug")
	}
	h := newHarness(t, nil, withHooks(agent.Hooks{PromptAdmission: []agent.Hook[agent.Prompt, agent.Admission]{boom}}))
	h.send("P")
	h.idle()
	if b := h.lives(agent.LiveBlocked); len(b) != 1 {
		t.Errorf("a panicking admission hook should block the prompt: %+v", b)
	}
}

// Duplicate tool-call ids from a provider are re-minted instead of failing
// the turn.
func TestDuplicateToolCallIDsAreReminted(t *testing.T) {
	h := newHarness(t, []scripted.Call{
		scripted.UseTools(scripted.ToolCall{ID: "dup", Name: "p"}, scripted.ToolCall{ID: "dup", Name: "p"}),
		scripted.Answer("ok"),
	}, withTools(probe("p", tool.Parallel, nil)))
	h.send("P")
	h.idle()
	evs := h.events()
	if end := evs[len(evs)-1].MustDecode().(*session.TurnEnd); end.Reason.Kind != session.ReasonCompleted {
		t.Errorf("turn ended %v", end.Reason)
	}
	if n := len(findType(evs, session.TypeToolResult)); n != 2 {
		t.Errorf("%d results, want 2", n)
	}
}

type cancellingApprover struct{ a *atomic.Pointer[agent.Agent] }

func (c cancellingApprover) Approve(ctx context.Context, r agent.ApprovalRequest) (agent.Approval, error) {
	c.a.Load().Cancel(session.CauseUser, agent.CancelOptions{})
	<-ctx.Done()
	return agent.Approval{}, ctx.Err()
}

// A call whose approval was pending when the turn was cancelled never
// started: it is not-run, not denied.
func TestCancelledWhileApprovingIsNotRun(t *testing.T) {
	var ap atomic.Pointer[agent.Agent]
	ask := func(ctx context.Context, in agent.ToolCallInfo, next func(context.Context, agent.ToolCallInfo) (agent.ToolDecision, error)) (agent.ToolDecision, error) {
		return agent.ToolDecision{Kind: agent.Ask, Reason: "writes"}, nil
	}
	h := newHarness(t, []scripted.Call{scripted.UseTools(scripted.ToolCall{ID: "k1", Name: "p"})},
		withTools(probe("p", tool.Exclusive, nil)), withHooks(agent.Hooks{ToolPre: []agent.Hook[agent.ToolCallInfo, agent.ToolDecision]{ask}}),
		func(x *harness) { x.cfg.Approver = cancellingApprover{&ap} })
	ap.Store(h.a)
	h.send("P")
	h.idle()
	evs := h.events()
	expectTypes(t, evs[len(evs)-4:], "tool/call k1", "tool/result k1{not-run}", "step/end", "turn/end{aborted{user}}")
}

// Send on an idle agent starts the prompt's admission at once: context
// injected right after it follows that prompt (in its turn, at the first
// boundary still ahead, or after it if the turn already ended); it was
// written before the turn when the driver had not yet taken the prompt up.
func TestInjectRightAfterSendFollowsThePrompt(t *testing.T) {
	for range 20 {
		h := newHarness(t, []scripted.Call{scripted.Answer("ok")})
		h.send("P")
		h.inject("ci", "A")
		h.idle()
		evs := h.events()
		expectTypes(t, evs[:2], "turn/start", "u:P")
		at := -1
		for i, e := range evs {
			if e.Type == session.TypeUserMessage && strings.Contains(string(e.Data), `"text":"A"`) {
				at = i
			}
		}
		// In the turn, or after it when the turn had already ended:
		// never before the prompt.
		if at < 2 || countType(evs, session.TypeTurnStart) != 1 {
			t.Fatalf("the context is at %d of %d events, before the prompt's one turn", at, len(evs))
		}
	}
}

// A steer right after a send steers that prompt's turn rather than
// queueing a turn of its own.
func TestSteerRightAfterSendSteersItsTurn(t *testing.T) {
	// The admission waits for the steer, so the turn cannot end first.
	steered := make(chan struct{})
	wait := func(ctx context.Context, p agent.Prompt, next func(context.Context, agent.Prompt) (agent.Admission, error)) (agent.Admission, error) {
		<-steered
		return next(ctx, p)
	}
	h := newHarness(t, []scripted.Call{{Match: wantTexts("user:P", "user:S"), Reply: scripted.Reply{Text: []string{"ok"}}}},
		withHooks(agent.Hooks{PromptAdmission: []agent.Hook[agent.Prompt, agent.Admission]{wait}}))
	h.send("P")
	if _, err := h.a.Steer(agent.Message{Content: llm.Text("S")}); err != nil {
		t.Fatal(err)
	}
	close(steered)
	h.idle()
	expectTypes(t, h.events()[:3], "turn/start", "u:P", "s:S")
	if turns := countType(h.events(), session.TypeTurnStart); turns != 1 {
		t.Errorf("%d turns, want 1", turns)
	}
}

// Context staged for a prompt that a cancel drops, whether before its
// admission began (then out of turn) or after its turn opened (then in
// the turn), is committed once: an inject is never lost.
func TestCancelledQueuedPromptKeepsItsContext(t *testing.T) {
	for range 20 {
		// A turn that gets as far as the model hangs until the cancel; one
		// cancelled before never calls it.
		h := newHarness(t, nil, func(x *harness) { x.model = scripted.New(scripted.Call{Hang: true}) })
		h.send("P")
		h.inject("ci", "A")
		h.a.Cancel(session.CauseUser, agent.CancelOptions{})
		h.idle()
		n := 0
		for _, e := range h.events() {
			if e.Type == session.TypeUserMessage && strings.Contains(string(e.Data), `"text":"A"`) {
				n++
			}
		}
		if n != 1 {
			t.Fatalf("the injected context is in the log %d times, want once", n)
		}
	}
}

func countType(evs []session.Event, typ session.Type) int {
	n := 0
	for _, e := range evs {
		if e.Type == typ {
			n++
		}
	}
	return n
}

// Close right after Send and Inject: the context is stored, once, whether
// the prompt's turn opened or not.
func TestCloseAfterSendAndInjectKeepsTheContext(t *testing.T) {
	for range 20 {
		h := newHarness(t, nil, func(x *harness) { x.model = scripted.New(scripted.Call{Hang: true}) })
		h.send("P")
		h.inject("ci", "A")
		if err := h.a.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		ld, err := h.st.Load(context.Background(), h.a.ID(), store.LoadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, e := range ld.Log.Events(0) {
			if e.Type == session.TypeUserMessage && strings.Contains(string(e.Data), `"text":"A"`) {
				n++
			}
		}
		if n != 1 {
			t.Fatalf("the injected context is stored %d times, want once", n)
		}
	}
}
