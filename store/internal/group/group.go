// Package group commits the requests of concurrent callers in groups, for
// the stores' writers: the first caller to find no commit running becomes
// the committer and commits every request queued so far at once; the
// callers whose requests arrive meanwhile wait, and the first of them
// commits the next group. No timer and no goroutine of its own: under load,
// requests pile up behind the running commit and share the next one.
//
// A Queue is guarded by its writer's mutex, which Do takes held and
// releases.
package group

import "sync"

// Queue is the queue of one writer. The zero value is ready.
type Queue[R any] struct {
	pending    []*entry[R]
	committing bool
}

type entry[R any] struct {
	r        R
	wake     chan struct{} // one send: finished, or "commit now"
	finished bool
	err      error
}

// Busy reports whether a commit is running or requests are queued. The
// writer's mutex must be held.
func (q *Queue[R]) Busy() bool { return q.committing || len(q.pending) > 0 }

// Do queues r and returns once the group holding it was committed, with
// that commit's error. mu (the writer's mutex, guarding q) is held on entry
// and released on return. commit runs without mu, on one goroutine at a
// time, with a group's requests in arrival order. When it fails, failed
// runs under mu, and the requests queued behind the group fail too, with
// behind(err): their callers retry from the writer's durable end.
func (q *Queue[R]) Do(mu *sync.Mutex, r R, commit func([]R) error, failed func(error), behind func(error) error) error {
	e := &entry[R]{r: r, wake: make(chan struct{}, 1)}
	q.pending = append(q.pending, e)
	if q.committing {
		mu.Unlock()
		<-e.wake
		mu.Lock()
		if e.finished {
			err := e.err
			mu.Unlock()
			return err
		}
		// Handed the commit role; e heads the queue.
	}
	q.committing = true
	group := q.pending
	q.pending = nil
	mu.Unlock()

	rs := make([]R, len(group))
	for i, g := range group {
		rs[i] = g.r
	}
	err := commit(rs)

	mu.Lock()
	for _, g := range group {
		g.finished, g.err = true, err
		if g != e {
			g.wake <- struct{}{}
		}
	}
	if err != nil {
		failed(err)
		for _, p := range q.pending {
			p.finished, p.err = true, behind(err)
			p.wake <- struct{}{}
		}
		q.pending = nil
	}
	if len(q.pending) > 0 {
		q.pending[0].wake <- struct{}{}
	} else {
		q.committing = false
	}
	mu.Unlock()
	return err
}
