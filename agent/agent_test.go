package agent_test

import (
	"context"
	"encoding/json"
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
	"github.com/reinhq/rein/store/memstore"
	"github.com/reinhq/rein/tool"
)

func TestScenario24CompactionAcrossOutOfTurnMessages(t *testing.T) {
	h := newHarness(t, []scripted.Call{
		scripted.Answer("a1"),
		scripted.Answer("a2"),
		{Match: wantTexts("user:u1", "assistant:a1", "user:A", "user:u2", "assistant:a2", "user:"+agent.CompactionInstruction), Reply: scripted.Reply{Text: []string{"S"}}},
		{Match: wantTexts("user:"+agent.SummaryPrefix+"S", "user:B", "user:u3"), Reply: scripted.Reply{Text: []string{"a3"}}},
	})
	h.send("u1")
	h.idle()
	h.inject("ci", "A")
	h.send("u2")
	h.idle()
	h.inject("ci", "B")
	h.idle()
	if err := h.a.Compact(context.Background(), agent.CompactOptions{Keep: 1}); err != nil {
		t.Fatal(err)
	}
	h.send("u3")
	h.idle()
	evs := h.events()
	var sum *session.UserMessage
	for _, ev := range evs {
		if ev.Type == session.TypeUserMessage {
			if m := ev.MustDecode().(*session.UserMessage); m.Replaces != nil {
				sum = m
			}
		}
	}
	if sum == nil || sum.Source.Kind != session.SourceSystem {
		t.Fatalf("no summary from system:compaction: %+v", sum)
	}
	// u1(1) a1(5) A(8) u2(10) a2(13): every surface event of the range.
	if got := js(sum.Replaces.Seqs); got != "[1,5,8,10,13]" {
		t.Errorf("replaces.seqs = %s", got)
	}
	h.golden("24-compaction-across-out-of-turn-messages")
}

func TestCompactNothingAndBusy(t *testing.T) {
	started := make(chan struct{})
	h := newHarness(t, []scripted.Call{{Hang: true, BeforeChunk: func(ctx context.Context, i int) { close(started) }}})
	if err := h.a.Compact(context.Background(), agent.CompactOptions{}); !errors.Is(err, agent.ErrNothingToCompact) {
		t.Errorf("empty session: %v, want ErrNothingToCompact", err)
	}
	h.send("P")
	<-started
	if err := h.a.Compact(context.Background(), agent.CompactOptions{}); !errors.Is(err, agent.ErrBusy) {
		t.Errorf("during a turn: %v, want ErrBusy", err)
	}
	h.a.Cancel(session.CauseUser, agent.CancelOptions{})
	h.idle()
}

func TestAutoCompactionOnOverflowRetriesTheStep(t *testing.T) {
	h := newHarness(t, []scripted.Call{
		scripted.Answer("a1"),
		scripted.Answer("a2"),
		scripted.Failure(llm.CodeContextOverflow, "prompt is too long"),
		{Match: func(r *llm.Request) error {
			if r.System != agent.CompactionSystemPrompt {
				return errors.New("expected the summary request")
			}
			return nil
		}, Reply: scripted.Reply{Text: []string{"S"}}},
		{Match: wantTexts("user:"+agent.SummaryPrefix+"S", "user:u2", "assistant:a2", "user:u3"), Reply: scripted.Reply{Text: []string{"a3"}}},
	}, func(x *harness) { x.cfg.ContextWindow = 1000 })
	for _, p := range []string{"u1", "u2", "u3"} {
		h.send(p)
		h.idle()
	}
	evs := h.events()
	last := evs[len(evs)-1].MustDecode().(*session.TurnEnd)
	if last.Reason.Kind != session.ReasonCompleted {
		t.Errorf("turn ended %v, want completed after compaction and retry", last.Reason)
	}
	if n := len(findType(evs, session.TypeCompactionEnd)); n != 1 {
		t.Errorf("%d compactions", n)
	}
}

