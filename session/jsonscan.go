package session

import (
	"encoding/binary"
	"encoding/json"
	"math/bits"
	"sync"
	"unicode/utf16"
	"unicode/utf8"
	"unsafe"
)

// The JSON scanner under the payload decoders of decode.go: whitespace,
// objects, arrays, numbers, strings (aliased when they need no unescaping,
// else unescaped a word at a time) and validation of skipped values, with
// exactly encoding/json's acceptance (the fuzz tests hold it to that).

// scratchPool holds unescaping buffers across decodes.
var scratchPool = sync.Pool{New: func() any { return new([]byte) }}

type dec struct {
	b   []byte
	i   int
	bad bool
	buf []byte   // scratch for unescaping
	ld  *loadDec // decoding for a log (see loadDec), or nil
}

// lazy reports whether fields the log does not need are only validated.
func (d *dec) lazy() bool { return d.ld != nil }

func (d *dec) fail() { d.bad = true }

func (d *dec) ws() {
	for d.i < len(d.b) {
		switch d.b[d.i] {
		case ' ', '\t', '\n', '\r':
			d.i++
		default:
			return
		}
	}
}

func (d *dec) peek() byte {
	d.ws()
	if d.i < len(d.b) {
		return d.b[d.i]
	}
	return 0
}

func (d *dec) eat(c byte) bool {
	if d.peek() == c {
		d.i++
		return true
	}
	return false
}

func (d *dec) null() bool {
	if d.peek() == 'n' && len(d.b)-d.i >= 4 && string(d.b[d.i:d.i+4]) == "null" {
		d.i += 4
		return true
	}
	return false
}

// object calls field for each key of an object (the value follows at d.i).
// null leaves the target untouched, like encoding/json.
func (d *dec) object(field func(key []byte)) {
	if d.bad || d.null() {
		return
	}
	if !d.eat('{') {
		d.fail()
		return
	}
	if d.eat('}') {
		return
	}
	for !d.bad {
		if d.peek() != '"' {
			d.fail()
			return
		}
		k := d.key()
		if !d.eat(':') {
			d.fail()
			return
		}
		field(k)
		if d.eat(',') {
			continue
		}
		if !d.eat('}') {
			d.fail()
		}
		return
	}
}

// key reads an object key without unescaping (a key with escapes fails).
func (d *dec) key() []byte {
	d.i++ // '"'
	s := d.i
	for d.i < len(d.b) {
		c := d.b[d.i]
		if c == '"' {
			k := d.b[s:d.i]
			d.i++
			return k
		}
		if c == '\\' || c < 0x20 {
			break
		}
		d.i++
	}
	d.fail()
	return nil
}

// array calls elem for each element of an array. It reports whether the
// value was an array (false for null, which leaves the target nil).
func (d *dec) array(elem func()) bool {
	if d.bad || d.null() {
		return false
	}
	if !d.eat('[') {
		d.fail()
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
			d.fail()
		}
		break
	}
	return true
}

func (d *dec) int() int {
	d.ws()
	if d.null() {
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
		d.fail()
		return 0
	}
	if d.i < len(d.b) {
		switch d.b[d.i] {
		case '.', 'e', 'E':
			d.fail()
			return 0
		}
	}
	if neg {
		n = -n
	}
	return n
}

