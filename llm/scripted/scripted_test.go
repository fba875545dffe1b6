package scripted_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/reinhq/rein/llm"
	"github.com/reinhq/rein/llm/scripted"
)

var _ llm.Provider = (*scripted.Model)(nil)

func collect(m *scripted.Model, ctx context.Context, req *llm.Request) []llm.Event {
	var out []llm.Event
	for ev := range m.Stream(ctx, req) {
		out = append(out, ev)
	}
	return out
}

func userReq(texts ...string) *llm.Request {
	req := &llm.Request{}
	for _, s := range texts {
		req.Messages = append(req.Messages, llm.Message{Role: llm.RoleUser, Content: llm.Text(s)})
	}
	return req
}

func delta(d llm.Delta) llm.Event { return llm.Event{Type: llm.EventDelta, Delta: d} }

func tcDelta(i int, id, name, args string) llm.Event {
	return delta(llm.Delta{ToolCall: &llm.ToolCallDelta{Index: i, ID: id, Name: name, Arguments: args}})
}

// terminal checks the stream shape (deltas, then exactly one terminal event
// last) and returns the terminal event.
func terminal(t *testing.T, evs []llm.Event) llm.Event {
	t.Helper()
	if len(evs) == 0 {
		t.Fatal("empty stream")
	}
	for i, ev := range evs[:len(evs)-1] {
		if ev.Type != llm.EventDelta {
			t.Fatalf("event %d of %d is type %d, want a delta before the terminal event", i, len(evs), ev.Type)
		}
	}
	last := evs[len(evs)-1]
	if last.Type != llm.EventDone && last.Type != llm.EventError {
		t.Fatalf("last event type %d is not terminal", last.Type)
	}
	if last.Type == llm.EventError && last.Err == nil {
		t.Fatal("error event without Err")
	}
	return last
}

func wantCode(t *testing.T, ev llm.Event, code llm.Code) {
	t.Helper()
	if ev.Type != llm.EventError || ev.Err == nil || ev.Err.Code != code {
		t.Fatalf("terminal event = %+v (err %v), want error code %s", ev, ev.Err, code)
	}
}