func TestAutoCompactionUnderPressure(t *testing.T) {
	big := &llm.Usage{Input: 900, Output: 10}
	h := newHarness(t, []scripted.Call{
		scripted.Answer("a1"),
		{Reply: scripted.Reply{Text: []string{"a2"}, Usage: big}},
		{Match: func(r *llm.Request) error {
			if r.System != agent.CompactionSystemPrompt {
				return errors.New("expected the summary request before step 1 of turn 3")
			}
			return nil
		}, Reply: scripted.Reply{Text: []string{"S"}}},
		{Match: wantTexts("user:"+agent.SummaryPrefix+"S", "user:u2", "assistant:a2", "user:u3"), Reply: scripted.Reply{Text: []string{"a3"}}},
	}, func(x *harness) { x.cfg.ContextWindow = 1000 })
	h.send("u1")
	h.idle()
	h.send("u2") // this response uses 91% of the window
	h.idle()
	h.send("u3") // so a compaction runs before this turn's first step
	h.idle()
	if n := len(findType(h.events(), session.TypeCompactionStart)); n != 1 {
		t.Errorf("%d compactions, want 1", n)
	}
}

func TestMaxTokensIsStickyButSteeringContinues(t *testing.T) {
	var h *harness
	h = newHarness(t, []scripted.Call{
		{Reply: scripted.Reply{Text: []string{"trunc"}, ToolCalls: []scripted.ToolCall{{ID: "x", Name: "p", Arguments: `{"a":`}}, Finish: llm.FinishMaxTokens},
			BeforeChunk: func(ctx context.Context, i int) {
				if i == 0 {
					if _, err := h.a.Steer(agent.Message{Content: llm.Text("go on")}); err != nil {
						t.Error(err)
					}
				}
			}},
		scripted.UseTools(scripted.ToolCall{ID: "k1", Name: "p"}),
		{Match: wantTexts("user:P", "assistant:trunc", "user:go on", "assistant:[k1]", "tool:k1"), Reply: scripted.Reply{Text: []string{"done"}}},
	}, withTools(probe("p", tool.Exclusive, nil)))
	h.send("P")
	h.idle()
	evs := h.events()
	am := evs[findIndex(evs, session.TypeAssistantMessage)].MustDecode().(*session.AssistantMessage)
	if len(am.ToolCalls) != 0 || am.Finish != llm.FinishMaxTokens {
		t.Errorf("max-tokens message kept tool calls: %+v", am)
	}
	end := evs[len(evs)-1].MustDecode().(*session.TurnEnd)
	if end.Reason.Kind != session.ReasonMaxTokens {
		t.Errorf("turn reason %v, want max-tokens (sticky)", end.Reason)
	}
	h.golden("max-tokens-sticky")
}

func findIndex(evs []session.Event, t session.Type) int {
	for i, ev := range evs {
		if ev.Type == t {
			return i
		}
	}
	return -1
}

func TestSessionStartContextsLandBeforeFirstRequest(t *testing.T) {
	start := func(ctx context.Context, in agent.SessionStartInfo, next func(context.Context, agent.SessionStartInfo) ([]agent.AdditionalContext, error)) ([]agent.AdditionalContext, error) {
		time.Sleep(20 * time.Millisecond) // a slow hook is still awaited
		return []agent.AdditionalContext{{Content: llm.Text("repo facts (" + in.Source + ")")}}, nil
	}
	h := newHarness(t, []scripted.Call{{Match: wantTexts("user:repo facts (startup)", "user:P"), Reply: scripted.Reply{Text: []string{"ok"}}}},
		withHooks(agent.Hooks{SessionStart: []agent.Hook[agent.SessionStartInfo, []agent.AdditionalContext]{start}}))
	h.send("P")
	h.idle()
	expectTypes(t, h.events()[:2], "c:repo facts (startup)", "turn/start")
}