func (d *dec) bool() bool {
	d.ws()
	switch {
	case len(d.b)-d.i >= 4 && string(d.b[d.i:d.i+4]) == "true":
		d.i += 4
		return true
	case len(d.b)-d.i >= 5 && string(d.b[d.i:d.i+5]) == "false":
		d.i += 5
	case d.null():
	default:
		d.fail()
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

// plainLen returns the length of the run of plain bytes (printable ASCII
// but '"' and '\\') b starts with, eight bytes at a time.
func plainLen(b []byte) int {
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

// str reads a string value (null gives ""), unescaping it.
func (d *dec) str() string {
	if d.peek() != '"' {
		if !d.null() {
			d.fail()
		}
		return ""
	}
	b := d.b
	s := d.i + 1
	i := s
	for {
		i += plainLen(b[i:])
		if i >= len(b) {
			d.fail()
			return ""
		}
		c := b[i]
		if c < 0x80 {
			break
		}
		// encoding/json substitutes U+FFFD for invalid UTF-8: let it.
		r, n := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && n == 1 {
			d.fail()
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
	d.fail() // a control byte
	return ""
}

// keep returns v as a string: aliasing the input when loading (see
// loadDec), else a copy.
func (d *dec) keep(v []byte) string {
	if d.ld == nil || len(v) == 0 {
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
// first backslash. It unescapes into the decoder's scratch buffer, copying
// plain runs a word at a time while it scans them, then copies the result
// (into the arena when loading).
func (d *dec) strEscaped(s int) string {
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
				d.fail()
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
				d.fail()
				return ""
			}
			d.i = i + 2
			r, ok := d.hex4()
			if !ok {
				d.fail()
				return ""
			}
			if utf16.IsSurrogate(r) {
				if len(b)-d.i < 6 || b[d.i] != '\\' || b[d.i+1] != 'u' {
					d.fail()
					return ""
				}
				d.i += 2
				r2, ok := d.hex4()
				if !ok {
					d.fail()
					return ""
				}
				r = utf16.DecodeRune(r, r2)
				if r == utf8.RuneError {
					d.fail()
					return ""
				}
			}
			o += utf8.EncodeRune(out[o:], r)
			i = d.i
		case c >= 0x80:
			// encoding/json substitutes U+FFFD for invalid UTF-8: let it.
			r, n := utf8.DecodeRune(b[i:])
			if r == utf8.RuneError && n == 1 {
				d.fail()
				return ""
			}
			o += copy(out[o:], b[i:i+n])
			i += n
		default: // a control byte
			d.fail()
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
			d.fail()
			return ""
		}
	next:
	}
}

// copyStr returns a copy of v: a fresh string, or when loading, a slice of
// the arena (one allocation per chunk, not per string).
func (d *dec) copyStr(v []byte) string {
	if d.ld == nil || len(v) == 0 || len(v) > bigStr {
		return string(v)
	}
	c := d.ld.alloc(v)
	return unsafe.String(&c[0], len(c))
}

// skipStr validates a string value (or null) without building it: what
// str would accept, with any UTF-8 (encoding/json accepts invalid UTF-8).
func (d *dec) skipStr() {
	if d.peek() != '"' {
		if !d.null() {
			d.fail()
		}
		return
	}
	b := d.b
	i := d.i + 1
	for {
		for {
			i += plainLen(b[i:])
			if i >= len(b) || b[i] < 0x80 {
				break
			}
			i++
		}
		if i >= len(b) {
			d.fail()
			return
		}
		switch b[i] {
		case '"':
			d.i = i + 1
			return
		case '\\':
			if i+1 >= len(b) {
				d.fail()
				return
			}
			if unesc[b[i+1]] != 0 {
				i += 2
				continue
			}
			if b[i+1] != 'u' {
				d.fail()
				return
			}
			d.i = i + 2
			if _, ok := d.hex4(); !ok {
				d.fail()
				return
			}
			i = d.i
		default:
			d.fail()
			return
		}
	}
}

func (d *dec) hex4() (rune, bool) {
	if len(d.b)-d.i < 4 {
		return 0, false
	}
	var r rune
	for _, c := range d.b[d.i : d.i+4] {
		switch {
		case c >= '0' && c <= '9':
			r = r<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	d.i += 4
	return r, true
}

// raw returns the next value's bytes (copied), validated.
func (d *dec) raw() json.RawMessage {
	d.ws()
	s := d.i
	d.value(0)
	if d.bad {
		return nil
	}
	return append(json.RawMessage(nil), d.b[s:d.i]...)
}

// maxDepth bounds value's recursion; deeper values take the fallback.
const maxDepth = 512

// value moves past one JSON value, validating it as json.Valid does.
func (d *dec) value(depth int) {
	if depth > maxDepth {
		d.fail()
		return
	}
	switch d.peek() {
	case '{':
		d.i++
		if d.eat('}') {
			return
		}
		for !d.bad {
			if d.peek() != '"' {
				d.fail()
				return
			}
			d.skipStr()
			if !d.eat(':') {
				d.fail()
				return
			}
			d.value(depth + 1)
			if d.eat(',') {
				continue
			}
			if !d.eat('}') {
				d.fail()
			}
			return
		}
	case '[':
		d.i++
		if d.eat(']') {
			return
		}
		for !d.bad {
			d.value(depth + 1)
			if d.eat(',') {
				continue
			}
			if !d.eat(']') {
				d.fail()
			}
			return
		}
	case '"':
		d.skipStr()
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

func (d *dec) lit(s string) {
	if len(d.b)-d.i >= len(s) && string(d.b[d.i:d.i+len(s)]) == s {
		d.i += len(s)
		return
	}
	d.fail()
}

// number moves past a JSON number: -?(0|[1-9]\d*)(\.\d+)?([eE][+-]?\d+)?
func (d *dec) number() {
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
		d.fail()
		return
	}
	if i < len(b) && b[i] == '.' {
		i++
		if !digits() {
			d.fail()
			return
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if !digits() {
			d.fail()
			return
		}
	}
	d.i = i
}

// skip moves past one value without validating its inside.
func (d *dec) skip() {
	d.ws()
	if d.i >= len(d.b) {
		d.fail()
		return
	}
	switch d.b[d.i] {
	case '{', '[':
		n := objectLen(d.b[d.i:])
		if n < 0 {
			d.fail()
			return
		}
		d.i += n
	case '"':
		d.i++
		for d.i < len(d.b) && d.b[d.i] != '"' {
			if d.b[d.i] == '\\' {
				d.i++
			}
			d.i++
		}
		if d.i >= len(d.b) {
			d.fail()
			return
		}
		d.i++
	default:
		for d.i < len(d.b) {
			switch d.b[d.i] {
			case ',', '}', ']', ' ', '\t', '\n', '\r':
				return
			}
			d.i++
		}
	}
}
