package session

import (
	"time"

	"github.com/reinhq/rein/session/internal/wire"
)

// evStore holds a log's events compactly: 24 bytes per event instead of
// an 80-byte Event, and no pointers, so the garbage collector never scans
// the index (kept in fixed pages of 64 Ki records). An event's data lives
// in a segment: a block of a loaded file (AppendLines registers each block
// it appends, and the events' data stay where they are) or an arena chunk
// that appended payloads are copied into. A loaded log thus holds the
// file's bytes once plus this index.
type evStore struct {
	// pages hold the records: every page but the last is full (pageLen
	// records), so a seq's record is found by shift and mask, and growing
	// never copies or over-allocates more than one page.
	pages [][]rec
	n     int64
	segs  [][]byte
	// arena is 1 + the open chunk (a segment) that other data is copied
	// into, 0 for none; arenaLen is how much of it is used.
	arena    int
	arenaLen int
	// types maps rec.typ to a type: the known types first, then any
	// unknown (ignorable) type met, each once.
	types []Type
	lastT Type // the last type looked up, and its index
	lastI uint16
	// count makes the store only count events (a Validator's log).
	count bool
	// base is the seq of the first record kept: a Validator that repairs
	// keeps only the events repair reads (see Validator.Repair).
	base int64
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
	pageBits = 16
	pageLen  = 1 << pageBits

	arenaChunk = 64 << 10
	// Data of at least bigData bytes gets a segment of its own instead of
	// a copy.
	bigData = 16 << 10
)

func (s *evStore) len() int64 { return s.n }

// add appends a record.
func (s *evStore) add(r rec) {
	if s.count {
		s.n++
		return
	}
	np := len(s.pages)
	if np == 0 || len(s.pages[np-1]) == pageLen {
		// A new page; the first one starts small and doubles, so a short
		// log holds little.
		c := pageLen
		if np == 0 {
			c = 64
		}
		s.pages = append(s.pages, make([]rec, 0, c))
		np++
	}
	pg := s.pages[np-1]
	if len(pg) == cap(pg) {
		grown := make([]rec, len(pg), min(2*cap(pg), pageLen))
		copy(grown, pg)
		pg = grown
	}
	s.pages[np-1] = append(pg, r)
	s.n++
}

// addRun appends the records of a parsed run, all in segment seg.
func (s *evStore) addRun(rs []lineRec, seg uint32) {
	if s.count {
		s.n += int64(len(rs))
		return
	}
	for len(rs) > 0 {
		np := len(s.pages)
		if np == 0 || len(s.pages[np-1]) == cap(s.pages[np-1]) {
			// Let add open or grow the page.
			r := rs[0].rec
			r.seg = seg
			s.add(r)
			rs = rs[1:]
			continue
		}
		pg := s.pages[np-1]
		k := min(len(rs), cap(pg)-len(pg))
		n := len(pg)
		pg = pg[:n+k]
		for i, lr := range rs[:k] {
			r := &pg[n+i]
			*r = lr.rec
			r.seg = seg
		}
		s.pages[np-1] = pg
		s.n += int64(k)
		rs = rs[k:]
	}
}

// pushAt is push for an event whose data is at offset off of segment seg.
func (s *evStore) pushAt(ev Event, seg, off uint32) {
	s.add(rec{seg: seg, off: off, n: uint32(len(ev.Data)), ign: ev.Ignorable, ms: ev.Time.UnixMilli(), typ: s.typeOf(ev.Type)})
}

// rec returns the record of seq.
func (s *evStore) rec(seq int64) *rec {
	i := seq - s.base
	return &s.pages[i>>pageBits][i&(pageLen-1)]
}

func (s *evStore) push(ev Event) {
	if s.count {
		s.n++
		return
	}
	if len(ev.Data) > 1<<32-1 {
		panic("session: event data over 4 GiB")
	}
	r := rec{n: uint32(len(ev.Data)), ign: ev.Ignorable, ms: ev.Time.UnixMilli()}
	if len(ev.Data) > 0 {
		r.seg, r.off = s.place(ev.Data)
	}
	r.typ = s.typeOf(ev.Type)
	s.add(r)
}

// place puts a copy of d in a segment.
func (s *evStore) place(d []byte) (seg, off uint32) {
	if len(d) >= bigData {
		s.segs = append(s.segs, d)
		return uint32(len(s.segs) - 1), 0
	}
	if s.arena == 0 || s.arenaLen+len(d) > cap(s.segs[s.arena-1]) {
		prev := 0
		if s.arena > 0 {
			prev = cap(s.segs[s.arena-1])
		}
		s.segs = append(s.segs, make([]byte, 0, max(wire.NextChunk(prev, arenaChunk), len(d))))
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
	if i := typeIdx(string(t)); i >= 0 {
		return uint16(i)
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
	r := s.rec(seq)
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
func (s *evStore) slice(from, to int64) []Event {
	from = max(from, s.base)
	if from >= to {
		return nil
	}
	out := make([]Event, to-from)
	for i := range out {
		out[i] = s.at(from + int64(i))
	}
	return out
}
