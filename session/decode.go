package session

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"math/bits"

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