func TestToolPreDenyAskUpdateAndBadArguments(t *testing.T) {
	var ran []string
	var mu sync.Mutex
	body := func(ctx context.Context, c tool.Call) (tool.Result, error) {
		mu.Lock()
		ran = append(ran, c.ID+"="+string(c.Arguments))
		mu.Unlock()
		return tool.TextResult("ran"), nil
	}
	pre := func(ctx context.Context, in agent.ToolCallInfo, next func(context.Context, agent.ToolCallInfo) (agent.ToolDecision, error)) (agent.ToolDecision, error) {
		switch in.CallID {
		case "deny":
			return agent.ToolDecision{Kind: agent.Deny, Reason: "not here", By: "rule:p(deny)"}, nil
		case "ask":
			return agent.ToolDecision{Kind: agent.Ask, Reason: "sure?"}, nil
		case "upd":
			return agent.ToolDecision{Kind: agent.Allow, UpdatedInput: json.RawMessage(`{"safe":true}`), By: "hook:test"}, nil
		}
		return next(ctx, in)
	}
	h := newHarness(t, []scripted.Call{
		scripted.UseTools(
			scripted.ToolCall{ID: "deny", Name: "p", Arguments: `{}`},
			scripted.ToolCall{ID: "ask", Name: "p", Arguments: `{}`},
			scripted.ToolCall{ID: "upd", Name: "p", Arguments: `{"safe":false}`},
			scripted.ToolCall{ID: "bad", Name: "p", Arguments: `{"x":`},
			scripted.ToolCall{ID: "nope", Name: "missing", Arguments: `{}`},
			scripted.ToolCall{ID: "ok", Name: "p", Arguments: `{}`},
		),
		scripted.Answer("done"),
	}, withTools(probe("p", tool.Exclusive, body)), withHooks(agent.Hooks{ToolPre: []agent.Hook[agent.ToolCallInfo, agent.ToolDecision]{pre}}))
	h.send("P")
	h.idle()
	got := strings.Join(types(h.events()), " ")
	for _, want := range []string{"tool/result deny{denied}", "tool/result ask{denied}", "tool/result bad{invalid-arguments}", "tool/result nope{unknown-tool}", "tool/result upd", "tool/result ok"} {
		if !strings.Contains(got, want) {
			t.Errorf("missing %q in %s", want, got)
		}
	}
	if strings.Join(ran, ",") != `upd={"safe":true},ok={}` {
		t.Errorf("bodies ran: %v", ran)
	}
	h.golden("tool-pre-decisions")
}

type approveAll struct{}

func (approveAll) Approve(ctx context.Context, r agent.ApprovalRequest) (agent.Approval, error) {
	return agent.Approval{Allow: true, By: "flag:--yes"}, nil
}

func TestAskGoesToTheApprover(t *testing.T) {
	pre := func(ctx context.Context, in agent.ToolCallInfo, next func(context.Context, agent.ToolCallInfo) (agent.ToolDecision, error)) (agent.ToolDecision, error) {
		return agent.ToolDecision{Kind: agent.Ask, Reason: "writes"}, nil
	}
	h := newHarness(t, []scripted.Call{scripted.UseTools(scripted.ToolCall{ID: "k1", Name: "p"}), scripted.Answer("ok")},
		withTools(probe("p", tool.Exclusive, nil)), withHooks(agent.Hooks{ToolPre: []agent.Hook[agent.ToolCallInfo, agent.ToolDecision]{pre}}),
		func(x *harness) { x.cfg.Approver = approveAll{} })
	h.send("P")
	h.idle()
	ap := findType(h.events(), session.TypeToolApproval)
	if len(ap) != 1 {
		t.Fatalf("%d approvals", len(ap))
	}
	if d := ap[0].MustDecode().(*session.ToolApproval); d.Decision != "allow" || d.By != "flag:--yes" {
		t.Errorf("approval %+v", d)
	}
}

func TestParallelPoolIsBoundedAndExclusiveIsABarrier(t *testing.T) {
	var cur, peak atomic.Int32
	var exclusiveOverlap atomic.Bool
	body := func(ctx context.Context, c tool.Call) (tool.Result, error) {
		n := cur.Add(1)
		for {
			p := peak.Load()
			if n <= p || peak.CompareAndSwap(p, n) {
				break
			}
		}
		time.Sleep(5 * time.Millisecond)
		cur.Add(-1)
		return tool.TextResult("ok"), nil
	}
	excl := func(ctx context.Context, c tool.Call) (tool.Result, error) {
		if cur.Load() != 0 {
			exclusiveOverlap.Store(true)
		}
		return tool.TextResult("x"), nil
	}
	var tcs []scripted.ToolCall
	for i := range 6 {
		tcs = append(tcs, scripted.ToolCall{ID: "p" + string(rune('a'+i)), Name: "par"})
	}
	tcs = append(tcs, scripted.ToolCall{ID: "x", Name: "ex"})
	for i := range 3 {
		tcs = append(tcs, scripted.ToolCall{ID: "q" + string(rune('a'+i)), Name: "par"})
	}
	h := newHarness(t, []scripted.Call{scripted.UseTools(tcs...), scripted.Answer("ok")},
		withTools(probe("par", tool.Parallel, body), probe("ex", tool.Exclusive, excl)),
		func(x *harness) { x.cfg.MaxParallelTools = 3 })
	h.send("P")
	h.idle()
	if p := peak.Load(); p != 3 {
		t.Errorf("peak parallelism %d, want 3", p)
	}
	if exclusiveOverlap.Load() {
		t.Error("exclusive call overlapped parallel ones")
	}
	// Results in model order.
	var order []string
	for _, ev := range findType(h.events(), session.TypeToolResult) {
		order = append(order, ev.MustDecode().(*session.ToolResult).CallID)
	}
	if strings.Join(order, ",") != "pa,pb,pc,pd,pe,pf,x,qa,qb,qc" {
		t.Errorf("result order %v", order)
	}
}

