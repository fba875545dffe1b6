package session

import (
	"bytes"
	"errors"
	"reflect"
	"slices"
	"testing"

	"github.com/reinhq/rein/llm"
)

// turns returns payloads of n completed one-step turns.
func turns(n int) []Payload {
	var ps []Payload
	for i := 1; i <= n; i++ {
		ps = append(ps, ts(i), um("u", "p"), ss(i, 1), am(i, 1, "ok"), se(i, 1), te(i))
	}
	return ps
}

func repaired(t *testing.T, l *Log) []Event {
	t.Helper()
	n, last := l.Len(), l.LastTime()
	streamed := validatorRepair(t, l)
	added, err := Repair(l)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := lineText(streamed), lineText(added); got != want {
		t.Fatalf("a Validator's repair:\n%s\nRepair on the log:\n%s", got, want)
	}
	if vs := Check(l.Events(0)); len(vs) != 0 {
		t.Fatalf("repaired log has violations: %v", vs)
	}
	for i, ev := range added {
		if ev.Seq != n+int64(i) || !ev.Time.Equal(last) {
			t.Fatalf("added event %d: seq %d time %v", i, ev.Seq, ev.Time)
		}
	}
	if _, open := l.Turn(); open {
		t.Fatal("turn still open")
	}
	if again, err := Repair(l); err != nil || len(again) != 0 {
		t.Fatalf("second Repair: %v, %v", again, err)
	}
	return added
}

// Scenario 21.
func TestRepairCrashInTurnAfterOutOfTurnContext(t *testing.T) {
	ps := append(turns(3), ctx("A", "c:A"), ts(4), um("P", "p"), ss(4, 1), am(4, 1, "", "k1", "k2"), tcall(4, 1, "k1"))
	l := newLog(t, ps...)
	aSeq := int64(len(turns(3)))
	added := repaired(t, l)
	if got, want := typesOf(added), []Type{TypeToolResult, TypeToolCall, TypeToolResult, TypeStepEnd, TypeTurnEnd}; !slices.Equal(got, want) {
		t.Fatalf("added %v, want %v", got, want)
	}
	r1, r2 := added[0].MustDecode().(*ToolResult), added[2].MustDecode().(*ToolResult)
	if r1.CallID != "k1" || r1.Code != CodeOutcomeUnknown || !r1.IsError || r1.Turn != 4 || r1.Step != 1 {
		t.Errorf("k1 result %+v", r1)
	}
	if r2.CallID != "k2" || r2.Code != CodeNotRun || !r2.IsError {
		t.Errorf("k2 result %+v", r2)
	}
	if llm.PlainText(r1.Content) == "" || llm.PlainText(r2.Content) == "" || llm.PlainText(r1.Content) == llm.PlainText(r2.Content) {
		t.Errorf("result texts %q, %q", llm.PlainText(r1.Content), llm.PlainText(r2.Content))
	}
	if e := added[4].MustDecode().(*TurnEnd); e.Turn != 4 || e.Reason.Kind != ReasonInterrupted {
		t.Errorf("turn/end %+v", e)
	}
	if s := added[3].MustDecode().(*StepEnd); s.Turn != 4 || s.Step != 1 {
		t.Errorf("step/end %+v", s)
	}
	// The not-run call gets a tool/call with the model's arguments before
	// its result, as the agent writes for a call a cancel settles.
	want := am(4, 1, "", "k1", "k2").ToolCalls[1]
	if c := added[1].MustDecode().(*ToolCall); c.CallID != "k2" || c.Turn != 4 || c.Step != 1 || c.Name != want.Name || c.Arguments != want.Arguments {
		t.Errorf("k2 tool/call %+v, want the call %+v", c, want)
	}
	if a := l.Event(aSeq).MustDecode().(*UserMessage); a.ID != "A" {
		t.Fatalf("c:A changed: %+v", a)
	}
	// The projection ends with the assistant's calls and both results.
	msgs := l.Messages()
	tail := msgs[len(msgs)-3:]
	if tail[0].Role != llm.RoleAssistant || tail[1].ToolCallID != "k1" || tail[2].ToolCallID != "k2" {
		t.Fatalf("projection tail %+v", tail)
	}
}

// Scenario 22 and 20 at the Log level: committed out-of-turn history.
func TestRepairOutOfTurnTail(t *testing.T) {
	l := newLog(t, append(turns(3), ctx("A", "c:A"), um("B", "b"))...)
	n := l.Len()
	if added := repaired(t, l); len(added) != 0 || l.Len() != n {
		t.Fatalf("added %v", typesOf(added))
	}
	if l2 := newLog(t); len(repaired(t, l2)) != 0 {
		t.Fatal("empty log repaired")
	}
}

