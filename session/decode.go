package session

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"math/bits"
	"sync"
	"unicode/utf16"
	"unicode/utf8"
	"unsafe"

	"github.com/reinhq/rein/llm"
)

// Fast payload decoding. Loading a session decodes every non-chunk payload
// (messages, tool results, headers); encoding/json costs several times a
// line scan for that. fastDecode handles the payload types that dominate a
// log, as rein writes them (its field names exactly, no unknown fields);
// anything else, or anything it does not expect, makes it give up and the
// caller falls back to encoding/json, so results never differ from
// json.Unmarshal's on what it accepts.

// fastDecode decodes data as the payload of type t, reporting false when it
// cannot (the caller then uses encoding/json).
func fastDecode(t Type, data []byte) (Payload, bool) {
	return decodeWith(t, data, nil)
}

// loadDec is a loading worker's state. The data it decodes is kept by the
// log (AppendLines' input, which must not change), so strings without
// escapes alias it; unescaped strings are copied into the worker's arena,
// one allocation per chunk instead of one per string. Payloads the log
// keeps only raw are validated, not decoded (lazy).
type loadDec struct {
	arena []byte // the open chunk: only ever appended to
}

// nextChunk is the size of the chunk after one of size prev: twice it,
// from 1 KB up to limit.
func nextChunk(prev, limit int) int {
	return min(max(2*prev, 1<<10), limit)
}

const (
	arenaSize = 64 << 10
	// Strings over bigStr bytes get an allocation of their own.
	bigStr = 8 << 10
)

// alloc copies d into the open chunk, opening a new one when it is full.
// Chunks start small and double up to arenaSize, so a small session does
// not hold 64 KB per worker (an idle agent must stay small).
func (a *loadDec) alloc(d []byte) []byte {
	if cap(a.arena)-len(a.arena) < len(d) {
		a.arena = make([]byte, 0, max(nextChunk(cap(a.arena), arenaSize), len(d)))
	}
	n := len(a.arena)
	a.arena = append(a.arena, d...)
	return a.arena[n:len(a.arena):len(a.arena)]
}

// decodeWith is fastDecode; with ld set it decodes for a log (see loadDec):
// a request/header then only has Turn and Step, and a tool/call only Turn,
// Step and CallID, the rest of the payload being validated only.
func decodeWith(t Type, data []byte, ld *loadDec) (Payload, bool) {
	bp := scratchPool.Get().(*[]byte)
	d := dec{b: data, buf: *bp, ld: ld}
	defer func() {
		if cap(d.buf) <= 1<<20 {
			*bp = d.buf
		}
		scratchPool.Put(bp)
	}()
	var p Payload
	switch t {
	case TypeAssistantMessage:
		p = d.assistantMessage()
	case TypeToolResult:
		p = d.toolResult()
	case TypeUserMessage:
		p = d.userMessage()
	case TypeToolCall:
		p = d.toolCall()
	case TypeStepStart:
		var v StepStart
		d.turnStep(&v.Turn, &v.Step)
		p = &v
	case TypeStepEnd:
		var v StepEnd
		d.turnStep(&v.Turn, &v.Step)
		p = &v
	case TypeTurnStart:
		p = d.turnStart()
	case TypeTurnEnd:
		p = d.turnEnd()
	case TypeRequestHeader:
		p = d.requestHeader()
	default:
		return nil, false
	}
	if d.bad {
		return nil, false
	}
	d.ws()
	if d.i != len(d.b) {
		return nil, false
	}
	return p, true
}

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

func (d *dec) parts() []llm.Part {
	var ps []llm.Part
	if d.peek() == '[' {
		ps = make([]llm.Part, 0, 2)
	}
	if !d.array(func() {
		var p llm.Part
		d.object(func(k []byte) {
			switch string(k) {
			case "type":
				p.Type = d.str()
			case "text":
				p.Text = d.str()
			case "signature":
				p.Signature = d.str()
			case "mediaType":
				p.MediaType = d.str()
			case "data":
				p.Data = d.str()
			default:
				d.fail()
			}
		})
		ps = append(ps, p)
	}) {
		return nil
	}
	return ps
}

func (d *dec) source() (s Source) {
	d.object(func(k []byte) {
		switch string(k) {
		case "kind":
			s.Kind = d.str()
		case "name":
			s.Name = d.str()
		default:
			d.fail()
		}
	})
	return s
}

var comma = []byte{','}

