package agent_test

import (
	"context"
	"errors"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/reinhq/rein/agent"
	"github.com/reinhq/rein/llm"
	"github.com/reinhq/rein/llm/scripted"
	"github.com/reinhq/rein/session"
	"github.com/reinhq/rein/store"
	"github.com/reinhq/rein/store/jsonl"
	"github.com/reinhq/rein/store/memstore"
	"github.com/reinhq/rein/tool"
)

// The acceptance scenarios of the runtime, one test each. Every test checks the
// invariant and the request/projection equality in its harness cleanup.

func TestScenario01IdleInject(t *testing.T) {
	h := newHarness(t, nil)
	h.inject("ci", "A")
	h.idle()
	if s := h.a.Status(); s != agent.Idle {
		t.Errorf("status %s, want idle", s)
	}
	expectTypes(t, h.events(), "c:A")
	if got := h.lives(agent.LiveStatus); len(got) != 0 {
		t.Errorf("idle inject changed the status: %v", got)
	}
	h.golden("01-idle-inject")
}

func TestScenario02IdleInjectThenSend(t *testing.T) {
	h := newHarness(t, []scripted.Call{{
		Match: wantTexts("user:A", "user:P"),
		Reply: scripted.Reply{Text: []string{"ans", "wer"}},
	}})
	h.inject("ci", "A")
	h.send("P")
	h.idle()
	expectTypes(t, h.events(), "c:A", "turn/start", "u:P", "step/start", "request/header", "assistant/chunk", "assistant/chunk",
		"assistant/message", "step/end", "turn/end{completed}")
	h.golden("02-idle-inject-then-send")
}

func TestScenario03InjectWhileFinalAnswerStreams(t *testing.T) {
	var h *harness
	h = newHarness(t, []scripted.Call{
		{Reply: scripted.Reply{Text: []string{"one", "two"}}, BeforeChunk: func(ctx context.Context, i int) {
			if i == 1 {
				h.inject("ci", "B")
			}
		}},
		{Match: wantTexts("user:P1", "assistant:onetwo", "user:B", "user:P2")},
	})
	h.send("P1")
	h.idle()
	h.send("P2")
	h.idle()
	evs := h.events()
	expectTypes(t, evs[:10], "turn/start", "u:P1", "step/start", "request/header", "assistant/chunk", "assistant/chunk",
		"assistant/message", "step/end", "c:B", "turn/end{completed}")
	if h.model.Calls() != 2 {
		t.Errorf("model calls = %d, want 2", h.model.Calls())
	}
	h.golden("03-inject-while-final-answer-streams")
}

func TestScenario04InjectDuringToolBatch(t *testing.T) {
	var h *harness
	body := func(ctx context.Context, c tool.Call) (tool.Result, error) {
		if c.ID == "k1" {
			h.inject("ci", "B1")
			h.inject("ci", "B2")
		}
		return tool.TextResult("done " + c.ID), nil
	}
	h = newHarness(t, []scripted.Call{
		scripted.UseTools(scripted.ToolCall{ID: "k1", Name: "p", Arguments: `{}`}, scripted.ToolCall{ID: "k2", Name: "p", Arguments: `{}`}),
		{Match: wantTexts("user:P", "assistant:[k1,k2]", "tool:k1", "tool:k2", "user:B1", "user:B2"), Reply: scripted.Reply{Text: []string{"ok"}}},
	}, withTools(probe("p", tool.Parallel, body)))
	h.send("P")
	h.idle()
	expectTypes(t, h.events(), "turn/start", "u:P", "step/start", "request/header", "assistant/chunk", "assistant/chunk",
		"assistant/message", "tool/call k1", "tool/call k2", "tool/result k1", "tool/result k2", "c:B1", "c:B2", "step/end",
		"step/start", "assistant/chunk", "assistant/message", "step/end", "turn/end{completed}")
	h.golden("04-inject-during-tool-batch")
}