func TestRepairInterruptedStream(t *testing.T) {
	ps := append(turns(1), ts(2), um("u", "p"), ss(2, 1), hdr(2, 1),
		chunk(2, 1, "lost attempt"),
		&HookResult{Point: "RequestError", Hook: "retry", Decision: "allow"},
		&AssistantChunk{Turn: 2, Step: 1, Delta: llm.Delta{Reasoning: "think"}},
		&AssistantChunk{Turn: 2, Step: 1, Delta: llm.Delta{Reasoning: "ing", Signature: "sig"}},
		chunk(2, 1, "Hello, "),
		&AssistantChunk{Turn: 2, Step: 1, Delta: llm.Delta{ToolCall: &llm.ToolCallDelta{Index: 0, ID: "k1", Name: "read", Arguments: `{"fi`}}},
		chunk(2, 1, "wor"),
	)
	l := newLog(t, ps...)
	first := int64(len(ps) - 5)
	added := repaired(t, l)
	if got, want := typesOf(added), []Type{TypeAssistantMessage, TypeStepEnd, TypeTurnEnd}; !slices.Equal(got, want) {
		t.Fatalf("added %v, want %v", got, want)
	}
	m := added[0].MustDecode().(*AssistantMessage)
	want := []llm.Part{{Type: llm.PartReasoning, Text: "thinking", Signature: "sig"}, {Type: llm.PartText, Text: "Hello, wor"}}
	if !m.Interrupted || len(m.ToolCalls) != 0 || !slices.Equal(m.Content, want) || m.Turn != 2 || m.Step != 1 {
		t.Fatalf("message %+v", m)
	}
	if !slices.Equal(m.ChunkSeqs, []int64{first, first + 1, first + 2, first + 3, first + 4}) {
		t.Fatalf("chunkSeqs %v (first %d)", m.ChunkSeqs, first)
	}
	msgs := l.Messages()
	if last := msgs[len(msgs)-1]; last.Role != llm.RoleAssistant || llm.PlainText(last.Content) != "Hello, wor" {
		t.Fatalf("projection ends with %+v", last)
	}
}

func TestRepairOpenStepWithoutOutput(t *testing.T) {
	l := newLog(t, ts(1), um("u", "p"), ss(1, 1), hdr(1, 1))
	if got := typesOf(repaired(t, l)); !slices.Equal(got, []Type{TypeStepEnd, TypeTurnEnd}) {
		t.Fatalf("added %v", got)
	}
	l = newLog(t, ts(1), um("u", "p"))
	if got := typesOf(repaired(t, l)); !slices.Equal(got, []Type{TypeTurnEnd}) {
		t.Fatalf("added %v", got)
	}
}

func TestRepairOpenCompaction(t *testing.T) {
	one := 1
	// Started between steps: closed before turn/end (no step open).
	l := newLog(t, ts(1), um("u", "p"), ss(1, 1), am(1, 1, "a"), se(1, 1), cstart(&one, "c1"))
	added := repaired(t, l)
	if got := typesOf(added); !slices.Equal(got, []Type{TypeCompactionEnd, TypeTurnEnd}) {
		t.Fatalf("added %v", got)
	}
	if e := added[0].MustDecode().(*CompactionEnd); e.ID != "c1" || e.Error != "interrupted" || e.Turn == nil || *e.Turn != 1 || e.Reason != CompactManual {
		t.Fatalf("compaction/end %+v", e)
	}
	// Started inside the open step: closed before step/end.
	l = newLog(t, ts(1), um("u", "p"), ss(1, 1), cstart(&one, "c1"))
	if got := typesOf(repaired(t, l)); !slices.Equal(got, []Type{TypeCompactionEnd, TypeStepEnd, TypeTurnEnd}) {
		t.Fatalf("added %v", got)
	}
	// Started before the open step: step/end first.
	l = newLog(t, ts(1), um("u", "p"), cstart(&one, "c1"), ss(1, 1))
	if got := typesOf(repaired(t, l)); !slices.Equal(got, []Type{TypeStepEnd, TypeCompactionEnd, TypeTurnEnd}) {
		t.Fatalf("added %v", got)
	}
	// Between turns: only the pair is closed, so a turn can start again.
	l = newLog(t, append(turns(1), ctx("A", "a"), cstart(nil, "c2"))...)
	added = repaired(t, l)
	if got := typesOf(added); !slices.Equal(got, []Type{TypeCompactionEnd}) {
		t.Fatalf("added %v", got)
	}
	if e := added[0].MustDecode().(*CompactionEnd); e.Turn != nil || e.ID != "c2" {
		t.Fatalf("compaction/end %+v", e)
	}
	mustAppend(t, l, ts(2))
}

