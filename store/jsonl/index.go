package jsonl

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"os"
	"sort"
	"strconv"

	"github.com/reinhq/rein/session"
	"github.com/reinhq/rein/store"
)

// The fork index <id>.idx records, for the first Size bytes of a session
// file, what Fork needs to decide a fork point and to find where event
// line seq ends without reading the lines before it: the turn spans, the
// between-turn compaction spans, the titles, and a mark (seq, end offset)
// at every between-turn line, so at every possible fork point. Like
// <id>.meta it is a cache written without fsync and trusted only up to the
// Size it names; the lines after that size are scanned by their fixed
// prefix (seq and type) only. It is a separate file so that List, which
// reads every session's .meta, does not pay for it.
//
// Each mark also holds a checksum (CRC-32C) of the event bytes from the
// header's end up to the mark, recorded only by whoever validated exactly
// those bytes: the writer, which validates every line it appends, or Open,
// over the bytes it loaded and validated. Fork computes the same checksum
// over what it copies: equal, the child gets bytes a rein writer (or load)
// validated, and Fork need not validate them again; different, or none
// recorded, it validates every line it copies. A checksum is no seal
// against someone who rewrites both files; it tells bytes as validated
// from bytes changed since (an edit, a restore, another tool, a bad disk).
//
// The sidecar is itself a log, appended to and not rewritten: lines of
// "<crc32 of the JSON, 8 hex digits> <record JSON>\n". The first record is
// a snapshot (it carries the version and the header length); each later
// one the changes since the record before it: the new Size, Events and
// checker state, and for each list the index its new tail starts at (an
// open span written earlier is rewritten when it closes) and that tail. A
// reader applies records while they are whole and their checksums match,
// and stops at the first that is not (a torn tail, after a crash) or that
// names more bytes than the file holds; the writer that opens the session
// cuts the sidecar back to what was read and appends from there. When the
// records after the snapshot outgrow it, the writer writes a new snapshot
// (a new file, renamed into place), so appends stay amortized O(1).

// indexVersion is the fork index's format version; another one is ignored
// (and replaced by the next writer). Version 3 added the checksums, and a
// mark at every between-turn line (version 2 marked every turn/end and one
// between-turn line per 64 KB).
const indexVersion = 3

// castagnoli is CRC-32C's table: hash/crc32 computes it with the CPU's
// instruction where there is one (SSE 4.2, ARMv8), at several GB/s.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// scanChunk is the read size of prefix scans. Tests shrink it.
var scanChunk = 1 << 20

// index is the fork index (see above). Spans are flat start,end pairs
// sorted by start, end -1 while open, as in session's checker.
type index struct {
	Size   int64 // bytes described, header included; a line end
	Hdr    int64 // length of the header line, '\n' included
	Events int64 // event lines in [Hdr, Size)
	Turns  []int64
	Comps  []int64
	// Marks are triples: the seq of a between-turn line, the offset just
	// past it, and the checksum of the event bytes [Hdr, that offset), or
	// -1 when nobody who validated them recorded one.
	Marks  []int64
	Titles []titleAt
	// Sum is the checksum of the event bytes [Hdr, Size), or -1.
	Sum int64
	// The state of session's checker that the spans depend on.
	TurnOpen, CompOpen, CompInTurn bool

	dirty bool  // changed since the last record written
	tail  int64 // where the last line starts, when scan added it; else 0
	// written is where each list (turns, comps, marks, titles) has
	// changed since the last record: its length then, less an open span.
	written [4]int
}

// record is one line of the sidecar.
type record struct {
	V      int       `json:"v,omitempty"`   // the snapshot only
	Hdr    int64     `json:"hdr,omitempty"` // the snapshot only
	Size   int64     `json:"size"`
	Events int64     `json:"events"`
	Sum    int64     `json:"sum"`  // of the event bytes up to size; -1: none
	From   [4]int    `json:"from"` // where the tails replace turns, comps, marks, titles
	Turns  []int64   `json:"turns,omitempty"`
	Comps  []int64   `json:"comps,omitempty"`
	Marks  []int64   `json:"marks,omitempty"`
	Titles []titleAt `json:"titles,omitempty"`

	TurnOpen   bool `json:"turnOpen,omitempty"`
	CompOpen   bool `json:"compOpen,omitempty"`
	CompInTurn bool `json:"compInTurn,omitempty"`
}

