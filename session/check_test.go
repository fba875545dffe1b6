package session

import (
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/reinhq/rein/llm"
)

// validLog exercises every event type in a valid arrangement.
func validLog() []Payload {
	one := 1
	return []Payload{
		&SessionTitle{Title: "t"}, // 0
		&HookResult{Point: "SessionStart", Hook: "h", Decision: "allow"}, // 1
		ctx("c0", "CI is red"), // 2 out-of-turn
		ts(1),                  // 3
		um("u1", "why?"),       // 4
		ss(1, 1),               // 5
		hdr(1, 1),              // 6
		chunk(1, 1, "look"),    // 7
		&AssistantMessage{Turn: 1, Step: 1, Content: llm.Text("look"), ToolCalls: []llm.ToolCall{{ID: "k1", Name: "read"}, {ID: "k2", Name: "read"}}, Finish: llm.FinishToolCalls, ChunkSeqs: []int64{7}}, // 8
		tappr(1, 1, "k1"),                  // 9
		tcall(1, 1, "k1"),                  // 10
		tcall(1, 1, "k2"),                  // 11
		tres(1, 1, "k2"),                   // 12 results may come in any order
		tres(1, 1, "k1"),                   // 13
		ctx("c1", "drained"),               // 14 in turn, batch answered
		se(1, 1),                           // 15
		cstart(&one, "c_1"),                // 16 compaction in a turn
		summary("S1", 2, 4, 8, 12, 13, 14), // 17: c0, u1, a(k1,k2), results, c1
		cend(&one, "c_1"),                  // 18
		ss(1, 2),                           // 19
		am(1, 2, ""),                       // 20 empty assistant message
		steer(1, "s1", "also this"),        // 21
		se(1, 2),                           // 22
		ss(1, 3),                           // 23
		&AssistantMessage{Turn: 1, Step: 3, Content: llm.Text("cut"), ToolCalls: []llm.ToolCall{}, Finish: llm.FinishMaxTokens}, // 24
		se(1, 3), // 25
		&HookResult{Turn: &one, Point: "Stop", Hook: "h", Decision: "pass"}, // 26
		&TurnEnd{Turn: 1, Reason: Reason{Kind: ReasonMaxTokens}},            // 27
		um("u2", "between turns"),                                           // 28 out-of-turn user message
		&SessionTitle{Title: "t2"},                                          // 29
		cstart(nil, "c_2"),                                                  // 30 between turns
		ctx("c2", "lands during compaction"),                                // 31
		summary("S2", 17, 20, 21, 24, 28),                                   // 32 shadows the first summary
		cend(nil, "c_2"),                                                    // 33
		ts(2),                                                               // 34
		ss(2, 1),                                                            // 35 steps restart at 1
		am(2, 1, "done"),                                                    // 36
		se(2, 1),                                                            // 37
		&TurnEnd{Turn: 2, Reason: Reason{Kind: ReasonAborted, Cause: CauseUser}}, // 38
		ctx("c3", "idle inject"),                                  // 39
		&TurnStart{Turn: 3, Trigger: Trigger{Kind: TriggerSteer}}, // 40
		steer(3, "s2", "steer"),                                   // 41
		te(3),                                                     // 42
		&CompactionStart{ID: "c_3", Reason: CompactPressure},                      // 43
		&CompactionEnd{ID: "c_3", Reason: CompactPressure, Error: "model failed"}, // 44
	}
}

func TestCheckValidLog(t *testing.T) {
	evs := events(t, validLog()...)
	// An unknown ignorable type may appear anywhere.
	evs = append(evs, Event{Seq: int64(len(evs)), Type: "future/thing", Time: evs[len(evs)-1].Time, Ignorable: true, Data: json.RawMessage(`{"x":1}`)})
	if vs := Check(evs); len(vs) != 0 {
		t.Fatalf("valid log has violations: %v", vs)
	}
	l := newLog(t)
	for _, ev := range evs {
		if err := l.AppendEvent(ev); err != nil {
			t.Fatalf("AppendEvent seq %d: %v", ev.Seq, err)
		}
	}
	if l.Title() != "t2" {
		t.Errorf("title %q", l.Title())
	}
	if turn, open := l.Turn(); turn != 3 || open {
		t.Errorf("Turn() = %d, %v", turn, open)
	}
	// Projection: S2, c2, then turn 2's "done", c3, s2.
	var got []string
	for _, m := range l.Messages() {
		got = append(got, string(m.Role)+":"+llm.PlainText(m.Content))
	}
	want := []string{"user:S2", "user:lands during compaction", "assistant:done", "user:idle inject", "user:steer"}
	if !slices.Equal(got, want) {
		t.Errorf("projection %q, want %q", got, want)
	}
}

