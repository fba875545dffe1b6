package jsonl

import (
	"bytes"
	"context"
	"fmt"
	"hash/crc32"
	"os"
	"sync"
	"time"

	"github.com/reinhq/rein/session"
	"github.com/reinhq/rein/store"
	"github.com/reinhq/rein/store/internal/group"
)

// file is what a writer needs of its session file; tests wrap it to inject
// write and sync failures.
type file interface {
	WriteAt(b []byte, off int64) (int, error)
	Sync() error
	Truncate(size int64) error
}

// writer appends to one locked session file with group commit: the first
// Append to find no commit running becomes the committer, writes every
// queued batch with one write and one fsync, wakes their callers, and hands
// the commit role to the first batch queued meanwhile.
type writer struct {
	s    *Store
	id   string
	hdr  session.Header
	osf  *os.File    // the session file (also flocked)
	lock *os.File    // the session's lock file, flocked (see Store.lockPath)
	fi   os.FileInfo // osf's identity, to notice the path being replaced
	f    file
	stop sync.Once

	mu     sync.Mutex
	closed bool
	broken error             // the file could not be restored after a failure
	q      group.Queue[*req] // group commit
	next   int64             // seq the next accepted batch must start at
	size   int64             // durable size in bytes
	m      meta              // summary of the durable content
	ix     *index            // fork index of the durable content; nil: not kept
	idx    sidecar           // the fork index's file
	// v validates what is committed, so that the fork index may vouch for
	// it (index.vouch); nil once a commit did not validate (the writer then
	// records no more checksums). Only the committer uses it.
	v       *session.Validator
	metaAt  time.Time
	scratch []byte
}

// linePool recycles the encoding buffers of batches (a batch's lines are
// copied into the committer's buffer before Append returns).
var linePool = sync.Pool{New: func() any { return new([]byte) }}

type req struct {
	lines  []byte
	events []session.Event
}

// newWriter returns the writer of session h's file f, whose durable content
// m summarizes and x indexes (nil: no index), and which v has validated
// (nil: the writer vouches for nothing).
func (s *Store) newWriter(h session.Header, f *os.File, m meta, x *index, v *session.Validator) *writer {
	if x == nil || x.Sum < 0 {
		v = nil
	}
	w := &writer{s: s, id: h.ID, hdr: h, osf: f, f: f, next: m.Events, size: m.Size, m: m, ix: x, idx: sidecar{path: s.idxPath(h.ID)}, v: v}
	w.fi, _ = f.Stat()
	if s.wrap != nil {
		w.f = s.wrap(f)
	}
	return w
}

// Header implements store.Writer.
func (w *writer) Header() session.Header { return w.hdr }

// Append implements store.Writer. The batch is encoded before it is
// queued; ctx is honoured only until then (a queued batch is committed
// whatever happens to ctx, so that Append's answer is always the truth).
// When a commit fails, its batches and every batch queued behind them fail
// and nothing of them stays in the file; the caller may retry from the
// first failed seq.
func (w *writer) Append(ctx context.Context, batch []session.Event) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if len(batch) == 0 {
		return w.Flush(ctx)
	}
	n := 0
	for i := range batch {
		n += 96 + len(batch[i].Data)
	}
	bp := linePool.Get().(*[]byte)
	defer linePool.Put(bp)
	lines := (*bp)[:0]
	if cap(lines) < n {
		lines = make([]byte, 0, n)
	}
	for i := range batch {
		if i > 0 && batch[i].Seq != batch[i-1].Seq+1 {
			return fmt.Errorf("%w: batch seq %d follows %d", store.ErrSeq, batch[i].Seq, batch[i-1].Seq)
		}
		if err := store.CheckLine(batch[i]); err != nil {
			return err
		}
		lines = batch[i].AppendLine(lines)
	}
	if cap(lines) <= 1<<20 {
		*bp = lines // keep the grown buffer; bigger ones go to the GC
	}
	r := &req{lines: lines, events: batch}
	w.mu.Lock()
	switch {
	case w.closed:
		w.mu.Unlock()
		return fmt.Errorf("%w: session %s", store.ErrClosed, w.id)
	case w.broken != nil:
		w.mu.Unlock()
		return w.broken
	case batch[0].Seq != w.next:
		next := w.next
		w.mu.Unlock()
		return fmt.Errorf("%w: batch starts at seq %d, want %d", store.ErrSeq, batch[0].Seq, next)
	}
	w.next += int64(len(batch))
	return w.enqueue(r)
}

// Flush implements store.Writer.
func (w *writer) Flush(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return fmt.Errorf("%w: session %s", store.ErrClosed, w.id)
	}
	if !w.q.Busy() {
		err := w.broken
		w.mu.Unlock()
		return err
	}
	return w.enqueue(&req{})
}

// enqueue queues r (w.mu held; released on return) and waits for its
// group's commit.
func (w *writer) enqueue(r *req) error {
	return w.q.Do(&w.mu, r, w.commit,
		func(error) { w.next = w.m.Events }, // batches behind the failed group fail too
		func(err error) error { return fmt.Errorf("jsonl: an earlier batch failed: %w", err) })
}