func TestFlushFailureBeforeRequestFailsTheTurnClosed(t *testing.T) {
	var fail atomic.Bool
	st := memstore.New(memstore.Options{BeforeAppend: func(ctx context.Context, id string, b []session.Event) error {
		if fail.Load() {
			return errors.New("disk full")
		}
		return nil
	}})
	h := newHarness(t, nil, withStore(st)) // no model call may happen
	fail.Store(true)
	h.send("P")
	h.idle()
	errs := h.lives(agent.LiveFlushError)
	if len(errs) == 0 {
		t.Fatal("no session/flush-error")
	}
	fail.Store(false)
	if err := h.a.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	evs := h.events()
	end := evs[len(evs)-1].MustDecode().(*session.TurnEnd)
	if end.Reason.Kind != session.ReasonError || end.Reason.Code != "persistence" {
		t.Errorf("turn end %v, want error{persistence}", end.Reason)
	}
	if e := h.lives(agent.LiveError); len(e) != 0 {
		t.Errorf("persistence failure reported as agent/error: %+v", e)
	}
}

func TestIdleFlushFailureIsRetriedExactlyOnce(t *testing.T) {
	var failures atomic.Int32
	failures.Store(1)
	st := memstore.New(memstore.Options{BeforeAppend: func(ctx context.Context, id string, b []session.Event) error {
		if failures.Add(-1) >= 0 {
			return errors.New("transient")
		}
		return nil
	}})
	h := newHarness(t, nil, withStore(st))
	h.inject("ci", "A")
	h.idle() // a failed flush does not make WhenIdle fail
	if len(h.lives(agent.LiveFlushError)) != 1 {
		t.Fatalf("want one session/flush-error")
	}
	if n := len(h.events()); n != 0 {
		t.Fatalf("%d events stored after a failed flush", n)
	}
	h.inject("ci", "B")
	h.idle()
	expectTypes(t, h.events(), "c:A", "c:B")
}

func TestKeepInboxParksQueuedPrompts(t *testing.T) {
	started := make(chan struct{})
	h := newHarness(t, []scripted.Call{
		{Hang: true, BeforeChunk: func(ctx context.Context, i int) { close(started) }},
		{Match: wantTexts("user:P1", "user:P2"), Reply: scripted.Reply{Text: []string{"two"}}},
		{Match: wantTexts("user:P1", "user:P2", "assistant:two", "user:P3"), Reply: scripted.Reply{Text: []string{"three"}}},
	})
	h.send("P1")
	h.send("P2")
	<-started
	h.a.Cancel(session.CauseUser, agent.CancelOptions{KeepInbox: true})
	h.idle()
	if n := len(findType(h.events(), session.TypeTurnStart)); n != 1 {
		t.Fatalf("parked prompt ran by itself: %d turns", n)
	}
	h.send("P3") // wakes the parked P2 first
	h.idle()
	if n := len(findType(h.events(), session.TypeTurnStart)); n != 3 {
		t.Errorf("%d turns, want 3", n)
	}
}

// TestWakeRunsParkedPrompts: Wake lets parked prompts run without a new
// one; with nothing parked it does nothing.
func TestWakeRunsParkedPrompts(t *testing.T) {
	started := make(chan struct{})
	h := newHarness(t, []scripted.Call{
		{Hang: true, BeforeChunk: func(ctx context.Context, i int) { close(started) }},
		{Match: wantTexts("user:P1", "user:P2"), Reply: scripted.Reply{Text: []string{"two"}}},
	})
	h.a.Wake() // nothing parked
	h.send("P1")
	h.send("P2")
	<-started
	h.a.Cancel(session.CauseUser, agent.CancelOptions{KeepInbox: true})
	h.idle()
	if n := len(findType(h.events(), session.TypeTurnStart)); n != 1 {
		t.Fatalf("parked prompt ran by itself: %d turns", n)
	}
	h.a.Wake()
	h.idle()
	if n := len(findType(h.events(), session.TypeTurnStart)); n != 2 {
		t.Errorf("%d turns after Wake, want 2", n)
	}
}

