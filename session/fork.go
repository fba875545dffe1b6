package session

import (
	"fmt"
	"sort"
)

// ForkPoint reports whether a fork may take events 0..at (inclusive) of l
// (SPEC §4 "Fork"). It returns nil for at == -1 (an empty child), on a
// turn/end and on any stable between-turn event, including an out-of-turn
// user/message. It returns an error wrapping ErrOpenTurn when at lies
// inside a turn (turn/start <= at < its turn/end) or inside a between-turn
// compaction pair, and an error when at is out of range. It costs
// O(log turns).
func ForkPoint(l *Log, at int64) error {
	if at < -1 || at >= l.Len() {
		return fmt.Errorf("session: fork seq %d out of range -1..%d", at, l.Len()-1)
	}
	if at == -1 {
		return nil
	}
	if s, ok := within(l.checker.turns, at); ok {
		return fmt.Errorf("%w: fork seq %d is inside the turn that starts at seq %d", ErrOpenTurn, at, s.start)
	}
	if s, ok := within(l.checker.comps, at); ok {
		return fmt.Errorf("%w: fork seq %d is inside the compaction that starts at seq %d", ErrOpenTurn, at, s.start)
	}
	return nil
}

// within finds the span of spans (sorted by start, disjoint) with
// start <= at < end (end -1: still open).
func within(spans []span, at int64) (span, bool) {
	i := sort.Search(len(spans), func(i int) bool { return spans[i].start > at }) - 1
	if i < 0 {
		return span{}, false
	}
	s := spans[i]
	return s, s.end < 0 || at < s.end
}