func TestReplyOrderAndDefaults(t *testing.T) {
	m := scripted.New(scripted.Call{Reply: scripted.Reply{
		Reasoning: []string{"think ", "hard"},
		Signature: "sig",
		Text:      []string{"hello ", "world"},
		ToolCalls: []scripted.ToolCall{
			{ID: "a", Name: "read", Arguments: `{"path":"x"}`},
			{Name: "shell", Arguments: `{"cmd":"ls"}`, Split: 2},
		},
	}})
	req := &llm.Request{System: "sys!", Messages: []llm.Message{{Role: llm.RoleUser, Content: llm.Text("0123456789")}}}
	got := collect(m, t.Context(), req)
	want := []llm.Event{
		delta(llm.Delta{Reasoning: "think "}),
		delta(llm.Delta{Reasoning: "hard"}),
		delta(llm.Delta{Signature: "sig"}),
		delta(llm.Delta{Text: "hello "}),
		delta(llm.Delta{Text: "world"}),
		tcDelta(0, "a", "read", `{"path":"x"}`),
		tcDelta(1, "call_1_1", "shell", `{"cmd"`),
		tcDelta(1, "", "", `:"ls"}`),
		// input: 4+10=14 -> 4; reasoning 10 -> 3; output 10+11+4+12+5+12=54 -> 14
		{Type: llm.EventDone, Finish: llm.FinishToolCalls, Usage: llm.Usage{Input: 4, Output: 14, Reasoning: 3}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("events:\n got %s\nwant %s", dump(got), dump(want))
	}
	if err := m.Verify(); err != nil {
		t.Fatal(err)
	}
}

func dump(evs []llm.Event) string {
	var b strings.Builder
	for _, ev := range evs {
		fmt.Fprintf(&b, "\n  %d %+v", ev.Type, ev.Delta)
		if ev.Delta.ToolCall != nil {
			fmt.Fprintf(&b, " %+v", *ev.Delta.ToolCall)
		}
		if ev.Type != llm.EventDelta {
			fmt.Fprintf(&b, " finish=%s usage=%+v err=%v", ev.Finish, ev.Usage, ev.Err)
		}
	}
	return b.String()
}

func TestFinishStopAndGivenUsage(t *testing.T) {
	u := llm.Usage{Input: 7, Output: 9, CacheRead: 3}
	m := scripted.New(
		scripted.Answer("hi"),
		scripted.Call{Reply: scripted.Reply{Text: []string{"x"}, Finish: llm.FinishMaxTokens, Usage: &u}},
		scripted.Call{}, // empty reply
	)
	ev := terminal(t, collect(m, t.Context(), userReq("q")))
	if ev.Type != llm.EventDone || ev.Finish != llm.FinishStop || ev.Usage != (llm.Usage{Input: 1, Output: 1}) {
		t.Fatalf("call 1 terminal = %+v", ev)
	}
	ev = terminal(t, collect(m, t.Context(), userReq("q")))
	if ev.Finish != llm.FinishMaxTokens || ev.Usage != u {
		t.Fatalf("call 2 terminal = %+v", ev)
	}
	evs := collect(m, t.Context(), userReq("q"))
	if len(evs) != 1 || evs[0].Type != llm.EventDone || evs[0].Finish != llm.FinishStop {
		t.Fatalf("empty call = %s", dump(evs))
	}
}

func TestSplitArguments(t *testing.T) {
	args := `{"text":"héllo wörld ✓ done"}`
	for _, split := range []int{0, 1, 2, 3, 7, 1000} {
		m := scripted.New(scripted.UseTools(scripted.ToolCall{ID: "id", Name: "echo", Arguments: args, Split: split}))
		evs := collect(m, t.Context(), userReq("q"))
		terminal(t, evs)
		frags := evs[:len(evs)-1]
		want := max(1, min(split, len([]rune(args))))
		if len(frags) != want {
			t.Fatalf("split %d: %d fragments, want %d", split, len(frags), want)
		}
		var b strings.Builder
		for i, ev := range frags {
			tc := ev.Delta.ToolCall
			if tc == nil || tc.Index != 0 {
				t.Fatalf("split %d: fragment %d = %+v", split, i, ev.Delta)
			}
			if (i == 0) != (tc.ID == "id" && tc.Name == "echo") || (i > 0 && (tc.ID != "" || tc.Name != "")) {
				t.Fatalf("split %d: fragment %d carries id %q name %q", split, i, tc.ID, tc.Name)
			}
			if i > 0 && tc.Arguments == "" {
				t.Fatalf("split %d: empty fragment %d", split, i)
			}
			if !utf8.ValidString(tc.Arguments) {
				t.Fatalf("split %d: fragment %d %q cuts a rune", split, i, tc.Arguments)
			}
			b.WriteString(tc.Arguments)
		}
		if b.String() != args {
			t.Fatalf("split %d: assembled %q, want %q", split, b.String(), args)
		}
	}
}

func TestErrorReply(t *testing.T) {
	m := scripted.New(
		scripted.Call{Err: &scripted.ErrorReply{Code: llm.CodeRateLimit, Message: "slow down", Status: 429, RetryAfter: 150 * time.Millisecond}},
		scripted.Call{Reply: scripted.Reply{Text: []string{"par", "tial"}}, Err: &scripted.ErrorReply{Code: llm.CodeNetwork}},
		scripted.Failure(llm.CodeOverloaded, "busy"),
	)
	evs := collect(m, t.Context(), userReq("q"))
	if len(evs) != 1 {
		t.Fatalf("call 1: %s", dump(evs))
	}
	e := evs[0].Err
	wantCode(t, evs[0], llm.CodeRateLimit)
	if e.Message != "slow down" || e.Status != 429 || e.RetryAfter != 150*time.Millisecond {
		t.Fatalf("call 1 error = %+v", e)
	}
	evs = collect(m, t.Context(), userReq("q"))
	if len(evs) != 3 || evs[0].Delta.Text != "par" || evs[1].Delta.Text != "tial" {
		t.Fatalf("call 2: %s", dump(evs))
	}
	wantCode(t, terminal(t, evs), llm.CodeNetwork)
	if evs[2].Err.Message == "" {
		t.Fatal("call 2: empty default message")
	}
	wantCode(t, terminal(t, collect(m, t.Context(), userReq("q"))), llm.CodeOverloaded)
	if err := m.Verify(); err != nil {
		t.Fatal(err)
	}
}

func TestUnexpectedCall(t *testing.T) {
	m := scripted.New(scripted.Answer("one"))
	terminal(t, collect(m, t.Context(), userReq("first")))
	evs := collect(m, t.Context(), userReq("second"))
	if len(evs) != 1 {
		t.Fatalf("unexpected call streamed %s", dump(evs))
	}
	wantCode(t, evs[0], llm.CodeInvalidRequest)
	if msg := evs[0].Err.Message; !strings.Contains(msg, "call 2") || !strings.Contains(msg, `"second"`) {
		t.Fatalf("message does not explain the call: %q", msg)
	}
	if m.Calls() != 2 || len(m.Requests()) != 2 {
		t.Fatalf("Calls %d, Requests %d, want 2, 2", m.Calls(), len(m.Requests()))
	}
	err := m.Verify()
	if !errors.Is(err, scripted.ErrUnexpectedCall) || errors.Is(err, scripted.ErrMissingCall) {
		t.Fatalf("Verify = %v, want only ErrUnexpectedCall", err)
	}
}

func TestMissingCall(t *testing.T) {
	m := scripted.New(scripted.Answer("1"), scripted.Answer("2"), scripted.Answer("3"))
	if err := m.Verify(); !errors.Is(err, scripted.ErrMissingCall) || !strings.Contains(err.Error(), "calls 1-3 of 3") {
		t.Fatalf("Verify before any call = %v", err)
	}
	terminal(t, collect(m, t.Context(), userReq("q")))
	terminal(t, collect(m, t.Context(), userReq("q")))
	if m.Remaining() != 1 {
		t.Fatalf("Remaining = %d, want 1", m.Remaining())
	}
	err := m.Verify()
	if !errors.Is(err, scripted.ErrMissingCall) || !strings.Contains(err.Error(), "call 3 of 3 (2 made)") {
		t.Fatalf("Verify = %v", err)
	}
	terminal(t, collect(m, t.Context(), userReq("q")))
	if err := m.Verify(); err != nil {
		t.Fatalf("Verify after all calls = %v", err)
	}
}

func TestExpectations(t *testing.T) {
	two, three := 2, 3
	req := &llm.Request{
		System: "You are rein.",
		Tools:  []llm.ToolSpec{{Name: "shell"}, {Name: "read"}},
		Messages: []llm.Message{
			{Role: llm.RoleUser, Content: llm.Text("list files")},
			{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{{ID: "1", Name: "shell", Arguments: `{"cmd":"ls"}`}}},
			{Role: llm.RoleTool, ToolCallID: "1", Content: llm.Text("README.md")},
		},
	}
	cases := []struct {
		name   string
		expect scripted.Expect
		bad    string // substring of the mismatch; "" when it matches
	}{
		{"all match", scripted.Expect{LastUser: "list files", Contains: []string{"README.md", `"cmd":"ls"`}, Messages: &three, Tools: []string{"shell", "read"}, System: "rein"}, ""},
		{"no tools expected", scripted.Expect{Tools: []string{}}, "expect.tools"},
		{"last user", scripted.Expect{LastUser: "list"}, `expect.lastUser: want "list", got "list files"`},
		{"contains", scripted.Expect{Contains: []string{"README.md", "missing"}}, `expect.contains: "missing"`},
		{"messages", scripted.Expect{Messages: &two}, "expect.messages: want 2, got 3"},
		{"tools", scripted.Expect{Tools: []string{"read"}}, "expect.tools"},
		{"system", scripted.Expect{System: "Claude"}, "expect.system"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m := scripted.New(scripted.Call{Expect: &tc.expect, Reply: scripted.Reply{Text: []string{"ok"}}})
			ev := terminal(t, collect(m, t.Context(), req))
			err := m.Verify()
			if tc.bad == "" {
				if ev.Type != llm.EventDone || err != nil {
					t.Fatalf("terminal %+v, Verify %v; want a match", ev, err)
				}
				return
			}
			wantCode(t, ev, llm.CodeInvalidRequest)
			if !strings.Contains(ev.Err.Message, tc.bad) {
				t.Fatalf("stream message %q lacks %q", ev.Err.Message, tc.bad)
			}
			if !errors.Is(err, scripted.ErrMismatch) || !strings.Contains(err.Error(), tc.bad) {
				t.Fatalf("Verify = %v, want ErrMismatch with %q", err, tc.bad)
			}
		})
	}
	t.Run("no user message", func(t *testing.T) {
		m := scripted.New(scripted.Call{Expect: &scripted.Expect{LastUser: "x"}})
		wantCode(t, terminal(t, collect(m, t.Context(), &llm.Request{})), llm.CodeInvalidRequest)
	})
}

