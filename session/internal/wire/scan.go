package wire

import (
	"encoding/binary"
	"encoding/json"
	"math/bits"
	"sync"
	"unicode/utf16"
	"unicode/utf8"
	"unsafe"
)

// Dec scans one JSON value: whitespace, objects, arrays, numbers, strings
// (aliased when they need no unescaping and the decoder loads for a log,
// else unescaped a word at a time) and validation of values it skips, with
// exactly encoding/json's acceptance plus the rule that strings are valid
// UTF-8. A Dec that meets anything else fails (Bad) and the caller falls
// back to the general decoder.
type Dec struct {
	b     []byte
	i     int
	bad   bool
	buf   []byte // scratch for unescaping
	a     *Arena // decoding for a log (see Arena), or nil
	check bool   // only checking (see Check)
}

// decPool holds decoders (and their unescaping buffers) across decodes:
// a decoder escapes to the heap (plans call readers through function
// values), so it is reused rather than allocated per payload.
var decPool = sync.Pool{New: func() any { return new(Dec) }}

// NewDec returns a decoder of b. With a set it decodes for a log: strings
// without escapes alias b (which must then stay unchanged for as long as
// the strings live), unescaped ones are copied into a's chunks, and fields
// marked Lazy are validated, not decoded. Release returns it to a pool.
func NewDec(b []byte, a *Arena) *Dec {
	d := decPool.Get().(*Dec)
	*d = Dec{b: b, buf: d.buf, a: a}
	return d
}

// Release returns d (and its scratch buffer) to the pool; d must not be
// used afterwards.
func (d *Dec) Release() {
	buf := d.buf
	if cap(buf) > 1<<20 {
		buf = nil
	}
	*d = Dec{buf: buf}
	decPool.Put(d)
}

// Arena is a loading worker's string store: unescaped strings are copied
// into its chunks, one allocation per chunk instead of one per string.
// Chunks start small and double up to arenaSize, so a small session does
// not hold 64 KB per worker.
type Arena struct {
	open []byte // the open chunk: only ever appended to
}

const (
	arenaSize = 64 << 10
	// Strings over bigStr bytes get an allocation of their own.
	bigStr = 8 << 10
)

// NextChunk is the size of the chunk after one of size prev: twice it,
// from 1 KB up to limit.
func NextChunk(prev, limit int) int {
	return min(max(2*prev, 1<<10), limit)
}

func (a *Arena) alloc(d []byte) []byte {
	if cap(a.open)-len(a.open) < len(d) {
		a.open = make([]byte, 0, max(NextChunk(cap(a.open), arenaSize), len(d)))
	}
	n := len(a.open)
	a.open = append(a.open, d...)
	return a.open[n:len(a.open):len(a.open)]
}

// Check makes d a decoder for checking only: Lazy and Text fields are
// validated, not decoded, and strings are copied (nothing refers to the
// input afterwards).
func (d *Dec) Check() { d.check, d.a = true, nil }

// Lazy reports whether fields the log does not need are only validated.
func (d *Dec) Lazy() bool { return d.a != nil || d.check }

// Fail marks the input as one this decoder does not take.
func (d *Dec) Fail() { d.bad = true }

// Bad reports whether the decoder gave up.
func (d *Dec) Bad() bool { return d.bad }

// Done reports whether the whole input was one value, taken without
// giving up.
func (d *Dec) Done() bool {
	d.ws()
	return !d.bad && d.i == len(d.b)
}

func (d *Dec) ws() {
	for d.i < len(d.b) {
		switch d.b[d.i] {
		case ' ', '\t', '\n', '\r':
			d.i++
		default:
			return
		}
	}
}

// Peek returns the next byte after whitespace, or 0 at the end.
func (d *Dec) Peek() byte {
	d.ws()
	if d.i < len(d.b) {
		return d.b[d.i]
	}
	return 0
}

func (d *Dec) eat(c byte) bool {
	if d.Peek() == c {
		d.i++
		return true
	}
	return false
}

// Null moves past a null, reporting whether there was one.
func (d *Dec) Null() bool {
	if d.Peek() == 'n' && len(d.b)-d.i >= 4 && string(d.b[d.i:d.i+4]) == "null" {
		d.i += 4
		return true
	}
	return false
}

// key reads an object key without unescaping (a key with escapes or
// non-ASCII bytes fails: encoding/json would match it case-insensitively).
func (d *Dec) key() []byte {
	d.i++ // '"'
	s := d.i
	for d.i < len(d.b) {
		c := d.b[d.i]
		if c == '"' {
			k := d.b[s:d.i]
			d.i++
			return k
		}
		if c == '\\' || c < 0x20 || c >= 0x80 {
			break
		}
		d.i++
	}
	d.Fail()
	return nil
}

