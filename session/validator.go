package session

import (
	"fmt"
	"maps"
	"slices"
)

// Validator checks event lines exactly as (*Log).AppendLines appends them,
// every line validated and the invariant checked, without keeping them: no
// events, no projection, payloads decoded only as far as the checker
// needs, and nothing that refers to the input once AppendLines returns,
// so the caller may reuse its buffers. A store validates what it copies
// with it (a fork), reads a session a piece at a time with it
// (streaming: Visit hands each event on), and validates what it appends
// (to vouch for it later).
type Validator struct{ l Log }

// NewValidator returns a validator for the lines of a session with header
// h.
func NewValidator(h Header) *Validator {
	v := &Validator{l: Log{header: h, check: true}}
	v.l.events.count = true
	return v
}

// Validator returns a validator that goes on where l ends: it checks lines
// as l.AppendLines would append them next. It holds a copy of l's checker
// state (about a byte per event, and two map entries per tool result), so
// that l and the validator go their own ways.
func (l *Log) Validator() *Validator {
	v := &Validator{l: Log{header: l.header, check: true, last: l.last, checker: l.checker.clone()}}
	v.l.events.count = true
	v.l.events.n = l.Len()
	return v
}

// AppendLines validates lines as (*Log).AppendLines appends them, with the
// same errors. An error of the Visit function stops it and is returned as
// it is.
func (v *Validator) AppendLines(data []byte) error { return v.l.AppendLines(data) }

// Visit makes AppendLines call fn with every event it validates, in order,
// once the event is in (checked with the events before it), on the
// calling goroutine. ev.Data aliases the lines given to AppendLines. p is
// the payload as ev.Decode returns it (strings are copies: fn may keep
// them), decoded while the lines were parsed, on every core; it is nil
// for assistant/chunk and request/header events, which are validated
// without being decoded in full (ev.Decode decodes them), and for unknown
// types. With chunks false, fn does not get assistant/chunk events (they
// are validated all the same): a reader that shows whole messages skips
// most of a session's lines without an Event being made for each.
//
// Visit must be called before the first AppendLines.
func (v *Validator) Visit(fn func(ev Event, p Payload) error, chunks bool) {
	v.l.visit, v.l.visitChunks = fn, chunks
}

// Len returns the number of events validated, which is also the next seq.
func (v *Validator) Len() int64 { return v.l.Len() }

// ForkPoint is ForkPoint on the events validated.
func (v *Validator) ForkPoint(at int64) error { return ForkPoint(&v.l, at) }

// RepairFrom returns the first seq that Repair reads: the start of the
// final turn, or of a between-turn compaction, that the events validated
// leave open; -1 when they leave nothing open and Repair adds nothing.
func (v *Validator) RepairFrom() int64 {
	c := &v.l.checker
	switch {
	case c.turnOpen:
		return c.spans.Turns[len(c.spans.Turns)-2]
	case c.compOpen:
		return c.compStart
	}
	return -1
}

// Repair is Repair on the events validated: it closes what a crash left
// open and returns the events it adds, exactly as Repair does on a Log
// holding the same events. tail holds the events from RepairFrom on (the
// lines were validated already; Repair reads nothing before them). The
// validator takes no more lines afterwards.
func (v *Validator) Repair(tail []Event) ([]Event, error) {
	from := v.RepairFrom()
	if from < 0 {
		return nil, nil
	}
	if int64(len(tail)) != v.Len()-from {
		return nil, fmt.Errorf("session: repair: %d events from seq %d, want %d", len(tail), from, v.Len()-from)
	}
	l := &v.l
	l.visit = nil
	l.events = evStore{base: from, n: from}
	for i, ev := range tail {
		if ev.Seq != from+int64(i) {
			return nil, fmt.Errorf("session: repair: seq %d where %d belongs", ev.Seq, from+int64(i))
		}
		l.events.push(ev)
	}
	return Repair(l)
}

// clone returns a copy of c that shares nothing it changes.
func (c *Checker) clone() Checker {
	d := *c
	d.calls = maps.Clone(c.calls)
	d.stepChunks = slices.Clone(c.stepChunks)
	d.kinds = slices.Clone(c.kinds)
	d.resultOwner = maps.Clone(c.resultOwner)
	if c.ownResults != nil {
		d.ownResults = make(map[int64][]int64, len(c.ownResults))
		for k, v := range c.ownResults {
			d.ownResults[k] = slices.Clone(v)
		}
	}
	d.spans.Turns = slices.Clone(c.spans.Turns)
	d.spans.Comps = slices.Clone(c.spans.Comps)
	return d
}
