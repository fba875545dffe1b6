package postgres

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/reinhq/rein/session"
	"github.com/reinhq/rein/store"
)

// listener holds one connection that LISTENs on the store's channel and
// wakes the subscribers of the session each notification names (its
// payload is a session id: every commit, release and delete sends one).
// When the connection fails it reconnects and wakes every subscriber,
// since notifications sent meanwhile are lost; subscribers then read what
// they missed, so nothing depends on a notification arriving.
type listener struct {
	s      *Store
	cancel context.CancelFunc
	done   chan struct{}

	mu        sync.Mutex
	subs      map[string]map[chan struct{}]struct{}
	listening bool
	err       error         // the last connection failure, while not listening
	changed   chan struct{} // closed and replaced when listening or err change
}

// listener returns the store's listener, starting it on first use, once it
// listens (or the error of its latest attempt to).
func (s *Store) listener(ctx context.Context) (*listener, error) {
	s.lnMu.Lock()
	if s.ln == nil {
		lctx, cancel := context.WithCancel(context.Background())
		s.ln = &listener{s: s, cancel: cancel, done: make(chan struct{}),
			subs: map[string]map[chan struct{}]struct{}{}, changed: make(chan struct{})}
		go s.ln.run(lctx)
	}
	ln := s.ln
	s.lnMu.Unlock()
	for {
		ln.mu.Lock()
		ok, err, changed := ln.listening, ln.err, ln.changed
		ln.mu.Unlock()
		switch {
		case ok:
			return ln, nil
		case err != nil:
			return nil, unreadable(err)
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

func (ln *listener) stop() {
	ln.cancel()
	<-ln.done
}

func (ln *listener) setState(listening bool, err error) {
	ln.mu.Lock()
	ln.listening, ln.err = listening, err
	close(ln.changed)
	ln.changed = make(chan struct{})
	ln.mu.Unlock()
}

// subscribe returns a channel that receives (at most one pending value)
// whenever session id may have changed, and a function that ends the
// subscription.
func (ln *listener) subscribe(id string) (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	ln.mu.Lock()
	if ln.subs[id] == nil {
		ln.subs[id] = map[chan struct{}]struct{}{}
	}
	ln.subs[id][ch] = struct{}{}
	ln.mu.Unlock()
	return ch, func() {
		ln.mu.Lock()
		delete(ln.subs[id], ch)
		if len(ln.subs[id]) == 0 {
			delete(ln.subs, id)
		}
		ln.mu.Unlock()
	}
}

// wake pokes the subscribers of id, or of every session when all is set.
func (ln *listener) wake(id string, all bool) {
	ln.mu.Lock()
	defer ln.mu.Unlock()
	for sid, chs := range ln.subs {
		if !all && sid != id {
			continue
		}
		for ch := range chs {
			select {
			case ch <- struct{}{}:
			default:
			}
		}
	}
}

func (ln *listener) run(ctx context.Context) {
	defer close(ln.done)
	backoff := 50 * time.Millisecond
	for ctx.Err() == nil {
		err := ln.listen(ctx)
		if ctx.Err() != nil {
			break
		}
		ln.setState(false, err)
		select {
		case <-time.After(backoff):
		case <-ctx.Done():
		}
		backoff = min(2*backoff, 5*time.Second)
	}
	ln.setState(false, store.ErrClosed)
}

// listen runs one connection until it fails.
func (ln *listener) listen(ctx context.Context) error {
	pc, err := ln.s.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	conn := pc.Hijack() // ours alone: LISTEN is per connection
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{ln.s.channel}.Sanitize()); err != nil {
		return err
	}
	ln.setState(true, nil)
	ln.wake("", true)
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		ln.wake(n.Payload, false)
	}
}

// followBatch is how many segments Follow reads per query.
const followBatch = 64

// followPoll is how long a follower waits for a notification before it
// reads anyway: an announcement lost with a process that died right after
// its commit delays a follower by at most this.
const followPoll = 5 * time.Second

// Follow implements store.Follower. It listens before it first reads, so
// no announcement falls between; each notification for the session (or a
// reconnection of the listener, or followPoll without either) makes it
// read the events after the last one it yielded.
func (s *Store) Follow(ctx context.Context, id string, from int64) iter.Seq2[session.Event, error] {
	return func(yield func(session.Event, error) bool) {
		if err := checkID(id); err != nil {
			yield(session.Event{}, err)
			return
		}
		ln, err := s.listener(ctx)
		if err != nil {
			yield(session.Event{}, err)
			return
		}
		wake, stop := ln.subscribe(id)
		defer stop()
		from = max(from, 0)
		for {
			evs, more, err := s.fetch(ctx, id, from)
			if err != nil {
				yield(session.Event{}, err)
				return
			}
			for _, ev := range evs {
				if !yield(ev, nil) {
					return
				}
				from = ev.Seq + 1
			}
			if more {
				continue
			}
			t := time.NewTimer(followPoll)
			select {
			case <-wake:
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				yield(session.Event{}, ctx.Err())
				return
			}
			t.Stop()
		}
	}
}

// fetch reads the stored events of id from seq from on, as far as
// followBatch segments go, and reports whether more segments may follow. A
// final line that does not parse (torn) ends the events without an error:
// the next writer's Open removes it.
func (s *Store) fetch(ctx context.Context, id string, from int64) ([]session.Event, bool, error) {
	rows, err := s.pool.Query(ctx, `
SELECT s.next_seq, g.first_seq, g.lines FROM rein_sessions s
LEFT JOIN LATERAL (
	SELECT first_seq, lines FROM rein_segments
	WHERE session_id = s.id AND last_seq >= $2 AND first_seq >= coalesce(
		(SELECT max(first_seq) FROM rein_segments WHERE session_id = s.id AND first_seq <= $2), 0)
	ORDER BY first_seq LIMIT $3) g ON true
WHERE s.id = $1 ORDER BY g.first_seq`, id, from, followBatch)
	if err != nil {
		return nil, false, unreadable(err)
	}
	defer rows.Close()
	found, segs := false, 0
	var evs []session.Event
	for rows.Next() {
		found = true
		var next int64
		var first *int64
		var lines []byte
		if err := rows.Scan(&next, &first, &lines); err != nil {
			return nil, false, unreadable(err)
		}
		if first == nil {
			break // the session, and no events from seq on
		}
		segs++
		for seq, line := range segLines(*first, lines) {
			if seq < from {
				continue
			}
			ev, err := session.ParseLine(line)
			if err == nil && ev.Seq != seq {
				err = fmt.Errorf("%w: seq %d, want %d", store.ErrSeq, ev.Seq, seq)
			}
			if err != nil {
				if seq >= next {
					return evs, false, nil // a torn tail, not an event
				}
				return nil, false, &store.LineError{File: fileName(id), Line: int(seq) + 2, Err: err}
			}
			evs = append(evs, ev)
		}
	}
	if err := rows.Err(); err != nil {
		if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			return nil, false, err
		}
		return nil, false, unreadable(err)
	}
	if !found {
		return nil, false, notFound(id)
	}
	return evs, segs == followBatch, nil
}
