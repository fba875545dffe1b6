package session

import (
	"fmt"
	"sort"
)

// Spans are what the fork rule looks at: the turns and the between-turn
// compactions of a log of Events events, as flat start, end seq pairs
// sorted by start (end -1 while open). The checker keeps them for a Log;
// a store that indexes a file without parsing it keeps them too.
type Spans struct {
	Turns, Comps []int64
	Events       int64
}

// ForkPoint reports whether a fork may take events 0..at (inclusive) of l;
// see Spans.ForkPoint.
func ForkPoint(l *Log, at int64) error { return l.spans().ForkPoint(at) }

// StablePoint returns the last seq at or before at where l may be forked;
// see Spans.StablePoint.
func StablePoint(l *Log, at int64) int64 { return l.spans().StablePoint(at) }

func (l *Log) spans() Spans {
	s := l.checker.spans
	s.Events = l.Len()
	return s
}

// ForkPoint reports whether a fork may take events 0..at (inclusive). It
// returns nil for at == -1 (an empty child), on a turn/end and on any
// stable between-turn event, including an out-of-turn user/message. It
// returns an error wrapping ErrOpenTurn when at lies inside a turn
// (turn/start <= at < its turn/end) or inside a between-turn compaction
// (compaction/start <= at < its compaction/end: an out-of-turn message an
// idle inject placed there is not a stable point yet, since the summary
// and the end that settle it come after), naming the nearest stable
// points, and an error when at is out of range. It costs O(log spans).
func (s Spans) ForkPoint(at int64) error {
	if at < -1 || at >= s.Events {
		return fmt.Errorf("session: fork seq %d out of range -1..%d", at, s.Events-1)
	}
	if at == -1 {
		return nil
	}
	what := ""
	i, start, end := within(s.Turns, at)
	if i >= 0 {
		what = fmt.Sprintf("inside turn %d, which starts at seq %d", i+1, start)
	} else if _, start, end = within(s.Comps, at); start >= 0 {
		what = fmt.Sprintf("inside the between-turn compaction that starts at seq %d", start)
	} else {
		return nil
	}
	// Stable points are named by seq; -1 (nothing before it is stable)
	// is not one a person can find in a listing of the events.
	before := s.StablePoint(start - 1)
	switch ended := end >= 0 && end < s.Events; {
	case !ended && before < 0:
		return fmt.Errorf("%w: fork seq %d is %s and has not ended; no event before it is a stable point", ErrOpenTurn, at, what)
	case !ended:
		return fmt.Errorf("%w: fork seq %d is %s and has not ended; the last stable point is seq %d", ErrOpenTurn, at, what, before)
	case before < 0:
		return fmt.Errorf("%w: fork seq %d is %s; the nearest stable point is seq %d, where it ends (no event before it is one)", ErrOpenTurn, at, what, end)
	}
	return fmt.Errorf("%w: fork seq %d is %s; the nearest stable points are seq %d and seq %d, where it ends", ErrOpenTurn, at, what, before, end)
}

// StablePoint returns the last seq s <= at (clipped to the events) where a
// fork is allowed: at itself when it is stable, else the seq before the
// turn or compaction that holds it (-1, an empty fork, at worst).
func (s Spans) StablePoint(at int64) int64 {
	at = min(at, s.Events-1)
	for at >= 0 {
		if _, start, _ := within(s.Turns, at); start >= 0 {
			at = start - 1
		} else if _, start, _ := within(s.Comps, at); start >= 0 {
			at = start - 1
		} else {
			break
		}
	}
	return max(at, -1)
}

// within finds the span of spans (flat pairs, sorted by start, disjoint)
// with start <= at < end (end -1: still open), returning its index, start
// and end, or -1, -1, -1.
func within(spans []int64, at int64) (int, int64, int64) {
	i := sort.Search(len(spans)/2, func(i int) bool { return spans[2*i] > at }) - 1
	if i < 0 {
		return -1, -1, -1
	}
	start, end := spans[2*i], spans[2*i+1]
	if end >= 0 && at >= end {
		return -1, -1, -1
	}
	return i, start, end
}