// digits8 returns how many decimal digits b starts with when that is 1 to
// 7 and b has 8 bytes to look at, else 0.
func digits8(b []byte) int {
	if len(b) < 8 {
		return 0
	}
	w := binary.LittleEndian.Uint64(b)
	// A high bit on each byte above '9' or below '0'; carries and
	// borrows only reach bytes above a marked one.
	m := ((w + ones*(0x7f-'9')) | (w - ones*'0') | w) & highs
	return bits.TrailingZeros64(m) >> 3 & 7
}

// swar8 converts the n (1..7) digits b starts with, eight bytes at a time.
func swar8(b []byte, n int) uint64 {
	v := (binary.LittleEndian.Uint64(b) - ones*'0') << (64 - 8*n) // the digits, then zeros, as leading zeros
	v = (v & 0x0F0F0F0F0F0F0F0F) * 2561 >> 8
	v = (v & 0x00FF00FF00FF00FF) * 6553601 >> 16
	return (v & 0x0000FFFF0000FFFF) * 42949672960001 >> 32
}

func (d *dec) int64s() []int64 {
	var v []int64
	if d.peek() == '[' {
		// Size the slice at once: count the commas up to ']'.
		rest := d.b[d.i:]
		if j := bytes.IndexByte(rest, ']'); j >= 0 {
			rest = rest[:j]
		}
		v = make([]int64, 0, bytes.Count(rest, comma)+1)
		// Fast path: plain non-negative numbers, no spaces.
		b := d.b
		i := d.i + 1
		if i < len(b) && b[i] == ']' {
			d.i = i + 1
			return v
		}
		for i < len(b) {
			s := i
			var x int64
			if n := digits8(b[i:]); n > 0 {
				x = int64(swar8(b[i:], n))
				i += n
			} else {
				for i < len(b) && b[i] >= '0' && b[i] <= '9' {
					x = x*10 + int64(b[i]-'0')
					i++
				}
			}
			if i == s || i-s > 15 || (b[s] == '0' && i-s > 1) || i >= len(b) {
				break
			}
			v = append(v, x)
			if b[i] == ']' {
				d.i = i + 1
				return v
			}
			if b[i] != ',' {
				break
			}
			i++
		}
		v = v[:0] // something else: the general path
	}
	if !d.array(func() { v = append(v, int64(d.int())) }) {
		return nil
	}
	return v
}

func (d *dec) turnStep(turn, step *int) {
	d.object(func(k []byte) {
		switch string(k) {
		case "turn":
			*turn = d.int()
		case "step":
			*step = d.int()
		default:
			d.fail()
		}
	})
}

func (d *dec) userMessage() *UserMessage {
	var v UserMessage
	d.object(func(k []byte) {
		switch string(k) {
		case "id":
			v.ID = d.str()
		case "content":
			v.Content = d.parts()
		case "source":
			v.Source = d.source()
		case "replaces":
			if d.null() {
				v.Replaces = nil
				return
			}
			r := new(Replaces)
			d.object(func(k []byte) {
				switch string(k) {
				case "start":
					r.Start = int64(d.int())
				case "end":
					r.End = int64(d.int())
				case "seqs":
					r.Seqs = d.int64s()
				default:
					d.fail()
				}
			})
			v.Replaces = r
		default:
			d.fail()
		}
	})
	return &v
}

func (d *dec) assistantMessage() *AssistantMessage {
	var v AssistantMessage
	d.object(func(k []byte) {
		switch string(k) {
		case "turn":
			v.Turn = d.int()
		case "step":
			v.Step = d.int()
		case "content":
			v.Content = d.parts()
		case "toolCalls":
			var tcs []llm.ToolCall
			if d.array(func() {
				var tc llm.ToolCall
				d.object(func(k []byte) {
					switch string(k) {
					case "id":
						tc.ID = d.str()
					case "name":
						tc.Name = d.str()
					case "arguments":
						tc.Arguments = d.str()
					default:
						d.fail()
					}
				})
				tcs = append(tcs, tc)
			}) && tcs == nil {
				tcs = []llm.ToolCall{}
			}
			v.ToolCalls = tcs
		case "finish":
			v.Finish = llm.Finish(d.str())
		case "usage":
			d.object(func(k []byte) {
				switch string(k) {
				case "input":
					v.Usage.Input = d.int()
				case "output":
					v.Usage.Output = d.int()
				case "cacheRead":
					v.Usage.CacheRead = d.int()
				case "cacheWrite":
					v.Usage.CacheWrite = d.int()
				case "reasoning":
					v.Usage.Reasoning = d.int()
				default:
					d.fail()
				}
			})
		case "chunkSeqs":
			v.ChunkSeqs = d.int64s()
		case "interrupted":
			v.Interrupted = d.bool()
		default:
			d.fail()
		}
	})
	return &v
}

