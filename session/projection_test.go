package session

import (
	"fmt"
	"slices"
	"testing"

	"github.com/reinhq/rein/llm"
)

func texts(msgs []llm.Message) []string {
	out := make([]string, len(msgs))
	for i, m := range msgs {
		out[i] = llm.PlainText(m.Content)
	}
	return out
}

// scenario24 returns the log of acceptance scenario 24 (compaction across out-of-turn messages) after the compaction:
// 0 ts1, 1 u1, 2 ss, 3 a1, 4 se, 5 te1, 6 A, 7 ts2, 8 u2, 9 ss, 10 a2,
// 11 se, 12 te2, 13 B, 14 ts3, 15 u3, 16 te3, 17 cs, 18 S1, 19 ce, 20 u4.
func scenario24(t *testing.T) *Log {
	l := newLog(t,
		ts(1), um("u1", "u1"), ss(1, 1), am(1, 1, "a1"), se(1, 1), te(1),
		ctx("A", "A"),
		ts(2), um("u2", "u2"), ss(2, 1), am(2, 1, "a2"), se(2, 1), te(2),
		ctx("B", "B"),
		ts(3), um("u3", "u3"), te(3),
	)
	if got := texts(l.Messages()); !slices.Equal(got, []string{"u1", "a1", "A", "u2", "a2", "B", "u3"}) {
		t.Fatalf("surface %q", got)
	}
	before := l.Messages()
	mustAppend(t, l, cstart(nil, "c1"))
	mustAppend(t, l, summary("S1", 1, 3, 6, 8, 10))
	mustAppend(t, l, cend(nil, "c1"))
	if got := texts(l.Messages()); !slices.Equal(got, []string{"S1", "B", "u3"}) {
		t.Fatalf("projection %q, want [S1 B u3]", got)
	}
	if got := l.Projection().Seqs(); !slices.Equal(got, []int64{18, 13, 15}) {
		t.Fatalf("seqs %v", got)
	}
	if got := texts(before); !slices.Equal(got, []string{"u1", "a1", "A", "u2", "a2", "B", "u3"}) {
		t.Fatalf("earlier Messages() changed: %q", got)
	}
	// The transcript (the events) still holds A.
	if l.Event(6).MustDecode().(*UserMessage).ID != "A" {
		t.Fatal("A gone from the log")
	}
	mustAppend(t, l, um("u4", "u4"))
	return l
}

func TestCompactionScenario24(t *testing.T) { scenario24(t) }

func TestSecondCompaction(t *testing.T) {
	cases := []struct {
		name string
		seqs []int64
		want []string
	}{
		{"shadows the first summary and the rest", []int64{13, 15, 18}, []string{"S2", "u4"}},
		{"shadows only the first summary", []int64{18}, []string{"S2", "B", "u3", "u4"}},
		{"shadows what follows the first summary", []int64{13, 15}, []string{"S1", "S2", "u4"}},
		{"shadows the first summary and u4", []int64{18, 20}, []string{"S2", "B", "u3"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			l := scenario24(t)
			mustAppend(t, l, cstart(nil, "c2"))
			mustAppend(t, l, summary("S2", tc.seqs...))
			mustAppend(t, l, cend(nil, "c2"))
			if got := texts(l.Messages()); !slices.Equal(got, tc.want) {
				t.Fatalf("projection %q, want %q", got, tc.want)
			}
			if got, want := texts(l.Messages()), texts(referenceProjection(t, l.Events(0))); !slices.Equal(got, want) {
				t.Fatalf("projection %q, reference %q", got, want)
			}
		})
	}
}

// TestCompactionInTurnKeepsPairs compacts a tool batch whole, with an
// inject landing during the compaction.
func TestCompactionInTurnKeepsPairs(t *testing.T) {
	l := newLog(t, ts(1), um("u", "p"), ss(1, 1), am(1, 1, "", "k1", "k2"), tres(1, 1, "k1"), tres(1, 1, "k2"), se(1, 1),
		cstart(ip(1), "c"), ctx("late", "late"), summary("S", 1, 3, 4, 5), cend(ip(1), "c"))
	if got := texts(l.Messages()); !slices.Equal(got, []string{"S", "late"}) {
		t.Fatalf("projection %q", got)
	}
}

// TestMessagesCallerAppend: a caller appending to Messages() cannot write
// into the projection, nor the projection into the caller's slice.
func TestMessagesCallerAppend(t *testing.T) {
	l := newLog(t)
	for i := range 5 { // grow the backing array so it has spare capacity
		mustAppend(t, l, um("u", fmt.Sprint("m", i)))
	}
	mine := append(l.Messages(), llm.Message{Role: llm.RoleUser, Content: llm.Text("mine")})
	mustAppend(t, l, um("v", "logged"))
	if got := llm.PlainText(mine[len(mine)-1].Content); got != "mine" {
		t.Fatalf("caller's slice overwritten: %q", got)
	}
	msgs := l.Messages()
	if got := llm.PlainText(msgs[len(msgs)-1].Content); got != "logged" {
		t.Fatalf("projection holds %q", got)
	}
}
