package session

import (
	"errors"
	"strings"
	"testing"
)

func TestForkPoint(t *testing.T) {
	// 0..5 turn 1, 6 c:A, 7 turn/start 2, 8 u, 9 step/start (open).
	l := newLog(t, append(turns(1), ctx("A", "a"), ts(2), um("u", "p"), ss(2, 1))...)
	cases := []struct {
		at   int64
		want error // nil, ErrOpenTurn, or errAny
	}{
		{-2, errAny}, {-1, nil}, {0, ErrOpenTurn}, {3, ErrOpenTurn}, {4, ErrOpenTurn}, {5, nil},
		{6, nil}, {7, ErrOpenTurn}, {8, ErrOpenTurn}, {9, ErrOpenTurn}, {10, errAny}, {100, errAny},
	}
	for _, tc := range cases {
		checkFork(t, l, tc.at, tc.want)
	}
}

func TestForkPointCompaction(t *testing.T) {
	one := 1
	// 0..5 turn 1, 6 c:A, 7 compaction/start, 8 c:B, 9 summary, 10 end,
	// 11 u (out of turn), 12.. turn 2 with an in-turn compaction.
	ps := append(turns(1), ctx("A", "a"), cstart(nil, "c1"), ctx("B", "lands during"), summary("S", 6), cend(nil, "c1"), um("u", "x"),
		ts(2), cstart(&one, "c2"), cend(&one, "c2"), te(2), um("v", "y"))
	ps[13] = cstart(ip(2), "c2")
	ps[14] = cend(ip(2), "c2")
	l := newLog(t, ps...)
	for at, want := range map[int64]error{6: nil, 7: ErrOpenTurn, 8: ErrOpenTurn, 9: ErrOpenTurn, 10: nil, 11: nil, 12: ErrOpenTurn, 13: ErrOpenTurn, 14: ErrOpenTurn, 15: nil, 16: nil} {
		checkFork(t, l, at, want)
	}
	// An open between-turn compaction at the end.
	mustAppend(t, l, cstart(nil, "c3"))
	checkFork(t, l, 16, nil)
	checkFork(t, l, 17, ErrOpenTurn)
}

var errAny = errors.New("any error but ErrOpenTurn")

func checkFork(t *testing.T, l *Log, at int64, want error) {
	t.Helper()
	err := ForkPoint(l, at)
	switch want {
	case nil:
		if err != nil {
			t.Errorf("ForkPoint(%d) = %v, want nil", at, err)
		}
	case errAny:
		if err == nil || errors.Is(err, ErrOpenTurn) {
			t.Errorf("ForkPoint(%d) = %v, want a range error", at, err)
		}
	default:
		if !errors.Is(err, want) {
			t.Errorf("ForkPoint(%d) = %v, want %v", at, err, want)
		}
	}
}

// TestForkAtInjectInsideCompaction: the rule for an out-of-turn
// user/message that an idle inject placed inside a between-turn
// compaction. It is not a stable point: the compaction has not ended
// there, and a child cut at it would hold a compaction/start without the
// summary and end that settle it. The refusal names the stable points on
// either side, the second being the compaction/end.
func TestForkAtInjectInsideCompaction(t *testing.T) {
	// 0..5 turn 1, 6 c:A, 7 compaction/start, 8 c:B (the inject), 9
	// summary, 10 compaction/end.
	l := newLog(t, append(turns(1), ctx("A", "a"), cstart(nil, "c1"), ctx("B", "lands during"), summary("S", 6), cend(nil, "c1"))...)
	err := ForkPoint(l, 8)
	if !errors.Is(err, ErrOpenTurn) || !strings.Contains(err.Error(), "seq 6 and seq 10") {
		t.Fatalf("ForkPoint at the inject = %v, want a refusal naming seq 6 and seq 10", err)
	}
	if got := StablePoint(l, 8); got != 6 {
		t.Errorf("StablePoint(8) = %d, want 6", got)
	}
	if err := ForkPoint(l, 10); err != nil {
		t.Errorf("ForkPoint at the compaction/end: %v", err)
	}
	// While the compaction is still open, only the point before it.
	open := newLog(t, append(turns(1), ctx("A", "a"), cstart(nil, "c1"), ctx("B", "lands during"))...)
	err = ForkPoint(open, 8)
	if !errors.Is(err, ErrOpenTurn) || !strings.Contains(err.Error(), "has not ended; the last stable point is seq 6") {
		t.Errorf("ForkPoint in an open compaction = %v", err)
	}
}

func TestStablePoint(t *testing.T) {
	// 0..5 turn 1, 6 c:A, 7 compaction/start, 8 c:B, 9 summary, 10 end,
	// 11 turn/start 2 (open), 12 u.
	l := newLog(t, append(turns(1), ctx("A", "a"), cstart(nil, "c1"), ctx("B", "b"), summary("S", 6), cend(nil, "c1"), ts(2), um("u", "p"))...)
	for at, want := range map[int64]int64{-1: -1, 0: -1, 4: -1, 5: 5, 6: 6, 7: 6, 9: 6, 10: 10, 11: 10, 12: 10, 99: 10} {
		if got := StablePoint(l, at); got != want {
			t.Errorf("StablePoint(%d) = %d, want %d", at, got, want)
		}
		if got := StablePoint(l, at); ForkPoint(l, got) != nil {
			t.Errorf("StablePoint(%d) = %d is not a fork point", at, got)
		}
	}
}