func TestMatchAndRespond(t *testing.T) {
	m := scripted.New(
		scripted.Call{
			Match: func(r *llm.Request) error {
				if r.Params.MaxTokens != 100 {
					return fmt.Errorf("max tokens %d", r.Params.MaxTokens)
				}
				return nil
			},
			Respond: func(r *llm.Request) scripted.Reply {
				return scripted.Reply{Text: []string{"echo: " + llm.PlainText(r.Messages[0].Content)}}
			},
		},
		scripted.Call{Match: func(*llm.Request) error { return errors.New("never") }},
	)
	req := userReq("ping")
	req.Params.MaxTokens = 100
	evs := collect(m, t.Context(), req)
	if terminal(t, evs).Type != llm.EventDone || evs[0].Delta.Text != "echo: ping" {
		t.Fatalf("respond: %s", dump(evs))
	}
	ev := terminal(t, collect(m, t.Context(), req))
	wantCode(t, ev, llm.CodeInvalidRequest)
	if !strings.Contains(ev.Err.Message, "match: never") {
		t.Fatalf("message %q", ev.Err.Message)
	}
	if err := m.Verify(); !errors.Is(err, scripted.ErrMismatch) {
		t.Fatalf("Verify = %v", err)
	}
}

func TestRequestsAreDeepCopies(t *testing.T) {
	temp := 0.5
	req := &llm.Request{
		Tools:    []llm.ToolSpec{{Name: "read", Parameters: []byte(`{"type":"object"}`)}},
		Messages: []llm.Message{{Role: llm.RoleAssistant, Content: llm.Text("a"), ToolCalls: []llm.ToolCall{{ID: "1", Name: "n", Arguments: "{}"}}}},
		Params:   llm.Params{Temperature: &temp},
	}
	m := scripted.New(scripted.Call{})
	seq := m.Stream(t.Context(), req)
	req.Tools[0].Parameters[0] = 'X'
	req.Messages[0].Content[0].Text = "changed"
	req.Messages[0].ToolCalls[0].Arguments = "changed"
	req.Messages = append(req.Messages[:0], llm.Message{Role: llm.RoleUser})
	temp = 9
	for range seq {
	}
	got := m.Requests()
	if len(got) != 1 {
		t.Fatalf("%d requests", len(got))
	}
	r := got[0]
	if string(r.Tools[0].Parameters) != `{"type":"object"}` || r.Messages[0].Role != llm.RoleAssistant ||
		r.Messages[0].Content[0].Text != "a" || r.Messages[0].ToolCalls[0].Arguments != "{}" || *r.Params.Temperature != 0.5 {
		t.Fatalf("recorded request changed with the caller's: %+v", r)
	}
	// A nil request is recorded as an empty one.
	m.Append(scripted.Call{})
	terminal(t, collect(m, t.Context(), nil))
	if r := m.Requests()[1]; r == nil || len(r.Messages) != 0 {
		t.Fatalf("nil request recorded as %+v", r)
	}
}

