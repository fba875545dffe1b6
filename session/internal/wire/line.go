package wire

import (
	"encoding/binary"
	"math"
	"time"
)

// TimeLayout is the wire layout of event times: RFC 3339, UTC, milliseconds.
const TimeLayout = "2006-01-02T15:04:05.000Z"

// Envelope is what Prefix reads of an event line.
type Envelope struct {
	Seq       int64
	Type      []byte // aliases the line
	Ms        int64  // the time, Unix milliseconds
	Ignorable bool
	// Data is the data value, from its '{' to its '}' (the byte before the
	// line's last); it aliases the line and is not looked into: the caller
	// decodes or validates it.
	Data []byte
}

// Prefix reads the envelope of an event line (without its '\n') written
// in rein's field order,
//
//	{"seq":N,"type":"T","time":"2006-01-02T15:04:05.000Z"[,"ignorable":true],"data":{…}}
//
// reporting false for anything else (another field order, spaces, escapes
// or non-ASCII bytes in the type, a time in another layout, a seq with a
// leading zero): those lines take the general decoder. tc may be nil.
func Prefix(line []byte, tc *TimeCache) (Envelope, bool) {
	const p1 = `{"seq":`
	if len(line) < len(p1)+40 || string(line[:len(p1)]) != p1 || line[len(line)-1] != '}' {
		return Envelope{}, false
	}
	i, seq, ok := uintAt(line, len(p1), 18)
	if !ok {
		return Envelope{}, false
	}
	const p2 = `,"type":"`
	if !hasAt(line, i, p2) {
		return Envelope{}, false
	}
	i += len(p2)
	ts := i
	for i < len(line) && line[i] != '"' && line[i] != '\\' && line[i] >= 0x20 && line[i] < 0x80 {
		i++
	}
	if i >= len(line) || line[i] != '"' || i == ts {
		return Envelope{}, false
	}
	e := Envelope{Seq: seq, Type: line[ts:i]}
	i++
	const p3 = `,"time":"`
	if !hasAt(line, i, p3) {
		return Envelope{}, false
	}
	i += len(p3)
	if i+len(TimeLayout)+1 > len(line) || line[i+len(TimeLayout)] != '"' {
		return Envelope{}, false
	}
	if e.Ms, ok = tc.Ms(line[i : i+len(TimeLayout)]); !ok {
		return Envelope{}, false
	}
	i += len(TimeLayout) + 1
	const pi = `,"ignorable":true`
	if hasAt(line, i, pi) {
		e.Ignorable = true
		i += len(pi)
	}
	const p4 = `,"data":`
	if !hasAt(line, i, p4) {
		return Envelope{}, false
	}
	i += len(p4)
	e.Data = line[i : len(line)-1]
	if len(e.Data) < 2 || e.Data[0] != '{' || e.Data[len(e.Data)-1] != '}' {
		return Envelope{}, false
	}
	return e, true
}

// uintAt reads the JSON integer of 1 to max (at most 18) digits, no sign
// and no leading zero, at b[i:], returning the offset after it.
func uintAt(b []byte, i, max int) (int, int64, bool) {
	s := i
	var n int64
	for i < len(b) && b[i]-'0' <= 9 {
		n = n*10 + int64(b[i]-'0')
		i++
	}
	if i == s || i-s > max || (b[s] == '0' && i-s > 1) {
		return i, 0, false
	}
	return i, n, true
}

func hasAt(b []byte, i int, s string) bool {
	return len(b)-i >= len(s) && string(b[i:i+len(s)]) == s
}

// Chunk is what ChunkLine reads of an assistant/chunk line.
type Chunk struct {
	Seq, Ms    int64
	Turn, Step int32
	// Off and Len locate the line's data in the input.
	Off, Len uint32
}

// ChunkLine parses the line at d[pos:] when it is an assistant/chunk in
// exactly the shape rein writes,
//
//	{"seq":N,"type":"assistant/chunk","time":"…","data":{"turn":N,"step":N,"delta":{"text"|"reasoning":"…"}}}
//
// validating all of it (the string's escapes and UTF-8 included), and
// returns it with the offset just past its '\n' (or the input's end). It
// returns 0 for any other line: an ignorable chunk, a tool-call delta,
// another field order, a turn or step of more than nine digits, data too
// big for Chunk's offsets, or anything invalid. Those take the general
// path, which gives the same result on what ChunkLine takes.
//
// Comparisons with constant strings of up to 16 bytes compile to a few
// word loads (longer ones, or ones through a helper, to a call): hence the
// literals in 16-byte pieces, written out.
func ChunkLine(d []byte, pos int, tc *TimeCache) (c Chunk, next int) {
	if len(d)-pos < 7 || string(d[pos:pos+7]) != `{"seq":` {
		return c, 0
	}
	i, seq, ok := uintAt(d, pos+7, 18)
	// ,"type":"assistant/chunk","time":"2006-01-02T15:04:05.000Z","data":{"turn":
	const fixed = 34 + len(TimeLayout) + 17
	if !ok || len(d)-i < fixed {
		return c, 0
	}
	f := d[i : i+fixed]
	if string(f[:16]) != `,"type":"assista` || string(f[16:32]) != `nt/chunk","time"` || string(f[32:34]) != `:"` ||
		string(f[58:74]) != `","data":{"turn"` || f[74] != ':' {
		return c, 0
	}
	ms, ok := tc.Ms(f[34:58])
	if !ok {
		return c, 0
	}
	ds := i + 67 // data starts at its '{'
	var turn, step int64
	if i, turn, ok = uintAt(d, i+fixed, 9); !ok || len(d)-i < 8 || string(d[i:i+8]) != `,"step":` {
		return c, 0
	}
	if i, step, ok = uintAt(d, i+8, 9); !ok || len(d)-i < 11 || string(d[i:i+11]) != `,"delta":{"` {
		return c, 0
	}
	i += 11
	switch {
	case len(d)-i >= 7 && string(d[i:i+7]) == `text":"`:
		i += 6
	case len(d)-i >= 12 && string(d[i:i+12]) == `reasoning":"`:
		i += 11
	default:
		return c, 0
	}
	n := StrLen(d[i:]) // from the string's opening quote
	if n == 0 {
		return c, 0
	}
	i += n
	if len(d)-i < 3 || string(d[i:i+3]) != `}}}` {
		return c, 0
	}
	i += 3
	switch {
	case i == len(d):
		next = i
	case d[i] == '\n':
		next = i + 1
	default:
		return c, 0
	}
	if uint64(i) > math.MaxUint32 {
		return c, 0 // too big for the offsets: the general path keeps it whole
	}
	return Chunk{Seq: seq, Ms: ms, Turn: int32(turn), Step: int32(step), Off: uint32(ds), Len: uint32(i - 1 - ds)}, next
}

