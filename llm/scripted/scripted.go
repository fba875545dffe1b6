// Package scripted is rein's one scripted model: an llm.Provider that plays
// back a fixed list of calls, used by every rein test, the keyless demo and
// the snapshots. It owns the script (the calls and their replies), the record
// of the requests it received, and the bookkeeping that makes a script fail
// loudly when the code under test calls the model more, less, or differently
// than scripted.
//
// # Calls
//
// Each call to Stream consumes the next scripted Call. A Call may state what
// it expects of the request (Expect, Match) and gives its reply: reasoning
// chunks, text chunks, tool calls (optionally split into several argument
// fragments), a finish reason and usage; or an error; optionally after a
// delay, with a delay before each chunk, or hanging until the request's
// context is cancelled.
//
// A reply streams, in this order: one EventDelta per reasoning chunk, one
// with the reasoning Signature (if any), one per text chunk, the fragments of
// each tool call in turn (the first fragment carries Index, ID, Name and the
// first piece of the arguments; later fragments only Index and further
// pieces), and then exactly one terminal event: EventDone with Finish and
// Usage, or EventError when the call scripts an error.
//
// Defaults: Finish is tool-calls when the reply has tool calls, else stop. A
// tool call without an ID gets "call_N_K" (N the 1-based call number, K the
// 0-based tool call index). Usage, when not given, is a deterministic
// estimate counted in characters (runes) and rounded up: Input is the
// characters of the request (system prompt, every part's text and data, tool
// call names and arguments of every message, and each tool's name,
// description and parameters) divided by 4; Output is the characters of the
// reply (reasoning, text, tool call names and arguments) divided by 4;
// Reasoning is the characters of the reasoning chunks divided by 4.
//
// # Failure
//
// An unexpected call (more calls than scripted, or a request that does not
// meet the call's expectations) ends its stream with a single EventError of
// code invalid-request whose message explains the mismatch, and the problem
// is recorded so that Verify reports it. A scripted call never made is
// reported by Verify. Package scriptedtest registers Verify as a test
// cleanup.
//
// # Cancellation
//
// Every wait (Delay, ChunkDelay, Hang) ends promptly when the request's
// context is done, and the context is checked before every event: the stream
// then ends, after any chunks already yielded, with the EventError that
// llm.AsError gives for the context's error (code canceled for a cancelled
// context, timeout for an expired deadline). A Stream whose context is
// already done yields only that error; the call is still consumed and its
// request recorded. The stream runs in the consumer's goroutine and starts
// none of its own, so a consumer that stops early leaks nothing.
//
// # File format
//
// Load and Parse read a JSON script; unknown fields are errors. Every field
// but "calls" is optional (the // remarks below are not part of the format):
//
//	{
//	  "model": "demo",                      // optional display name
//	  "comment": "free text, ignored",
//	  "calls": [
//	    {
//	      "comment": "free text, ignored",
//	      "expect": {
//	        "lastUser": "list the files",   // exact text of the last user message
//	        "contains": ["README"],         // substrings of the messages' text
//	        "messages": 3,                  // exact number of messages
//	        "tools": ["read", "shell"],     // exact set of tool names (any order)
//	        "system": "You are"             // substring of the system prompt
//	      },
//	      "reply": {
//	        "reasoning": ["Let me ", "look."],
//	        "signature": "sig",
//	        "text": ["I will ", "read it."],
//	        "toolCalls": [
//	          {"id": "c1", "name": "read", "arguments": {"path": "README.md"}, "split": 3}
//	        ],
//	        "finish": "tool-calls",
//	        "usage": {"input": 120, "output": 30}
//	      },
//	      "error": {"code": "rate-limit", "message": "slow down", "retryAfterMs": 100, "status": 429},
//	      "delayMs": 0,
//	      "chunkDelayMs": 0,
//	      "hang": false
//	    }
//	  ]
//	}
//
// "arguments" is either a JSON string (used verbatim, even when it is not
// valid JSON) or a JSON object or array (re-encoded compactly). "error" may
// accompany a reply: its chunks stream first, then the error instead of
// EventDone. "hang" cannot be combined with "error" or "finish". The full
// reference with a worked example is docs/scripted-model.md.
//
// # Concurrency
//
// A Model is safe for concurrent use: calls are consumed in the order Stream
// is called. Append may add calls while streams run. The sequence a Stream
// returns is single-use and must be ranged in one goroutine.
//
// Package scripted imports only llm and the standard library; it must not
// import "testing" or any other rein package.
package scripted

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/reinhq/rein/llm"
)

