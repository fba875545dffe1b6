package agent

import (
	"context"
	"fmt"
	"sync"

	"github.com/reinhq/rein/session"
	"github.com/reinhq/rein/store"
)

// persister moves accepted events to the store. The owner hands it events
// in seq order (accept); flush waits until everything up to a seq is
// durable. One write is in flight at a time, and each write takes every
// event accepted so far (group commit). A failed write keeps its events
// queued; the next flush retries them, so the store holds each event
// exactly once.
//
// It holds no agent state, only its queue, under its own mutex.
type persister struct {
	w store.Writer

	mu      sync.Mutex
	queue   []session.Event
	durable int64 // seqs below this are durable
	writing bool
	// done is closed and replaced after every write attempt.
	done    chan struct{}
	lastErr error
	gen     uint64 // write attempts finished
}

func newPersister(w store.Writer, durable int64) *persister {
	return &persister{w: w, durable: durable, done: make(chan struct{})}
}

// accept queues events for the next write. It never blocks on I/O.
func (p *persister) accept(evs ...session.Event) {
	p.mu.Lock()
	p.queue = append(p.queue, evs...)
	p.mu.Unlock()
}

// flush returns once every event with seq < upTo is durable, or the error
// of a write attempt that started after flush was called and failed.
func (p *persister) flush(ctx context.Context, upTo int64) error {
	p.mu.Lock()
	startGen := p.gen
	if p.writing {
		// The write in flight may not hold our events; wait for one more.
		startGen++
	}
	for p.durable < upTo {
		if p.gen > startGen && p.lastErr != nil {
			err := p.lastErr
			p.mu.Unlock()
			return err
		}
		if !p.writing {
			p.writing = true
			batch := p.queue
			if len(batch) == 0 || batch[len(batch)-1].Seq+1 < upTo {
				p.writing = false
				p.mu.Unlock()
				return fmt.Errorf("agent: flush up to seq %d: events not accepted", upTo)
			}
			p.mu.Unlock()
			p.write(batch)
			p.mu.Lock()
			continue
		}
		done := p.done
		p.mu.Unlock()
		select {
		case <-done:
		case <-ctx.Done():
			return context.Cause(ctx)
		}
		p.mu.Lock()
	}
	p.mu.Unlock()
	return nil
}

// write stores batch (the queue's prefix at the time it was taken) and
// updates the state. Called with writing set and the mutex released.
func (p *persister) write(batch []session.Event) {
	var err error
	if len(batch) > 0 {
		// Not cancellable: a write that has started is finished, so the
		// file never holds half a batch we then forget about.
		err = p.w.Append(context.Background(), batch)
	}
	p.mu.Lock()
	if err == nil {
		p.queue = p.queue[len(batch):]
		if len(batch) > 0 {
			p.durable = batch[len(batch)-1].Seq + 1
		}
	}
	p.lastErr = err
	p.gen++
	p.writing = false
	close(p.done)
	p.done = make(chan struct{})
	p.mu.Unlock()
}

// watermark reports the durable bound (seqs below it are durable) and a
// channel closed when the next write attempt finishes.
func (p *persister) watermark() (int64, <-chan struct{}) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.durable, p.done
}

// pending reports the seqs accepted but not yet durable.
func (p *persister) pending() []int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	seqs := make([]int64, len(p.queue))
	for i, ev := range p.queue {
		seqs[i] = ev.Seq
	}
	return seqs
}

// lazyWriter is a new session's writer: it creates the session in the store
// with the first batch that holds an event other than a log-only record
// (hook/result, session/title). Until then such records are held here,
// reported written, and written ahead of that batch; Close drops them if
// none came. A failed Create or Append keeps everything for the retry.
type lazyWriter struct {
	st store.Store
	h  session.Header
	// lost is closed when the created writer's lease is lost
	// (store.Leased); closed, when Close runs, ends the goroutine that
	// watches for that.
	lost, closed chan struct{}
	stop         sync.Once

	mu   sync.Mutex
	w    store.Writer // nil until created
	held []session.Event
}

func newLazyWriter(st store.Store, h session.Header) *lazyWriter {
	return &lazyWriter{st: st, h: h, lost: make(chan struct{}), closed: make(chan struct{})}
}

// Lost implements store.Leased: it passes on the loss of the created
// writer's lease (and never closes for a store without leases).
func (l *lazyWriter) Lost() <-chan struct{} { return l.lost }

func (l *lazyWriter) created() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w != nil
}

// retitle sets the title of the header the session will be created with;
// it reports false once the session exists.
func (l *lazyWriter) retitle(title string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.w != nil {
		return false
	}
	l.h.Title = title
	return true
}

func (l *lazyWriter) Header() session.Header {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.h
}

func (l *lazyWriter) Append(ctx context.Context, batch []session.Event) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.w == nil {
		if onlyRecords(batch) {
			l.held = append(l.held, batch...)
			return nil
		}
		w, err := l.st.Create(ctx, l.h)
		if err != nil {
			return err
		}
		l.w = w
		if lw, ok := w.(store.Leased); ok {
			go func() {
				select {
				case <-lw.Lost():
					close(l.lost)
				case <-l.closed:
				}
			}()
		}
	}
	if len(l.held) > 0 {
		full := append(l.held[:len(l.held):len(l.held)], batch...)
		if err := l.w.Append(ctx, full); err != nil {
			return err
		}
		l.held = nil
		return nil
	}
	return l.w.Append(ctx, batch)
}

func (l *lazyWriter) Flush(ctx context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.w == nil {
		return nil
	}
	return l.w.Flush(ctx)
}

func (l *lazyWriter) Close() error {
	l.stop.Do(func() { close(l.closed) })
	l.mu.Lock()
	defer l.mu.Unlock()
	l.held = nil
	if l.w == nil {
		return nil
	}
	return l.w.Close()
}

// onlyRecords reports whether every event of batch is a log-only record.
func onlyRecords(batch []session.Event) bool {
	for _, ev := range batch {
		if ev.Type != session.TypeHookResult && ev.Type != session.TypeSessionTitle {
			return false
		}
	}
	return true
}
