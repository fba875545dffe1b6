package session

import (
	"encoding/json"

	"github.com/reinhq/rein/llm"
	"github.com/reinhq/rein/session/internal/wire"
)

// Payload decoding, the fast path. Loading a session decodes every payload;
// encoding/json costs several times a line scan for that. The decoders here
// state each payload's fields (wire.Fields) as rein writes them; anything
// else (an unknown or case-folded key, a float where an int belongs, ...)
// makes them give up and the caller falls back to the general decoder,
// encoding/json (see generalDecode), so results never differ from it.

// fastDecode decodes data as the payload of type t, reporting false when it
// cannot (the caller then uses the general decoder).
func fastDecode(t Type, data []byte) (Payload, bool) {
	return decodeWith(t, data, nil, false)
}

// decodeWith is fastDecode; with a set it decodes for a log (see
// wire.NewDec): strings alias data, and a request/header then has only
// Turn and Step, a tool/call only Turn, Step and CallID, the rest of the
// payload being validated only. With check set it decodes only what the
// checker looks at (see wire.Dec.Check), validating the rest.
func decodeWith(t Type, data []byte, a *wire.Arena, check bool) (Payload, bool) {
	d := wire.NewDec(data, a)
	defer d.Release()
	if check {
		d.Check()
	}
	var p Payload
	// A switch, not a table of functions: through an indirect call d
	// would escape to the heap.
	switch t {
	case TypeTurnStart:
		p = readTurnStart(&d)
	case TypeTurnEnd:
		p = readTurnEnd(&d)
	case TypeStepStart:
		p = readStepStart(&d)
	case TypeStepEnd:
		p = readStepEnd(&d)
	case TypeUserMessage:
		p = readUserMessage(&d)
	case TypeSteeringMessage:
		p = readSteeringMessage(&d)
	case TypeRequestHeader:
		p = readRequestHeader(&d)
	case TypeAssistantChunk:
		p = readAssistantChunk(&d)
	case TypeAssistantMessage:
		p = readAssistantMessage(&d)
	case TypeToolCall:
		p = readToolCall(&d)
	case TypeToolApproval:
		p = readToolApproval(&d)
	case TypeToolResult:
		p = readToolResult(&d)
	case TypeHookResult:
		p = readHookResult(&d)
	case TypeCompactionStart:
		p = readCompactionStart(&d)
	case TypeCompactionEnd:
		p = readCompactionEnd(&d)
	case TypeSessionTitle:
		p = readSessionTitle(&d)
	default:
		return nil, false
	}
	if !d.Done() {
		return nil, false
	}
	return p, true
}

func readTurnStart(d *wire.Dec) Payload {
	var v TurnStart
	d.Fields(wire.F("turn", &v.Turn), wire.F("trigger", func() {
		d.Fields(wire.F("kind", &v.Trigger.Kind), wire.F("messageID", &v.Trigger.MessageID))
	}))
	return &v
}

func readTurnEnd(d *wire.Dec) Payload {
	var v TurnEnd
	r := &v.Reason
	d.Fields(wire.F("turn", &v.Turn), wire.F("reason", func() {
		d.Fields(wire.F("kind", &r.Kind), wire.F("code", &r.Code), wire.F("message", &r.Message), wire.F("cause", &r.Cause))
	}))
	return &v
}

func readStepStart(d *wire.Dec) Payload {
	var v StepStart
	d.Fields(wire.F("turn", &v.Turn), wire.F("step", &v.Step))
	return &v
}

func readStepEnd(d *wire.Dec) Payload {
	var v StepEnd
	d.Fields(wire.F("turn", &v.Turn), wire.F("step", &v.Step))
	return &v
}

func readUserMessage(d *wire.Dec) Payload {
	var v UserMessage
	d.Fields(wire.F("id", &v.ID), content(d, &v.Content), source(d, &v.Source), wire.F("replaces", optional(d, &v.Replaces, func(r *Replaces) {
		d.Fields(wire.F("start", &r.Start), wire.F("end", &r.End), wire.F("seqs", &r.Seqs))
	})))
	return &v
}

func readSteeringMessage(d *wire.Dec) Payload {
	var v SteeringMessage
	d.Fields(wire.F("turn", &v.Turn), wire.F("id", &v.ID), content(d, &v.Content), source(d, &v.Source))
	return &v
}

func readRequestHeader(d *wire.Dec) Payload {
	var v RequestHeader
	d.Fields(wire.F("turn", &v.Turn), wire.F("step", &v.Step),
		wire.Lazy("reason", &v.Reason), wire.Lazy("model", &v.Model), wire.Lazy("system", &v.System),
		wire.F("tools", func() {
			var t llm.ToolSpec
			v.Tools = list(d, 0, &t, func() {
				d.Fields(wire.F("name", &t.Name), wire.Lazy("description", &t.Description), wire.Lazy("parameters", &t.Parameters))
			})
			if d.Lazy() {
				v.Tools = nil // only validated
			}
		}),
		wire.F("params", func() { params(d, &v.Params) }))
	return &v
}

func readAssistantChunk(d *wire.Dec) Payload {
	var v AssistantChunk
	d.Fields(wire.F("turn", &v.Turn), wire.F("step", &v.Step), wire.F("delta", func() {
		x := &v.Delta
		d.Fields(wire.F("text", &x.Text), wire.F("reasoning", &x.Reasoning), wire.F("signature", &x.Signature),
			wire.F("toolCall", optional(d, &x.ToolCall, func(tc *llm.ToolCallDelta) {
				d.Fields(wire.F("index", &tc.Index), wire.F("id", &tc.ID), wire.F("name", &tc.Name), wire.F("arguments", &tc.Arguments))
			})))
	}), wire.F("lost", optional(d, &v.Lost, func(l *Lost) {
		d.Fields(wire.F("line", &l.Line), wire.F("error", &l.Error))
	})))
	return &v
}