// Array calls elem for each element of an array. It reports whether the
// value was an array (false for null, which leaves the target nil).
func (d *Dec) Array(elem func()) bool {
	if d.bad || d.Null() {
		return false
	}
	if !d.eat('[') {
		d.Fail()
		return false
	}
	if d.eat(']') {
		return true
	}
	for !d.bad {
		elem()
		if d.eat(',') {
			continue
		}
		if !d.eat(']') {
			d.Fail()
		}
		break
	}
	return true
}

// Int reads an integer of at most 15 digits (null gives 0); anything else
// (fractions, exponents, larger numbers) fails.
func (d *Dec) Int() int {
	d.ws()
	if d.Null() {
		return 0
	}
	neg := false
	if d.i < len(d.b) && d.b[d.i] == '-' {
		neg = true
		d.i++
	}
	s := d.i
	n := 0
	for d.i < len(d.b) && d.b[d.i] >= '0' && d.b[d.i] <= '9' {
		n = n*10 + int(d.b[d.i]-'0')
		d.i++
	}
	if d.i == s || d.i-s > 15 || (d.b[s] == '0' && d.i-s > 1) {
		d.Fail()
		return 0
	}
	if d.i < len(d.b) {
		switch d.b[d.i] {
		case '.', 'e', 'E':
			d.Fail()
			return 0
		}
	}
	if neg {
		n = -n
	}
	return n
}

// Bool reads true, false or null (false).
func (d *Dec) Bool() bool {
	d.ws()
	switch {
	case len(d.b)-d.i >= 4 && string(d.b[d.i:d.i+4]) == "true":
		d.i += 4
		return true
	case len(d.b)-d.i >= 5 && string(d.b[d.i:d.i+5]) == "false":
		d.i += 5
	case d.Null():
	default:
		d.Fail()
	}
	return false
}

// strStop marks the bytes that end a run of plain string bytes: control
// bytes, '"', '\\' and (for the UTF-8 check) every byte from 0x80.
var strStop = func() (t [256]bool) {
	for c := 0; c < 0x20; c++ {
		t[c] = true
	}
	for c := 0x80; c < 0x100; c++ {
		t[c] = true
	}
	t['"'], t['\\'] = true, true
	return t
}()

const (
	ones  = 0x0101010101010101
	highs = 0x8080808080808080
)

// PlainLen returns the length of the run of plain bytes (printable ASCII
// but '"' and '\\') b starts with, eight bytes at a time.
func PlainLen(b []byte) int {
	i := 0
	for ; i+8 <= len(b); i += 8 {
		if m := special(binary.LittleEndian.Uint64(b[i:])); m != 0 {
			return i + bits.TrailingZeros64(m)>>3
		}
	}
	for i < len(b) && !strStop[b[i]] {
		i++
	}
	return i
}

// special returns a high bit for each byte of w (little-endian) that is
// not plain: < 0x20, '"', '\\' or >= 0x80. Borrows can mark bytes above
// a marked one, never below: the lowest mark is exact.
func special(w uint64) uint64 {
	q := w ^ (ones * '"')
	e := w ^ (ones * '\\')
	return ((w-ones*0x20)&^w | (q-ones)&^q | (e-ones)&^e | w) & highs
}

// utf8At returns the length of the valid UTF-8 sequence b[i:] starts with
// (b[i] >= 0x80), or 0 when it is not one.
func utf8At(b []byte, i int) int {
	r, n := utf8.DecodeRune(b[i:])
	if r == utf8.RuneError && n == 1 {
		return 0
	}
	return n
}

// Str reads a string value (null gives ""), unescaping it.
func (d *Dec) Str() string {
	if d.Peek() != '"' {
		if !d.Null() {
			d.Fail()
		}
		return ""
	}
	b := d.b
	s := d.i + 1
	i := s
	for {
		i += PlainLen(b[i:])
		if i >= len(b) {
			d.Fail()
			return ""
		}
		if b[i] < 0x80 {
			break
		}
		n := utf8Len(b, i)
		if n == 0 {
			d.Fail()
			return ""
		}
		i += n
	}
	switch b[i] {
	case '"':
		d.i = i + 1
		return d.keep(b[s:i])
	case '\\':
		d.i = i
		return d.strEscaped(s)
	}
	d.Fail() // a control byte
	return ""
}

// keep returns v as a string: aliasing the input when loading, else a
// copy.
func (d *Dec) keep(v []byte) string {
	if d.a == nil || len(v) == 0 {
		return string(v)
	}
	return unsafe.String(&v[0], len(v))
}