func TestScenario05ToolContextsKeepModelOrder(t *testing.T) {
	k2done := make(chan struct{})
	body := func(ctx context.Context, c tool.Call) (tool.Result, error) {
		if c.ID == "k1" {
			<-k2done // k2 finishes first
		} else {
			defer close(k2done)
		}
		return tool.TextResult("done " + c.ID), nil
	}
	post := func(ctx context.Context, in agent.ToolPostInfo, next func(context.Context, agent.ToolPostInfo) (agent.ToolPostDecision, error)) (agent.ToolPostDecision, error) {
		d, err := next(ctx, in)
		d.AdditionalContexts = append(d.AdditionalContexts, ctxOf("post", in.CallID))
		return d, err
	}
	h := newHarness(t, []scripted.Call{
		scripted.UseTools(scripted.ToolCall{ID: "k1", Name: "p"}, scripted.ToolCall{ID: "k2", Name: "p"}),
		scripted.Answer("ok"),
	}, withTools(probe("p", tool.Parallel, body)), withHooks(agent.Hooks{ToolPost: []agent.Hook[agent.ToolPostInfo, agent.ToolPostDecision]{post}}))
	h.send("P")
	h.idle()
	evs := h.events()
	expectTypes(t, evs[7:14], "tool/call k1", "tool/call k2", "tool/result k1", "tool/result k2", "c:k1", "c:k2", "step/end")
	h.golden("05-tool-contexts-keep-model-order")
}

func TestScenario06SteerAndInjectAtOneBoundary(t *testing.T) {
	var h *harness
	body := func(ctx context.Context, c tool.Call) (tool.Result, error) {
		if _, err := h.a.Steer(agent.Message{Content: llm.Text("S")}); err != nil {
			t.Error(err)
		}
		h.inject("ci", "B")
		return tool.TextResult("done"), nil
	}
	h = newHarness(t, []scripted.Call{
		scripted.UseTools(scripted.ToolCall{ID: "k1", Name: "p"}),
		{Match: wantTexts("user:P", "assistant:[k1]", "tool:k1", "user:S", "user:B"), Reply: scripted.Reply{Text: []string{"ok"}}},
	}, withTools(probe("p", tool.Exclusive, body)))
	h.send("P")
	h.idle()
	expectTypes(t, h.events()[6:11], "tool/call k1", "tool/result k1", "s:S", "c:B", "step/end")
	q := h.lives(agent.LiveQueued)
	if len(q) != 2 || q[1].Placement != agent.PlacementSteering {
		t.Errorf("queued events %+v, want the steer placed as steering", q)
	}
	h.golden("06-steer-and-inject-at-one-boundary")
}

func TestScenario07ContextAloneDoesNotContinue(t *testing.T) {
	var h *harness
	post := func(ctx context.Context, in agent.ToolPostInfo, next func(context.Context, agent.ToolPostInfo) (agent.ToolPostDecision, error)) (agent.ToolPostDecision, error) {
		d, err := next(ctx, in)
		d.AdditionalContexts = append(d.AdditionalContexts, ctxOf("post", "X"))
		return d, err
	}
	h = newHarness(t, []scripted.Call{
		scripted.UseTools(scripted.ToolCall{ID: "k1", Name: "p"}),
		{Match: wantTexts("user:P", "assistant:[k1]", "tool:k1", "user:X"), Reply: scripted.Reply{Text: []string{"fi", "nal"}},
			BeforeChunk: func(ctx context.Context, i int) {
				if i == 1 {
					h.inject("ci", "Y")
				}
			}},
	}, withTools(probe("p", tool.Exclusive, nil)), withHooks(agent.Hooks{ToolPost: []agent.Hook[agent.ToolPostInfo, agent.ToolPostDecision]{post}}))
	h.send("P")
	h.idle()
	evs := h.events()
	expectTypes(t, evs[len(evs)-4:], "assistant/message", "step/end", "c:Y", "turn/end{completed}")
	if h.model.Calls() != 2 {
		t.Errorf("model calls = %d, want 2 (context alone must not force a step)", h.model.Calls())
	}
	h.golden("07-context-alone-does-not-continue")
}

func TestScenario08IdleSteer(t *testing.T) {
	h := newHarness(t, []scripted.Call{scripted.Answer("ok")})
	if _, err := h.a.Steer(agent.Message{Content: llm.Text("S")}); err != nil {
		t.Fatal(err)
	}
	h.idle()
	evs := h.events()
	expectTypes(t, evs[:2], "turn/start", "u:S")
	if ts := evs[0].MustDecode().(*session.TurnStart); ts.Trigger.Kind != session.TriggerSteer {
		t.Errorf("trigger %q, want steer", ts.Trigger.Kind)
	}
	q := h.lives(agent.LiveQueued)
	if len(q) != 1 || q[0].Placement != agent.PlacementQueued {
		t.Errorf("queued %+v, want placement queued", q)
	}
	h.golden("08-idle-steer")
}