// ProviderName is what Name returns: the provider half of "scripted:FILE".
const ProviderName = "scripted"

// Sentinels wrapped by the errors Verify returns.
var (
	// ErrUnexpectedCall: Stream was called after every scripted call was used.
	ErrUnexpectedCall = errors.New("unexpected model call")
	// ErrMismatch: a request did not meet its call's expectations.
	ErrMismatch = errors.New("request does not match the script")
	// ErrMissingCall: a scripted call was never made.
	ErrMissingCall = errors.New("scripted call never made")
)

// Call is one scripted model call. The zero Call replies with an empty
// response that finishes with stop.
type Call struct {
	// Expect states what the request must look like; nil checks nothing.
	Expect *Expect
	// Match is a Go-only expectation run after Expect on a deep copy of the
	// request; a non-nil error is a mismatch.
	Match func(*llm.Request) error
	// Reply is streamed when the request matches.
	Reply Reply
	// Respond, when set, computes the reply from (a deep copy of) the
	// request instead of Reply. It runs in the consumer's goroutine when
	// the stream starts, after Delay.
	Respond func(*llm.Request) Reply
	// Err ends the stream with this error instead of EventDone, after the
	// reply's chunks (none when Reply is empty).
	Err *ErrorReply
	// Delay is waited before the first event.
	Delay time.Duration
	// Hang blocks after the reply's chunks until the request's context is
	// done; the stream then ends with the context's error. Err and
	// Reply.Finish are ignored.
	Hang bool
	// BeforeChunk, when set, is called with the request's context before
	// delta i (0-based, counting every reasoning, signature, text and tool
	// call fragment delta) is yielded, and once more with i equal to the
	// number of deltas before the terminal event (or before hanging). It
	// runs in the consumer's goroutine; tests use it to inject, steer or
	// cancel mid-stream, or to block on a channel. The context is checked
	// right after it returns.
	BeforeChunk func(ctx context.Context, i int)
}

// Reply is the content of a successful response.
type Reply struct {
	Reasoning []string
	// Signature, when set, is yielded as one delta after the reasoning.
	Signature string
	Text      []string
	ToolCalls []ToolCall
	// Finish defaults to tool-calls when there are tool calls, else stop.
	Finish llm.Finish
	// Usage defaults to the estimate described in the package comment.
	Usage *llm.Usage
	// ChunkDelay is waited before each delta.
	ChunkDelay time.Duration
}

// ToolCall is a scripted tool call. Arguments is streamed verbatim.
type ToolCall struct {
	// ID defaults to "call_N_K" (see the package comment).
	ID   string
	Name string
	// Arguments is the raw JSON argument text (not checked for validity).
	Arguments string
	// Split is the number of fragments the arguments are streamed in
	// (values below 2 mean one fragment; never more fragments than runes).
	Split int
}

// ErrorReply is a scripted request failure.
type ErrorReply struct {
	Code    llm.Code
	Message string
	// Status is the HTTP status to report, if any.
	Status     int
	RetryAfter time.Duration
}

// Expect states what a request must look like. Zero fields check nothing.
type Expect struct {
	// LastUser is the exact plain text of the last user message.
	LastUser string
	// Contains are substrings that must each occur in the text of the
	// request's messages (text parts, tool call arguments, tool results).
	Contains []string
	// Messages, when non-nil, is the exact number of messages.
	Messages *int
	// Tools, when non-nil, is the exact set of tool names, in any order.
	Tools []string
	// System is a substring of the system prompt.
	System string
}

// Answer returns a call that replies with the given text chunks.
func Answer(text ...string) Call { return Call{Reply: Reply{Text: text}} }

// UseTools returns a call that replies with the given tool calls.
func UseTools(calls ...ToolCall) Call { return Call{Reply: Reply{ToolCalls: calls}} }

