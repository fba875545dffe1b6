package session

import (
	"errors"
	"testing"
	"time"

	"github.com/reinhq/rein/llm"
)

var t0 = time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)

// Payload shorthands.

func ts(n int) *TurnStart { return &TurnStart{Turn: n, Trigger: Trigger{Kind: TriggerSend}} }
func te(n int) *TurnEnd   { return &TurnEnd{Turn: n, Reason: Reason{Kind: ReasonCompleted}} }
func ss(t, s int) *StepStart {
	return &StepStart{Turn: t, Step: s}
}
func se(t, s int) *StepEnd { return &StepEnd{Turn: t, Step: s} }

func um(id, text string) *UserMessage {
	return &UserMessage{ID: id, Content: llm.Text(text), Source: Source{Kind: SourceUser}}
}

func ctx(id, text string) *UserMessage {
	return &UserMessage{ID: id, Content: llm.Text(text), Source: Source{Kind: SourcePlugin, Name: "test"}}
}

func steer(turn int, id, text string) *SteeringMessage {
	return &SteeringMessage{Turn: turn, ID: id, Content: llm.Text(text), Source: Source{Kind: SourceUser}}
}

func summary(text string, seqs ...int64) *UserMessage {
	m := &UserMessage{ID: "sum-" + text, Content: llm.Text(text), Source: Source{Kind: SourceSystem, Name: "compaction"}}
	m.Replaces = &Replaces{Seqs: seqs}
	if len(seqs) > 0 {
		m.Replaces.Start, m.Replaces.End = seqs[0], seqs[len(seqs)-1]
	}
	return m
}

// am is an assistant/message with text (may be "") and tool calls ids.
func am(turn, step int, text string, ids ...string) *AssistantMessage {
	m := &AssistantMessage{Turn: turn, Step: step, Content: []llm.Part{}, ToolCalls: []llm.ToolCall{}, Finish: llm.FinishStop}
	if text != "" {
		m.Content = llm.Text(text)
	}
	for _, id := range ids {
		m.ToolCalls = append(m.ToolCalls, llm.ToolCall{ID: id, Name: "read", Arguments: `{"file_path":"x"}`})
	}
	if len(ids) > 0 {
		m.Finish = llm.FinishToolCalls
	}
	return m
}

func chunk(turn, step int, text string) *AssistantChunk {
	return &AssistantChunk{Turn: turn, Step: step, Delta: llm.Delta{Text: text}}
}

func tcall(turn, step int, id string) *ToolCall {
	return &ToolCall{Turn: turn, Step: step, CallID: id, Name: "read", Arguments: `{"file_path":"x"}`}
}

func tappr(turn, step int, id string) *ToolApproval {
	return &ToolApproval{Turn: turn, Step: step, CallID: id, Decision: "allow", By: "user"}
}

func tres(turn, step int, id string) *ToolResult {
	return &ToolResult{Turn: turn, Step: step, CallID: id, Content: llm.Text("result " + id)}
}

func hdr(turn, step int) *RequestHeader {
	return &RequestHeader{Turn: turn, Step: step, Reason: HeaderInitial, Model: "scripted:test", System: "sys", Tools: []llm.ToolSpec{}}
}

func ip(n int) *int { return &n }

func cstart(turn *int, id string) *CompactionStart {
	return &CompactionStart{Turn: turn, ID: id, Reason: CompactManual}
}
func cend(turn *int, id string) *CompactionEnd {
	return &CompactionEnd{Turn: turn, ID: id, Reason: CompactManual}
}

// events encodes ps as events 0.. one millisecond apart.
func events(t testing.TB, ps ...Payload) []Event {
	t.Helper()
	evs := make([]Event, len(ps))
	for i, p := range ps {
		ev, err := NewEvent(int64(i), t0.Add(time.Duration(i)*time.Millisecond), p)
		if err != nil {
			t.Fatal(err)
		}
		evs[i] = ev
	}
	return evs
}

// newLog returns a log holding ps, failing the test if any is refused.
func newLog(t testing.TB, ps ...Payload) *Log {
	t.Helper()
	l := NewLog(Header{ID: "s1", CreatedAt: t0, Version: Version})
	for _, p := range ps {
		mustAppend(t, l, p)
	}
	return l
}

func mustAppend(t testing.TB, l *Log, p Payload) Event {
	t.Helper()
	ev, err := l.Append(l.LastTime().Add(time.Millisecond), p)
	if err != nil {
		t.Fatalf("append %s at seq %d: %v", p.EventType(), l.Len(), err)
	}
	return ev
}

// rules returns the rule names of err's violations.
func rules(err error) []string {
	var ie *InvariantError
	if !errors.As(err, &ie) {
		return nil
	}
	var out []string
	for _, v := range ie.Violations {
		out = append(out, v.Rule)
	}
	return out
}

func vrules(vs []Violation) []string {
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = v.Rule
	}
	return out
}

// typesOf returns the types of evs.
func typesOf(evs []Event) []Type {
	out := make([]Type, len(evs))
	for i, e := range evs {
		out[i] = e.Type
	}
	return out
}
