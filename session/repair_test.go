package session

import (
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
	added, err := Repair(l)
	if err != nil {
		t.Fatal(err)
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
