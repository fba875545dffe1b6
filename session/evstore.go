package session

import (
	"time"
	"unsafe"
)

// evStore holds a log's events compactly: 24 bytes per event instead of
// an 80-byte Event, and no pointers, so the garbage collector never scans
// the index. An event's data lives in a segment: a block of a loaded file
// (AppendLines registers each block it appends, and the events' data stay
// where they are) or an arena chunk that appended payloads are copied
// into. A loaded log thus holds the file's bytes once plus this index.
type evStore struct {
	recs []rec
	segs [][]byte
	// cur is 1 + the segment that pushed data is looked for first (the
	// block being appended), 0 for none.
	cur int
	// arena is 1 + the open chunk (a segment) that other data is copied
	// into, 0 for none; arenaLen is how much of it is used.
	arena    int
	arenaLen int
	// types maps rec.typ to a type: the known types first, then any
	// unknown (ignorable) type met, each once.
	types []Type
	lastT Type // the last type looked up, and its index
	lastI uint16
}

type rec struct {
	seg uint32 // index into evStore.segs
	off uint32 // offset of Data in the segment
	n   uint32 // len(Data)
	typ uint16 // index into evStore.types
	ign bool
	ms  int64 // time, Unix milliseconds
}

const (
	arenaChunk = 64 << 10
	// Data of at least bigData bytes gets a segment of its own instead of
	// a copy.
	bigData = 16 << 10
)

// useSegment registers seg (data that will not be modified) and makes it
// the first place push looks for event data.
func (s *evStore) useSegment(seg []byte) {
	if len(seg) > 1<<32-1 {
		s.cur = 0 // too big to address with 32-bit offsets: copy instead
		return
	}
	s.segs = append(s.segs, seg)
	s.cur = len(s.segs)
}

// endSegment stops looking in the current segment.
func (s *evStore) endSegment() { s.cur = 0 }

// typeIndex maps each known type to its index in Types.
var typeIndex = func() map[Type]uint16 {
	m := make(map[Type]uint16, len(Types))
	for i, t := range Types {
		m[t] = uint16(i)
	}
	return m
}()

func (s *evStore) len() int64 { return int64(len(s.recs)) }

func (s *evStore) grow(n int) {
	if cap(s.recs)-len(s.recs) < n {
		// Geometric growth: callers grow once per chunk of input.
		recs := make([]rec, len(s.recs), max(len(s.recs)+n, 2*cap(s.recs)))
		copy(recs, s.recs)
		s.recs = recs
	}
}

func (s *evStore) push(ev Event) {
	if len(ev.Data) > 1<<32-1 {
		panic("session: event data over 4 GiB")
	}
	r := rec{n: uint32(len(ev.Data)), ign: ev.Ignorable, ms: ev.Time.UnixMilli()}
	if len(ev.Data) > 0 {
		r.seg, r.off = s.place(ev.Data)
	}
	r.typ = s.typeOf(ev.Type)
	s.recs = append(s.recs, r)
}

// place finds or puts d in a segment.
func (s *evStore) place(d []byte) (seg, off uint32) {
	if s.cur > 0 {
		base := s.segs[s.cur-1]
		b, p := uintptr(unsafe.Pointer(unsafe.SliceData(base))), uintptr(unsafe.Pointer(unsafe.SliceData(d)))
		if p >= b && p+uintptr(len(d)) <= b+uintptr(len(base)) {
			return uint32(s.cur - 1), uint32(p - b)
		}
	}
	if len(d) >= bigData {
		s.segs = append(s.segs, d)
		return uint32(len(s.segs) - 1), 0
	}
	if s.arena == 0 || s.arenaLen+len(d) > cap(s.segs[s.arena-1]) {
		s.segs = append(s.segs, make([]byte, 0, arenaChunk))
		s.arena, s.arenaLen = len(s.segs), 0
	}
	a := append(s.segs[s.arena-1][:s.arenaLen], d...)
	s.segs[s.arena-1] = a
	off = uint32(s.arenaLen)
	s.arenaLen = len(a)
	return uint32(s.arena - 1), off
}

func (s *evStore) typeOf(t Type) uint16 {
	// Runs of one type (chunks) skip the hashing.
	if t == s.lastT && t != "" {
		return s.lastI
	}
	i := s.typeIndexOf(t)
	s.lastT, s.lastI = t, i
	return i
}

func (s *evStore) typeIndexOf(t Type) uint16 {
	if i, ok := typeIndex[t]; ok {
		return i
	}
	for i := len(Types); i < len(s.types); i++ {
		if s.types[i] == t {
			return uint16(i)
		}
	}
	if s.types == nil {
		s.types = append([]Type(nil), Types...)
	}
	s.types = append(s.types, t)
	return uint16(len(s.types) - 1)
}

func (s *evStore) at(seq int64) Event {
	r := &s.recs[seq]
	ev := Event{Seq: seq, Ignorable: r.ign, Time: time.UnixMilli(r.ms).UTC()}
	if int(r.typ) < len(Types) {
		ev.Type = Types[r.typ]
	} else {
		ev.Type = s.types[r.typ]
	}
	if r.n > 0 {
		ev.Data = s.segs[r.seg][r.off : r.off+r.n : r.off+r.n]
	}
	return ev
}

// slice returns fresh Events for seqs from..len-1.
func (s *evStore) slice(from int64) []Event {
	if from < 0 {
		from = 0
	}
	if from >= s.len() {
		return nil
	}
	out := make([]Event, s.len()-from)
	for i := range out {
		out[i] = s.at(from + int64(i))
	}
	return out
}

// timeCache speeds up parsing the times of consecutive events, which
// mostly share their date, hour and minute: it keeps the last minute seen
// and adds seconds and milliseconds to it. A nil cache parses every time
// in full.
type timeCache struct {
	minute [17]byte // "2006-01-02T15:04:"
	base   time.Time
	ok     bool
}

func (c *timeCache) parse(b []byte) (time.Time, bool) {
	if c != nil && c.ok && string(b[:17]) == string(c.minute[:]) && b[19] == '.' && b[23] == 'Z' {
		s0, s1, m0, m1, m2 := b[17]-'0', b[18]-'0', b[20]-'0', b[21]-'0', b[22]-'0'
		if s0 <= 5 && s1 <= 9 && m0 <= 9 && m1 <= 9 && m2 <= 9 {
			sec := int64(s0)*10 + int64(s1)
			ms := int64(m0)*100 + int64(m1)*10 + int64(m2)
			return c.base.Add(time.Duration(sec*1e9 + ms*1e6)), true
		}
	}
	t, ok := parseTime(b)
	if ok && c != nil {
		copy(c.minute[:], b[:17])
		c.base = t.Truncate(time.Minute)
		c.ok = true
	}
	return t, ok
}
