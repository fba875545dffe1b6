package session

import (
	"errors"
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
