package llm_test

import (
	"context"
	"iter"
	"strings"
	"testing"
	"time"

	"github.com/reinhq/rein/llm"
)

// hanging streams one delta and then waits for its context.
type hanging struct{}

func (hanging) Name() string { return "hanging" }
func (hanging) Stream(ctx context.Context, _ *llm.Request) iter.Seq[llm.Event] {
	return func(yield func(llm.Event) bool) {
		if !yield(llm.Event{Type: llm.EventDelta, Delta: llm.Delta{Text: "a"}}) {
			return
		}
		<-ctx.Done()
		yield(llm.Event{Type: llm.EventError, Err: llm.AsError(ctx.Err())})
	}
}

func TestWithTimeoutCutsAStreamAndSaysWhy(t *testing.T) {
	p := llm.WithTimeout(hanging{}, 20*time.Millisecond)
	var last llm.Event
	n := 0
	for ev := range p.Stream(context.Background(), &llm.Request{}) {
		last, n = ev, n+1
	}
	if n != 2 || last.Type != llm.EventError || last.Err.Code != llm.CodeTimeout || !strings.Contains(last.Err.Message, "20ms") {
		t.Errorf("%d events, last %+v %v; want a delta then a timeout naming the bound", n, last, last.Err)
	}
	if u, ok := p.(interface{ Unwrap() llm.Provider }); !ok || u.Unwrap() != (hanging{}) {
		t.Errorf("Unwrap does not return the inner provider")
	}
}

func TestWithTimeoutLeavesTheCallersCancelAlone(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	p := llm.WithTimeout(hanging{}, time.Hour)
	var last llm.Event
	for ev := range p.Stream(ctx, &llm.Request{}) {
		if ev.Type == llm.EventDelta {
			cancel()
		}
		last = ev
	}
	if last.Err == nil || last.Err.Code != llm.CodeCanceled {
		t.Errorf("last event %+v, want canceled", last.Err)
	}
	if llm.WithTimeout(hanging{}, 0) != (hanging{}) {
		t.Errorf("a zero bound wraps the provider")
	}
}

func TestErrorSummary(t *testing.T) {
	for _, tc := range []struct {
		e    llm.Error
		want string
	}{
		{llm.Error{Code: llm.CodeRateLimit, Status: 429, Message: "slow down"}, "rate limited (429)"},
		{llm.Error{Code: llm.CodeNetwork, Message: "connection reset"}, "network error: connection reset"},
		{llm.Error{Code: llm.CodeTimeout}, "the request timed out"},
		{llm.Error{Code: llm.CodeAuth, Status: 401, Message: "bad key"}, "auth: bad key (401)"},
	} {
		if got := tc.e.Summary(); got != tc.want {
			t.Errorf("%+v: Summary() = %q, want %q", tc.e, got, tc.want)
		}
	}
}
