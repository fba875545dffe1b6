package storetest

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/reinhq/rein/llm"
	"github.com/reinhq/rein/session"
)

// epoch is the fixed clock of every fixture: golden logs are deterministic
// by construction.
var epoch = time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)

// builder writes valid logs through a session.Log, with a clock that
// advances one second per event.
type builder struct {
	t   testing.TB
	log *session.Log
	now time.Time
	// pending holds events not yet handed to a writer.
	pending []session.Event
}

func newBuilder(t testing.TB, h session.Header) *builder {
	return &builder{t: t, log: session.NewLog(h), now: epoch}
}

// resume continues a loaded log.
func resume(t testing.TB, l *session.Log) *builder {
	now := l.LastTime()
	if now.IsZero() {
		now = epoch
	}
	return &builder{t: t, log: l, now: now}
}

func (b *builder) add(p session.Payload) session.Event {
	b.t.Helper()
	b.now = b.now.Add(time.Second)
	ev, err := b.log.Append(b.now, p)
	if err != nil {
		b.t.Fatalf("fixture: append %s: %v", p.EventType(), err)
	}
	b.pending = append(b.pending, ev)
	return ev
}

// take returns the events added since the last take.
func (b *builder) take() []session.Event {
	evs := b.pending
	b.pending = nil
	return evs
}

func userMsg(id, text string) *session.UserMessage {
	return &session.UserMessage{ID: id, Content: llm.Text(text), Source: session.Source{Kind: session.SourceUser}}
}

func contextMsg(id, text, plugin string) *session.UserMessage {
	return &session.UserMessage{ID: id, Content: llm.Text(text), Source: session.Source{Kind: session.SourcePlugin, Name: plugin}}
}

// turn appends one complete turn: the prompt, one step with a streamed
// answer, turn/end. It returns the seq of the prompt and of the answer.
func (b *builder) turn(prompt, answer string) (u, a int64) {
	b.t.Helper()
	n, _ := b.log.Turn()
	n++
	id := fmt.Sprintf("m%d", b.log.Len())
	b.add(&session.TurnStart{Turn: n, Trigger: session.Trigger{Kind: session.TriggerSend, MessageID: id}})
	u = b.add(userMsg(id, prompt)).Seq
	a = b.step(n, 1, answer, nil)
	b.add(&session.StepEnd{Turn: n, Step: 1})
	b.add(&session.TurnEnd{Turn: n, Reason: session.Reason{Kind: session.ReasonCompleted}})
	return u, a
}

// step opens step s of turn n and streams answer (one chunk per piece
// between '|', the message holding them joined) and calls; it leaves the
// step open and returns the assistant/message's seq.
func (b *builder) step(n, s int, answer string, calls []llm.ToolCall) int64 {
	b.add(&session.StepStart{Turn: n, Step: s})
	if s == 1 {
		b.add(&session.RequestHeader{Turn: n, Step: s, Reason: session.HeaderInitial, Model: "scripted:demo", System: "You are terse.", Tools: []llm.ToolSpec{}})
	}
	var chunks []int64
	if answer != "" {
		for _, piece := range strings.Split(answer, "|") {
			chunks = append(chunks, b.add(&session.AssistantChunk{Turn: n, Step: s, Delta: llm.Delta{Text: piece}}).Seq)
		}
		answer = strings.ReplaceAll(answer, "|", "")
	}
	for i, c := range calls {
		chunks = append(chunks, b.add(&session.AssistantChunk{Turn: n, Step: s, Delta: llm.Delta{ToolCall: &llm.ToolCallDelta{Index: i, ID: c.ID, Name: c.Name, Arguments: c.Arguments}}}).Seq)
	}
	content := []llm.Part{}
	if answer != "" {
		content = llm.Text(answer)
	}
	finish := llm.FinishStop
	if len(calls) > 0 {
		finish = llm.FinishToolCalls
	}
	if calls == nil {
		calls = []llm.ToolCall{}
	}
	return b.add(&session.AssistantMessage{Turn: n, Step: s, Content: content, ToolCalls: calls, Finish: finish,
		Usage: llm.Usage{Input: 100, Output: 10}, ChunkSeqs: chunks}).Seq
}

// file renders the builder's log as a session file: the header line, then
// every event line.
func (b *builder) file() []byte {
	b.t.Helper()
	h, err := json.Marshal(b.log.Header())
	if err != nil {
		b.t.Fatal(err)
	}
	out := append(h, '\n')
	for _, ev := range b.log.Events(0) {
		out = ev.AppendLine(out)
	}
	return out
}