// canceledAfter runs the stream and cancels its context after d; it returns
// the events and how long the stream took.
func canceledAfter(m *scripted.Model, d time.Duration) ([]llm.Event, time.Duration) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	timer := time.AfterFunc(d, cancel)
	defer timer.Stop()
	start := time.Now()
	evs := collect(m, ctx, userReq("q"))
	return evs, time.Since(start)
}

func TestCancellation(t *testing.T) {
	const long = time.Hour
	cases := []struct {
		name   string
		call   scripted.Call
		deltas int
	}{
		{"delay", scripted.Call{Delay: long, Reply: scripted.Reply{Text: []string{"a"}}}, 0},
		{"chunk delay", scripted.Call{Reply: scripted.Reply{Text: []string{"a", "b"}, ChunkDelay: long}}, 0},
		{"hang after chunks", scripted.Call{Hang: true, Reply: scripted.Reply{Text: []string{"a", "b"}}}, 2},
		{"hang without chunks", scripted.Call{Hang: true}, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m := scripted.New(tc.call)
			evs, took := canceledAfter(m, 20*time.Millisecond)
			if took > 5*time.Second {
				t.Fatalf("stream took %v after cancel", took)
			}
			wantCode(t, terminal(t, evs), llm.CodeCanceled)
			if len(evs)-1 != tc.deltas {
				t.Fatalf("%d deltas before cancel, want %d: %s", len(evs)-1, tc.deltas, dump(evs))
			}
			if err := m.Verify(); err != nil {
				t.Fatalf("a cancelled call is a made call: %v", err)
			}
		})
	}
	t.Run("chunk delay mid-stream", func(t *testing.T) {
		// The first chunk comes after 1ms; the second would come an hour later.
		var n int
		m := scripted.New(scripted.Call{
			Reply: scripted.Reply{Text: []string{"a", "b", "c"}, ChunkDelay: time.Millisecond},
			BeforeChunk: func(ctx context.Context, i int) {
				n++
				if i == 1 {
					<-ctx.Done()
				}
			},
		})
		evs, _ := canceledAfter(m, 20*time.Millisecond)
		if len(evs) != 2 || evs[0].Delta.Text != "a" || n != 2 {
			t.Fatalf("events %s, BeforeChunk calls %d", dump(evs), n)
		}
		wantCode(t, evs[1], llm.CodeCanceled)
	})
	t.Run("deadline", func(t *testing.T) {
		m := scripted.New(scripted.Call{Hang: true})
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Millisecond)
		defer cancel()
		wantCode(t, terminal(t, collect(m, ctx, userReq("q"))), llm.CodeTimeout)
	})
}