func readAssistantMessage(d *wire.Dec) Payload {
	var v AssistantMessage
	u := &v.Usage
	d.Fields(wire.F("turn", &v.Turn), wire.F("step", &v.Step), content(d, &v.Content),
		wire.F("toolCalls", func() {
			var tc llm.ToolCall
			v.ToolCalls = list(d, 0, &tc, func() {
				d.Fields(wire.F("id", &tc.ID), wire.F("name", &tc.Name), wire.F("arguments", &tc.Arguments))
			})
		}),
		wire.F("finish", (*string)(&v.Finish)),
		wire.F("usage", func() {
			d.Fields(wire.F("input", &u.Input), wire.F("output", &u.Output), wire.F("cacheRead", &u.CacheRead),
				wire.F("cacheWrite", &u.CacheWrite), wire.F("reasoning", &u.Reasoning))
		}),
		wire.F("chunkSeqs", &v.ChunkSeqs), wire.F("interrupted", &v.Interrupted))
	return &v
}

func readToolCall(d *wire.Dec) Payload {
	var v ToolCall
	d.Fields(wire.F("turn", &v.Turn), wire.F("step", &v.Step), wire.F("callID", &v.CallID),
		wire.Lazy("name", &v.Name), wire.Lazy("arguments", &v.Arguments), wire.Lazy("originalArguments", &v.OriginalArguments))
	return &v
}

func readToolApproval(d *wire.Dec) Payload {
	var v ToolApproval
	d.Fields(wire.F("turn", &v.Turn), wire.F("step", &v.Step), wire.F("callID", &v.CallID),
		wire.F("decision", &v.Decision), wire.F("by", &v.By), wire.F("reason", &v.Reason))
	return &v
}

func readToolResult(d *wire.Dec) Payload {
	var v ToolResult
	d.Fields(wire.F("turn", &v.Turn), wire.F("step", &v.Step), wire.F("callID", &v.CallID), content(d, &v.Content),
		wire.F("isError", &v.IsError), wire.F("code", &v.Code), wire.Text("meta", &v.Meta))
	return &v
}

func readHookResult(d *wire.Dec) Payload {
	var v HookResult
	d.Fields(wire.F("turn", intPtr(d, &v.Turn)), wire.F("point", &v.Point), wire.F("hook", &v.Hook),
		wire.F("decision", &v.Decision), wire.F("exitCode", intPtr(d, &v.ExitCode)),
		wire.F("durationMs", &v.DurationMs), wire.F("stderr", &v.Stderr))
	return &v
}

func readCompactionStart(d *wire.Dec) Payload {
	var v CompactionStart
	d.Fields(wire.F("turn", intPtr(d, &v.Turn)), wire.F("id", &v.ID), wire.F("reason", &v.Reason), wire.F("instructions", &v.Instructions))
	return &v
}

func readCompactionEnd(d *wire.Dec) Payload {
	var v CompactionEnd
	d.Fields(wire.F("turn", intPtr(d, &v.Turn)), wire.F("id", &v.ID), wire.F("reason", &v.Reason), wire.F("error", &v.Error))
	return &v
}

func readSessionTitle(d *wire.Dec) Payload {
	var v SessionTitle
	d.Fields(wire.F("title", &v.Title))
	return &v
}

// list decodes an array, each element by elem into *e (zeroed first) and
// then appended, with room for n elements at first. null gives nil, an
// empty array an empty, non-nil slice, as encoding/json does.
func list[T any](d *wire.Dec, n int, e *T, elem func()) []T {
	var out []T
	if n > 0 && d.Peek() == '[' {
		out = make([]T, 0, n)
	}
	if !d.Array(func() {
		var zero T
		*e = zero
		elem()
		out = append(out, *e)
	}) {
		return nil
	}
	if out == nil {
		out = []T{}
	}
	return out
}

// content is the field "content": a list of parts.
func content(d *wire.Dec, ps *[]llm.Part) wire.Field {
	return wire.F("content", func() {
		var p llm.Part
		*ps = list(d, 2, &p, func() {
			d.Fields(wire.F("type", &p.Type), wire.Text("text", &p.Text), wire.Text("signature", &p.Signature),
				wire.F("mediaType", &p.MediaType), wire.Text("data", &p.Data))
		})
	})
}

// source is the field "source".
func source(d *wire.Dec, s *Source) wire.Field {
	return wire.F("source", func() { d.Fields(wire.F("kind", &s.Kind), wire.F("name", &s.Name)) })
}

// optional reads an object into a new T with fields (null: nil).
func optional[T any](d *wire.Dec, p **T, fields func(v *T)) func() {
	return func() {
		if d.Null() {
			*p = nil
			return
		}
		v := new(T)
		fields(v)
		*p = v
	}
}

// intPtr reads an optional integer into *p (null: nil).
func intPtr(d *wire.Dec, p **int) func() {
	return func() {
		if d.Null() {
			*p = nil
			return
		}
		n := d.Int()
		*p = &n
	}
}

// params decodes llm.Params.
func params(d *wire.Dec, p *llm.Params) {
	float := func(f **float64) func() {
		return func() {
			// Floats: encoding/json's business.
			s := d.Span()
			if d.Bad() {
				return
			}
			if err := json.Unmarshal(s, f); err != nil {
				d.Fail()
			}
		}
	}
	d.Fields(wire.F("maxTokens", &p.MaxTokens), wire.F("thinkingBudget", &p.ThinkingBudget),
		wire.F("reasoningEffort", &p.ReasoningEffort), wire.F("temperature", float(&p.Temperature)), wire.F("topP", float(&p.TopP)))
}