// TimeCache speeds up parsing the times of consecutive events, which
// mostly share their date, hour and minute: it keeps the last minute seen
// (as Unix milliseconds) and adds seconds and milliseconds to it. A nil
// cache parses every time in full.
type TimeCache struct {
	// The minute, "2006-01-02T15:04:", as two words and a byte.
	m0, m1 uint64
	m2     byte
	base   int64
	ok     bool
}

// Ms parses a TimeLayout time (b is len(TimeLayout) bytes) to Unix
// milliseconds. It refuses what time.Parse would refuse, and leap seconds
// and years before 1 or after 9999 (the general decoder takes those).
func (c *TimeCache) Ms(b []byte) (int64, bool) {
	_ = b[23]
	if c != nil && c.ok && binary.LittleEndian.Uint64(b) == c.m0 && binary.LittleEndian.Uint64(b[8:]) == c.m1 && b[16] == c.m2 && b[19] == '.' && b[23] == 'Z' {
		s0, s1, m0, m1, m2 := b[17]-'0', b[18]-'0', b[20]-'0', b[21]-'0', b[22]-'0'
		if s0 <= 5 && s1 <= 9 && m0 <= 9 && m1 <= 9 && m2 <= 9 {
			return c.base + (int64(s0)*10+int64(s1))*1000 + int64(m0)*100 + int64(m1)*10 + int64(m2), true
		}
	}
	t, ok := ParseTime(b)
	if ok && c != nil {
		c.m0, c.m1, c.m2 = binary.LittleEndian.Uint64(b), binary.LittleEndian.Uint64(b[8:]), b[16]
		c.base = t.Truncate(time.Minute).UnixMilli()
		c.ok = true
	}
	return t.UnixMilli(), ok
}

// ParseTime parses TimeLayout (b is len(TimeLayout) bytes) without
// allocating.
func ParseTime(b []byte) (time.Time, bool) {
	num := func(lo, hi int) (int, bool) {
		n := 0
		for _, c := range b[lo:hi] {
			if c < '0' || c > '9' {
				return 0, false
			}
			n = n*10 + int(c-'0')
		}
		return n, true
	}
	if b[4] != '-' || b[7] != '-' || b[10] != 'T' || b[13] != ':' || b[16] != ':' || b[19] != '.' || b[23] != 'Z' {
		return time.Time{}, false
	}
	y, ok1 := num(0, 4)
	mo, ok2 := num(5, 7)
	d, ok3 := num(8, 10)
	h, ok4 := num(11, 13)
	mi, ok5 := num(14, 16)
	s, ok6 := num(17, 19)
	ms, ok7 := num(20, 23)
	if !(ok1 && ok2 && ok3 && ok4 && ok5 && ok6 && ok7) || mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 || s > 59 {
		return time.Time{}, false
	}
	t := time.Date(y, time.Month(mo), d, h, mi, s, ms*int(time.Millisecond), time.UTC)
	if t.Day() != d {
		return time.Time{}, false // Feb 30: the general decoder decides
	}
	return t, true
}

// Head is what ReadHead reads of a line's fixed prefix.
type Head struct {
	Seq       int64
	Type      []byte
	Ignorable bool
}

// ReadHead reads the fixed prefix of an event line in rein's field order,
// `{"seq":N,"type":"T","time":"…"` and whether `,"ignorable":true`
// follows, without looking at the rest: what can still be told of a
// damaged line.
func ReadHead(line []byte) (Head, bool) {
	const p1, p2, p3 = `{"seq":`, `,"type":"`, `","time":"`
	if !hasAt(line, 0, p1) {
		return Head{}, false
	}
	i, seq, ok := uintAt(line, len(p1), 18)
	if !ok || !hasAt(line, i, p2) {
		return Head{}, false
	}
	i += len(p2)
	ts := i
	for i < len(line) && line[i] != '"' && line[i] != '\\' && line[i] >= 0x20 && line[i] < 0x80 {
		i++
	}
	if i == ts || !hasAt(line, i, p3) {
		return Head{}, false
	}
	h := Head{Seq: seq, Type: line[ts:i]}
	i += len(p3) + len(TimeLayout) + 1
	h.Ignorable = hasAt(line, i, `,"ignorable":true`)
	return h, true
}