type titleAt struct {
	Seq   int64  `json:"seq"`
	Title string `json:"title"`
}

// newIndex is the index of a session without events (whose checksum, of no
// bytes, is 0).
func newIndex(hdr int64) *index {
	return &index{Size: hdr, Hdr: hdr, dirty: true}
}

// add folds the event line seq, of type typ, ending at byte end, into x,
// and reports whether it got a mark (it is a between-turn line). data is
// needed for session/title only. It follows session's checker
// (Checker.apply) for the spans. The new bytes have no checksum until the
// caller vouches for them.
func (x *index) add(seq int64, typ session.Type, data []byte, end int64) bool {
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
	x.Events, x.Size, x.Sum = seq+1, end, -1
	if x.TurnOpen {
		return false
	}
	x.Marks = append(x.Marks, seq, end, -1)
	x.dirty = true
	return true
}

// vouch records sum as the checksum of the event bytes [Hdr, Size), and of
// the mark there if there is one: the caller validated exactly those bytes.
func (x *index) vouch(sum uint32) {
	x.Sum = int64(sum)
	if n := len(x.Marks); n > 0 && x.Marks[n-2] == x.Size {
		x.Marks[n-1] = int64(sum)
	}
}

// sumAt returns the checksum recorded for the event bytes up to the end of
// line at, which ends at offset end; false when there is none. An empty
// child (at -1) needs none.
func (x *index) sumAt(at, end int64) (uint32, bool) {
	if at < 0 {
		return 0, end == x.Hdr
	}
	i := 3 * sort.Search(len(x.Marks)/3, func(i int) bool { return x.Marks[3*i] >= at })
	if i < len(x.Marks) && x.Marks[i] == at && x.Marks[i+1] == end && x.Marks[i+2] >= 0 {
		return uint32(x.Marks[i+2]), true
	}
	return 0, false
}

// unsummed is the number of marks without a checksum.
func (x *index) unsummed() int {
	n := 0
	for i := 2; i < len(x.Marks); i += 3 {
		if x.Marks[i] < 0 {
			n++
		}
	}
	return n
}

// unvouched drops every checksum: for an index whose spans were not derived
// from the bytes the checksums cover.
func (x *index) unvouched() {
	for i := 2; i < len(x.Marks); i += 3 {
		x.Marks[i] = -1
	}
	x.Sum = -1
}

// settle gives a checksum slot that holds none (-1) sum, and reports
// whether it holds sum.
func settle(slot *int64, sum uint32) bool {
	if *slot < 0 {
		*slot = int64(sum)
	}
	return *slot == int64(sum)
}

// check compares x's checksums with those plan computed over the bytes a
// load read: of every mark's (a mark without one gets it) and of the
// whole. False when one differs or is missing (x describes other bytes).
func (x *index) check(plan *sumPlan) bool {
	for i := 1; i < len(x.Marks); i += 3 {
		if sum, ok := plan.sum(x.Marks[i]); !ok || !settle(&x.Marks[i+1], sum) {
			return false
		}
	}
	sum, ok := plan.sum(x.Size)
	return ok && x.Sum == int64(sum)
}

// sumMarks computes the checksums of the event bytes up to x's marks from
// the i-th on, and up to x.Size, from the bytes of the file in m,
// continuing from crc, the checksum of the bytes [Hdr, off) (off at or
// before those marks). A mark without a checksum gets it; it returns false
// when a mark's checksum or x.Sum is set and differs (the index describes
// other bytes), or the marks do not fit.
func (x *index) sumMarks(m *image, i int, off int64, crc uint32) bool {
	for ; 3*i < len(x.Marks); i++ {
		end := x.Marks[3*i+1]
		if end < off || end > x.Size {
			return false
		}
		if crc, off = m.sum(crc, off, end), end; !settle(&x.Marks[3*i+2], crc) {
			return false
		}
	}
	return settle(&x.Sum, m.sum(crc, off, x.Size))
}

// spans are the indexed events' spans, for session's fork rule.
func (x *index) spans() session.Spans {
	return session.Spans{Turns: x.Turns, Comps: x.Comps, Events: x.Events}
}