// unesc maps the byte after a backslash to what it stands for (0: not a
// one-byte escape).
var unesc = func() (t [256]byte) {
	t['"'], t['\\'], t['/'] = '"', '\\', '/'
	t['n'], t['t'], t['r'], t['b'], t['f'] = '\n', '\t', '\r', '\b', '\f'
	return t
}()

// strEscaped reads a string with escapes that starts at s, d.i at its
// first backslash. It unescapes into the scratch buffer, copying plain
// runs a word at a time while it scans them, then copies the result (into
// the arena when loading).
func (d *Dec) strEscaped(s int) string {
	b := d.b
	// The result is no longer than the input it comes from; the slack
	// lets the word stores run past the end of a run.
	if need := len(b) - s + 8; cap(d.buf) < need {
		d.buf = make([]byte, need)
	}
	out := d.buf[:cap(d.buf)]
	o := copy(out, b[s:d.i])
	i := d.i
	for {
		// b[i] is not a plain byte.
		switch c := b[i]; {
		case c == '"':
			d.i = i + 1
			return d.copyStr(out[:o])
		case c == '\\':
			if i+1 >= len(b) {
				d.Fail()
				return ""
			}
			e := b[i+1]
			if u := unesc[e]; u != 0 {
				out[o] = u
				o++
				i += 2
				break
			}
			if e != 'u' {
				d.Fail()
				return ""
			}
			d.i = i + 2
			r, ok := d.hex4()
			if !ok {
				d.Fail()
				return ""
			}
			if utf16.IsSurrogate(r) {
				// A pair, or encoding/json's business (it substitutes
				// U+FFFD for a lone surrogate).
				if len(b)-d.i < 6 || b[d.i] != '\\' || b[d.i+1] != 'u' {
					d.Fail()
					return ""
				}
				d.i += 2
				r2, ok := d.hex4()
				if !ok {
					d.Fail()
					return ""
				}
				r = utf16.DecodeRune(r, r2)
				if r == utf8.RuneError {
					d.Fail()
					return ""
				}
			}
			o += utf8.EncodeRune(out[o:], r)
			i = d.i
		case c >= 0x80:
			n := utf8Len(b, i)
			if n == 0 {
				d.Fail()
				return ""
			}
			o += copy(out[o:], b[i:i+n])
			i += n
		default: // a control byte
			d.Fail()
			return ""
		}
		// The plain run up to the next byte that is not.
		for i+8 <= len(b) {
			w := binary.LittleEndian.Uint64(b[i:])
			binary.LittleEndian.PutUint64(out[o:], w)
			if m := special(w); m != 0 {
				k := bits.TrailingZeros64(m) >> 3
				i += k
				o += k
				goto next
			}
			i += 8
			o += 8
		}
		for i < len(b) && !strStop[b[i]] {
			out[o] = b[i]
			i++
			o++
		}
		if i >= len(b) {
			d.Fail()
			return ""
		}
	next:
	}
}

// copyStr returns a copy of v: a fresh string, or when loading, a slice of
// the arena.
func (d *Dec) copyStr(v []byte) string {
	if d.a == nil || len(v) == 0 || len(v) > bigStr {
		return string(v)
	}
	c := d.a.alloc(v)
	return unsafe.String(&c[0], len(c))
}

// SkipStr validates a string value (or null) without building it: what
// Str accepts.
func (d *Dec) SkipStr() {
	if d.Peek() != '"' {
		if !d.Null() {
			d.Fail()
		}
		return
	}
	if n := StrLen(d.b[d.i:]); n > 0 {
		d.i += n
		return
	}
	d.Fail()
}

// StrLen returns the length of the JSON string b starts with (b[0] is
// '"'), quotes included, or 0 when it is not a valid one: bad escapes,
// control bytes, invalid UTF-8, a missing closing quote. Escaped lone
// surrogates are valid (encoding/json reads them as U+FFFD). It runs on
// every chunk line, so the plain run is scanned a word at a time here and
// two- and three-byte UTF-8 sequences are checked in line.
func StrLen(b []byte) int {
	i := 1
	for {
		for i+8 <= len(b) {
			if m := special(binary.LittleEndian.Uint64(b[i:])); m != 0 {
				i += bits.TrailingZeros64(m) >> 3
				goto stop
			}
			i += 8
		}
		for i < len(b) && !strStop[b[i]] {
			i++
		}
		if i >= len(b) {
			return 0
		}
	stop:
		switch c := b[i]; {
		case c == '"':
			return i + 1
		case c == '\\':
			if i+1 >= len(b) {
				return 0
			}
			if unesc[b[i+1]] != 0 {
				i += 2
				continue
			}
			if b[i+1] != 'u' || len(b)-i < 6 || !isHex4(b[i+2:i+6]) {
				return 0
			}
			i += 6
		case c < 0x80:
			return 0 // a control byte
		default:
			n := utf8Len(b, i)
			if n == 0 {
				return 0
			}
			i += n
		}
	}
}

