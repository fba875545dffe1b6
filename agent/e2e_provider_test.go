package agent_test

// End-to-end tests through a real adapter (llm/openai) and the
// fault-injecting mock server (llm/mock), with the default retry policy
// (llm/retry) as the RequestError hook. Each checks the invariant and that
// every request equalled the log's projection (harness cleanup), and
// compares the log with a golden file.

import (
	"context"
	"encoding/json"
	"iter"
	"testing"
	"time"

	"github.com/reinhq/rein/agent"
	"github.com/reinhq/rein/llm"
	"github.com/reinhq/rein/llm/mock"
	"github.com/reinhq/rein/llm/openai"
	"github.com/reinhq/rein/llm/retry"
	"github.com/reinhq/rein/session"
	"github.com/reinhq/rein/store/memstore"
	"github.com/reinhq/rein/tool"
)

// retryHook turns a retry.Policy into a RequestError hook.
func retryHook(p retry.Policy) agent.Hook[agent.RequestErrorInfo, agent.Retry] {
	return func(ctx context.Context, in agent.RequestErrorInfo, next func(context.Context, agent.RequestErrorInfo) (agent.Retry, error)) (agent.Retry, error) {
		if wait, ok := p.Next(in.Attempt, in.Err); ok {
			return agent.Retry{Retry: true, Wait: wait}, nil
		}
		return next(ctx, in)
	}
}

// newProviderHarness is a harness whose model is the openai adapter talking
// to a mock server playing replies.
func newProviderHarness(t *testing.T, replies []mock.Reply, tap func(llm.Delta), opts ...option) (*harness, *mock.Server) {
	t.Helper()
	srv, err := mock.Start(mock.Script{Replies: replies})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	pol := retry.Default()
	pol.Base = time.Millisecond
	pol.Rand = func() float64 { return 0.5 }
	h := &harness{t: t, ctx: context.Background(), st: memstore.New(memstore.Options{})}
	h.cfg = agent.Config{
		Model:     "openai:mock",
		System:    []agent.Section{{Name: "base", Text: "You are a test agent."}},
		Cwd:       t.TempDir(),
		SessionID: "s1",
		Clock:     agent.StepClock(t0, time.Millisecond),
		NewID:     agent.SequentialIDs(),
		Hooks:     agent.Hooks{RequestError: []agent.Hook[agent.RequestErrorInfo, agent.Retry]{retryHook(pol)}},
	}
	for _, o := range opts {
		o(h)
	}
	h.cfg.Store = h.st
	var p llm.Provider = openai.New(openai.Config{BaseURL: srv.URL + "/v1", APIKey: "k", IdleTimeout: 5 * time.Second})
	if tap != nil {
		p = &tapProvider{Provider: p, onDelta: tap}
	}
	h.cfg.Provider = checked(h, p)
	a, err := agent.New(h.ctx, h.cfg)
	if err != nil {
		t.Fatal(err)
	}
	h.attach(a)
	return h, srv
}

func echoTool(name string) tool.Tool {
	return &tool.Func{
		ToolSpec: llm.ToolSpec{Name: name, Description: "echo", Parameters: json.RawMessage(`{"type":"object","properties":{"x":{"type":"string"}}}`)},
		ToolMode: tool.Parallel,
		Body: func(ctx context.Context, c tool.Call) (tool.Result, error) {
			return tool.TextResult(name + " saw " + string(c.Arguments)), nil
		},
	}
}

