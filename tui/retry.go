package tui

import (
	"errors"
	"fmt"
	"time"

	"github.com/reinhq/rein/agent"
	"github.com/reinhq/rein/llm"
	"github.com/reinhq/rein/session"
	"github.com/reinhq/rein/transcript"
)

// retry is a failed model request the agent sends again (agent/retry).
type retry struct {
	what    string    // why the attempt failed, for a person
	at      time.Time // when the next attempt starts
	attempt int       // the next attempt's number, from 2
}

func newRetry(l agent.Live, now time.Time) *retry {
	what := "the model request failed"
	var e *llm.Error
	if errors.As(l.Err, &e) {
		what = e.Summary()
	}
	return &retry{what: what, at: now.Add(l.Wait), attempt: l.Attempt + 1}
}

// text is the status line's notice: "rate limited, retrying in 7 s
// (attempt 2)".
func (r *retry) text(now time.Time) string {
	left := r.at.Sub(now)
	if left <= 0 {
		return fmt.Sprintf("%s, retrying (attempt %d)", r.what, r.attempt)
	}
	return fmt.Sprintf("%s, retrying in %d s (attempt %d)", r.what, int((left+time.Second-1)/time.Second), r.attempt)
}

// retried forgets what the failed attempt streamed: the chunks of the
// open step from seq on belong to the next attempt (the agent says where
// it starts), and are streamed again from the log if the follower already
// delivered them.
func (c *conv) retried(seq int64) {
	c.retryFrom = seq
	b := c.open
	if b == nil || len(b.stream) == 0 {
		return
	}
	for _, it := range b.stream {
		it.text.Reset()
		it.lines = nil
	}
	b.lines = nil
	if seq >= c.end {
		return
	}
	for _, ev := range c.log.Range(seq, c.end) {
		if ev.Type != session.TypeAssistantChunk {
			continue
		}
		p, err := ev.Decode()
		ch, ok := p.(*session.AssistantChunk)
		if err != nil || !ok {
			continue
		}
		if it := b.stream[streamKind(ch.Delta)]; it != nil {
			it.text.WriteString(ch.Delta.Text + ch.Delta.Reasoning)
		}
	}
}

func streamKind(d llm.Delta) transcript.Kind {
	if d.Reasoning != "" {
		return transcript.ReasoningDelta
	}
	return transcript.AssistantDelta
}
