package mock_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/reinhq/rein/llm"
	"github.com/reinhq/rein/llm/anthropic"
	"github.com/reinhq/rein/llm/mock"
	"github.com/reinhq/rein/llm/openai"
	"github.com/reinhq/rein/llm/retry"
)

// idle is the adapters' watchdog in these tests.
const idle = time.Second

func start(t *testing.T, replies ...mock.Reply) *mock.Server {
	t.Helper()
	s, err := mock.Start(mock.Script{Replies: replies})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func providers(s *mock.Server) map[string]llm.Provider {
	return map[string]llm.Provider{
		"openai":    openai.New(openai.Config{BaseURL: s.URL + "/v1", APIKey: "k", IdleTimeout: idle}),
		"anthropic": anthropic.New(anthropic.Config{BaseURL: s.URL, APIKey: "k", IdleTimeout: idle}),
	}
}

func request() *llm.Request {
	return &llm.Request{Model: "mock", Messages: []llm.Message{{Role: llm.RoleUser, Content: llm.Text("hi")}}}
}

// result is a stream folded the way the agent folds it.
type result struct {
	text, reasoning, signature string
	calls                      []llm.ToolCall
	deltas                     int
	done                       *llm.Event
	err                        *llm.Error
}

func collect(t *testing.T, ctx context.Context, p llm.Provider, req *llm.Request) result {
	t.Helper()
	var r result
	terminal := 0
	for ev := range p.Stream(ctx, req) {
		if terminal > 0 {
			t.Fatalf("event after the terminal event: %+v", ev)
		}
		switch ev.Type {
		case llm.EventDelta:
			r.deltas++
			d := ev.Delta
			r.text += d.Text
			r.reasoning += d.Reasoning
			r.signature += d.Signature
			if tc := d.ToolCall; tc != nil {
				for len(r.calls) <= tc.Index {
					r.calls = append(r.calls, llm.ToolCall{})
				}
				c := &r.calls[tc.Index]
				if tc.ID != "" {
					c.ID = tc.ID
				}
				c.Name += tc.Name
				c.Arguments += tc.Arguments
			}
		case llm.EventDone:
			ev := ev
			r.done = &ev
			terminal++
		case llm.EventError:
			r.err = ev.Err
			terminal++
		}
	}
	if terminal != 1 {
		t.Fatalf("%d terminal events", terminal)
	}
	return r
}

func TestNormalReplyBothDialects(t *testing.T) {
	reply := mock.Reply{
		Reasoning: "Let me think — über",
		Signature: "sig",
		Text:      "Héllo, wörld",
		ToolCalls: []llm.ToolCall{
			{ID: "c1", Name: "read", Arguments: `{"file_path":"a \"b\".go"}`},
			{ID: "c2", Name: "grep", Arguments: `{"pattern":"Test\\d+"}`},
		},
		Usage: llm.Usage{Input: 100, Output: 20, CacheRead: 64},
	}
	s := start(t, reply, reply)
	for _, name := range []string{"openai", "anthropic"} {
		p := providers(s)[name]
		r := collect(t, context.Background(), p, request())
		if r.err != nil {
			t.Fatalf("%s: %v", name, r.err)
		}
		if r.text != reply.Text || r.reasoning != reply.Reasoning || len(r.calls) != 2 || r.calls[0] != reply.ToolCalls[0] || r.calls[1] != reply.ToolCalls[1] {
			t.Errorf("%s: reassembled %+v", name, r)
		}
		if r.done.Finish != llm.FinishToolCalls || r.done.Usage.Input != 100 || r.done.Usage.Output != 20 || r.done.Usage.CacheRead != 64 {
			t.Errorf("%s: done %+v", name, r.done)
		}
		if r.deltas < 20 {
			t.Errorf("%s: only %d deltas; the mock should split finely", name, r.deltas)
		}
		if name == "anthropic" && r.signature != "sig" {
			t.Errorf("signature %q", r.signature)
		}
	}
	reqs := s.Requests()
	if len(reqs) != 2 || reqs[0].Dialect != "openai" || reqs[1].Dialect != "anthropic" {
		t.Fatalf("requests: %+v", reqs)
	}
}

// TestFaults drives every fault through both real adapters and checks the
// code each one is normalised to.
func TestFaults(t *testing.T) {
	text := mock.Reply{Text: "some partial answer here", Split: 4}
	cases := []struct {
		reply   mock.Reply
		code    llm.Code
		partial bool // text arrived before the failure
		retry   time.Duration
	}{
		{mock.Reply{Fault: mock.FaultReset, Text: text.Text, Split: 4, After: 3}, llm.CodeNetwork, true, 0},
		{mock.Reply{Fault: mock.FaultStall, Text: text.Text, Split: 4, After: 3}, llm.CodeTimeout, true, 0},
		{mock.Reply{Fault: mock.FaultMalformed, Text: text.Text, Split: 4, After: 3}, llm.CodeMalformedStream, true, 0},
		{mock.Reply{Fault: mock.FaultStreamError, Text: text.Text, Split: 4, After: 3}, llm.CodeOverloaded, true, 0},
		{mock.Reply{Fault: mock.FaultRateLimit, RetryAfter: mock.Duration(1500 * time.Millisecond)}, llm.CodeRateLimit, false, 1500 * time.Millisecond},
		{mock.Reply{Fault: mock.FaultServer}, llm.CodeServer, false, 0},
		{mock.Reply{Fault: mock.FaultOverloaded}, llm.CodeOverloaded, false, 0},
		{mock.Reply{Fault: mock.FaultContextOverflow}, llm.CodeContextOverflow, false, 0},
		{mock.Reply{Fault: mock.FaultAuth}, llm.CodeAuth, false, 0},
		{mock.Reply{Fault: mock.FaultEmpty}, llm.CodeEmptyResponse, false, 0},
	}
	for _, c := range cases {
		for _, name := range []string{"openai", "anthropic"} {
			t.Run(string(c.reply.Fault)+"/"+name, func(t *testing.T) {
				t.Parallel()
				s := start(t, c.reply)
				r := collect(t, context.Background(), providers(s)[name], request())
				if r.err == nil || r.err.Code != c.code || r.err.RetryAfter != c.retry {
					t.Fatalf("got %+v (done %+v), want %s", r.err, r.done, c.code)
				}
				if c.partial != (r.text != "") || !strings.HasPrefix(text.Text, r.text) {
					t.Fatalf("partial text %q", r.text)
				}
			})
		}
	}
}

func TestScriptExhausted(t *testing.T) {
	s := start(t)
	r := collect(t, context.Background(), providers(s)["openai"], request())
	if r.err == nil || r.err.Code != llm.CodeInvalidRequest || !strings.Contains(r.err.Message, "script exhausted") {
		t.Fatalf("got %+v", r.err)
	}
}

// attempt runs the request under the retry policy the way the agent does.
func attempt(t *testing.T, ctx context.Context, p llm.Provider, pol retry.Policy) (result, int) {
	t.Helper()
	for n := 1; ; n++ {
		r := collect(t, ctx, p, request())
		if r.err == nil {
			return r, n
		}
		wait, ok := pol.Next(n, r.err)
		if !ok {
			return r, n
		}
		if err := retry.Wait(ctx, wait); err != nil {
			r.err = llm.AsError(err)
			return r, n
		}
	}
}

func TestRetryThroughMock(t *testing.T) {
	pol := retry.Default()
	pol.Base = 5 * time.Millisecond
	pol.Rand = func() float64 { return 0.5 }

	// Retry-After honoured, then success.
	s := start(t, mock.Reply{Fault: mock.FaultRateLimit, RetryAfter: mock.Duration(120 * time.Millisecond)}, mock.Reply{Fault: mock.FaultReset, Text: "abc", After: 2}, mock.Reply{Text: "ok"})
	began := time.Now()
	r, n := attempt(t, context.Background(), providers(s)["openai"], pol)
	if r.err != nil || r.text != "ok" || n != 3 {
		t.Fatalf("got %+v after %d attempts", r.err, n)
	}
	if el := time.Since(began); el < 120*time.Millisecond {
		t.Fatalf("Retry-After not honoured: done after %v", el)
	}
	reqs := s.Requests()
	if string(reqs[0].Body) != string(reqs[2].Body) {
		t.Fatal("a retry sent a different request body")
	}

	// Auth and invalid requests are not retried.
	s = start(t, mock.Reply{Fault: mock.FaultAuth}, mock.Reply{Text: "never"})
	if r, n := attempt(t, context.Background(), providers(s)["anthropic"], pol); r.err.Code != llm.CodeAuth || n != 1 {
		t.Fatalf("auth: %+v after %d", r.err, n)
	}

	// Bounded attempts.
	pol.MaxRetries = 2
	s = start(t, mock.Reply{Fault: mock.FaultServer}, mock.Reply{Fault: mock.FaultServer}, mock.Reply{Fault: mock.FaultServer}, mock.Reply{Text: "late"})
	if r, n := attempt(t, context.Background(), providers(s)["openai"], pol); r.err.Code != llm.CodeServer || n != 3 {
		t.Fatalf("bounded: %+v after %d", r.err, n)
	}

	// Cancellation wins over a long Retry-After.
	pol = retry.Default()
	s = start(t, mock.Reply{Fault: mock.FaultRateLimit, RetryAfter: mock.Duration(time.Minute)}, mock.Reply{Text: "late"})
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	began = time.Now()
	if r, n := attempt(t, ctx, providers(s)["openai"], pol); r.err.Code != llm.CodeTimeout && r.err.Code != llm.CodeCanceled || n != 1 || time.Since(began) > 5*time.Second {
		t.Fatalf("cancel: %+v after %d in %v", r.err, n, time.Since(began))
	}
}

func TestCancelMidStream(t *testing.T) {
	s := start(t, mock.Reply{Fault: mock.FaultStall, Text: "partial text", After: 3})
	for _, name := range []string{"openai"} {
		ctx, cancel := context.WithCancel(context.Background())
		var text string
		var last *llm.Error
		for ev := range providers(s)[name].Stream(ctx, request()) {
			if ev.Type == llm.EventDelta && ev.Delta.Text != "" {
				text += ev.Delta.Text
				cancel()
			}
			if ev.Type == llm.EventError {
				last = ev.Err
			}
		}
		cancel()
		if last == nil || last.Code != llm.CodeCanceled || text == "" {
			t.Fatalf("%s: %q then %+v", name, text, last)
		}
	}
}

func TestLoadScript(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.json")
	os.WriteFile(path, []byte(`{"replies":[{"fault":"rate-limit","retryAfter":"2s"},{"text":"hi","delay":"5ms","toolCalls":[{"id":"c1","name":"read","arguments":"{}"}]}],"loop":true}`), 0o644)
	sc, err := mock.LoadScript(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(sc.Replies) != 2 || !sc.Loop || time.Duration(sc.Replies[0].RetryAfter) != 2*time.Second || time.Duration(sc.Replies[1].Delay) != 5*time.Millisecond || sc.Replies[1].ToolCalls[0].Name != "read" {
		t.Fatalf("%+v", sc)
	}
	os.WriteFile(path, []byte(`{"replies":[{"txt":"typo"}]}`), 0o644)
	if _, err := mock.LoadScript(path); err == nil {
		t.Fatal("unknown field accepted")
	}
	b, _ := json.Marshal(sc.Replies[0].RetryAfter)
	if string(b) != `"2s"` {
		t.Fatalf("duration marshals as %s", b)
	}
}