type ruleCase struct {
	name string
	ps   []Payload // all but the last are valid; the last breaks rule
	rule string
}

func ruleCases() []ruleCase {
	one := 1
	batch := []Payload{ts(1), um("u", "p"), ss(1, 1), am(1, 1, "", "k1", "k2")} // seqs 0..3
	with := func(prefix []Payload, ps ...Payload) []Payload {
		return append(slices.Clip(prefix), ps...)
	}
	inStep := []Payload{ts(1), ss(1, 1)}
	return []ruleCase{
		{"turn/start in a turn", []Payload{ts(1), ts(2)}, RuleTurnOpen},
		{"turn/end with no turn", []Payload{te(1)}, RuleTurnOpen},
		{"turn/end twice", []Payload{ts(1), te(1), te(1)}, RuleTurnOpen},
		{"first turn is not 1", []Payload{ts(2)}, RuleTurnNumber},
		{"turn skipped", []Payload{ts(1), te(1), ts(3)}, RuleTurnNumber},
		{"turn/end wrong number", []Payload{ts(1), te(2)}, RuleTurnNumber},
		{"steering wrong turn", []Payload{ts(1), steer(2, "s", "x")}, RuleTurnNumber},
		{"tool/result wrong turn", with(batch, tres(2, 1, "k1")), RuleTurnNumber},
		{"step/start in a step", []Payload{ts(1), ss(1, 1), ss(1, 2)}, RuleStepNesting},
		{"step/end with no step", []Payload{ts(1), se(1, 1)}, RuleStepNesting},
		{"turn/end in a step", []Payload{ts(1), ss(1, 1), te(1)}, RuleStepNesting},
		{"first step is not 1", []Payload{ts(1), ss(1, 2)}, RuleStepNumber},
		{"step skipped", []Payload{ts(1), ss(1, 1), se(1, 1), ss(1, 3)}, RuleStepNumber},
		{"steps do not restart", []Payload{ts(1), ss(1, 1), se(1, 1), te(1), ts(2), ss(2, 2)}, RuleStepNumber},
		{"step/end wrong step", []Payload{ts(1), ss(1, 1), se(1, 2)}, RuleStepNumber},
		{"request/header wrong step", []Payload{ts(1), ss(1, 1), hdr(1, 2)}, RuleStepNumber},
		{"chunk wrong step", []Payload{ts(1), ss(1, 1), chunk(1, 2, "x")}, RuleStepNumber},
		{"step/start between turns", []Payload{ss(1, 1)}, RuleOutsideTurn},
		{"steering between turns", []Payload{ts(1), te(1), steer(1, "s", "x")}, RuleOutsideTurn},
		{"request/header between turns", []Payload{hdr(1, 1)}, RuleOutsideTurn},
		{"chunk between turns", []Payload{chunk(1, 1, "x")}, RuleOutsideTurn},
		{"assistant between turns", []Payload{ts(1), te(1), am(1, 1, "x")}, RuleOutsideTurn},
		{"tool/call between turns", []Payload{tcall(1, 1, "k")}, RuleOutsideTurn},
		{"tool/result between turns", []Payload{tres(1, 1, "k")}, RuleOutsideTurn},
		{"request/header outside step", []Payload{ts(1), hdr(1, 1)}, RuleOutsideStep},
		{"assistant outside step", []Payload{ts(1), am(1, 1, "x")}, RuleOutsideStep},
		{"chunk outside step", []Payload{ts(1), ss(1, 1), se(1, 1), chunk(1, 1, "x")}, RuleOutsideStep},
		{"tool/approval outside step", []Payload{ts(1), tappr(1, 1, "k")}, RuleOutsideStep},
		{"two assistant messages", with(inStep, am(1, 1, "a"), am(1, 1, "b")), RuleAssistantOnce},
		{"chunk after assistant", with(inStep, am(1, 1, "a"), chunk(1, 1, "b")), RuleAssistantOnce},
		{"chunkSeqs cite a non-chunk", with(inStep, chunk(1, 1, "a"), &AssistantMessage{Turn: 1, Step: 1, ChunkSeqs: []int64{1, 2}}), RuleChunkSeqs},
		{"chunkSeqs cite another step", []Payload{ts(1), ss(1, 1), chunk(1, 1, "a"), am(1, 1, "a"), se(1, 1), ss(1, 2), &AssistantMessage{Turn: 1, Step: 2, ChunkSeqs: []int64{2}}}, RuleChunkSeqs},
		{"chunkSeqs descending", with(inStep, chunk(1, 1, "a"), chunk(1, 1, "b"), &AssistantMessage{Turn: 1, Step: 1, ChunkSeqs: []int64{3, 2}}), RuleChunkSeqs},
		{"max-tokens with calls", with(inStep, &AssistantMessage{Turn: 1, Step: 1, ToolCalls: []llm.ToolCall{{ID: "k"}}, Finish: llm.FinishMaxTokens}), RuleMaxTokens},
		{"duplicate call id", with(inStep, am(1, 1, "", "k", "k")), RuleToolID},
		{"empty call id", with(inStep, am(1, 1, "", "")), RuleToolID},
		{"user/message inside a batch", with(batch, tres(1, 1, "k1"), ctx("c", "x")), RuleToolAdjacency},
		{"user/message right after the calls", with(batch, um("u2", "x")), RuleToolAdjacency},
		{"steering inside a batch", with(batch, tcall(1, 1, "k1"), steer(1, "s", "x")), RuleToolAdjacency},
		{"result for an unknown id", with(batch, tres(1, 1, "k9")), RuleUnknownCall},
		{"tool/call for an unknown id", with(batch, tcall(1, 1, "k9")), RuleUnknownCall},
		{"approval for an unknown id", with(batch, tappr(1, 1, "k9")), RuleUnknownCall},
		{"result before any assistant message", with(inStep, tres(1, 1, "k1")), RuleUnknownCall},
		{"result for the previous step's call", with(batch, tres(1, 1, "k1"), tres(1, 1, "k2"), se(1, 1), ss(1, 2), tres(1, 2, "k1")), RuleUnknownCall},
		{"tool/call after its result", with(batch, tres(1, 1, "k1"), tcall(1, 1, "k1")), RuleToolOrder},
		{"tool/call twice", with(batch, tcall(1, 1, "k1"), tcall(1, 1, "k1")), RuleToolOrder},
		{"result twice", with(batch, tres(1, 1, "k1"), tres(1, 1, "k1")), RuleToolOrder},
		{"approval after result", with(batch, tres(1, 1, "k1"), tappr(1, 1, "k1")), RuleToolOrder},
		{"step/end with a call unanswered", with(batch, tres(1, 1, "k1"), se(1, 1)), RuleUnanswered},
		{"compaction nested", []Payload{cstart(nil, "a"), cstart(nil, "b")}, RuleCompaction},
		{"compaction/end with none open", []Payload{cend(nil, "a")}, RuleCompaction},
		{"compaction/end other id", []Payload{cstart(nil, "a"), cend(nil, "b")}, RuleCompaction},
		{"turn/start in a between-turn compaction", []Payload{cstart(nil, "a"), ts(1)}, RuleCompaction},
		{"turn/end in a compaction", []Payload{ts(1), cstart(&one, "a"), te(1)}, RuleCompaction},
		{"compaction null turn in a turn", []Payload{ts(1), cstart(nil, "a")}, RuleCompaction},
		{"compaction with a turn between turns", []Payload{cstart(&one, "a")}, RuleCompaction},
		{"summary outside a compaction", []Payload{um("u", "x"), summary("S", 0)}, RuleReplace},
		{"summary with no seqs", []Payload{um("u", "x"), cstart(nil, "a"), summary("S")}, RuleReplace},
		{"summary shadows itself", []Payload{um("u", "x"), cstart(nil, "a"), summary("S", 0, 2)}, RuleReplace},
		{"summary start is not the first seq", []Payload{um("u", "x"), um("v", "y"), cstart(nil, "a"), &UserMessage{ID: "s", Replaces: &Replaces{Start: 0, End: 1, Seqs: []int64{1}}}}, RuleReplace},
		{"summary seqs not ascending", []Payload{um("u", "x"), um("v", "y"), um("w", "z"), cstart(nil, "a"), &UserMessage{ID: "s", Replaces: &Replaces{Start: 0, End: 2, Seqs: []int64{0, 2, 1, 2}}}}, RuleReplace},
		{"summary shadows a non-surface event", []Payload{ts(1), um("u", "x"), te(1), cstart(nil, "a"), summary("S", 0, 1)}, RuleReplace},
		{"summary leaves a surface event of its range", []Payload{um("u", "x"), um("v", "y"), um("w", "z"), cstart(nil, "a"), summary("S", 0, 2)}, RuleReplace},
		{"summary shadows a shadowed event", []Payload{um("u", "x"), cstart(nil, "a"), summary("S", 0), cend(nil, "a"), cstart(nil, "b"), summary("T", 0)}, RuleReplace},
		{"summary splits a call from its result", with(batch, tres(1, 1, "k1"), tres(1, 1, "k2"), se(1, 1), cstart(&one, "a"), summary("S", 1, 3, 4)), RuleReplace},
		{"summary splits a result from its call", with(batch, tres(1, 1, "k1"), tres(1, 1, "k2"), se(1, 1), cstart(&one, "a"), summary("S", 5)), RuleReplace},
	}
}

