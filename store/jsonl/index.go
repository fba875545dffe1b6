package jsonl

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"

	"github.com/reinhq/rein/session"
	"github.com/reinhq/rein/store"
)

// The fork index <id>.idx records, for the first Size bytes of a session
// file, what Fork needs to decide a fork point and to find where event
// line seq ends without reading the lines before it: the turn spans, the
// between-turn compaction spans, the titles, and a sparse seq→offset map.
// Like <id>.meta it is a cache written without fsync and trusted only up
// to the Size it names; the lines after that size are scanned by their
// fixed prefix (seq and type) only. It is a separate file so that List,
// which reads every session's .meta, does not pay for it.

// indexVersion is the fork index's format version; another one is ignored.
const indexVersion = 1

// markGap is how many bytes of between-turn lines may follow a mark before
// the next between-turn line gets one (every turn/end gets one). Between
// the mark before a fork point and the fork point itself there are only
// between-turn lines, so finding the fork point's offset reads at most
// about markGap bytes. Tests shrink it.
var markGap int64 = 64 << 10

// scanChunk is the read size of prefix scans. Tests shrink it.
var scanChunk = 1 << 20

// index is the fork index (see above). Spans are flat start,end pairs
// sorted by start, end -1 while open, as in session's checker.
type index struct {
	V      int       `json:"v"`
	Size   int64     `json:"size"`   // bytes described, header included; a line end
	Hdr    int64     `json:"hdr"`    // length of the header line, '\n' included
	Events int64     `json:"events"` // event lines in [Hdr, Size)
	Turns  []int64   `json:"turns"`  // turn/start seq, turn/end seq
	Comps  []int64   `json:"comps"`  // between-turn compaction/start, compaction/end
	Marks  []int64   `json:"marks"`  // seq, offset just past its line
	Titles []titleAt `json:"titles,omitempty"`
	// The state of session's checker that the spans depend on.
	TurnOpen   bool `json:"turnOpen,omitempty"`
	CompOpen   bool `json:"compOpen,omitempty"`
	CompInTurn bool `json:"compInTurn,omitempty"`

	dirty bool  // changed since written (spans, marks or titles)
	tail  int64 // where the last line starts, when scan added it; else 0
}

type titleAt struct {
	Seq   int64  `json:"seq"`
	Title string `json:"title"`
}

func newIndex(hdr int64) *index {
	return &index{V: indexVersion, Size: hdr, Hdr: hdr, dirty: true}
}

// add folds the event line seq, of type typ, ending at byte end, into x.
// data is needed for session/title only. It follows session's checker
// (Checker.apply) for the spans.
func (x *index) add(seq int64, typ session.Type, data []byte, end int64) {
	switch typ {
	case session.TypeTurnStart:
		x.TurnOpen = true
		x.Turns = append(x.Turns, seq, -1)
		x.dirty = true
	case session.TypeTurnEnd:
		x.TurnOpen = false
		if n := len(x.Turns); n > 0 && x.Turns[n-1] < 0 {
			x.Turns[n-1] = seq
		}
		if x.CompOpen && x.CompInTurn {
			x.CompOpen = false
		}
		x.dirty = true
	case session.TypeCompactionStart:
		x.CompOpen, x.CompInTurn = true, x.TurnOpen
		if !x.TurnOpen {
			x.Comps = append(x.Comps, seq, -1)
			x.dirty = true
		}
	case session.TypeCompactionEnd:
		if x.CompOpen && !x.CompInTurn {
			if n := len(x.Comps); n > 0 && x.Comps[n-1] < 0 {
				x.Comps[n-1] = seq
				x.dirty = true
			}
		}
		x.CompOpen = false
	case session.TypeSessionTitle:
		var t session.SessionTitle
		if json.Unmarshal(data, &t) == nil {
			x.Titles = append(x.Titles, titleAt{seq, t.Title})
			x.dirty = true
		}
	}
	x.Events, x.Size = seq+1, end
	if !x.TurnOpen && (typ == session.TypeTurnEnd || end-x.lastMark() >= markGap) {
		x.Marks = append(x.Marks, seq, end)
		x.dirty = true
	}
}

func (x *index) lastMark() int64 {
	if n := len(x.Marks); n > 0 {
		return x.Marks[n-1]
	}
	return x.Hdr
}