func TestScenario09OneSendOneTurn(t *testing.T) {
	h := newHarness(t, []scripted.Call{
		{Match: wantTexts("user:P1"), Reply: scripted.Reply{Text: []string{"A1"}}},
		{Match: wantTexts("user:P1", "assistant:A1", "user:P2"), Reply: scripted.Reply{Text: []string{"A2"}}},
	})
	h.send("P1")
	h.send("P2")
	h.idle()
	h.golden("09-one-send-one-turn")
}

func blockIf(text string) agent.Hook[agent.Prompt, agent.Admission] {
	return func(ctx context.Context, p agent.Prompt, next func(context.Context, agent.Prompt) (agent.Admission, error)) (agent.Admission, error) {
		if llm.PlainText(p.Message.Content) == text {
			return agent.Admission{Block: true, Reason: "blocked " + text}, nil
		}
		return next(ctx, p)
	}
}

func TestScenario10InjectThenBlockedSend(t *testing.T) {
	h := newHarness(t, nil, withHooks(agent.Hooks{PromptAdmission: []agent.Hook[agent.Prompt, agent.Admission]{blockIf("P")}}))
	h.inject("ci", "A")
	h.send("P")
	h.idle()
	expectTypes(t, h.events(), "c:A")
	if b := h.lives(agent.LiveBlocked); len(b) != 1 || b[0].Reason != "blocked P" {
		t.Errorf("blocked events %+v", b)
	}
	if e := h.lives(agent.LiveError); len(e) != 0 {
		t.Errorf("agent/error on a blocked prompt: %+v", e)
	}
	h.golden("10-inject-then-blocked-send")
}

func TestScenario11InjectDuringBlockingAdmission(t *testing.T) {
	hook := func(ctx context.Context, p agent.Prompt, next func(context.Context, agent.Prompt) (agent.Admission, error)) (agent.Admission, error) {
		if err := p.Agent.Inject(ctxOf("ci", "B")); err != nil {
			return agent.Admission{}, err
		}
		return agent.Admission{Block: true, Reason: "no"}, nil
	}
	h := newHarness(t, nil, withHooks(agent.Hooks{PromptAdmission: []agent.Hook[agent.Prompt, agent.Admission]{hook}}))
	h.send("P")
	h.idle()
	expectTypes(t, h.events(), "c:B")
	h.golden("11-inject-during-blocking-admission")
}

func TestScenario12InjectAndSteerDuringBlockedAdmission(t *testing.T) {
	hook := func(ctx context.Context, p agent.Prompt, next func(context.Context, agent.Prompt) (agent.Admission, error)) (agent.Admission, error) {
		if llm.PlainText(p.Message.Content) != "P" {
			return next(ctx, p)
		}
		if err := p.Agent.Inject(ctxOf("ci", "B")); err != nil {
			return agent.Admission{}, err
		}
		if _, err := p.Agent.Steer(agent.Message{Content: llm.Text("S")}); err != nil {
			return agent.Admission{}, err
		}
		return agent.Admission{Block: true, Reason: "no"}, nil
	}
	h := newHarness(t, []scripted.Call{{Match: wantTexts("user:B", "user:Q", "user:S"), Reply: scripted.Reply{Text: []string{"ok"}}}},
		withHooks(agent.Hooks{PromptAdmission: []agent.Hook[agent.Prompt, agent.Admission]{hook}}))
	h.send("P")
	h.idle()
	expectTypes(t, h.events(), "c:B")
	h.send("Q")
	h.idle()
	expectTypes(t, h.events()[:5], "c:B", "turn/start", "u:Q", "s:S", "step/start")
	h.golden("12-inject-and-steer-during-blocked-admission")
}

