package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/reinhq/rein/agent"
	"github.com/reinhq/rein/llm"
	"github.com/reinhq/rein/session"
)

// feed appends payloads to a log and hands each event to o as accepted;
// a nil payload is a retry whose failed attempt ends here.
func feed(t *testing.T, o *printer, ps ...session.Payload) {
	t.Helper()
	log := session.NewLog(session.Header{ID: "s", Version: session.Version})
	now := time.Unix(0, 0)
	for _, p := range ps {
		if p == nil {
			o.live(agent.Live{Type: agent.LiveRetry, Turn: 1, Step: 1, Attempt: 1, Seq: log.Len(), Err: &llm.Error{Code: llm.CodeNetwork}})
			continue
		}
		ev, err := log.Append(now, p)
		if err != nil {
			t.Fatal(err)
		}
		o.accepted(ev)
	}
}

func retriedTurn() []session.Payload {
	return []session.Payload{
		&session.TurnStart{Turn: 1, Trigger: session.Trigger{Kind: session.TriggerSend, MessageID: "p"}},
		&session.UserMessage{ID: "p", Content: llm.Text("hi"), Source: session.Source{Kind: session.SourceUser}},
		&session.StepStart{Turn: 1, Step: 1},
		&session.AssistantChunk{Turn: 1, Step: 1, Delta: llm.Delta{Text: "partia"}},
		nil, // the stream broke; the step retries
		&session.AssistantChunk{Turn: 1, Step: 1, Delta: llm.Delta{Text: "recovered"}},
		&session.AssistantMessage{Turn: 1, Step: 1, Content: llm.Text("recovered"), ToolCalls: []llm.ToolCall{}, Finish: llm.FinishStop, ChunkSeqs: []int64{4}},
		&session.StepEnd{Turn: 1, Step: 1},
		&session.TurnEnd{Turn: 1, Reason: session.Reason{Kind: session.ReasonCompleted}},
	}
}

func TestTextStreamedToATerminalMarksADiscardedAttempt(t *testing.T) {
	var stdout, stderr bytes.Buffer
	o := newPrinter(outText, &stdout, &stderr, true, false, nil)
	o.expect("p", nil)
	feed(t, o, retriedTurn()...)
	close(o.closed)
	res, ok := o.finish()
	if got := stdout.String(); got != "partia\nrecovered\n" {
		t.Errorf("stdout %q: want the cut attempt on a line of its own, then the answer", got)
	}
	if !strings.Contains(stderr.String(), "the answer above was cut off") {
		t.Errorf("stderr %q does not say the text above was discarded", stderr.String())
	}
	if !ok || res.Text != "recovered" || res.Outcome != session.ReasonCompleted {
		t.Errorf("result %+v: want the final attempt's text only", res)
	}
}

func TestTextNotStreamedCarriesOnlyTheFinalAttempt(t *testing.T) {
	var stdout, stderr bytes.Buffer
	o := newPrinter(outText, &stdout, &stderr, false, false, nil)
	o.expect("p", nil)
	feed(t, o, retriedTurn()...)
	close(o.closed)
	o.finish()
	if got := stdout.String(); got != "recovered\n" {
		t.Errorf("stdout %q, want only the final attempt", got)
	}
	if stderr.Len() != 0 {
		t.Errorf("stderr %q: nothing was discarded from stdout", stderr.String())
	}
}

func TestRetryMarkerWaitsForTheFailedAttempt(t *testing.T) {
	var stdout bytes.Buffer
	o := newPrinter(outStreamJSON, &stdout, &bytes.Buffer{}, false, false, nil)
	// The retry is announced before the accepted stream has delivered the
	// failed attempt's chunk: its line must still come after that chunk's.
	o.live(agent.Live{Type: agent.LiveRetry, Turn: 1, Step: 1, Attempt: 1, Seq: 4, Err: &llm.Error{Code: llm.CodeNetwork}})
	ps := retriedTurn()
	feed(t, o, append(ps[:4:4], ps[5:]...)...)
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	if len(lines) != 3 || !strings.Contains(lines[0], `"text":"partia"`) || !strings.Contains(lines[1], `"type":"agent/retry"`) || !strings.Contains(lines[2], `"text":"recovered"`) {
		t.Errorf("lines:\n%s\nwant the failed delta, the retry marker, the next delta", stdout.String())
	}
}
