package jsonl

import (
	"bytes"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"sort"
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
	// For a writer (loadFile's plan set): the bytes read, the header
	// line's length, the checksums planned, and a validator that goes on
	// from the events read (before crash repair, which the writer
	// appends).
	image *image
	hdr   int64
	plan  *sumPlan
	v     *session.Validator
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

// sumPiece is how much the reader reads at a time when it also computes
// checksums: little enough that the bytes are still in the CPU's cache
// when it sums them (several times faster than over memory).
const sumPiece = 256 << 10

// readSource starts reading f (size bytes, as stat said) in the
// background. A file that grows meanwhile is read up to size only; one
// that shrinks, up to its end. With plan set the reader also computes the
// checksums it asks for.
func readSource(f *os.File, size int64, plan *sumPlan) *source {
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
				hi := cap(cur)
				if plan != nil {
					hi = min(hi, len(cur)+sumPiece)
				}
				var k int
				k, err = f.ReadAt(cur[len(cur):hi], off)
				if plan != nil {
					plan.feed(cur[len(cur) : len(cur)+k])
				}
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

// loadFile reads and parses a session file, every line validated. With
// plan set (for a writer) it also computes the checksums the plan asks for
// and keeps what a writer needs to vouch for the bytes (see parsed).
func loadFile(file string, f *os.File, repair bool, plan *sumPlan) (*parsed, error) {
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("%w: %v", store.ErrUnreadable, err)
	}
	src := readSource(f, st.Size(), plan)
	p, err := parseSource(file, src, repair, plan)
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
func parseSource(file string, src *source, repair bool, plan *sumPlan) (*parsed, error) {
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
	p := &parsed{header: hdr, loaded: ld}
	if plan != nil {
		src.mu.Lock()
		p.image = newImage(src.segs)
		src.mu.Unlock()
		p.hdr, p.plan, p.v = int64(nl+1), plan, l.Validator()
	}
	if repair {
		rep, err := session.Repair(l)
		if err != nil {
			return nil, fmt.Errorf("jsonl: repair %s: %w", file, err)
		}
		ld.Repair = rep
	}
	src.mu.Lock()
	p.size = src.size
	src.mu.Unlock()
	p.good = p.size - int64(ld.TornBytes)
	return p, nil
}

// image is a session file's bytes as a load read (and validated) them: its
// segments in order, which the loaded log keeps anyway. Open derives the
// fork index and its checksums from it rather than from another read of
// the file, so that they describe the very bytes that were validated.
type image struct {
	segs  [][]byte
	start []int64 // file offset of each segment
	size  int64
}

func newImage(segs [][]byte) *image {
	m := &image{segs: segs, start: make([]int64, len(segs))}
	for i, s := range segs {
		m.start[i] = m.size
		m.size += int64(len(s))
	}
	return m
}

// seg returns the segment holding offset off (< size) and off within it.
func (m *image) seg(off int64) (int, int) {
	i := sort.Search(len(m.start), func(i int) bool { return m.start[i] > off }) - 1
	return i, int(off - m.start[i])
}

// ReadAt implements io.ReaderAt.
func (m *image) ReadAt(p []byte, off int64) (int, error) {
	n := 0
	for n < len(p) && off < m.size {
		i, j := m.seg(off)
		k := copy(p[n:], m.segs[i][j:])
		n += k
		off += int64(k)
	}
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

// sum returns the CRC-32C of bytes [from, to) (within the image),
// continuing crc.
func (m *image) sum(crc uint32, from, to int64) uint32 {
	for from < to {
		i, j := m.seg(from)
		b := m.segs[i][j:min(len(m.segs[i]), j+int(to-from))]
		crc = crc32.Update(crc, castagnoli, b)
		from += int64(len(b))
	}
	return crc
}

// sumPlan has the reader compute, as it reads, the checksum (CRC-32C) of
// the event bytes of a file, from the end of its header line, up to each
// of a list of offsets: Open checks a fork index's checksums with it
// while the bytes are in the cache.
type sumPlan struct {
	hdr  int64    // the header line's length, as the index has it
	at   []int64  // ascending offsets, each at least hdr
	sums []uint32 // sums[i] is the checksum up to at[i], once read
	crc  uint32   // of the bytes fed after the header line
	off  int64    // bytes fed
}

// feed takes the next bytes of the file.
func (p *sumPlan) feed(b []byte) {
	for {
		if skip := min(int64(len(b)), p.hdr-p.off); skip > 0 {
			b, p.off = b[skip:], p.off+skip
		}
		for i := len(p.sums); i < len(p.at) && p.at[i] <= p.off; i++ {
			p.sums = append(p.sums, p.crc)
		}
		if len(b) == 0 {
			return
		}
		n := len(b)
		if i := len(p.sums); i < len(p.at) {
			n = int(min(int64(n), p.at[i]-p.off))
		}
		p.crc = crc32.Update(p.crc, castagnoli, b[:n])
		b, p.off = b[n:], p.off+int64(n)
	}
}

// sum returns the checksum up to offset off, if the plan had it and the
// reader got there.
func (p *sumPlan) sum(off int64) (uint32, bool) {
	i := sort.Search(len(p.sums), func(i int) bool { return p.at[i] >= off })
	if i < len(p.sums) && p.at[i] == off {
		return p.sums[i], true
	}
	return 0, false
}