func TestValidationErrors(t *testing.T) {
	h := newHarness(t, nil)
	if _, err := h.a.Send(agent.Message{}); !errors.Is(err, agent.ErrEmpty) {
		t.Errorf("empty send: %v", err)
	}
	if err := h.a.Inject(agent.AdditionalContext{Content: llm.Text("x")}); !errors.Is(err, agent.ErrNoSource) {
		t.Errorf("sourceless inject: %v", err)
	}
	h.inject("ci", "x")
	h.idle()
	logged := h.events()[0].MustDecode().(*session.UserMessage).ID
	if _, err := h.a.Send(agent.Message{ID: logged, Content: llm.Text("y")}); !errors.Is(err, agent.ErrDuplicateID) {
		t.Errorf("duplicate id: %v", err)
	}
	if n := len(h.events()); n != 1 {
		t.Errorf("a refused call changed the log: %d events", n)
	}
}

func TestEventsFollowsTheLogAndReadersMayCallBack(t *testing.T) {
	h := newHarness(t, []scripted.Call{scripted.Answer("a", "b")})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var got []session.Type
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev, err := range h.a.Events(ctx, 0) {
			if err != nil {
				return
			}
			got = append(got, ev.Type)
			if ev.Type == session.TypeTurnEnd {
				// A reader that calls back into the agent must not deadlock.
				if err := h.a.Inject(ctxOf("reader", "after")); err != nil {
					t.Error(err)
				}
			}
			if ev.Type == session.TypeUserMessage && len(got) > 3 {
				return
			}
		}
	}()
	h.send("P")
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("reader stuck")
	}
	h.idle()
	if got[len(got)-1] != session.TypeUserMessage || got[len(got)-2] != session.TypeTurnEnd {
		t.Errorf("reader saw %v", got)
	}
	// Subscribers may call back too.
	var once sync.Once
	h.a.Subscribe(context.Background(), func(l agent.Live) {
		if l.Type == agent.LiveStatus {
			once.Do(func() { _ = h.a.Status() })
		}
	})
}

func TestRequestHeaderOnlyWhenChanged(t *testing.T) {
	change := func(ctx context.Context, in agent.RequestInfo, next func(context.Context, agent.RequestInfo) (llm.Params, error)) (llm.Params, error) {
		p, err := next(ctx, in)
		if in.Turn == 3 {
			p.MaxTokens = 99
		}
		return p, err
	}
	h := newHarness(t, []scripted.Call{scripted.Answer("1"), scripted.Answer("2"), scripted.Answer("3")},
		withHooks(agent.Hooks{Request: []agent.Hook[agent.RequestInfo, llm.Params]{change}}))
	for _, p := range []string{"a", "b", "c"} {
		h.send(p)
		h.idle()
	}
	var reasons []string
	for _, ev := range findType(h.events(), session.TypeRequestHeader) {
		reasons = append(reasons, ev.MustDecode().(*session.RequestHeader).Reason)
	}
	if strings.Join(reasons, ",") != "initial,change" {
		t.Errorf("headers %v, want initial then one change", reasons)
	}
}

func TestPressureSurvivesResume(t *testing.T) {
	big := &llm.Usage{Input: 900, Output: 10}
	h := newHarness(t, []scripted.Call{
		scripted.Answer("a1"),
		{Reply: scripted.Reply{Text: []string{"a2"}, Usage: big}},
		{Match: func(r *llm.Request) error {
			if r.System != agent.CompactionSystemPrompt {
				return errors.New("expected the summary request before the resumed agent's first step")
			}
			return nil
		}, Reply: scripted.Reply{Text: []string{"S"}}},
		scripted.Answer("a3"),
	}, func(x *harness) { x.cfg.ContextWindow = 1000 })
	h.send("u1")
	h.idle()
	h.send("u2")
	h.idle()
	if err := h.a.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	b, err := agent.Resume(context.Background(), h.st, h.a.ID(), h.cfg)
	if err != nil {
		t.Fatal(err)
	}
	h.attach(b)
	h.send("u3")
	h.idle()
	if n := len(findType(h.events(), session.TypeCompactionEnd)); n != 1 {
		t.Errorf("%d compactions after resume, want 1", n)
	}
}