// forkPoint is session.ForkPoint on the indexed events.
func (x *index) forkPoint(at int64) error {
	if at < -1 || at >= x.Events {
		return fmt.Errorf("%w: fork seq %d out of range -1..%d", errBeyond, at, x.Events-1)
	}
	return x.spans().ForkPoint(at)
}

// startsUpTo is the number of spans (flat pairs) that start at or before at.
func startsUpTo(spans []int64, at int64) int {
	return sort.Search(len(spans)/2, func(i int) bool { return spans[2*i] > at })
}

// mark returns the last mark at or before seq at, or (-1, Hdr).
func (x *index) mark(at int64) (seq, end int64) {
	i := sort.Search(len(x.Marks)/3, func(i int) bool { return x.Marks[3*i] > at }) - 1
	if i < 0 {
		return -1, x.Hdr
	}
	return x.Marks[3*i], x.Marks[3*i+1]
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
// of hdr bytes. The event bytes are the parent's, so are their checksums.
func (x *index) child(at, end, hdr int64) *index {
	shift := hdr - x.Hdr
	c := newIndex(hdr)
	c.Events, c.Size = at+1, end+shift
	c.Turns = append([]int64(nil), x.Turns[:2*startsUpTo(x.Turns, at)]...)
	c.Comps = append([]int64(nil), x.Comps[:2*startsUpTo(x.Comps, at)]...)
	n := sort.Search(len(x.Marks)/3, func(i int) bool { return x.Marks[3*i] > at })
	c.Marks = make([]int64, 0, 3*n+3)
	for i := 0; i < n; i++ {
		c.Marks = append(c.Marks, x.Marks[3*i], x.Marks[3*i+1]+shift, x.Marks[3*i+2])
	}
	if at >= 0 && (n == 0 || x.Marks[3*n-3] < at) {
		c.Marks = append(c.Marks, at, c.Size, -1)
	}
	if sum, ok := x.sumAt(at, end); ok {
		c.Sum = int64(sum)
	} else {
		c.Sum = -1
	}
	c.Titles = append([]titleAt(nil), x.Titles[:sort.Search(len(x.Titles), func(i int) bool { return x.Titles[i].Seq > at })]...)
	return c
}

// record returns the changes since the last record written, or the whole
// index as a snapshot.
func (x *index) record(snapshot bool) record {
	from := x.written
	if snapshot {
		from = [4]int{}
	}
	r := record{Size: x.Size, Events: x.Events, Sum: x.Sum, From: from,
		Turns: x.Turns[from[0]:], Comps: x.Comps[from[1]:], Marks: x.Marks[from[2]:], Titles: x.Titles[from[3]:],
		TurnOpen: x.TurnOpen, CompOpen: x.CompOpen, CompInTurn: x.CompInTurn}
	if snapshot {
		r.V, r.Hdr = indexVersion, x.Hdr
	}
	return r
}

// wrote notes that a record holds everything x says now.
func (x *index) wrote() {
	open := func(spans []int64) int {
		if n := len(spans); n > 0 && spans[n-1] < 0 {
			return n - 2
		}
		return len(spans)
	}
	x.written = [4]int{open(x.Turns), open(x.Comps), len(x.Marks), len(x.Titles)}
	x.dirty = false
}

// apply folds record r into x; false when it does not fit.
func (x *index) apply(r *record) bool {
	f := r.From
	if f[0] > len(x.Turns) || f[1] > len(x.Comps) || f[2] > len(x.Marks) || f[3] > len(x.Titles) ||
		f[0]%2 != 0 || f[1]%2 != 0 || f[2]%3 != 0 || len(r.Turns)%2 != 0 || len(r.Comps)%2 != 0 || len(r.Marks)%3 != 0 ||
		r.Size < x.Size || r.Events < x.Events || r.Sum < -1 || r.Sum > math.MaxUint32 {
		return false
	}
	for i := 2; i < len(r.Marks); i += 3 {
		if r.Marks[i] < -1 || r.Marks[i] > math.MaxUint32 {
			return false
		}
	}
	x.Turns = append(x.Turns[:f[0]], r.Turns...)
	x.Comps = append(x.Comps[:f[1]], r.Comps...)
	x.Marks = append(x.Marks[:f[2]], r.Marks...)
	x.Titles = append(x.Titles[:f[3]], r.Titles...)
	x.Size, x.Events, x.Sum = r.Size, r.Events, r.Sum
	x.TurnOpen, x.CompOpen, x.CompInTurn = r.TurnOpen, r.CompOpen, r.CompInTurn
	return true
}

// appendRecord appends r as a sidecar line.
func appendRecord(b []byte, r record) []byte {
	j, err := json.Marshal(r)
	if err != nil {
		panic(err) // ints, bools and strings always encode
	}
	b = fmt.Appendf(b, "%08x ", crc32.ChecksumIEEE(j))
	b = append(b, j...)
	return append(b, '\n')
}

// snapshot is a sidecar holding x as one record.
func (x *index) snapshot() []byte { return appendRecord(nil, x.record(true)) }

// readIndex reads the sidecar at path; see parseIndex.
func readIndex(path string, hdr, size int64) (*index, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, false
	}
	x, _, _, ok := parseIndex(b, hdr, size)
	return x, ok
}