// Failure returns a call that fails with code and message.
func Failure(code llm.Code, message string) Call {
	return Call{Err: &ErrorReply{Code: code, Message: message}}
}

// Model is a scripted llm.Provider. Create it with New, Load or Parse.
type Model struct {
	display string

	mu       sync.Mutex
	calls    []Call
	next     int // calls consumed
	requests []*llm.Request
	problems []error
}

// New returns a model that plays calls in order.
func New(calls ...Call) *Model {
	return &Model{calls: slices.Clone(calls)}
}

// Name returns "scripted".
func (m *Model) Name() string { return ProviderName }

// DisplayName returns the script's "model" field ("" when unset).
func (m *Model) DisplayName() string { return m.display }

// Append adds calls to the end of the script.
func (m *Model) Append(calls ...Call) {
	m.mu.Lock()
	m.calls = append(m.calls, calls...)
	m.mu.Unlock()
}

// Calls returns the number of calls made so far, unexpected ones included.
func (m *Model) Calls() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.next
}

// Remaining returns the number of scripted calls not made yet.
func (m *Model) Remaining() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return max(0, len(m.calls)-m.next)
}

// Requests returns every request received, in call order. Each is a deep
// copy taken when Stream was called; callers must not modify them.
func (m *Model) Requests() []*llm.Request {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.requests)
}

// Verify returns nil when every scripted call was made and no call was
// unexpected or mismatched. Otherwise it returns all problems joined, in the
// order they happened, followed by one error for the calls never made; they
// wrap ErrUnexpectedCall, ErrMismatch and ErrMissingCall.
func (m *Model) Verify() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	errs := slices.Clone(m.problems)
	if missing := len(m.calls) - m.next; missing > 0 {
		first := m.next + 1
		which := fmt.Sprintf("call %d", first)
		if missing > 1 {
			which = fmt.Sprintf("calls %d-%d", first, len(m.calls))
		}
		errs = append(errs, fmt.Errorf("%w: %s of %d (%d made)", ErrMissingCall, which, len(m.calls), m.next))
	}
	return errors.Join(errs...)
}

func (m *Model) problem(err error) {
	m.mu.Lock()
	m.problems = append(m.problems, err)
	m.mu.Unlock()
}

// Stream consumes the next scripted call and returns its reply as a stream.
// The request is copied and checked against the call's expectations when
// Stream is called; the reply's waits and chunks happen while the sequence
// is ranged over. The sequence is single-use: ranging it again yields only
// an invalid-request error.
func (m *Model) Stream(ctx context.Context, req *llm.Request) iter.Seq[llm.Event] {
	cp := cloneRequest(req)
	m.mu.Lock()
	n := m.next + 1 // 1-based call number
	m.next++
	m.requests = append(m.requests, cp)
	var call Call
	scripted := n <= len(m.calls)
	if scripted {
		call = m.calls[n-1]
	}
	total := len(m.calls)
	m.mu.Unlock()

	var fail error
	if !scripted {
		fail = fmt.Errorf("%w: call %d, but the script has %d call(s); request: %s", ErrUnexpectedCall, n, total, summarize(cp))
	} else if err := check(call, cp); err != nil {
		fail = fmt.Errorf("%w: call %d: %v; request: %s", ErrMismatch, n, err, summarize(cp))
	}
	if fail != nil {
		m.problem(fail)
	}

	var used sync.Mutex
	ranged := false
	return func(yield func(llm.Event) bool) {
		used.Lock()
		again := ranged
		ranged = true
		used.Unlock()
		if again {
			yield(errorEvent(&llm.Error{Code: llm.CodeInvalidRequest, Message: fmt.Sprintf("scripted: stream of call %d ranged twice", n)}))
			return
		}
		if err := ctx.Err(); err != nil {
			yield(errorEvent(llm.AsError(err)))
			return
		}
		if fail != nil {
			yield(errorEvent(&llm.Error{Code: llm.CodeInvalidRequest, Message: "scripted: " + fail.Error()}))
			return
		}
		play(ctx, n, call, cp, yield)
	}
}