func TestScenario13AdmissionContexts(t *testing.T) {
	hook := func(ctx context.Context, p agent.Prompt, next func(context.Context, agent.Prompt) (agent.Admission, error)) (agent.Admission, error) {
		return agent.Admission{Content: llm.Text("P'"), AdditionalContexts: []agent.AdditionalContext{
			{Content: llm.Text("H1"), Source: session.Source{Kind: session.SourceHook, Name: "claude-code:UserPromptSubmit"}},
			{Content: llm.Text("H2"), Source: session.Source{Kind: session.SourcePlugin, Name: "git"}},
		}}, nil
	}
	h := newHarness(t, []scripted.Call{{Match: wantTexts("user:P'", "user:H1", "user:H2"), Reply: scripted.Reply{Text: []string{"ok"}}}},
		withHooks(agent.Hooks{PromptAdmission: []agent.Hook[agent.Prompt, agent.Admission]{hook}}))
	id := h.send("P")
	h.idle()
	evs := h.events()
	expectTypes(t, evs[:5], "turn/start", "u:P'", "c:H1", "c:H2", "step/start")
	if m := evs[1].MustDecode().(*session.UserMessage); m.ID != id {
		t.Errorf("rewritten prompt id %q, want %q", m.ID, id)
	}
	h.golden("13-admission-contexts")
}

func TestScenario14AdmissionHookFails(t *testing.T) {
	hook := func(ctx context.Context, p agent.Prompt, next func(context.Context, agent.Prompt) (agent.Admission, error)) (agent.Admission, error) {
		if llm.PlainText(p.Message.Content) == "P1" {
			return agent.Admission{}, errors.New("hook crashed")
		}
		return next(ctx, p)
	}
	h := newHarness(t, []scripted.Call{{Match: wantTexts("user:P2"), Reply: scripted.Reply{Text: []string{"ok"}}}},
		withHooks(agent.Hooks{PromptAdmission: []agent.Hook[agent.Prompt, agent.Admission]{hook}}))
	h.send("P1")
	h.send("P2")
	h.idle()
	expectTypes(t, h.events()[:2], "turn/start", "u:P2")
	if e := h.lives(agent.LiveError); len(e) != 0 {
		t.Errorf("agent/error for a failed admission hook: %+v", e)
	}
	h.golden("14-admission-hook-fails")
}

func TestScenario15CancelWithStagedOutbox(t *testing.T) {
	var h *harness
	h = newHarness(t, []scripted.Call{{Reply: scripted.Reply{Text: []string{"partial"}}, Hang: true, BeforeChunk: func(ctx context.Context, i int) {
		if i == 1 {
			h.inject("ci", "B")
			if _, err := h.a.Steer(agent.Message{ID: "S", Content: llm.Text("S")}); err != nil {
				t.Error(err)
			}
			h.a.Cancel(session.CauseUser, agent.CancelOptions{})
		}
	}}})
	h.send("P")
	h.idle()
	evs := h.events()
	expectTypes(t, evs[len(evs)-4:], "assistant/message{interrupted}", "step/end", "c:B", "turn/end{aborted{user}}")
	d := h.lives(agent.LiveDiscarded)
	if len(d) != 1 || len(d[0].Messages) != 1 || d[0].Messages[0].ID != "S" {
		t.Errorf("discarded %+v, want [S]", d)
	}
	h.golden("15-cancel-with-staged-outbox")
}

func TestScenario16CancelDuringToolBatch(t *testing.T) {
	var h *harness
	body := func(ctx context.Context, c tool.Call) (tool.Result, error) {
		c.Env.AddContext(llm.Text("from " + c.ID))
		h.a.Cancel(session.CauseUser, agent.CancelOptions{})
		<-ctx.Done()
		return tool.Errorf(tool.CodeAborted, "aborted"), nil
	}
	h = newHarness(t, []scripted.Call{
		scripted.UseTools(scripted.ToolCall{ID: "k1", Name: "p"}, scripted.ToolCall{ID: "k2", Name: "p"}, scripted.ToolCall{ID: "k3", Name: "p"}),
	}, withTools(probe("p", tool.Exclusive, body)))
	h.send("P")
	h.idle()
	evs := h.events()
	expectTypes(t, evs[len(evs)-9:], "tool/call k1", "tool/result k1{aborted}", "tool/call k2", "tool/result k2{not-run}",
		"tool/call k3", "tool/result k3{not-run}", "c:from k1", "step/end", "turn/end{aborted{user}}")
	h.golden("16-cancel-during-tool-batch")
}

