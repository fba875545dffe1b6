package main

import (
	"fmt"
	"strconv"
	"time"

	"github.com/reinhq/rein/agent"
	"github.com/reinhq/rein/llm"
	"github.com/reinhq/rein/llm/retry"
)

// retryHook retries failed model requests inside their step as policy
// says, and says so on stderr in every output mode: one line per retry
// (unless quiet), and why it stops retrying a failure that could have been
// retried.
func (a *app) retryHook(policy retry.Policy, quiet bool) agent.Hook[agent.RequestErrorInfo, agent.Retry] {
	return agent.RetryWith(func(attempt int, e *llm.Error) (time.Duration, bool) {
		wait, ok := policy.Next(attempt, e)
		switch {
		case ok:
			a.log.Debug("model request failed; retrying", "code", e.Code, "attempt", attempt, "wait", wait)
			if !quiet {
				fmt.Fprintf(a.stderr, "rein: %s; retry %d/%d in %s\n", e.Summary(), attempt, policy.MaxRetries, seconds(wait))
			}
		case !e.Code.Retryable():
		case policy.MaxRetryAfter > 0 && e.RetryAfter > policy.MaxRetryAfter && attempt <= policy.MaxRetries:
			fmt.Fprintf(a.stderr, "rein: %s; the provider asks to wait %s, longer than rein waits (%s): not retrying\n",
				e.Summary(), seconds(e.RetryAfter), seconds(policy.MaxRetryAfter))
		case attempt > policy.MaxRetries:
			fmt.Fprintf(a.stderr, "rein: %s; giving up after %d retries\n", e.Summary(), policy.MaxRetries)
		}
		return wait, ok
	})
}

// seconds formats d for a person: "0.5 s", "7 s", "120 s".
func seconds(d time.Duration) string {
	if d < 10*time.Second {
		return strconv.FormatFloat(d.Seconds(), 'f', 1, 64) + " s"
	}
	return strconv.Itoa(int(d.Round(time.Second).Seconds())) + " s"
}