// forkPoint is session.ForkPoint on the indexed events.
func (x *index) forkPoint(at int64) error {
	if at < -1 || at >= x.Events {
		return fmt.Errorf("%w: fork seq %d out of range -1..%d", errBeyond, at, x.Events-1)
	}
	if at == -1 {
		return nil
	}
	if start, ok := within(x.Turns, at); ok {
		return fmt.Errorf("%w: fork seq %d is inside the turn that starts at seq %d", session.ErrOpenTurn, at, start)
	}
	if start, ok := within(x.Comps, at); ok {
		return fmt.Errorf("%w: fork seq %d is inside the compaction that starts at seq %d", session.ErrOpenTurn, at, start)
	}
	return nil
}

// within finds the span of spans (flat pairs sorted by start) with
// start <= at < end (end -1: open) and returns its start.
func within(spans []int64, at int64) (int64, bool) {
	i := startsUpTo(spans, at) - 1
	if i < 0 {
		return 0, false
	}
	start, end := spans[2*i], spans[2*i+1]
	return start, end < 0 || at < end
}

// startsUpTo is the number of spans (flat pairs) that start at or before at.
func startsUpTo(spans []int64, at int64) int {
	return sort.Search(len(spans)/2, func(i int) bool { return spans[2*i] > at })
}

// mark returns the last mark at or before seq at, or (-1, Hdr).
func (x *index) mark(at int64) (seq, end int64) {
	i := sort.Search(len(x.Marks)/2, func(i int) bool { return x.Marks[2*i] > at }) - 1
	if i < 0 {
		return -1, x.Hdr
	}
	return x.Marks[2*i], x.Marks[2*i+1]
}

// title returns the title set last at or before seq at.
func (x *index) title(at int64) (string, bool) {
	i := sort.Search(len(x.Titles), func(i int) bool { return x.Titles[i].Seq > at }) - 1
	if i < 0 {
		return "", false
	}
	return x.Titles[i].Title, true
}

// child is the index of a fork child holding events 0..at (an allowed
// fork point) whose line at ends at end in the parent, under a header line
// of hdr bytes.
func (x *index) child(at, end, hdr int64) *index {
	shift := hdr - x.Hdr
	c := newIndex(hdr)
	c.Events, c.Size = at+1, end+shift
	c.Turns = append([]int64(nil), x.Turns[:2*startsUpTo(x.Turns, at)]...)
	c.Comps = append([]int64(nil), x.Comps[:2*startsUpTo(x.Comps, at)]...)
	n := sort.Search(len(x.Marks)/2, func(i int) bool { return x.Marks[2*i] > at })
	c.Marks = make([]int64, 0, 2*n+2)
	for i := 0; i < n; i++ {
		c.Marks = append(c.Marks, x.Marks[2*i], x.Marks[2*i+1]+shift)
	}
	if at >= 0 && (n == 0 || x.Marks[2*n-2] < at) {
		c.Marks = append(c.Marks, at, c.Size)
	}
	c.Titles = append([]titleAt(nil), x.Titles[:sort.Search(len(x.Titles), func(i int) bool { return x.Titles[i].Seq > at })]...)
	return c
}

// write replaces the sidecar at path like meta.write (no fsync).
func (x *index) write(path string) {
	if writeSidecar(path, x) {
		x.dirty = false
	}
}

// readIndex reads the sidecar at path; see parseIndex.
func readIndex(path string, hdr, size int64) (*index, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, false
	}
	return parseIndex(b, hdr, size)
}

// parseIndex decodes a sidecar and checks that it is plausible for a file
// whose header line is hdr bytes long and which holds at least size bytes.
// Whether its content matches the file is checked by its users (the seq
// of the line found at an offset).
func parseIndex(b []byte, hdr, size int64) (*index, bool) {
	if len(b) == 0 {
		return nil, false
	}
	x := &index{}
	if json.Unmarshal(b, x) != nil || x.V != indexVersion || x.Hdr != hdr || x.Size < hdr || x.Size > size ||
		x.Events < 0 || len(x.Turns)%2 != 0 || len(x.Comps)%2 != 0 || len(x.Marks)%2 != 0 {
		return nil, false
	}
	if n := len(x.Marks); n > 0 && (x.Marks[n-2] >= x.Events || x.Marks[n-1] > x.Size) {
		return nil, false
	}
	return x, true
}

// errBeyond reports a fork seq past the parent's stored events.
var errBeyond = errors.New("beyond the stored events")