func TestProviderE2EToolLoop(t *testing.T) {
	h, srv := newProviderHarness(t, []mock.Reply{
		{Reasoning: "Two lookups.", Text: "Looking.", ToolCalls: []llm.ToolCall{
			{ID: "c1", Name: "a", Arguments: `{"x":"ünï"}`},
			{ID: "c2", Name: "b", Arguments: `{"x":"q\"uote"}`},
		}, Usage: llm.Usage{Input: 40, Output: 12, CacheRead: 32}},
		{ToolCalls: []llm.ToolCall{{ID: "c3", Name: "a", Arguments: `{}`}}, Usage: llm.Usage{Input: 60, Output: 5}},
		{Text: "Both done.", Usage: llm.Usage{Input: 80, Output: 3}},
	}, nil, withTools(echoTool("a"), echoTool("b")))
	h.send("go")
	h.idle()
	expectTypes(t, h.events(),
		"turn/start", "u:go",
		"step/start", "request/header", "assistant/chunk", "assistant/chunk", "assistant/chunk", "assistant/chunk", "assistant/chunk",
		"assistant/chunk", "assistant/chunk", "assistant/chunk", "assistant/chunk", "assistant/chunk", "assistant/chunk", "assistant/chunk",
		"assistant/chunk", "assistant/chunk", "assistant/chunk", "assistant/chunk", "assistant/chunk", "assistant/chunk", "assistant/chunk",
		"assistant/message", "tool/call c1", "tool/call c2", "tool/result c1", "tool/result c2", "step/end",
		"step/start", "assistant/chunk", "assistant/chunk", "assistant/message", "tool/call c3", "tool/result c3", "step/end",
		"step/start", "assistant/chunk", "assistant/chunk", "assistant/chunk", "assistant/chunk", "assistant/message", "step/end",
		"turn/end{completed}")
	if n := len(srv.Requests()); n != 3 {
		t.Errorf("%d requests, want 3", n)
	}
	h.golden("e2e-provider-tool-loop")
}

func TestProviderE2ERetryAfterRateLimit(t *testing.T) {
	h, srv := newProviderHarness(t, []mock.Reply{
		{Fault: mock.FaultRateLimit, RetryAfter: mock.Duration(50 * time.Millisecond)},
		{Fault: mock.FaultReset, Text: "lost text", After: 3},
		{Text: "ok"},
	}, nil)
	began := time.Now()
	h.send("go")
	h.idle()
	if el := time.Since(began); el < 50*time.Millisecond {
		t.Errorf("retried after %v, before the provider's Retry-After", el)
	}
	reqs := srv.Requests()
	if len(reqs) != 3 || string(reqs[0].Body) != string(reqs[2].Body) {
		t.Fatalf("%d requests; a retry must resend the same request", len(reqs))
	}
	h.golden("e2e-provider-retry")
}

// tapProvider reports each delta after the agent consumed it.
type tapProvider struct {
	llm.Provider
	onDelta func(llm.Delta)
}

func (p *tapProvider) Stream(ctx context.Context, req *llm.Request) iter.Seq[llm.Event] {
	return func(yield func(llm.Event) bool) {
		for ev := range p.Provider.Stream(ctx, req) {
			if !yield(ev) {
				return
			}
			if ev.Type == llm.EventDelta {
				p.onDelta(ev.Delta)
			}
		}
	}
}

func TestProviderE2ECancelMidStream(t *testing.T) {
	// The mock sends the role chunk and two text chunks, then goes silent
	// (the watchdog is far away); the test cancels once both are consumed.
	streamed := make(chan struct{})
	n := 0
	h, _ := newProviderHarness(t, []mock.Reply{
		{Fault: mock.FaultStall, Text: "partial answer that never ends", Split: 8, After: 3},
	}, func(d llm.Delta) {
		if n++; n == 2 {
			close(streamed)
		}
	})
	h.send("go")
	select {
	case <-streamed:
	case <-time.After(5 * time.Second):
		t.Fatal("the two chunks never arrived")
	}
	h.a.Cancel("user", agent.CancelOptions{})
	h.idle()
	var msg *session.AssistantMessage
	for _, ev := range h.events() {
		if ev.Type == session.TypeAssistantMessage {
			msg = ev.MustDecode().(*session.AssistantMessage)
		}
	}
	if msg == nil || !msg.Interrupted || llm.PlainText(msg.Content) != "partial answer t" || len(msg.ToolCalls) != 0 {
		t.Fatalf("interrupted message: %+v", msg)
	}
	h.golden("e2e-provider-cancel")
}
