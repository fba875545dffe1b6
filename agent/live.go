package agent

import (
	"context"
	"iter"
	"sync"
	"time"

	"github.com/reinhq/rein/session"
)

// LiveType names a live (non-durable) agent event.
type LiveType string

// Live event types (docs/semantics.md, "Live events").
const (
	LiveStatus    LiveType = "agent/status"
	LiveQueued    LiveType = "agent/queued"
	LiveDequeued  LiveType = "agent/dequeued"
	LiveDiscarded LiveType = "agent/discarded"
	LiveBlocked   LiveType = "agent/blocked"
	LiveError     LiveType = "agent/error"
	LiveSettled   LiveType = "agent/settled"
	// LiveRetry: a failed model request will be sent again (the
	// RequestError chain said so), after Wait.
	LiveRetry      LiveType = "agent/retry"
	LiveFlushError LiveType = "session/flush-error"
	// LiveClosed is the last event every subscriber receives: Close has
	// settled (Err holds Close's error, if any).
	LiveClosed LiveType = "agent/closed"
)

// Placements of agent/queued.
const (
	PlacementQueued   = "queued"
	PlacementSteering = "steering"
)

// Live is a live agent event, for UIs and embedders. Which fields are set
// depends on Type:
//
//   - agent/status: Status
//   - agent/queued: Message, Placement
//   - agent/dequeued: Message (Seq: where a steering message entered the
//     log; 0 for a prompt, whose admission starts now)
//   - agent/discarded: Messages
//   - agent/blocked: Message, Reason
//   - agent/error: Turn, Step, Err
//   - agent/settled: Turn, TurnReason
//   - agent/retry: Turn, Step, Attempt (failed attempts so far, from 1),
//     Err (why the attempt failed), Wait, and Seq: the seq the next event
//     will get, so every assistant/chunk of this step below Seq belongs
//     to a failed attempt and is not part of the final answer
//   - session/flush-error: Seqs, Err
//   - agent/closed: Err (the last event; nothing follows)
type Live struct {
	Type       LiveType
	Status     Status
	Message    *Message
	Messages   []Message
	Placement  string
	Reason     string
	Turn, Step int
	Err        error
	TurnReason session.Reason
	Seqs       []int64
	Seq        int64
	Attempt    int
	Wait       time.Duration
}

// Subscribe calls fn for every live event from now on, in order, on a
// goroutine of its own: fn may call the agent (Inject, Steer, ...). A slow
// fn never blocks the agent; events queue for it. Delivery stops when ctx
// ends, when the returned stop is called, or after Close (events emitted
// before Close completes are still delivered).
func (a *Agent) Subscribe(ctx context.Context, fn func(Live)) (stop func()) {
	s := &subscriber{fn: fn, wake: make(chan struct{}, 1), stop: make(chan struct{})}
	var once sync.Once
	stop = func() { once.Do(func() { close(s.stop) }) }
	added := false
	if err := a.exec(func() {
		if a.closed {
			return
		}
		a.subs.add(s)
		added = true
	}); err != nil || !added {
		return stop
	}
	go func() {
		defer a.do(func() { a.subs.remove(s) })
		s.run(ctx, a.subs.quit)
	}()
	return stop
}

// emit queues ev for every subscriber. Owner only.
func (a *Agent) emit(ev Live) {
	for _, s := range a.subs.list {
		s.push(ev)
	}
}

type subscribers struct {
	list []*subscriber
	quit chan struct{}
}

func (ss *subscribers) init() { ss.quit = make(chan struct{}) }

func (ss *subscribers) add(s *subscriber) { ss.list = append(ss.list, s) }

func (ss *subscribers) remove(s *subscriber) {
	for i, x := range ss.list {
		if x == s {
			ss.list = append(ss.list[:i:i], ss.list[i+1:]...)
			return
		}
	}
}

// close ends delivery after the queued events. It does not wait for the
// subscriber goroutines: one of them may be the caller of Close.
func (ss *subscribers) close() {
	close(ss.quit)
}