func TestScenario17CancelWhileIdle(t *testing.T) {
	h := newHarness(t, []scripted.Call{scripted.Answer("ok")})
	h.a.Cancel(session.CauseUser, agent.CancelOptions{})
	if n := len(h.events()); n != 0 {
		t.Errorf("cancel while idle wrote %d events", n)
	}
	h.send("P")
	h.idle()
	expectTypes(t, h.events()[len(h.events())-1:], "turn/end{completed}")
	h.golden("17-cancel-while-idle")
}

func TestScenario18CloseWaitsForIdleFlush(t *testing.T) {
	release := make(chan struct{})
	var once sync.Once
	st := memstore.New(memstore.Options{BeforeAppend: func(ctx context.Context, id string, batch []session.Event) error {
		once.Do(func() { <-release })
		return nil
	}})
	h := newHarness(t, nil, withStore(st))
	h.inject("ci", "A")
	closed := make(chan error, 1)
	go func() { closed <- h.a.Close(context.Background()) }()
	select {
	case err := <-closed:
		t.Fatalf("Close returned (%v) before the pending flush completed", err)
	case <-time.After(50 * time.Millisecond):
	}
	if n := len(h.events()); n != 0 {
		t.Fatalf("event durable before the slow write finished: %d", n)
	}
	close(release)
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	expectTypes(t, h.events(), "c:A")
	if _, err := h.a.Send(agent.Message{Content: llm.Text("x")}); !errors.Is(err, agent.ErrClosed) {
		t.Errorf("Send after Close: %v, want ErrClosed", err)
	}
	// The session is released: it can be resumed.
	b, err := agent.Resume(context.Background(), st, h.a.ID(), h.cfg)
	if err != nil {
		t.Fatal(err)
	}
	_ = b.Close(context.Background())
	h.golden("18-close-waits-for-idle-flush")
}

func TestScenario19CloseDuringTurn(t *testing.T) {
	started := make(chan struct{})
	h := newHarness(t, []scripted.Call{{Hang: true, BeforeChunk: func(ctx context.Context, i int) { close(started) }}})
	h.send("P1")
	h.send("P2")
	<-started
	if err := h.a.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	evs := h.events()
	expectTypes(t, evs[len(evs)-2:], "step/end", "turn/end{aborted{closed}}")
	d := h.lives(agent.LiveDiscarded)
	if len(d) != 1 || len(d[0].Messages) != 1 || llm.PlainText(d[0].Messages[0].Content) != "P2" {
		t.Errorf("discarded %+v, want [P2]", d)
	}
	h.golden("19-close-during-turn")
}

