// Package retry is rein's default policy for retrying a failed model
// request: exponential backoff with jitter, honouring the provider's
// Retry-After, bounded attempts, never retrying a failure whose code is not
// retryable (auth, invalid-request, context-overflow, canceled), and always
// yielding to cancellation while waiting.
//
// A Policy is a value; Next is a pure function of its arguments and the
// Policy's random source. The package holds no state. It imports only llm
// and must not import an adapter or the agent.
package retry

import (
	"context"
	"math/rand/v2"
	"time"

	"github.com/reinhq/rein/llm"
)

// Policy decides whether and when to send a failed request again.
type Policy struct {
	// MaxRetries bounds the retries after the first attempt.
	MaxRetries int
	// Base is the wait before the first retry; each retry doubles it.
	Base time.Duration
	// Max caps the computed backoff.
	Max time.Duration
	// Jitter spreads each backoff uniformly by ±Jitter of itself (0.2 =
	// ±20%), so clients that failed together do not retry together.
	Jitter float64
	// MaxRetryAfter is the longest provider-requested wait the policy
	// accepts. A longer Retry-After gives up at once rather than hang the
	// session; 0 accepts any.
	MaxRetryAfter time.Duration
	// Rand returns a number in [0, 1). Nil uses math/rand/v2; tests inject
	// a fixed source for deterministic jitter.
	Rand func() float64
}

// Default returns the default policy: 5 retries, backoff 500ms doubling to
// at most 30s with ±20% jitter, a Retry-After of up to 2 minutes honoured.
func Default() Policy {
	return Policy{MaxRetries: 5, Base: 500 * time.Millisecond, Max: 30 * time.Second, Jitter: 0.2, MaxRetryAfter: 2 * time.Minute}
}

// Next decides after the attempt-th failed attempt (1 for the first
// request) whether to retry and how long to wait first. It does not retry
// a nil error, a code that is not llm.Code.Retryable, or past MaxRetries.
// A provider Retry-After replaces the computed backoff, without jitter,
// when it is longer; a Retry-After above MaxRetryAfter gives up.
func (p Policy) Next(attempt int, err *llm.Error) (wait time.Duration, retry bool) {
	if err == nil || !err.Code.Retryable() || attempt < 1 || attempt > p.MaxRetries {
		return 0, false
	}
	if p.MaxRetryAfter > 0 && err.RetryAfter > p.MaxRetryAfter {
		return 0, false
	}
	d := p.Base
	for i := 1; i < attempt && d < p.Max; i++ {
		d *= 2
	}
	if p.Max > 0 && d > p.Max {
		d = p.Max
	}
	if p.Jitter > 0 && d > 0 {
		r := p.Rand
		if r == nil {
			r = rand.Float64
		}
		d = time.Duration(float64(d) * (1 + p.Jitter*(2*r()-1)))
	}
	if err.RetryAfter > d {
		d = err.RetryAfter
	}
	return d, true
}

// Wait sleeps for d or until ctx is done, whichever comes first, and
// returns ctx.Err() in the second case. A cancelled ctx wins even when d
// is zero.
func Wait(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
