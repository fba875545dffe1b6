package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/reinhq/rein/session"
)

// Streaming a session: reading it once, in order, without holding it. A
// face that shows a session (an editor's replay, `rein sessions show`)
// needs each event once and keeps only what it draws; loading the whole log
// first would hold the file's bytes and an index of every event.

// StreamOptions tune Stream.
type StreamOptions struct {
	// SkipChunks keeps assistant/chunk events from fn. They are read and
	// validated all the same; a reader that shows whole messages needs
	// none of them, and they are most of a session's lines.
	SkipChunks bool
	// RefuseHeld fails with the *LockedError, before fn sees any event,
	// when a writer holds the session (it is running, maybe in another
	// process).
	RefuseHeld bool
	// Piece is how many bytes a Streamer reads and validates at a time
	// (more for a line longer than that); 0 means 1 MiB, big enough for
	// the validator to parse on every core, small enough to stay in the
	// caches.
	Piece int
}

// Streamed is what Stream reports besides the events.
type Streamed struct {
	Header session.Header
	// Events is the number of stored events read (fn saw every one, or
	// every one but the chunks).
	Events int64
	// Repair lists the events crash repair adds to a session left inside
	// a turn or a between-turn compaction (seqs from Events on), as Load
	// repairs it in memory; fn does not see them. Nothing is written.
	Repair []session.Event
	// TornBytes and TornZeros are Load's: a torn final line was skipped.
	TornBytes int
	TornZeros bool
	// Locked is set when a writer held the session while it was read:
	// the events are as far as they were written, and not repaired.
	Locked *LockedError
}

// Streamer is implemented by stores that read a session a piece at a time
// (store/jsonl, store/memstore): the reader holds about one piece of the
// session and the validator's state (a byte per event), not the log.
type Streamer interface {
	// Stream calls fn with each stored event of session id, in order,
	// after the event was validated exactly as Load validates it (every
	// line, the invariant). ev.Data is valid only during the call; p is
	// ev's payload when the store decoded it already, as ev.Decode would
	// (nil otherwise: chunks, request headers, unknown types; ev.Decode
	// decodes them). It fails as Load does (a *LineError naming the line,
	// ErrNotFound, ...) after fn has seen the events before the bad line;
	// an error of fn stops it and is returned as it is. With fn nil it
	// only validates.
	Stream(ctx context.Context, id string, opts StreamOptions, fn func(ev session.Event, p session.Payload) error) (*Streamed, error)
}

// Stream calls fn with each stored event of session id, in order, as
// Streamer does, through st's own Streamer when it has one; another
// store's session is loaded and handed over in bounded batches (p nil; a
// session that does not load fails before fn sees any event).
func Stream(ctx context.Context, st Store, id string, opts StreamOptions, fn func(ev session.Event, p session.Payload) error) (*Streamed, error) {
	if s, ok := st.(Streamer); ok {
		return s.Stream(ctx, id, opts, fn)
	}
	ld, err := st.Load(ctx, id, LoadOptions{})
	if err != nil {
		return nil, err
	}
	if opts.RefuseHeld && ld.Locked != nil {
		return nil, ld.Locked
	}
	stored := ld.Log.Len() - int64(len(ld.Repair))
	for from := int64(0); fn != nil && from < stored; from += 4096 {
		for _, ev := range ld.Log.EventRange(from, min(from+4096, stored)) {
			if opts.SkipChunks && ev.Type == session.TypeAssistantChunk {
				continue
			}
			if err := fn(ev, nil); err != nil {
				return nil, err
			}
		}
	}
	return &Streamed{Header: ld.Log.Header(), Events: stored, Repair: ld.Repair, TornBytes: ld.TornBytes, TornZeros: ld.TornZeros, Locked: ld.Locked}, nil
}