// scan extends x with the event lines of f from x.Size up to limit bytes,
// stopping once event stop is in (stop < 0: read to limit). Only each
// line's fixed prefix (seq and type, as Event.AppendLine writes it) is
// read; a line in another field order, and a session/title, goes through
// session.ParseLine. A final line without '\n' ends the scan (a torn
// tail). A line that does not parse or does not continue the seqs is an
// error (a *store.LineError naming file), except that a final complete
// line that does not parse is a torn tail too.
func (x *index) scan(f io.ReaderAt, file string, limit, stop int64) error {
	off := x.Size
	if off >= limit {
		return nil
	}
	buf := make([]byte, min(int64(scanChunk), limit-off))
	for stop < 0 || x.Events <= stop {
		want := min(int64(len(buf)), limit-off)
		if want <= 0 {
			return nil
		}
		n, err := f.ReadAt(buf[:want], off)
		if n == 0 {
			if err == nil || err == io.EOF {
				return nil // the file shrank
			}
			return fmt.Errorf("%w: %v", store.ErrUnreadable, err)
		}
		b := buf[:n]
		pos := 0
		for stop < 0 || x.Events <= stop {
			nl := bytes.IndexByte(b[pos:], '\n')
			if nl < 0 {
				break
			}
			line := b[pos : pos+nl]
			seq, typ, ok := linePrefix(line)
			var data []byte
			if !ok || typ == session.TypeSessionTitle {
				ev, perr := session.ParseLine(line)
				if perr != nil {
					final := bytes.IndexByte(b[pos+nl+1:], '\n') < 0 && off+int64(n) >= limit
					if final {
						return nil
					}
					return &store.LineError{File: file, Line: int(x.Events) + 2, Err: perr}
				}
				seq, typ, data = ev.Seq, ev.Type, ev.Data
			}
			if seq != x.Events {
				return &store.LineError{File: file, Line: int(x.Events) + 2, Err: fmt.Errorf("%w: seq %d, want %d", store.ErrSeq, seq, x.Events)}
			}
			x.add(seq, typ, data, off+int64(pos+nl+1))
			x.tail = off + int64(pos)
			pos += nl + 1
		}
		if pos == 0 {
			if want < int64(len(buf)) || int64(n) < want {
				return nil // a torn tail
			}
			buf = make([]byte, 2*len(buf)) // a line longer than the buffer
			continue
		}
		off += int64(pos)
	}
	return nil
}

// linePrefix reads seq and type from the fixed prefix of an event line
// (`{"seq":N,"type":"T",…}`), without looking at the rest. Types the index
// does not care about come back as "".
func linePrefix(line []byte) (int64, session.Type, bool) {
	const p1, p2 = `{"seq":`, `,"type":"`
	if len(line) < len(p1)+len(p2)+4 || string(line[:len(p1)]) != p1 || line[len(line)-1] != '}' {
		return 0, "", false
	}
	i := len(p1)
	var seq int64
	for start := i; i < len(line) && line[i] >= '0' && line[i] <= '9'; i++ {
		if i-start >= 18 {
			return 0, "", false
		}
		seq = seq*10 + int64(line[i]-'0')
	}
	if i == len(p1) || len(line)-i < len(p2) || string(line[i:i+len(p2)]) != p2 {
		return 0, "", false
	}
	i += len(p2)
	j := bytes.IndexByte(line[i:], '"')
	if j <= 0 || bytes.IndexByte(line[i:i+j], '\\') >= 0 {
		return 0, "", false
	}
	switch t := line[i : i+j]; string(t) {
	case string(session.TypeTurnStart):
		return seq, session.TypeTurnStart, true
	case string(session.TypeTurnEnd):
		return seq, session.TypeTurnEnd, true
	case string(session.TypeCompactionStart):
		return seq, session.TypeCompactionStart, true
	case string(session.TypeCompactionEnd):
		return seq, session.TypeCompactionEnd, true
	case string(session.TypeSessionTitle):
		return seq, session.TypeSessionTitle, true
	}
	return seq, "", true
}

// lineAt reads event line at (< x.Events) using x's marks: it starts at
// the last mark before at and skips the lines up to it. It returns the
// line (without '\n') and the offset just past it.
func (x *index) lineAt(f io.ReaderAt, at int64) ([]byte, int64, error) {
	seq, off := x.mark(at - 1)
	r := bufio.NewReaderSize(io.NewSectionReader(f, off, x.Size-off), 64<<10)
	for ; seq < at-1; seq++ {
		for {
			line, err := r.ReadSlice('\n')
			off += int64(len(line))
			if err == nil {
				break
			}
			if err != bufio.ErrBufferFull {
				return nil, 0, fmt.Errorf("%w: index names %d events", errStale, x.Events)
			}
		}
	}
	line, err := r.ReadBytes('\n')
	if err != nil {
		return nil, 0, fmt.Errorf("%w: index names %d events", errStale, x.Events)
	}
	return line[:len(line)-1], off + int64(len(line)), nil
}

// errStale reports a fork index that does not match its file.
var errStale = errors.New("stale fork index")
