package session

import (
	"errors"
	"fmt"
	"time"

	"github.com/reinhq/rein/llm"
	"github.com/reinhq/rein/session/internal/wire"
)

// Log is one session's durable event log held in memory: the events, the
// incremental projection to model messages, and the turn/step state the
// invariant needs. It is not safe for concurrent use; in the agent one owner
// goroutine holds it.
//
// Append enforces the session invariant: an event that would break it is
// refused with ErrInvariant and the log is unchanged.
type Log struct {
	header  Header
	events  evStore // compact: see evstore.go
	checker Checker
	proj    Projection
	last    time.Time
	reqHdr  *RequestHeader
	// hdrLazy says that the last request header, at seq hdrSeq, was
	// validated but not decoded yet (AppendLines; see settleHeader).
	hdrLazy bool
	hdrSeq  int64
	// loaders are AppendLines' workers' arenas, kept between calls.
	loaders []*wire.Arena
	title   string
	// ids holds the ids of every user and steering message, so new ids can
	// be kept unique within the session.
	ids map[string]struct{}
	// usage is the last response's usage, zeroed by a compaction summary.
	usage llm.Usage
	// check makes the log a Validator's: events are counted and checked,
	// not kept, and payloads are decoded only as far as the checker needs.
	check bool
	// visit, when set, gets each event appended by AppendLines once it
	// is in (chunks only with visitChunks; see Validator.Visit).
	visit       func(Event, Payload) error
	visitChunks bool
	// spare holds parsed blocks' record buffers between AppendLines
	// calls (a Validator's only).
	spare chan *lineBlock
}

// LastUsage returns the usage of the last assistant message, or zero when a
// compaction summary came after it.
func (l *Log) LastUsage() llm.Usage { return l.usage }

// NewLog returns an empty log for a session with header h.
func NewLog(h Header) *Log {
	return &Log{header: h, title: h.Title}
}

// Header returns the session header.
func (l *Log) Header() Header { return l.header }

// Len returns the number of events, which is also the next seq.
func (l *Log) Len() int64 { return l.events.len() }

// Event returns the event with the given seq.
func (l *Log) Event(seq int64) Event { return l.events.at(seq) }

// Events returns the events from seq on, in a new slice (the log keeps
// events compactly; each call costs O(Len()-from)). Their Data must not be
// modified.
func (l *Log) Events(from int64) []Event { return l.events.slice(from, l.Len()) }

// EventRange returns fresh Events for the seqs in [from, to), clipped to
// the log: a bounded read for readers that follow a long log in batches.
func (l *Log) EventRange(from, to int64) []Event { return l.events.slice(from, min(to, l.Len())) }

// LastTime returns the time of the last event (zero when empty).
func (l *Log) LastTime() time.Time { return l.last }

// Title returns the latest title.
func (l *Log) Title() string { return l.title }

// Turn returns the number of the last turn opened and whether it is open.
func (l *Log) Turn() (turn int, open bool) { return l.checker.turn, l.checker.turnOpen }

// Step returns the number of the last step of the open turn and whether it
// is open.
func (l *Log) Step() (step int, open bool) { return l.checker.step, l.checker.stepOpen }

// RequestHeader returns the last recorded request header, or nil.
func (l *Log) RequestHeader() *RequestHeader {
	l.settleHeader()
	return l.reqHdr
}

// settleHeader decodes the last request header when AppendLines left it
// raw. It was validated then, so decoding does not fail.
func (l *Log) settleHeader() {
	if !l.hdrLazy {
		return
	}
	l.hdrLazy = false
	l.reqHdr = nil
	if p, err := l.Event(l.hdrSeq).Decode(); err == nil {
		l.reqHdr, _ = p.(*RequestHeader)
	}
}

// Messages returns the projection: the model messages derived from the log.
// The slice is shared with the log; callers must not modify it. It stays
// valid (unchanged) after later appends.
func (l *Log) Messages() []llm.Message { return l.proj.Messages() }

// Projection returns the log's incremental projection.
func (l *Log) Projection() *Projection { return &l.proj }

