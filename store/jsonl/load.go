package jsonl

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"sync"

	"github.com/reinhq/rein/session"
	"github.com/reinhq/rein/store"
)

// parsed is a session file read into memory.
type parsed struct {
	header session.Header
	loaded *store.Loaded
	// size is the number of bytes read; good is size without the torn
	// tail.
	size, good int64
}

// source is a session file's bytes as they arrive, in segments that end
// at a line end (all but maybe the last): a reader goroutine allocates and
// fills each segment while the previous ones are parsed, so reading (and
// zeroing fresh memory) overlaps parsing, and no single huge buffer is
// needed. The events of the loaded log alias the segments.
type source struct {
	mu   sync.Mutex
	cond *sync.Cond
	segs [][]byte
	done bool  // no more segments will come
	err  error // the read error, if any
	size int64 // bytes read so far
	stop bool  // the reader should stop early
}

// cancel asks the reader to stop; segments read so far stay.
func (s *source) cancel() {
	s.mu.Lock()
	s.stop = true
	s.mu.Unlock()
}

// segment is the size of a source segment; the first is firstSegment,
// and each next one twice the previous, up to segment.
var segment = 32 << 20

const firstSegment = 1 << 20

// readSource starts reading f (size bytes, as stat said) in the
// background. A file that grows meanwhile is read up to size only; one
// that shrinks, up to its end.
func readSource(f *os.File, size int64) *source {
	s := &source{}
	s.cond = sync.NewCond(&s.mu)
	go func() {
		var off int64
		var carry []byte
		var err error
		n := 0 // segments made
		for err == nil {
			left := size - off
			if left <= 0 && len(carry) == 0 {
				break
			}
			// The first segments are small, so parsing starts early.
			want := min(segment, firstSegment<<min(n, 16))
			n++
			cur := make([]byte, len(carry), int64(len(carry))+max(0, min(int64(want), left)))
			copy(cur, carry)
			carry = nil
			for len(cur) < cap(cur) && err == nil {
				var k int
				k, err = f.ReadAt(cur[len(cur):cap(cur)], off)
				cur = cur[:len(cur)+k]
				off += int64(k)
			}
			last := off >= size || err != nil
			if !last {
				nl := bytes.LastIndexByte(cur, '\n')
				if nl < 0 {
					// A line longer than a segment: continue it in the
					// next, bigger one.
					carry = cur
					continue
				}
				carry = cur[nl+1:]
				cur = cur[: nl+1 : nl+1]
			}
			s.mu.Lock()
			s.segs = append(s.segs, cur)
			s.size = off - int64(len(carry))
			s.cond.Broadcast()
			stop := s.stop
			s.mu.Unlock()
			if last || stop {
				carry = nil
				break
			}
		}
		if err == io.EOF {
			err = nil // the file shrank: parse what there is
		}
		s.mu.Lock()
		if len(carry) > 0 {
			s.segs = append(s.segs, carry)
			s.size += int64(len(carry))
		}
		s.done, s.err = true, err
		s.cond.Broadcast()
		s.mu.Unlock()
	}()
	return s
}

// next returns segment i, or false when the read ended before it.
func (s *source) next(i int) ([]byte, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i >= len(s.segs) && !s.done {
		s.cond.Wait()
	}
	if i >= len(s.segs) {
		return nil, false
	}
	return s.segs[i], true
}

// end waits for the reader and returns its error.
func (s *source) end() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for !s.done {
		s.cond.Wait()
	}
	return s.err
}

// loadFile reads and parses a session file, every line validated.
func loadFile(file string, f *os.File, repair bool) (*parsed, error) {
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("%w: %v", store.ErrUnreadable, err)
	}
	src := readSource(f, st.Size())
	p, err := parseSource(file, src, repair)
	if rerr := src.end(); rerr != nil && err == nil {
		err = fmt.Errorf("%w: read %s: %v", store.ErrUnreadable, file, rerr)
	}
	if err != nil {
		return nil, err
	}
	return p, nil
}

// parseSource parses a session file (header line, then events) into a
// session.Log whose event data aliases the source's segments, with the
// rules of store.ReadFile, streaming. With repair set it runs
// session.Repair on the result.
func parseSource(file string, src *source, repair bool) (*parsed, error) {
	defer src.cancel() // no need to read on after an error
	lineErr := func(line int, err error) error { return &store.LineError{File: file, Line: line, Err: err} }
	seg, ok := src.next(0)
	nl := -1
	if ok {
		nl = bytes.IndexByte(seg, '\n')
	}
	if nl < 0 {
		return nil, lineErr(1, fmt.Errorf("%w: no complete header line", session.ErrCorrupt))
	}
	hdr, err := store.ParseHeader(seg[:nl])
	if err != nil {
		return nil, lineErr(1, err)
	}
	l := session.NewLog(hdr)
	ld := &store.Loaded{Log: l}
	feed := func(body []byte) error {
		if err := l.AppendLines(body); err != nil {
			return store.LoadError(file, l.Len(), 2, err)
		}
		return nil
	}

	// Only at the end can the final line be judged torn, so the last
	// complete line seen is held back until more lines follow it. A
	// segment's other lines are parsed at once, while the reader reads on.
	run := func() error {
		var pending []byte
		body := seg[nl+1:]
		for i := 1; ; i++ {
			// body: complete lines (segments end at line ends), then
			// maybe a partial line if it is the final segment.
			complete := body[:bytes.LastIndexByte(body, '\n')+1]
			if len(complete) > 0 {
				if err := feed(pending); err != nil {
					return err
				}
				j := bytes.LastIndexByte(complete[:len(complete)-1], '\n')
				if err := feed(complete[:j+1]); err != nil {
					return err
				}
				pending = complete[j+1:]
			}
			next, more := src.next(i)
			if !more {
				// A final line without '\n' is a torn tail: a crash
				// while writing. So is a final line holding zeros that
				// does not parse (a page the crash lost). Any other
				// final line must read like the rest.
				ld.TornBytes = len(body) - len(complete)
				if ld.TornBytes == 0 && len(pending) > 0 && store.LostWrite(pending[:len(pending)-1]) {
					ld.TornBytes, ld.TornZeros = len(pending), true
					pending = nil
				}
				return feed(pending)
			}
			if len(complete) < len(body) {
				// Only the final segment may end inside a line.
				return fmt.Errorf("%w: %s: segment ends inside a line", store.ErrUnreadable, file)
			}
			body = next
		}
	}
	if err := run(); err != nil {
		return nil, err
	}
	if repair {
		rep, err := session.Repair(l)
		if err != nil {
			return nil, fmt.Errorf("jsonl: repair %s: %w", file, err)
		}
		ld.Repair = rep
	}
	src.mu.Lock()
	size := src.size
	src.mu.Unlock()
	return &parsed{header: hdr, loaded: ld, size: size, good: size - int64(ld.TornBytes)}, nil
}
