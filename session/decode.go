package session

import (
	"encoding/json"

	"github.com/reinhq/rein/llm"
	"github.com/reinhq/rein/session/internal/wire"
)

// Payload decoding, the fast path. Loading a session decodes every payload;
// encoding/json costs several times a line scan for that. Each payload is
// read by a plan made once from its type's json tags (wire.ObjOf), with
// readers of its own only for what a plan does not read (slices of
// structs, pointers, floats) and marks for what a log or a check does not
// need decoded. Anything a plan does not take (an unknown, case-folded or
// repeated key, a float where an int belongs, ...) makes it give up, and
// the caller falls back to the general decoder, encoding/json (see
// general.go), so results never differ from it.

var (
	partObj     = wire.ObjOf[llm.Part](wire.Text("text", "signature", "data"))
	toolCallObj = wire.ObjOf[llm.ToolCall](wire.Text("arguments"))
	toolSpecObj = wire.ObjOf[llm.ToolSpec](wire.Lazy("description", "parameters"))
	replacesObj = wire.ObjOf[Replaces]()
	lostObj     = wire.ObjOf[Lost]()
	callDelta   = wire.ObjOf[llm.ToolCallDelta]()
	prefixObj   = wire.ObjOf[Prefix]()

	// content reads a list of parts.
	content = func(d *wire.Dec) []llm.Part { return wire.List(d, partObj, 2) }

	turnStartObj       = wire.ObjOf[TurnStart]()
	turnEndObj         = wire.ObjOf[TurnEnd]()
	stepStartObj       = wire.ObjOf[StepStart]()
	stepEndObj         = wire.ObjOf[StepEnd]()
	userMessageObj     = wire.ObjOf[UserMessage](contentOf(func(v *UserMessage) *[]llm.Part { return &v.Content }), wire.Custom("replaces", func(d *wire.Dec, v *UserMessage) { v.Replaces = wire.Ptr(d, replacesObj) }))
	steeringMessageObj = wire.ObjOf[SteeringMessage](contentOf(func(v *SteeringMessage) *[]llm.Part { return &v.Content }))
	requestHeaderObj   = wire.ObjOf[RequestHeader](wire.Lazy("reason", "model", "system"),
		wire.Custom("tools", func(d *wire.Dec, v *RequestHeader) {
			if v.Tools = wire.List(d, toolSpecObj, 0); d.Lazy() {
				v.Tools = nil // only validated
			}
		}),
		wire.Nested("params", floatOf("temperature", func(p *llm.Params) **float64 { return &p.Temperature }),
			floatOf("topP", func(p *llm.Params) **float64 { return &p.TopP })),
		wire.Custom("prefix", func(d *wire.Dec, v *RequestHeader) { v.Prefix = wire.Ptr(d, prefixObj) }))
	assistantChunkObj = wire.ObjOf[AssistantChunk](
		wire.Nested("delta", wire.Custom("toolCall", func(d *wire.Dec, v *llm.Delta) { v.ToolCall = wire.Ptr(d, callDelta) })),
		wire.Custom("lost", func(d *wire.Dec, v *AssistantChunk) { v.Lost = wire.Ptr(d, lostObj) }))
	assistantMessageObj = wire.ObjOf[AssistantMessage](contentOf(func(v *AssistantMessage) *[]llm.Part { return &v.Content }),
		wire.Custom("toolCalls", func(d *wire.Dec, v *AssistantMessage) { v.ToolCalls = wire.List(d, toolCallObj, 0) }))
	toolCallEventObj   = wire.ObjOf[ToolCall](wire.Lazy("name", "arguments", "originalArguments"))
	toolApprovalObj    = wire.ObjOf[ToolApproval]()
	toolResultObj      = wire.ObjOf[ToolResult](contentOf(func(v *ToolResult) *[]llm.Part { return &v.Content }), wire.Text("meta"))
	hookResultObj      = wire.ObjOf[HookResult]()
	compactionStartObj = wire.ObjOf[CompactionStart]()
	compactionEndObj   = wire.ObjOf[CompactionEnd]()
	sessionTitleObj    = wire.ObjOf[SessionTitle]()
)

// contentOf is the reader of a payload's "content" field.
func contentOf[T any](field func(*T) *[]llm.Part) wire.Opt {
	return wire.Custom("content", func(d *wire.Dec, v *T) { *field(v) = content(d) })
}

// floatOf is the reader of an optional float: encoding/json's business.
func floatOf(name string, field func(*llm.Params) **float64) wire.Opt {
	return wire.Custom(name, func(d *wire.Dec, p *llm.Params) {
		s := d.Span()
		if !d.Bad() && json.Unmarshal(s, field(p)) != nil {
			d.Fail()
		}
	})
}

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
	switch t {
	case TypeTurnStart:
		p = decode(d, turnStartObj)
	case TypeTurnEnd:
		p = decode(d, turnEndObj)
	case TypeStepStart:
		p = decode(d, stepStartObj)
	case TypeStepEnd:
		p = decode(d, stepEndObj)
	case TypeUserMessage:
		p = decode(d, userMessageObj)
	case TypeSteeringMessage:
		p = decode(d, steeringMessageObj)
	case TypeRequestHeader:
		p = decode(d, requestHeaderObj)
	case TypeAssistantChunk:
		p = decode(d, assistantChunkObj)
	case TypeAssistantMessage:
		p = decode(d, assistantMessageObj)
	case TypeToolCall:
		p = decode(d, toolCallEventObj)
	case TypeToolApproval:
		p = decode(d, toolApprovalObj)
	case TypeToolResult:
		p = decode(d, toolResultObj)
	case TypeHookResult:
		p = decode(d, hookResultObj)
	case TypeCompactionStart:
		p = decode(d, compactionStartObj)
	case TypeCompactionEnd:
		p = decode(d, compactionEndObj)
	case TypeSessionTitle:
		p = decode(d, sessionTitleObj)
	default:
		return nil, false
	}
	if !d.Done() {
		return nil, false
	}
	return p, true
}

// decode reads a payload of plan o.
func decode[T any, P interface {
	*T
	Payload
}](d *wire.Dec, o *wire.Obj[T]) Payload {
	v := P(new(T))
	o.Decode(d, v)
	return v
}