func (d *dec) toolCall() *ToolCall {
	var v ToolCall
	d.object(func(k []byte) {
		switch string(k) {
		case "turn":
			v.Turn = d.int()
		case "step":
			v.Step = d.int()
		case "callID":
			v.CallID = d.str()
		case "name":
			if d.lazy() {
				d.skipStr()
			} else {
				v.Name = d.str()
			}
		case "arguments":
			if d.lazy() {
				d.skipStr()
			} else {
				v.Arguments = d.str()
			}
		case "originalArguments":
			if d.lazy() {
				d.skipStr()
			} else {
				v.OriginalArguments = d.str()
			}
		default:
			d.fail()
		}
	})
	return &v
}

func (d *dec) toolResult() *ToolResult {
	var v ToolResult
	d.object(func(k []byte) {
		switch string(k) {
		case "turn":
			v.Turn = d.int()
		case "step":
			v.Step = d.int()
		case "callID":
			v.CallID = d.str()
		case "content":
			v.Content = d.parts()
		case "isError":
			v.IsError = d.bool()
		case "code":
			v.Code = d.str()
		case "meta":
			v.Meta = d.raw()
		default:
			d.fail()
		}
	})
	return &v
}

func (d *dec) turnStart() *TurnStart {
	var v TurnStart
	d.object(func(k []byte) {
		switch string(k) {
		case "turn":
			v.Turn = d.int()
		case "trigger":
			d.object(func(k []byte) {
				switch string(k) {
				case "kind":
					v.Trigger.Kind = d.str()
				case "messageID":
					v.Trigger.MessageID = d.str()
				default:
					d.fail()
				}
			})
		default:
			d.fail()
		}
	})
	return &v
}

func (d *dec) turnEnd() *TurnEnd {
	var v TurnEnd
	d.object(func(k []byte) {
		switch string(k) {
		case "turn":
			v.Turn = d.int()
		case "reason":
			d.object(func(k []byte) {
				switch string(k) {
				case "kind":
					v.Reason.Kind = d.str()
				case "code":
					v.Reason.Code = d.str()
				case "message":
					v.Reason.Message = d.str()
				case "cause":
					v.Reason.Cause = d.str()
				default:
					d.fail()
				}
			})
		default:
			d.fail()
		}
	})
	return &v
}

// requestHeader decodes a request/header; lazily (for a log), it reads
// Turn and Step and validates the rest.
func (d *dec) requestHeader() *RequestHeader {
	var v RequestHeader
	lazy := d.lazy()
	d.object(func(k []byte) {
		switch string(k) {
		case "turn":
			v.Turn = d.int()
		case "step":
			v.Step = d.int()
		case "reason", "model", "system":
			if lazy {
				d.skipStr()
				return
			}
			switch s := d.str(); string(k) {
			case "reason":
				v.Reason = s
			case "model":
				v.Model = s
			default:
				v.System = s
			}
		case "tools":
			var ts []llm.ToolSpec
			if d.array(func() {
				var t llm.ToolSpec
				d.object(func(k []byte) {
					switch string(k) {
					case "name":
						t.Name = d.str()
					case "description":
						if lazy {
							d.skipStr()
						} else {
							t.Description = d.str()
						}
					case "parameters":
						if lazy {
							d.value(0)
						} else {
							t.Parameters = d.raw()
						}
					default:
						d.fail()
					}
				})
				if !lazy {
					ts = append(ts, t)
				}
			}) && ts == nil && !lazy {
				ts = []llm.ToolSpec{}
			}
			v.Tools = ts
		case "params":
			d.params(&v.Params)
		default:
			d.fail()
		}
	})
	return &v
}

// params decodes llm.Params.
func (d *dec) params(p *llm.Params) {
	d.object(func(k []byte) {
		switch string(k) {
		case "maxTokens":
			p.MaxTokens = d.int()
		case "thinkingBudget":
			p.ThinkingBudget = d.int()
		case "reasoningEffort":
			p.ReasoningEffort = d.str()
		case "temperature", "topP":
			// Floats: encoding/json's business.
			d.ws()
			s := d.i
			d.value(0)
			if d.bad {
				return
			}
			var f *float64
			if err := json.Unmarshal(d.b[s:d.i], &f); err != nil {
				d.fail()
				return
			}
			if string(k) == "temperature" {
				p.Temperature = f
			} else {
				p.TopP = f
			}
		default:
			d.fail()
		}
	})
}