func TestAlreadyCanceled(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	called := false
	m := scripted.New(
		scripted.Call{Reply: scripted.Reply{Text: []string{"a"}}, BeforeChunk: func(context.Context, int) { called = true }},
		scripted.Call{Expect: &scripted.Expect{LastUser: "other"}},
	)
	evs := collect(m, ctx, userReq("q"))
	if len(evs) != 1 || called {
		t.Fatalf("already-cancelled stream: %s (BeforeChunk called %v)", dump(evs), called)
	}
	wantCode(t, evs[0], llm.CodeCanceled)
	if m.Calls() != 1 || len(m.Requests()) != 1 {
		t.Fatalf("call not consumed: Calls %d", m.Calls())
	}
	// A mismatch is still recorded, but the stream reports the cancellation.
	evs = collect(m, ctx, userReq("q"))
	wantCode(t, terminal(t, evs), llm.CodeCanceled)
	if err := m.Verify(); !errors.Is(err, scripted.ErrMismatch) {
		t.Fatalf("Verify = %v", err)
	}
}

func TestBeforeChunk(t *testing.T) {
	var seen []int
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	m := scripted.New(
		scripted.Call{
			Reply: scripted.Reply{Reasoning: []string{"r"}, Text: []string{"t"}, ToolCalls: []scripted.ToolCall{{Name: "x", Arguments: "{}", Split: 2}}},
			BeforeChunk: func(c context.Context, i int) {
				if c != ctx {
					t.Error("BeforeChunk got another context")
				}
				seen = append(seen, i)
			},
		},
		scripted.Call{
			Reply: scripted.Reply{Text: []string{"a", "b", "c"}},
			BeforeChunk: func(_ context.Context, i int) {
				if i == 1 {
					cancel()
				}
			},
		},
	)
	if ev := terminal(t, collect(m, ctx, userReq("q"))); ev.Type != llm.EventDone {
		t.Fatalf("call 1 ended %+v", ev)
	}
	if want := []int{0, 1, 2, 3, 4}; !reflect.DeepEqual(seen, want) {
		t.Fatalf("BeforeChunk indices %v, want %v", seen, want)
	}
	evs := collect(m, ctx, userReq("q"))
	if len(evs) != 2 || evs[0].Delta.Text != "a" {
		t.Fatalf("cancel in BeforeChunk(1): %s", dump(evs))
	}
	wantCode(t, evs[1], llm.CodeCanceled)
}

