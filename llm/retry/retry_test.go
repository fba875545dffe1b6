package retry

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/reinhq/rein/llm"
)

func fixed(v float64) func() float64 { return func() float64 { return v } }

func TestBackoffAndBound(t *testing.T) {
	p := Default()
	p.Rand = fixed(0.5) // no jitter
	e := &llm.Error{Code: llm.CodeServer}
	want := []time.Duration{500 * time.Millisecond, time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second}
	for i, w := range want {
		got, ok := p.Next(i+1, e)
		if !ok || got != w {
			t.Errorf("attempt %d: %v %v, want %v true", i+1, got, ok, w)
		}
	}
	if _, ok := p.Next(6, e); ok {
		t.Error("retried past MaxRetries")
	}
	if _, ok := p.Next(0, e); ok {
		t.Error("attempt 0 retried")
	}
	p.MaxRetries = 20
	if got, _ := p.Next(15, e); got != 30*time.Second {
		t.Errorf("cap: %v, want 30s", got)
	}
}

func TestJitter(t *testing.T) {
	p := Default()
	e := &llm.Error{Code: llm.CodeNetwork}
	p.Rand = fixed(0)
	lo, _ := p.Next(2, e)
	p.Rand = fixed(0.999999)
	hi, _ := p.Next(2, e)
	if lo != 800*time.Millisecond || hi < 1199*time.Millisecond || hi > 1200*time.Millisecond {
		t.Fatalf("jitter range [%v, %v], want [800ms, 1.2s]", lo, hi)
	}
	// The default source stays within bounds.
	p.Rand = nil
	for range 100 {
		if d, _ := p.Next(1, e); d < 400*time.Millisecond || d > 600*time.Millisecond {
			t.Fatalf("default jitter out of range: %v", d)
		}
	}
}

func TestRetryAfter(t *testing.T) {
	p := Default()
	p.Rand = fixed(0.5)
	if d, ok := p.Next(1, &llm.Error{Code: llm.CodeRateLimit, RetryAfter: 7 * time.Second}); !ok || d != 7*time.Second {
		t.Errorf("Retry-After 7s: %v %v", d, ok)
	}
	// A shorter Retry-After does not shorten the backoff.
	if d, ok := p.Next(3, &llm.Error{Code: llm.CodeRateLimit, RetryAfter: time.Second}); !ok || d != 2*time.Second {
		t.Errorf("Retry-After 1s at attempt 3: %v %v", d, ok)
	}
	if _, ok := p.Next(1, &llm.Error{Code: llm.CodeRateLimit, RetryAfter: time.Hour}); ok {
		t.Error("a Retry-After of an hour was accepted")
	}
	p.MaxRetryAfter = 0
	if d, ok := p.Next(1, &llm.Error{Code: llm.CodeOverloaded, RetryAfter: time.Hour}); !ok || d != time.Hour {
		t.Errorf("unbounded Retry-After: %v %v", d, ok)
	}
}

func TestNeverRetried(t *testing.T) {
	p := Default()
	for _, c := range []llm.Code{llm.CodeAuth, llm.CodeInvalidRequest, llm.CodeContextOverflow, llm.CodeCanceled, llm.CodeUnknown} {
		if _, ok := p.Next(1, &llm.Error{Code: c, RetryAfter: time.Second}); ok {
			t.Errorf("%s retried", c)
		}
	}
	if _, ok := p.Next(1, nil); ok {
		t.Error("nil error retried")
	}
	for _, c := range []llm.Code{llm.CodeRateLimit, llm.CodeOverloaded, llm.CodeNetwork, llm.CodeTimeout, llm.CodeEmptyResponse, llm.CodeMalformedStream, llm.CodeServer} {
		if _, ok := p.Next(1, &llm.Error{Code: c}); !ok {
			t.Errorf("%s not retried", c)
		}
	}
}

func TestWaitYieldsToCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	go func() { time.Sleep(20 * time.Millisecond); cancel() }()
	start := time.Now()
	if err := Wait(ctx, time.Minute); !errors.Is(err, context.Canceled) || time.Since(start) > 5*time.Second {
		t.Fatalf("Wait = %v after %v", err, time.Since(start))
	}
	// Already cancelled: even a zero wait reports it.
	if err := Wait(ctx, 0); !errors.Is(err, context.Canceled) {
		t.Fatalf("Wait(cancelled, 0) = %v", err)
	}
	if err := Wait(context.Background(), time.Millisecond); err != nil {
		t.Fatal(err)
	}
}