// StreamFile is Stream over the bytes of a session file (header line,
// event lines) read from r, size bytes long, with the rules of ReadFile
// (torn tails, every line validated); name goes into errors. It holds
// about one piece of the file at a time; with fn nil it only validates.
// held, when set, says whether a
// writer holds the session: it is asked before reading (for
// opts.RefuseHeld, and for Streamed.Locked), and again at the end before
// an open final turn is repaired, since a writer that took the session
// meanwhile is running that turn. Only then is anything read twice: the
// open turn's lines, which repair reads.
func StreamFile(ctx context.Context, name string, r io.ReaderAt, size int64, held func() *LockedError, opts StreamOptions, fn func(ev session.Event, p session.Payload) error) (*Streamed, error) {
	if held == nil {
		held = func() *LockedError { return nil }
	}
	out := &Streamed{Locked: held()}
	if opts.RefuseHeld && out.Locked != nil {
		return nil, out.Locked
	}
	pieceSize := opts.Piece
	if pieceSize <= 0 {
		pieceSize = 1 << 20
	}
	f := fileReader{r: r, size: size, buf: make([]byte, 0, min(int64(pieceSize), max(size, 1)))}
	defer f.wait()
	// The header.
	nl := -1
	for nl < 0 {
		if !f.more() {
			return nil, &LineError{File: name, Line: 1, Err: fmt.Errorf("%w: no complete header line", session.ErrCorrupt)}
		}
		f.prefetch(0)
		if err := f.advance(0); err != nil {
			return nil, fmt.Errorf("%w: read %s: %v", ErrUnreadable, name, err)
		}
		nl = bytes.IndexByte(f.buf, '\n')
	}
	h, err := ParseHeader(f.buf[:nl])
	if err != nil {
		return nil, &LineError{File: name, Line: 1, Err: err}
	}
	f.buf, f.off = f.buf[nl+1:], f.off+int64(nl+1)
	out.Header = h

	v := session.NewValidator(h)
	var fnErr error
	if fn != nil {
		v.Visit(func(ev session.Event, p session.Payload) error {
			fnErr = fn(ev, p)
			return fnErr
		}, !opts.SkipChunks)
	}
	// pieces remember where each fed piece starts, for the re-read of
	// the open turn.
	type piece struct{ seq, off int64 }
	var pieces []piece
	feed := func(n int) error {
		if n == 0 {
			return nil
		}
		pieces = append(pieces, piece{v.Len(), f.off})
		if err := v.AppendLines(f.buf[:n]); err != nil {
			if fnErr != nil && err == fnErr {
				return err
			}
			return LoadError(name, v.Len(), 2, err)
		}
		return nil
	}
	// Only at the end can the final line be judged torn, so the last
	// complete line read is held back until more follow it. The next
	// piece is read while this one is validated.
	var fed int64 // the end of what was fed
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		complete := bytes.LastIndexByte(f.buf, '\n') + 1
		if !f.more() {
			out.TornBytes = len(f.buf) - complete
			if out.TornBytes == 0 && complete > 0 {
				last := f.buf[bytes.LastIndexByte(f.buf[:complete-1], '\n')+1 : complete]
				if LostWrite(last[:len(last)-1]) {
					out.TornBytes, out.TornZeros = len(last), true
					complete -= len(last)
				}
			}
			if err := feed(complete); err != nil {
				return nil, err
			}
			fed = f.off + int64(complete)
			break
		}
		// All but the last complete line.
		n := 0
		if complete > 0 {
			n = bytes.LastIndexByte(f.buf[:complete-1], '\n') + 1
		}
		f.prefetch(n)
		if err := feed(n); err != nil {
			return nil, err
		}
		if err := f.advance(n); err != nil {
			return nil, fmt.Errorf("%w: read %s: %v", ErrUnreadable, name, err)
		}
	}
	out.Events = v.Len()
	from := v.RepairFrom()
	if from < 0 {
		return out, nil
	}
	if out.Locked = held(); out.Locked != nil {
		return out, nil
	}
	// Re-read the open turn from the piece it starts in.
	i := len(pieces) - 1
	for pieces[i].seq > from {
		i--
	}
	tail, err := f.reread(pieces[i].off, fed, from, out.Events)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrUnreadable, name, err)
	}
	if out.Repair, err = v.Repair(tail); err != nil {
		return nil, fmt.Errorf("store: repair %s: %w", name, err)
	}
	return out, nil
}

// fileReader reads a file in pieces: buf holds the bytes from offset off
// on that are not fed yet. While the validator works on buf, the next
// piece is read into the other buffer (spare), after a copy of what buf
// holds back.
type fileReader struct {
	r     io.ReaderAt
	size  int64
	buf   []byte
	off   int64
	spare []byte
	ahead chan readAhead // the read in flight, or nil
}

type readAhead struct {
	buf []byte
	n   int // bytes read after the copy
	err error
}

// more reports whether the file holds bytes after buf.
func (f *fileReader) more() bool { return f.off+int64(len(f.buf)) < f.size }

// prefetch starts reading the bytes after buf into the other buffer,
// after a copy of buf[keep:]: what the next piece carries over (a line
// longer than a piece gets a buffer twice its size).
func (f *fileReader) prefetch(keep int) {
	carry, end := f.buf[keep:], f.off+int64(len(f.buf))
	next := f.spare
	if c := max(2*len(carry), cap(f.buf)); cap(next) < c {
		next = make([]byte, 0, c)
	}
	f.spare = nil
	want := int(min(int64(cap(next)-len(carry)), f.size-end))
	ch := make(chan readAhead, 1)
	f.ahead = ch
	go func() {
		next = append(next[:0], carry...)
		n, err := f.r.ReadAt(next[len(carry):len(carry)+want], end)
		ch <- readAhead{next[:len(carry)+n], n, err}
	}()
}

// advance waits for the read prefetch started and makes its buffer buf,
// the bytes of buf before keep having been fed.
func (f *fileReader) advance(keep int) error {
	res := <-f.ahead
	f.ahead = nil
	f.off += int64(keep)
	f.spare, f.buf = f.buf[:0], res.buf
	switch {
	case res.err == io.EOF || res.err == nil && res.n == 0:
		f.size = f.off + int64(len(f.buf)) // the file shrank: read what there is
	case res.err != nil:
		return res.err
	}
	return nil
}

// wait waits for a read still in flight.
func (f *fileReader) wait() {
	if f.ahead != nil {
		<-f.ahead
		f.ahead = nil
	}
}

// reread reads the events [from, to) again, from the lines between file
// offsets off and end (they were validated when they were first read).
func (f *fileReader) reread(off, end, from, to int64) ([]session.Event, error) {
	data := make([]byte, end-off)
	if n, err := f.r.ReadAt(data, off); n < len(data) {
		return nil, fmt.Errorf("re-read: %v", err)
	}
	var tail []session.Event
	for len(data) > 0 {
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			return nil, errChanged
		}
		ev, err := session.ParseLine(data[:i])
		data = data[i+1:]
		if err != nil {
			return nil, errors.Join(errChanged, err)
		}
		if ev.Seq < from {
			continue
		}
		if ev.Seq != from+int64(len(tail)) {
			return nil, errChanged
		}
		tail = append(tail, ev)
	}
	if from+int64(len(tail)) != to {
		return nil, errChanged
	}
	return tail, nil
}

var errChanged = errors.New("the session changed while it was read")