func TestCheckRules(t *testing.T) {
	for _, tc := range ruleCases() {
		t.Run(tc.name, func(t *testing.T) {
			evs := events(t, tc.ps...)
			last := int64(len(evs) - 1)
			vs := Check(evs)
			var atLast []string
			for _, v := range vs {
				if v.Seq < last {
					t.Fatalf("prefix not valid: %v", v)
				}
				atLast = append(atLast, v.Rule)
			}
			if !slices.Contains(atLast, tc.rule) {
				t.Fatalf("Check rules %q, want %q (%v)", atLast, tc.rule, vs)
			}

			// Log refuses the event and stays unchanged.
			l := NewLog(Header{ID: "s"})
			for _, ev := range evs[:last] {
				if err := l.AppendEvent(ev); err != nil {
					t.Fatalf("prefix seq %d: %v", ev.Seq, err)
				}
			}
			before := fmt.Sprintf("%+v", *l)
			msgs := l.Messages()
			err := l.AppendEvent(evs[last])
			if !IsInvariant(err) || !slices.Contains(rules(err), tc.rule) {
				t.Fatalf("AppendEvent: %v, want rule %q", err, tc.rule)
			}
			if after := fmt.Sprintf("%+v", *l); after != before {
				t.Fatalf("log changed by a refused event:\n%s\n%s", before, after)
			}
			if l.Len() != last || len(l.Messages()) != len(msgs) {
				t.Fatal("refused event was added")
			}
			// Append (the encoding path) refuses it too.
			if _, err := l.Append(l.LastTime(), evs[last].MustDecode()); !slices.Contains(rules(err), tc.rule) {
				t.Fatalf("Append: %v, want rule %q", err, tc.rule)
			}
		})
	}
}