// utf8Len returns the length of the valid UTF-8 sequence b[i:] starts with
// (b[i] >= 0x80), or 0 when it is not one; two- and three-byte sequences
// without a call.
func utf8Len(b []byte, i int) int {
	c := b[i]
	switch {
	case c < 0xC2:
		return 0
	case c < 0xE0:
		if i+1 < len(b) && b[i+1]&0xC0 == 0x80 {
			return 2
		}
		return 0
	case c < 0xF0:
		lo, hi := byte(0x80), byte(0xBF)
		switch c {
		case 0xE0:
			lo = 0xA0
		case 0xED:
			hi = 0x9F // no surrogates
		}
		if i+2 < len(b) && b[i+1] >= lo && b[i+1] <= hi && b[i+2]&0xC0 == 0x80 {
			return 3
		}
		return 0
	}
	return utf8At(b, i)
}

var hexVal = func() (t [256]int8) {
	for i := range t {
		t[i] = -1
	}
	for c := '0'; c <= '9'; c++ {
		t[c] = int8(c - '0')
	}
	for c := 'a'; c <= 'f'; c++ {
		t[c] = int8(c - 'a' + 10)
		t[c-'a'+'A'] = int8(c - 'a' + 10)
	}
	return t
}()

func isHex4(b []byte) bool {
	return hexVal[b[0]]|hexVal[b[1]]|hexVal[b[2]]|hexVal[b[3]] >= 0
}

func (d *Dec) hex4() (rune, bool) {
	if len(d.b)-d.i < 4 || !isHex4(d.b[d.i:]) {
		return 0, false
	}
	var r rune
	for _, c := range d.b[d.i : d.i+4] {
		r = r<<4 | rune(hexVal[c])
	}
	d.i += 4
	return r, true
}

// Raw returns the next value's bytes (copied), validated.
func (d *Dec) Raw() json.RawMessage {
	if s := d.Span(); !d.bad {
		return append(json.RawMessage(nil), s...)
	}
	return nil
}

// Span validates the next value and returns its bytes (aliasing the
// input).
func (d *Dec) Span() []byte {
	d.ws()
	s := d.i
	d.Value()
	if d.bad {
		return nil
	}
	return d.b[s:d.i]
}

// maxDepth bounds Value's recursion; deeper values fail (and go to the
// general decoder).
const maxDepth = 512

// Value moves past one JSON value, validating it as json.Valid does (and
// its strings as UTF-8).
func (d *Dec) Value() { d.value(0) }

func (d *Dec) value(depth int) {
	if depth > maxDepth {
		d.Fail()
		return
	}
	switch d.Peek() {
	case '{':
		d.i++
		if d.eat('}') {
			return
		}
		for !d.bad {
			if d.Peek() != '"' {
				d.Fail()
				return
			}
			d.SkipStr()
			if !d.eat(':') {
				d.Fail()
				return
			}
			d.value(depth + 1)
			if d.eat(',') {
				continue
			}
			if !d.eat('}') {
				d.Fail()
			}
			return
		}
	case '[':
		d.Array(func() { d.value(depth + 1) })
	case '"':
		d.SkipStr()
	case 't':
		d.lit("true")
	case 'f':
		d.lit("false")
	case 'n':
		d.lit("null")
	default:
		d.number()
	}
}

// Valid reports whether b is exactly one JSON value with valid UTF-8
// strings (and nesting of at most 512 levels).
func Valid(b []byte) bool {
	d := Dec{b: b}
	d.Value()
	return d.Done()
}

func (d *Dec) lit(s string) {
	if len(d.b)-d.i >= len(s) && string(d.b[d.i:d.i+len(s)]) == s {
		d.i += len(s)
		return
	}
	d.Fail()
}

// number moves past a JSON number: -?(0|[1-9]\d*)(\.\d+)?([eE][+-]?\d+)?
func (d *Dec) number() {
	b := d.b
	i := d.i
	digits := func() bool {
		s := i
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
		return i > s
	}
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case !digits():
		d.Fail()
		return
	}
	if i < len(b) && b[i] == '.' {
		i++
		if !digits() {
			d.Fail()
			return
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if !digits() {
			d.Fail()
			return
		}
	}
	d.i = i
}