// Append encodes p as the next event, with time t clamped so that times
// never decrease, checks it against the invariant, and adds it. It returns
// the event as it will be stored.
func (l *Log) Append(t time.Time, p Payload) (Event, error) {
	t = t.UTC().Truncate(time.Millisecond)
	if t.Before(l.last) {
		t = l.last
	}
	ev, err := NewEvent(l.Len(), t, p)
	if err != nil {
		return Event{}, err
	}
	if err := l.add(ev, p); err != nil {
		return Event{}, err
	}
	return ev, nil
}

// AppendEvent adds an already encoded event (as read from a store). Its seq
// must be Len(); unknown types are refused unless ignorable. The payload
// is decoded in full (chunks included) and checked, as AppendLines does.
func (l *Log) AppendEvent(ev Event) error {
	if ev.Seq != l.Len() {
		return fmt.Errorf("%w: seq %d, want %d", ErrInvariant, ev.Seq, l.Len())
	}
	var p Payload
	if !ev.Type.Known() {
		if !ev.Ignorable {
			return fmt.Errorf("%w: %q at seq %d", ErrUnknownType, ev.Type, ev.Seq)
		}
		if !wire.Valid(ev.Data) {
			return fmt.Errorf("%w: seq %d %s: data is not valid JSON in UTF-8", ErrCorrupt, ev.Seq, ev.Type)
		}
	} else {
		var err error
		if p, err = ev.Decode(); err != nil {
			return err
		}
	}
	return l.add(ev, p)
}

func (l *Log) add(ev Event, p Payload) error { return l.addP(ev, p, false, -1, 0) }

// addP is add; lazyHdr marks a request/header payload that holds only Turn
// and Step (enough for the checker), to be decoded by settleHeader; seg >= 0
// says the data is in the store already, at offset off of that segment.
func (l *Log) addP(ev Event, p Payload, lazyHdr bool, seg int, off uint32) error {
	if vs := l.checker.Add(ev, p); len(vs) > 0 {
		return &InvariantError{Violations: vs}
	}
	if seg >= 0 {
		l.events.pushAt(ev, uint32(seg), off)
	} else {
		l.events.push(ev)
	}
	if ev.Time.After(l.last) {
		l.last = ev.Time
	}
	if l.check {
		return nil
	}
	switch d := p.(type) {
	case *RequestHeader:
		l.reqHdr, l.hdrLazy, l.hdrSeq = d, lazyHdr, ev.Seq
		if lazyHdr {
			l.reqHdr = nil
		}
	case *SessionTitle:
		l.title = d.Title
	case *UserMessage:
		l.addID(d.ID)
		if d.Replaces != nil {
			l.usage = llm.Usage{} // the history it measured is gone
		}
	case *AssistantMessage:
		l.usage = d.Usage
	case *SteeringMessage:
		l.addID(d.ID)
	}
	l.proj.Add(ev.Seq, p)
	return nil
}

func (l *Log) addID(id string) {
	if l.ids == nil {
		l.ids = map[string]struct{}{}
	}
	l.ids[id] = struct{}{}
}

// HasMessageID reports whether a user or steering message with this id is
// in the log.
func (l *Log) HasMessageID(id string) bool {
	_, ok := l.ids[id]
	return ok
}

// InvariantError lists the rules an event broke.
type InvariantError struct {
	Violations []Violation
}

func (e *InvariantError) Error() string {
	s := ErrInvariant.Error()
	for i, v := range e.Violations {
		if i == 3 {
			s += fmt.Sprintf("; and %d more", len(e.Violations)-i)
			break
		}
		s += "; " + v.String()
	}
	return s
}

func (e *InvariantError) Unwrap() error { return ErrInvariant }

// IsInvariant reports whether err is an invariant violation.
func IsInvariant(err error) bool { return errors.Is(err, ErrInvariant) }

// LiveSurface returns the seqs in [start, end] of surface events
// (message-producing: user/message, steering/message, assistant/message,
// tool/result) that no compaction summary shadows yet, in ascending order:
// exactly what a summary replacing that range must list.
func (l *Log) LiveSurface(start, end int64) []int64 {
	var out []int64
	for s := max(start, 0); s <= end && s < int64(len(l.checker.kinds)); s++ {
		if k := l.checker.kinds[s]; k&kSurface != 0 && k&kShadowed == 0 {
			out = append(out, s)
		}
	}
	return out
}