func TestCheckEnvelopeRules(t *testing.T) {
	base := events(t, um("a", "x"), um("b", "y"))
	cases := []struct {
		name string
		mod  func([]Event) []Event
		rule string
	}{
		{"seq gap", func(e []Event) []Event { e[1].Seq = 2; return e }, RuleSeq},
		{"seq not from 0", func(e []Event) []Event { e[0].Seq = 1; return e[:1] }, RuleSeq},
		{"time decreases", func(e []Event) []Event { e[1].Time = e[0].Time.Add(-time.Millisecond); return e }, RuleTime},
		{"unknown type", func(e []Event) []Event { e[1].Type = "future/thing"; return e }, RuleUnknownType},
		{"bad payload", func(e []Event) []Event { e[1].Data = json.RawMessage(`{"id":7}`); return e }, RuleDecode},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			evs := tc.mod(slices.Clone(base))
			if got := vrules(Check(evs)); !slices.Contains(got, tc.rule) {
				t.Fatalf("rules %q, want %q", got, tc.rule)
			}
			var c Checker
			for _, ev := range evs[:len(evs)-1] {
				if vs := c.Add(ev, nil); vs != nil {
					t.Fatalf("prefix: %v", vs)
				}
			}
			if got := vrules(c.Add(evs[len(evs)-1], nil)); !slices.Contains(got, tc.rule) {
				t.Fatalf("Add rules %q, want %q", got, tc.rule)
			}
		})
	}
}

// TestCheckReportsAll shows Check goes on after a violation.
func TestCheckReportsAll(t *testing.T) {
	evs := events(t, steer(1, "s", "x"), ts(1), ts(2), te(2), te(9))
	got := vrules(Check(evs))
	want := []string{RuleOutsideTurn, RuleTurnOpen, RuleTurnOpen}
	if !slices.Equal(got, want) {
		t.Fatalf("rules %q, want %q", got, want)
	}
	if s := (Violation{Seq: 3, Rule: "turn-open", Msg: "x"}).String(); s != "seq 3: turn-open: x" {
		t.Errorf("String() = %q", s)
	}
}

func TestUserMessageBetweenTurnsIsValid(t *testing.T) {
	l := newLog(t, um("a", "first"), ts(1), um("b", "p"), te(1), ctx("c", "inject"), um("d", "another"), ts(2), te(2))
	if got := l.Len(); got != 8 {
		t.Fatalf("Len = %d", got)
	}
}