func TestEarlyStopLeaksNothing(t *testing.T) {
	before := runtime.NumGoroutine()
	calls := []scripted.Call{
		{Reply: scripted.Reply{Text: []string{"a", "b", "c"}, ChunkDelay: time.Millisecond}, Delay: time.Millisecond},
		{Hang: true, Reply: scripted.Reply{Text: []string{"a"}}},
		{Reply: scripted.Reply{ToolCalls: []scripted.ToolCall{{Name: "x", Arguments: "{}"}}}},
	}
	m := scripted.New()
	for range 50 {
		m.Append(calls...)
	}
	for i := range 150 {
		n := 0
		for ev := range m.Stream(t.Context(), userReq("q")) {
			n++
			if ev.Type != llm.EventDelta {
				t.Fatalf("call %d: early terminal %+v", i, ev)
			}
			break
		}
		if n != 1 {
			t.Fatalf("call %d: %d events", i, n)
		}
	}
	deadline := time.Now().Add(2 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if after := runtime.NumGoroutine(); after > before {
		t.Fatalf("goroutines: %d before, %d after early stops", before, after)
	}
	if err := m.Verify(); err != nil {
		t.Fatal(err)
	}
}

func TestRangedTwice(t *testing.T) {
	m := scripted.New(scripted.Answer("a"))
	seq := m.Stream(t.Context(), userReq("q"))
	for range seq {
	}
	var evs []llm.Event
	for ev := range seq {
		evs = append(evs, ev)
	}
	if len(evs) != 1 {
		t.Fatalf("second range: %s", dump(evs))
	}
	wantCode(t, evs[0], llm.CodeInvalidRequest)
	if m.Calls() != 1 {
		t.Fatalf("Calls = %d", m.Calls())
	}
}

func TestConcurrentUse(t *testing.T) {
	const n = 40
	m := scripted.New()
	for i := range n {
		m.Append(scripted.Answer(fmt.Sprint(i)))
	}
	var wg sync.WaitGroup
	seen := make([]bool, n)
	var mu sync.Mutex
	for range n {
		wg.Go(func() {
			var text string
			for ev := range m.Stream(context.Background(), userReq("q")) {
				text += ev.Delta.Text
				_ = m.Calls()
				_ = m.Requests()
			}
			var i int
			fmt.Sscan(text, &i)
			mu.Lock()
			seen[i] = true
			mu.Unlock()
		})
	}
	wg.Wait()
	for i, ok := range seen {
		if !ok {
			t.Fatalf("reply %d never streamed", i)
		}
	}
	if m.Calls() != n {
		t.Fatalf("Calls = %d", m.Calls())
	}
	if err := m.Verify(); err != nil {
		t.Fatal(err)
	}
}

func TestName(t *testing.T) {
	if got := scripted.New().Name(); got != "scripted" {
		t.Fatalf("Name = %q", got)
	}
}