type subscriber struct {
	fn   func(Live)
	mu   sync.Mutex
	q    []Live
	wake chan struct{}
	stop chan struct{}
}

func (s *subscriber) push(ev Live) {
	s.mu.Lock()
	s.q = append(s.q, ev)
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

func (s *subscriber) run(ctx context.Context, quit <-chan struct{}) {
	for {
		s.mu.Lock()
		q := s.q
		s.q = nil
		s.mu.Unlock()
		for _, ev := range q {
			select {
			case <-s.stop:
				return
			case <-ctx.Done():
				return
			default:
			}
			s.fn(ev)
		}
		if len(q) > 0 {
			continue
		}
		select {
		case <-s.wake:
		case <-s.stop:
			return
		case <-ctx.Done():
			return
		case <-quit:
			// Deliver what was queued before the owner stopped, then end.
			s.mu.Lock()
			q := s.q
			s.q = nil
			s.mu.Unlock()
			for _, ev := range q {
				s.fn(ev)
			}
			return
		}
	}
}

// eventBatch bounds how many events Events copies per visit to the owner.
const eventBatch = 1024

// Events yields the session's events from seq from on: those already in the
// log, then each new one as it is appended, until ctx ends (the iterator
// then yields ctx's error once) or the agent is closed and every event has
// been yielded. It never drops an event and never blocks the agent: a slow
// reader lags and catches up.
func (a *Agent) Events(ctx context.Context, from int64) iter.Seq2[session.Event, error] {
	return a.follow(ctx, from, false)
}

// DurableEvents is Events restricted to what is durable: it yields the
// session's events from seq from on, each only once the store has made it
// durable (a checkpoint or an idle flush wrote it), in seq order. A reader
// that must never show an event a crash could take back (one that prints
// seqs for others to rely on) follows this instead of Events. It ends when
// ctx ends (yielding ctx's error once) or when the agent is closed and
// every event that became durable has been yielded; events whose final
// flush failed are never yielded.
func (a *Agent) DurableEvents(ctx context.Context, from int64) iter.Seq2[session.Event, error] {
	return a.follow(ctx, from, true)
}

// durableBound is the seq below which events are durable, and (into wake,
// when not nil) a channel closed at the next write. Until a new session is
// created in the store, nothing is: the log-only records a new session's
// writer holds back are reported written but may never be stored.
func (a *Agent) durableBound(wake *<-chan struct{}) int64 {
	bound, w := a.p.watermark()
	if wake != nil {
		*wake = w
	}
	if !a.Stored() {
		return 0
	}
	return bound
}

// follow yields events from seq from on, up to the end of the log or, when
// durable, up to the persister's durable bound.
func (a *Agent) follow(ctx context.Context, from int64, durable bool) iter.Seq2[session.Event, error] {
	return func(yield func(session.Event, error) bool) {
		for {
			// Bounded batches: a reader starting at 0 on a long log never
			// holds the owner for a copy of the whole history.
			to := from + eventBatch
			var wake <-chan struct{}
			if durable {
				to = min(to, a.durableBound(&wake))
			}
			var evs []session.Event
			if err := a.exec(func() {
				evs = a.log.EventRange(from, to)
				if !durable {
					wake = a.notify
				}
			}); err != nil {
				// The owner has exited: the log no longer changes, and
				// Close made it durable (as far as it could) first.
				if durable {
					to = min(from+eventBatch, a.durableBound(nil))
				}
				if evs = a.log.EventRange(from, to); len(evs) == 0 {
					return
				}
			}
			for _, ev := range evs {
				if !yield(ev, nil) {
					return
				}
				from = ev.Seq + 1
			}
			if len(evs) > 0 {
				continue
			}
			select {
			case <-wake:
			case <-a.done:
			case <-ctx.Done():
				yield(session.Event{}, ctx.Err())
				return
			}
		}
	}
}