// parseIndex decodes a sidecar for a file whose header line is hdr bytes
// long and which holds at least size bytes: its records up to the first
// that is torn, fails its checksum, does not fit, or names more than size
// bytes. It returns the index and the bytes of b read, and of them the
// snapshot's. Whether the index matches the file is checked by its users
// (the seq of the line found at an offset).
func parseIndex(b []byte, hdr, size int64) (x *index, n, snap int, ok bool) {
	for n < len(b) {
		nl := bytes.IndexByte(b[n:], '\n')
		if nl < 10 || b[n+8] != ' ' {
			break
		}
		line := b[n : n+nl]
		sum, err := strconv.ParseUint(string(line[:8]), 16, 32)
		var r record
		if err != nil || uint32(sum) != crc32.ChecksumIEEE(line[9:]) || json.Unmarshal(line[9:], &r) != nil || r.Size > size {
			break
		}
		if x == nil {
			if r.V != indexVersion || r.Hdr != hdr || r.Size < hdr || r.From != [4]int{} {
				return nil, 0, 0, false
			}
			x = &index{Hdr: hdr, Size: hdr}
			snap = nl + 1
		} else if r.V != 0 {
			break
		}
		if !x.apply(&r) {
			break
		}
		n += nl + 1
	}
	if x == nil || x.Events < 0 {
		return nil, 0, 0, false
	}
	if m := len(x.Marks); m > 0 && (x.Marks[m-3] >= x.Events || x.Marks[m-2] > x.Size) {
		return nil, 0, 0, false
	}
	x.wrote()
	return x, n, snap, true
}

// sidecar appends one writer's fork index records to <id>.idx.
type sidecar struct {
	path string
	f    *os.File // open for appending; nil: the next write is a snapshot
	size int64    // bytes in the file
	snap int64    // bytes of its snapshot record
}

// open continues the sidecar at path, of which n bytes were read (with a
// snapshot of snap bytes) into the writer's index: what follows them (a
// torn record, records past the bytes the session keeps) is cut off.
func (sc *sidecar) open(n, snap int) {
	f, err := os.OpenFile(sc.path, os.O_WRONLY, 0)
	if err != nil {
		return
	}
	if f.Truncate(int64(n)) != nil {
		f.Close()
		return
	}
	if _, err := f.Seek(int64(n), io.SeekStart); err != nil {
		f.Close()
		return
	}
	sc.f, sc.size, sc.snap = f, int64(n), int64(snap)
}

// write records what changed in x: one appended line, or a new snapshot
// when the file is not open or its appended records outgrew the snapshot.
// Failures are not reported: the sidecar is a cache, and the next write
// starts a new snapshot.
func (sc *sidecar) write(x *index) {
	if sc.f != nil && sc.size-sc.snap <= sc.snap+4<<10 {
		line := appendRecord(nil, x.record(false))
		if _, err := sc.f.Write(line); err == nil {
			sc.size += int64(len(line))
			x.wrote()
			return
		}
	}
	sc.close()
	b := x.snapshot()
	if !writeFileAtomic(sc.path, b) {
		return
	}
	x.wrote()
	sc.open(len(b), len(b))
}

func (sc *sidecar) close() {
	if sc.f != nil {
		sc.f.Close()
		sc.f = nil
	}
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