func TestScenario20ResumeAfterOutOfTurnMessage(t *testing.T) {
	h := newHarness(t, []scripted.Call{scripted.Answer("a1"), scripted.Answer("a2"), scripted.Answer("a3"),
		{Match: wantTexts("user:P1", "assistant:a1", "user:P2", "assistant:a2", "user:P3", "assistant:a3", "user:A", "user:P")}})
	for _, p := range []string{"P1", "P2", "P3"} {
		h.send(p)
		h.idle()
	}
	h.inject("ci", "A")
	h.idle()
	if err := h.a.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	ld, err := h.st.Load(context.Background(), "s1", store.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(ld.Repair) != 0 {
		t.Errorf("resume repaired a clean log: %v", types(ld.Repair))
	}
	b, err := agent.Resume(context.Background(), h.st, "s1", h.cfg)
	if err != nil {
		t.Fatal(err)
	}
	h.attach(b)
	if s := b.Status(); s != agent.Idle {
		t.Errorf("resumed status %s", s)
	}
	h.send("P")
	h.idle()
	evs := h.events()
	ts := findType(evs, session.TypeTurnStart)
	if got := ts[len(ts)-1].MustDecode().(*session.TurnStart).Turn; got != 4 {
		t.Errorf("turn after resume = %d, want 4", got)
	}
	h.golden("20-resume-after-out-of-turn-message")
}

func TestScenario21CrashInsideTurnAfterContext(t *testing.T) {
	st := memstore.New(memstore.Options{})
	w, err := st.Create(context.Background(), session.Header{ID: "s1", CreatedAt: t0})
	if err != nil {
		t.Fatal(err)
	}
	l := session.NewLog(w.Header())
	add := func(p session.Payload) {
		if _, err := l.Append(t0, p); err != nil {
			t.Fatal(err)
		}
	}
	for turn := 1; turn <= 3; turn++ {
		add(&session.TurnStart{Turn: turn, Trigger: session.Trigger{Kind: "send"}})
		add(&session.TurnEnd{Turn: turn, Reason: session.Reason{Kind: session.ReasonCompleted}})
	}
	add(&session.UserMessage{ID: "A", Content: llm.Text("A"), Source: session.Source{Kind: session.SourcePlugin, Name: "ci"}})
	add(&session.TurnStart{Turn: 4, Trigger: session.Trigger{Kind: "send", MessageID: "P"}})
	add(&session.UserMessage{ID: "P", Content: llm.Text("P"), Source: session.Source{Kind: session.SourceUser}})
	add(&session.StepStart{Turn: 4, Step: 1})
	add(&session.AssistantMessage{Turn: 4, Step: 1, Content: []llm.Part{}, ToolCalls: []llm.ToolCall{{ID: "k1", Name: "p", Arguments: "{}"}, {ID: "k2", Name: "p", Arguments: "{}"}}, Finish: llm.FinishToolCalls, ChunkSeqs: []int64{}})
	add(&session.ToolCall{Turn: 4, Step: 1, CallID: "k1", Name: "p", Arguments: "{}"})
	if err := w.Append(context.Background(), l.Events(0)); err != nil {
		t.Fatal(err)
	}
	_ = w.Close() // the process "dies": no turn/end
	h := newHarness(t, nil, withStore(memstore.New(memstore.Options{})))
	b, err := agent.Resume(context.Background(), st, "s1", h.cfg)
	if err != nil {
		t.Fatal(err)
	}
	h.st = st
	h.attach(b)
	evs := h.events()
	// The not-run call gets a tool/call before its result, as a cancel
	// writes it.
	expectTypes(t, evs[len(evs)-5:], "tool/result k1{outcome-unknown}", "tool/call k2", "tool/result k2{not-run}", "step/end", "turn/end{interrupted}")
	expectTypes(t, evs[6:7], "c:A")
	h.golden("21-crash-inside-turn-after-context")
}

func TestScenario25RequestErrorWithRetry(t *testing.T) {
	retry := func(ctx context.Context, in agent.RequestErrorInfo, next func(context.Context, agent.RequestErrorInfo) (agent.Retry, error)) (agent.Retry, error) {
		if in.Err.Code == llm.CodeRateLimit && in.Attempt == 1 {
			return agent.Retry{Retry: true, Wait: time.Millisecond}, nil
		}
		return next(ctx, in)
	}
	h := newHarness(t, []scripted.Call{
		{Reply: scripted.Reply{Text: []string{"lost"}}, Err: &scripted.ErrorReply{Code: llm.CodeRateLimit, Message: "slow down"}},
		scripted.Answer("fi", "ne"),
	}, withHooks(agent.Hooks{RequestError: []agent.Hook[agent.RequestErrorInfo, agent.Retry]{retry}}))
	h.send("P")
	h.idle()
	evs := h.events()
	expectTypes(t, evs, "turn/start", "u:P", "step/start", "request/header", "assistant/chunk", "assistant/chunk", "assistant/chunk",
		"assistant/message", "step/end", "turn/end{completed}")
	am := evs[7].MustDecode().(*session.AssistantMessage)
	if len(am.ChunkSeqs) != 2 || am.ChunkSeqs[0] != 5 || am.ChunkSeqs[1] != 6 {
		t.Errorf("chunkSeqs %v, want [5 6] (the second attempt only)", am.ChunkSeqs)
	}
	h.golden("25-request-error-with-retry")
}

func TestScenario26TurnStoppingSteers(t *testing.T) {
	var once sync.Once
	stop := func(ctx context.Context, in agent.StopInfo, next func(context.Context, agent.StopInfo) (agent.StopDecision, error)) (agent.StopDecision, error) {
		once.Do(func() {
			if _, err := in.Agent.Steer(agent.Message{Content: llm.Text("S")}); err != nil {
				t.Error(err)
			}
		})
		return next(ctx, in)
	}
	h := newHarness(t, []scripted.Call{scripted.Answer("a1"), {Match: wantTexts("user:P", "assistant:a1", "user:S"), Reply: scripted.Reply{Text: []string{"a2"}}}},
		withHooks(agent.Hooks{TurnStopping: []agent.Hook[agent.StopInfo, agent.StopDecision]{stop}}))
	h.send("P")
	h.idle()
	evs := h.events()
	expectTypes(t, evs[6:9], "step/end", "s:S", "step/start")
	h.golden("26a-turn-stopping-steers")

	onlyInject := func(ctx context.Context, in agent.StopInfo, next func(context.Context, agent.StopInfo) (agent.StopDecision, error)) (agent.StopDecision, error) {
		return agent.StopDecision{AdditionalContexts: []agent.AdditionalContext{ctxOf("stop", "note")}}, nil
	}
	h2 := newHarness(t, []scripted.Call{scripted.Answer("a1")},
		withHooks(agent.Hooks{TurnStopping: []agent.Hook[agent.StopInfo, agent.StopDecision]{onlyInject}}))
	h2.send("P")
	h2.idle()
	evs = h2.events()
	expectTypes(t, evs[len(evs)-3:], "step/end", "c:note", "turn/end{completed}")
	h2.golden("26b-turn-stopping-injects")
}

// wantTexts matches a request whose messages render as want.
func wantTexts(want ...string) func(*llm.Request) error {
	return func(r *llm.Request) error {
		got := texts(r.Messages)
		if len(got) != len(want) {
			return errorsf("messages %q, want %q", got, want)
		}
		for i := range got {
			if got[i] != want[i] {
				return errorsf("messages %q, want %q", got, want)
			}
		}
		return nil
	}
}

func findType(evs []session.Event, t session.Type) []session.Event {
	var out []session.Event
	for _, ev := range evs {
		if ev.Type == t {
			out = append(out, ev)
		}
	}
	return out
}

func TestScenario22TornTailAfterOutOfTurnContext(t *testing.T) {
	st, err := jsonl.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, []scripted.Call{scripted.Answer("a1")}, withStore(st))
	h.send("P")
	h.idle()
	h.inject("ci", "A")
	if err := h.a.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	// The process dies while writing the next line.
	f, err := os.OpenFile(st.Path("s1"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(`{"seq":9,"type":"user/message","time":"2026-11-30T10:00:00.0`); err != nil {
		t.Fatal(err)
	}
	f.Close()
	ld, err := st.Load(context.Background(), "s1", store.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if ld.TornBytes == 0 || len(ld.Repair) != 0 {
		t.Errorf("torn %d bytes, repair %v; want the torn line dropped and no closers", ld.TornBytes, types(ld.Repair))
	}
	b, err := agent.Resume(context.Background(), st, "s1", h.cfg)
	if err != nil {
		t.Fatal(err)
	}
	h.attach(b)
	evs := h.events()
	expectTypes(t, evs[len(evs)-2:], "turn/end{completed}", "c:A")
	h.golden("22-torn-tail-after-out-of-turn-context")
}

func TestScenario23ForkInsideOpenTurnIsRejected(t *testing.T) {
	st, err := jsonl.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	started := make(chan struct{})
	h := newHarness(t, []scripted.Call{{Hang: true, BeforeChunk: func(ctx context.Context, i int) { close(started) }}}, withStore(st))
	h.inject("ci", "A")
	h.send("P")
	<-started
	cfg := h.cfg
	cfg.SessionID = "child"
	if _, err := agent.Fork(context.Background(), st, "s1", 2, cfg); !errors.Is(err, session.ErrOpenTurn) {
		t.Errorf("fork inside the open turn: %v, want ErrOpenTurn", err)
	}
	infos, err := st.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range infos {
		if in.ID == "child" {
			t.Error("a refused fork left a child session behind")
		}
	}
	// At the out-of-turn message it is allowed.
	child, err := agent.Fork(context.Background(), st, "s1", 0, cfg)
	if err != nil {
		t.Fatalf("fork at the out-of-turn message: %v", err)
	}
	_ = child.Close(context.Background())
	h.a.Cancel(session.CauseUser, agent.CancelOptions{})
	h.idle()
	h.golden("23-fork-inside-open-turn-is-rejected")
}