// play streams one matched call.
func play(ctx context.Context, n int, call Call, req *llm.Request, yield func(llm.Event) bool) {
	canceled := func() bool {
		if err := ctx.Err(); err != nil {
			yield(errorEvent(llm.AsError(err)))
			return true
		}
		return false
	}
	if !wait(ctx, call.Delay) {
		canceled()
		return
	}
	reply := call.Reply
	if call.Respond != nil {
		reply = call.Respond(req)
	}
	deltas := reply.deltas(n)
	for i, d := range deltas {
		if !wait(ctx, reply.ChunkDelay) {
			canceled()
			return
		}
		if call.BeforeChunk != nil {
			call.BeforeChunk(ctx, i)
		}
		if canceled() {
			return
		}
		if !yield(llm.Event{Type: llm.EventDelta, Delta: d}) {
			return
		}
	}
	if call.BeforeChunk != nil {
		call.BeforeChunk(ctx, len(deltas))
	}
	if canceled() {
		return
	}
	if call.Hang {
		<-ctx.Done()
		canceled()
		return
	}
	if e := call.Err; e != nil {
		msg := e.Message
		if msg == "" {
			msg = "scripted error"
		}
		yield(errorEvent(&llm.Error{Code: e.Code, Message: msg, Status: e.Status, RetryAfter: e.RetryAfter}))
		return
	}
	finish := reply.Finish
	if finish == "" {
		finish = llm.FinishStop
		if len(reply.ToolCalls) > 0 {
			finish = llm.FinishToolCalls
		}
	}
	usage := estimate(req, reply)
	if reply.Usage != nil {
		usage = *reply.Usage
	}
	yield(llm.Event{Type: llm.EventDone, Finish: finish, Usage: usage})
}

func errorEvent(e *llm.Error) llm.Event { return llm.Event{Type: llm.EventError, Err: e} }

// wait sleeps d unless ctx is done first; it reports whether d elapsed.
func wait(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// deltas returns the reply's delta events in streaming order.
func (r Reply) deltas(n int) []llm.Delta {
	var out []llm.Delta
	for _, s := range r.Reasoning {
		out = append(out, llm.Delta{Reasoning: s})
	}
	if r.Signature != "" {
		out = append(out, llm.Delta{Signature: r.Signature})
	}
	for _, s := range r.Text {
		out = append(out, llm.Delta{Text: s})
	}
	for k, tc := range r.ToolCalls {
		id := tc.ID
		if id == "" {
			id = fmt.Sprintf("call_%d_%d", n, k)
		}
		for j, piece := range split(tc.Arguments, tc.Split) {
			d := &llm.ToolCallDelta{Index: k, Arguments: piece}
			if j == 0 {
				d.ID, d.Name = id, tc.Name
			}
			out = append(out, llm.Delta{ToolCall: d})
		}
	}
	return out
}

// split cuts s into at most n pieces of nearly equal rune counts, never
// inside a rune. It always returns at least one piece.
func split(s string, n int) []string {
	runes := utf8.RuneCountInString(s)
	n = min(n, runes)
	if n < 2 {
		return []string{s}
	}
	out := make([]string, 0, n)
	start, r := 0, 0 // byte offset of the current piece, runes seen
	next := 1        // index of the next boundary
	for off := range s {
		if r == next*runes/n && r > 0 {
			out = append(out, s[start:off])
			start = off
			next++
		}
		r++
	}
	return append(out, s[start:])
}

// estimate is the default usage described in the package comment.
func estimate(req *llm.Request, r Reply) llm.Usage {
	in := chars(req.System)
	for _, t := range req.Tools {
		in += chars(t.Name) + chars(t.Description) + utf8.RuneCount(t.Parameters)
	}
	for _, msg := range req.Messages {
		for _, p := range msg.Content {
			in += chars(p.Text) + chars(p.Data)
		}
		for _, tc := range msg.ToolCalls {
			in += chars(tc.Name) + chars(tc.Arguments)
		}
	}
	reasoning := 0
	for _, s := range r.Reasoning {
		reasoning += chars(s)
	}
	out := reasoning
	for _, s := range r.Text {
		out += chars(s)
	}
	for _, tc := range r.ToolCalls {
		out += chars(tc.Name) + chars(tc.Arguments)
	}
	return llm.Usage{Input: quarter(in), Output: quarter(out), Reasoning: quarter(reasoning)}
}

func chars(s string) int    { return utf8.RuneCountInString(s) }
func quarter(n int) int     { return (n + 3) / 4 }
func quote(s string) string { return fmt.Sprintf("%q", clip(s, 120)) }

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

func clip(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n]) + "…"
}