func TestEventsReadsLongLogsInBatches(t *testing.T) {
	st := memstore.New(memstore.Options{})
	_, n := seedSession(t, st, "long", 3000)
	a, err := agent.Resume(context.Background(), st, "long", agent.Config{Provider: scripted.New()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	read := func() int64 {
		next := int64(0)
		for ev, err := range a.Events(ctx, 0) {
			if err != nil {
				t.Fatal(err)
			}
			if ev.Seq != next {
				t.Fatalf("seq %d, want %d", ev.Seq, next)
			}
			next++
			if next == n {
				break
			}
		}
		return next
	}
	if got := read(); got != n {
		t.Errorf("read %d events, want %d", got, n)
	}
	if err := a.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	// After Close the iterator reads the final log and ends by itself.
	var count int64
	for _, err := range a.Events(context.Background(), 0) {
		if err != nil {
			t.Fatal(err)
		}
		count++
	}
	if count != n {
		t.Errorf("after close: %d events, want %d", count, n)
	}
}

func TestCompactionInstructionsAreLogged(t *testing.T) {
	h := newHarness(t, []scripted.Call{
		scripted.Answer("a1"),
		scripted.Answer("a2"),
		{Match: func(r *llm.Request) error {
			last := llm.PlainText(r.Messages[len(r.Messages)-1].Content)
			if !strings.HasSuffix(last, "Also: keep file names") {
				return errorsf("summary request ends %q", last)
			}
			return nil
		}, Reply: scripted.Reply{Text: []string{"S"}}},
	})
	h.send("u1")
	h.idle()
	h.send("u2")
	h.idle()
	if err := h.a.Compact(context.Background(), agent.CompactOptions{Keep: 1, Instructions: "keep file names"}); err != nil {
		t.Fatal(err)
	}
	cs := findType(h.events(), session.TypeCompactionStart)
	if len(cs) != 1 || cs[0].MustDecode().(*session.CompactionStart).Instructions != "keep file names" {
		t.Errorf("compaction/start does not record the instructions: %v", cs)
	}
}

// A tool set and a system section that change between steps (as MCP
// servers come up) reach the model only through a logged request/header:
// the checked provider compares every request with the log.
func TestToolSetChangeAtStepBoundaryIsLogged(t *testing.T) {
	reg, err := tool.NewRegistry(probe("p", tool.Exclusive, func(context.Context, tool.Call) (tool.Result, error) { return tool.TextResult("ok"), nil }))
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	instructions := ""
	steps := 0
	sync := func(ctx context.Context, in agent.StepInfo, next func(context.Context, agent.StepInfo) ([]agent.AdditionalContext, error)) ([]agent.AdditionalContext, error) {
		steps++
		if steps == 2 {
			if err := reg.Sync("x__", []tool.Tool{probe("x__late", tool.Parallel, nil)}); err != nil {
				return nil, err
			}
			mu.Lock()
			instructions = "Use x__late."
			mu.Unlock()
		}
		return next(ctx, in)
	}
	var sawLate bool
	h := newHarness(t, []scripted.Call{
		scripted.UseTools(scripted.ToolCall{ID: "c1", Name: "p", Arguments: `{}`}),
		{Match: func(req *llm.Request) error {
			for _, s := range req.Tools {
				sawLate = sawLate || s.Name == "x__late"
			}
			if !strings.HasSuffix(req.System, "Use x__late.") {
				return errorsf("system prompt %q lacks the new section", req.System)
			}
			return nil
		}, Reply: scripted.Reply{Text: []string{"done"}}},
	}, func(x *harness) {
		x.cfg.Tools = reg
		x.cfg.System = append(x.cfg.System, agent.Section{Name: "late", Dynamic: func() string {
			mu.Lock()
			defer mu.Unlock()
			return instructions
		}})
		x.cfg.Hooks.BeforeStep = []agent.Hook[agent.StepInfo, []agent.AdditionalContext]{sync}
	})
	h.send("go")
	h.idle()
	if !sawLate {
		t.Fatal("the second request did not offer the tool added at its boundary")
	}
	var hdrs []*session.RequestHeader
	for _, ev := range findType(h.events(), session.TypeRequestHeader) {
		hdrs = append(hdrs, ev.MustDecode().(*session.RequestHeader))
	}
	if len(hdrs) != 2 || hdrs[1].Reason != session.HeaderChange || hdrs[1].Step != 2 || len(hdrs[1].Tools) != 2 {
		t.Fatalf("headers %s, want initial then a change at step 2 with both tools", js(hdrs))
	}
}