// commit writes and fsyncs group. Only the committer calls it, so the
// fields it touches outside w.mu (scratch, size, m) are its own until it
// hands over under w.mu.
func (w *writer) commit(group []*req) error {
	buf := w.scratch[:0]
	for _, g := range group {
		buf = append(buf, g.lines...)
	}
	if cap(buf) <= 1<<20 {
		w.scratch = buf
	}
	if len(buf) == 0 {
		return nil
	}
	_, err := w.f.WriteAt(buf, w.size)
	if err == nil {
		err = w.f.Sync()
	}
	if err == nil {
		err = w.stillOurs()
	}
	if err != nil {
		// Leave nothing of the group behind.
		if terr := w.f.Truncate(w.size); terr != nil {
			w.mu.Lock()
			w.broken = fmt.Errorf("jsonl: session %s: cannot restore the file after %v: %w", w.id, err, terr)
			w.mu.Unlock()
		}
		return fmt.Errorf("jsonl: append to %s: %w", w.id, err)
	}
	// The committed lines are validated, so that the index may vouch for
	// them. (The agent's log validated them already, but a store takes no
	// caller's word for what it vouches for.) Lines that do not validate
	// are stored all the same, as Append promises; from them on the
	// writer vouches for nothing.
	if w.v != nil && w.v.AppendLines(buf) != nil {
		w.v = nil
	}
	w.mu.Lock()
	if w.ix != nil {
		// Checksums at the new marks, and at the end, of validated bytes.
		vouch := w.v != nil && w.ix.Sum >= 0
		sum, summed := uint32(w.ix.Sum), 0
		end := w.size
		for _, g := range group {
			b := g.lines
			for i := range g.events {
				n := bytes.IndexByte(b, '\n') + 1
				end += int64(n)
				b = b[n:]
				if w.ix.add(g.events[i].Seq, g.events[i].Type, g.events[i].Data, end) && vouch {
					to := int(end - w.size)
					sum, summed = crc32.Update(sum, castagnoli, buf[summed:to]), to
					w.ix.vouch(sum)
				}
			}
		}
		if vouch {
			w.ix.vouch(crc32.Update(sum, castagnoli, buf[summed:]))
		}
		// New fork points (a turn/end, a between-turn boundary or title)
		// are recorded at once; within a turn nothing Fork needs changes.
		if w.ix.dirty && !w.ix.TurnOpen {
			w.idx.write(w.ix)
		}
	}
	w.size += int64(len(buf))
	for _, g := range group {
		w.m.add(g.events)
	}
	w.m.Size = w.size
	if now := time.Now(); now.Sub(w.metaAt) >= w.s.metaEvery {
		w.metaAt = now
		w.m.write(w.s.metaPath(w.id))
	}
	w.mu.Unlock()
	return nil
}

// stillOurs reports an error when the session's path no longer names the
// file this writer holds (another program deleted it or replaced it, e.g.
// by rename): what was just written went to a file nobody will read, so
// the batch must not be acknowledged, and the lock no longer keeps other
// writers out.
func (w *writer) stillOurs() error {
	if w.fi == nil {
		return nil
	}
	fi, err := os.Stat(w.s.Path(w.id))
	if err == nil && os.SameFile(fi, w.fi) {
		return nil
	}
	err = fmt.Errorf("jsonl: session %s: its file was removed or replaced by another program", w.id)
	w.mu.Lock()
	w.broken = err
	w.mu.Unlock()
	return err
}

// writeMeta writes both sidecars.
func (w *writer) writeMeta() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.metaAt = time.Now()
	w.m.write(w.s.metaPath(w.id))
	if w.ix != nil && (w.ix.dirty || w.idx.f == nil) {
		w.idx.write(w.ix)
	}
}

// Close implements store.Writer: it waits for queued batches, writes the
// sidecar and releases the lock. Appends racing with Close either commit
// before it returns or fail with store.ErrClosed.
func (w *writer) Close() error {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return fmt.Errorf("%w: session %s", store.ErrClosed, w.id)
	}
	w.closed = true
	var err error
	if w.q.Busy() {
		err = w.enqueue(&req{})
		w.mu.Lock()
	}
	if w.broken == nil {
		w.m.write(w.s.metaPath(w.id))
		if w.ix != nil && w.ix.dirty {
			w.idx.write(w.ix)
		}
	} else if err == nil {
		err = w.broken
	}
	w.mu.Unlock()
	w.abandon()
	return err
}

// abandon releases the file and its lock without flushing: what a crash
// does.
func (w *writer) abandon() {
	w.stop.Do(func() {
		w.mu.Lock()
		w.closed = true
		w.mu.Unlock()
		w.osf.Close()
		w.mu.Lock()
		w.idx.close()
		w.mu.Unlock()
		if w.lock != nil {
			w.lock.Close()
		}
	})
}