// check applies the call's expectations to req.
func check(c Call, req *llm.Request) error {
	if e := c.Expect; e != nil {
		if err := e.check(req); err != nil {
			return err
		}
	}
	if c.Match != nil {
		if err := c.Match(req); err != nil {
			return fmt.Errorf("match: %w", err)
		}
	}
	return nil
}

func (e *Expect) check(req *llm.Request) error {
	var errs []error
	if e.LastUser != "" {
		got, ok := lastUser(req)
		switch {
		case !ok:
			errs = append(errs, fmt.Errorf("expect.lastUser: want %s, the request has no user message", quote(e.LastUser)))
		case got != e.LastUser:
			errs = append(errs, fmt.Errorf("expect.lastUser: want %s, got %s", quote(e.LastUser), quote(got)))
		}
	}
	if len(e.Contains) > 0 {
		text := messagesText(req)
		for _, s := range e.Contains {
			if !strings.Contains(text, s) {
				errs = append(errs, fmt.Errorf("expect.contains: %s occurs in no message", quote(s)))
			}
		}
	}
	if e.Messages != nil && *e.Messages != len(req.Messages) {
		errs = append(errs, fmt.Errorf("expect.messages: want %d, got %d", *e.Messages, len(req.Messages)))
	}
	if e.Tools != nil {
		want := slices.Sorted(slices.Values(e.Tools))
		got := make([]string, 0, len(req.Tools))
		for _, t := range req.Tools {
			got = append(got, t.Name)
		}
		slices.Sort(got)
		if !slices.Equal(want, got) {
			errs = append(errs, fmt.Errorf("expect.tools: want %q, got %q", want, got))
		}
	}
	if e.System != "" && !strings.Contains(req.System, e.System) {
		errs = append(errs, fmt.Errorf("expect.system: %s does not occur in the system prompt %s", quote(e.System), quote(req.System)))
	}
	return errors.Join(errs...)
}

func lastUser(req *llm.Request) (string, bool) {
	for i := len(req.Messages) - 1; i >= 0; i-- {
		if req.Messages[i].Role == llm.RoleUser {
			return llm.PlainText(req.Messages[i].Content), true
		}
	}
	return "", false
}

// messagesText is the text Expect.Contains searches: each message's text
// parts and tool call arguments, one message per line.
func messagesText(req *llm.Request) string {
	var b strings.Builder
	for _, msg := range req.Messages {
		b.WriteString(llm.PlainText(msg.Content))
		for _, tc := range msg.ToolCalls {
			b.WriteString("\n")
			b.WriteString(tc.Arguments)
		}
		b.WriteString("\n")
	}
	return b.String()
}

// summarize describes a request briefly for failure messages.
func summarize(req *llm.Request) string {
	last := "none"
	if s, ok := lastUser(req); ok {
		last = quote(s)
	}
	return fmt.Sprintf("%d message%s, %d tool%s, last user message %s",
		len(req.Messages), plural(len(req.Messages)), len(req.Tools), plural(len(req.Tools)), last)
}

// cloneRequest deep-copies req; a nil req becomes an empty request.
func cloneRequest(req *llm.Request) *llm.Request {
	if req == nil {
		return &llm.Request{}
	}
	cp := *req
	if req.Tools != nil {
		cp.Tools = make([]llm.ToolSpec, len(req.Tools))
		for i, t := range req.Tools {
			t.Parameters = slices.Clone(t.Parameters)
			cp.Tools[i] = t
		}
	}
	if req.Messages != nil {
		cp.Messages = make([]llm.Message, len(req.Messages))
		for i, msg := range req.Messages {
			msg.Content = slices.Clone(msg.Content)
			msg.ToolCalls = slices.Clone(msg.ToolCalls)
			cp.Messages[i] = msg
		}
	}
	if p := req.Params.Temperature; p != nil {
		v := *p
		cp.Params.Temperature = &v
	}
	if p := req.Params.TopP; p != nil {
		v := *p
		cp.Params.TopP = &v
	}
	return &cp
}