// validatorRepair validates l's lines with a Validator that visits every
// event, keeps the visited events from RepairFrom on, and returns what
// its Repair adds: it must be what Repair adds to l.
func validatorRepair(t *testing.T, l *Log) []Event {
	t.Helper()
	v := NewValidator(l.Header())
	var seen, tail []Event
	v.Visit(func(ev Event, _ Payload) error {
		seen = append(seen, Event{Seq: ev.Seq, Type: ev.Type, Time: ev.Time, Ignorable: ev.Ignorable, Data: slices.Clone(ev.Data)})
		return nil
	}, true)
	if err := v.AppendLines([]byte(lineText(l.Events(0)))); err != nil {
		t.Fatal(err)
	}
	if got, want := lineText(seen), lineText(l.Events(0)); got != want {
		t.Fatalf("visited:\n%s\nwant:\n%s", got, want)
	}
	if from := v.RepairFrom(); from >= 0 {
		tail = seen[from:]
	}
	added, err := v.Repair(tail)
	if err != nil {
		t.Fatal(err)
	}
	return added
}

func lineText(evs []Event) string {
	var b []byte
	for _, ev := range evs {
		b = ev.AppendLine(b)
	}
	return string(b)
}

// TestValidatorVisit: Visit hands on every event validated, in order, or
// every one but the chunks; the function's error stops AppendLines as it
// is; a line that fails validation is never visited.
func TestValidatorVisit(t *testing.T) {
	ps := append(turns(2), ts(3), um("u", "p"), ss(3, 1), chunk(3, 1, "a"), chunk(3, 1, "b"), am(3, 1, "ab"), se(3, 1), te(3))
	l := newLog(t, ps...)
	lines := []byte(lineText(l.Events(0)))
	var types []Type
	v := NewValidator(l.Header())
	v.Visit(func(ev Event, p Payload) error {
		types = append(types, ev.Type)
		if want := ev.MustDecode(); ev.Type != TypeRequestHeader && !reflect.DeepEqual(p, want) {
			t.Errorf("seq %d: payload %#v, want %#v", ev.Seq, p, want)
		}
		return nil
	}, false)
	if err := v.AppendLines(lines); err != nil {
		t.Fatal(err)
	}
	want := slices.DeleteFunc(typesOf(l.Events(0)), func(t Type) bool { return t == TypeAssistantChunk })
	if !slices.Equal(types, want) {
		t.Fatalf("visited %v, want %v", types, want)
	}
	stop := errors.New("stop")
	v = NewValidator(l.Header())
	n := 0
	v.Visit(func(Event, Payload) error {
		if n++; n == 3 {
			return stop
		}
		return nil
	}, true)
	if err := v.AppendLines(lines); err != stop {
		t.Fatalf("AppendLines: %v, want the visitor's error", err)
	}
	// A broken line: the events before it are visited, it is not.
	bad := bytes.Replace(lines, []byte(`"turn":3`), []byte(`"turn":9`), 1)
	v = NewValidator(l.Header())
	n = 0
	v.Visit(func(Event, Payload) error { n++; return nil }, true)
	err := v.AppendLines(bad)
	var le *LineError
	if !errors.As(err, &le) || int64(n) != le.Seq || n != le.Line {
		t.Fatalf("AppendLines: %v after %d events", err, n)
	}
	// Repair needs the events of the open turn.
	crashed := newLog(t, append(turns(1), ts(2), um("u", "p"))...)
	v = NewValidator(crashed.Header())
	if err := v.AppendLines([]byte(lineText(crashed.Events(0)))); err != nil {
		t.Fatal(err)
	}
	if from := v.RepairFrom(); from != int64(len(turns(1))) {
		t.Fatalf("RepairFrom %d, want the open turn's start %d", from, len(turns(1)))
	}
	if vr, err := v.Repair(crashed.Events(v.RepairFrom() + 1)); err == nil || vr != nil {
		t.Fatalf("Repair without the open turn's start: %v, %v", vr, err)
	}
}
