package session

import (
	"encoding/json"
	"sync"
	"unicode/utf16"
	"unicode/utf8"

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
	bp := scratchPool.Get().(*[]byte)
	d := dec{b: data, buf: *bp}
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
	buf []byte // scratch for unescaping
}

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

// strStop marks the bytes that end a run of plain string bytes.
var strStop = func() (t [256]bool) {
	for c := 0; c < 0x20; c++ {
		t[c] = true
	}
	t['"'], t['\\'] = true, true
	return t
}()

// str reads a string value (null gives ""), unescaping it.
func (d *dec) str() string {
	if d.peek() != '"' {
		if !d.null() {
			d.fail()
		}
		return ""
	}
	d.i++
	s := d.i
	b := d.b
	i := d.i
	var hi byte
	for i < len(b) && !strStop[b[i]] {
		hi |= b[i]
		i++
	}
	d.i = i
	if i >= len(b) || b[i] != '"' {
		if i < len(b) && b[i] == '\\' {
			d.i = s
			return d.strEscaped()
		}
		d.fail()
		return ""
	}
	v := b[s:i]
	d.i++
	if hi >= 0x80 && !utf8.Valid(v) {
		d.fail() // encoding/json substitutes U+FFFD; let it
	}
	return string(v)
}

// unesc maps the byte after a backslash to what it stands for (0: not a
// one-byte escape).
var unesc = func() (t [256]byte) {
	t['"'], t['\\'], t['/'] = '"', '\\', '/'
	t['n'], t['t'], t['r'], t['b'], t['f'] = '\n', '\t', '\r', '\b', '\f'
	return t
}()

// strEscaped reads a string with escapes, d.i at its first byte. It
// unescapes into the decoder's scratch buffer, which string() then copies.
func (d *dec) strEscaped() string {
	out := d.buf[:0]
	b := d.b
	i := d.i
	var hi byte
	for {
		s := i
		for i < len(b) && !strStop[b[i]] {
			hi |= b[i]
			i++
		}
		out = append(out, b[s:i]...)
		if i >= len(b) || b[i] < 0x20 || (b[i] == '\\' && i+1 >= len(b)) {
			d.fail()
			return ""
		}
		if b[i] == '"' {
			d.i = i + 1
			d.buf = out
			if hi >= 0x80 && !utf8.Valid(out) {
				d.fail() // encoding/json substitutes U+FFFD; let it
				return ""
			}
			return string(out)
		}
		e := b[i+1]
		if c := unesc[e]; c != 0 {
			out = append(out, c)
			i += 2
			continue
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
		out = utf8.AppendRune(out, r)
		i = d.i
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

// raw returns the next value's bytes (copied), validated by encoding/json.
func (d *dec) raw() json.RawMessage {
	d.ws()
	s := d.i
	d.skip()
	if d.bad {
		return nil
	}
	v := d.b[s:d.i]
	if !json.Valid(v) {
		d.fail()
		return nil
	}
	return append(json.RawMessage(nil), v...)
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

func (d *dec) int64s() []int64 {
	var v []int64
	if d.peek() == '[' {
		// Size the slice at once: count the commas up to ']'.
		n := 1
		for j := d.i + 1; j < len(d.b) && d.b[j] != ']'; j++ {
			if d.b[j] == ',' {
				n++
			}
		}
		v = make([]int64, 0, n)
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
			v.Name = d.str()
		case "arguments":
			v.Arguments = d.str()
		case "originalArguments":
			v.OriginalArguments = d.str()
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

func (d *dec) requestHeader() *RequestHeader {
	var v RequestHeader
	d.object(func(k []byte) {
		switch string(k) {
		case "turn":
			v.Turn = d.int()
		case "step":
			v.Step = d.int()
		case "reason":
			v.Reason = d.str()
		case "model":
			v.Model = d.str()
		case "system":
			v.System = d.str()
		case "tools":
			var ts []llm.ToolSpec
			if d.array(func() {
				var t llm.ToolSpec
				d.object(func(k []byte) {
					switch string(k) {
					case "name":
						t.Name = d.str()
					case "description":
						t.Description = d.str()
					case "parameters":
						t.Parameters = d.raw()
					default:
						d.fail()
					}
				})
				ts = append(ts, t)
			}) && ts == nil {
				ts = []llm.ToolSpec{}
			}
			v.Tools = ts
		case "params":
			raw := d.raw()
			if !d.bad && len(raw) > 0 && json.Unmarshal(raw, &v.Params) != nil {
				d.fail()
			}
		default:
			d.fail()
		}
	})
	return &v
}
