package mock

import (
	"github.com/reinhq/rein/llm"
)

// dialect renders replies in one provider's wire format.
type dialect interface {
	name() string
	frames(r *Reply) []string
	empty() []string
	malformed() string
	streamError() string
	errorBody(typ, msg string) string
	overflowMessage() string
}

func data(v any) string { return "data: " + mustJSON(v) + "\n\n" }

func event(typ string, v any) string { return "event: " + typ + "\ndata: " + mustJSON(v) + "\n\n" }

type obj = map[string]any

// openaiDialect is the Chat Completions streaming format.
type openaiDialect struct{}

func (openaiDialect) name() string { return "openai" }

func chunk(delta obj, finish any) string {
	return data(obj{"id": "chatcmpl-mock", "object": "chat.completion.chunk", "created": 0, "model": "mock",
		"choices": []obj{{"index": 0, "delta": delta, "finish_reason": finish}}})
}

func (openaiDialect) frames(r *Reply) []string {
	out := []string{chunk(obj{"role": "assistant", "content": ""}, nil)}
	for _, f := range fragments(r.Reasoning, r.Split) {
		out = append(out, chunk(obj{"reasoning_content": f}, nil))
	}
	for _, f := range fragments(r.Text, r.Split) {
		out = append(out, chunk(obj{"content": f}, nil))
	}
	for i, tc := range r.ToolCalls {
		// The id, type and name come with the first fragment only.
		out = append(out, chunk(obj{"tool_calls": []obj{{"index": i, "id": tc.ID, "type": "function", "function": obj{"name": tc.Name, "arguments": ""}}}}, nil))
		for _, f := range fragments(tc.Arguments, r.Split) {
			out = append(out, chunk(obj{"tool_calls": []obj{{"index": i, "function": obj{"arguments": f}}}}, nil))
		}
	}
	reason := map[llm.Finish]string{llm.FinishStop: "stop", llm.FinishToolCalls: "tool_calls", llm.FinishMaxTokens: "length", llm.FinishError: "content_filter"}[finishOf(r)]
	out = append(out, chunk(obj{}, reason))
	u := r.Usage
	usage := obj{"prompt_tokens": u.Input, "completion_tokens": u.Output, "total_tokens": u.Input + u.Output,
		"prompt_tokens_details":     obj{"cached_tokens": u.CacheRead},
		"completion_tokens_details": obj{"reasoning_tokens": u.Reasoning}}
	out = append(out, data(obj{"id": "chatcmpl-mock", "object": "chat.completion.chunk", "created": 0, "model": "mock", "choices": []obj{}, "usage": usage}))
	return append(out, "data: [DONE]\n\n")
}

func (openaiDialect) empty() []string {
	return []string{chunk(obj{"role": "assistant", "content": ""}, nil), chunk(obj{}, "stop"), "data: [DONE]\n\n"}
}

func (openaiDialect) malformed() string {
	return "data: {\"id\":\"chatcmpl-mock\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"x\"\n\n"
}

func (openaiDialect) streamError() string {
	return data(obj{"error": obj{"message": "Overloaded", "type": "overloaded_error", "param": nil, "code": nil}})
}

func (openaiDialect) errorBody(typ, msg string) string {
	code := any(nil)
	switch typ {
	case "rate_limit_error":
		code = "rate_limit_exceeded"
	case "invalid_request_error":
		if msg == (openaiDialect{}).overflowMessage() {
			code = "context_length_exceeded"
		}
	}
	return mustJSON(obj{"error": obj{"message": msg, "type": typ, "param": nil, "code": code}})
}

func (openaiDialect) overflowMessage() string {
	return "This model's maximum context length is 131072 tokens. However, you requested 140000 tokens (140000 in the messages, 0 in the completion). Please reduce the length of the messages or completion."
}

// anthropicDialect is the Messages streaming format.
type anthropicDialect struct{}

func (anthropicDialect) name() string { return "anthropic" }

func messageStart(u llm.Usage) string {
	in := u.Input - u.CacheRead - u.CacheWrite
	return event("message_start", obj{"type": "message_start", "message": obj{
		"id": "msg_mock", "type": "message", "role": "assistant", "content": []obj{}, "model": "mock",
		"stop_reason": nil, "stop_sequence": nil,
		"usage": obj{"input_tokens": max(in, 0), "cache_creation_input_tokens": u.CacheWrite, "cache_read_input_tokens": u.CacheRead, "output_tokens": 1}}})
}

func (anthropicDialect) frames(r *Reply) []string {
	out := []string{messageStart(r.Usage)}
	idx := 0
	block := func(start obj, deltas []obj) {
		out = append(out, event("content_block_start", obj{"type": "content_block_start", "index": idx, "content_block": start}))
		for _, d := range deltas {
			out = append(out, event("content_block_delta", obj{"type": "content_block_delta", "index": idx, "delta": d}))
		}
		out = append(out, event("content_block_stop", obj{"type": "content_block_stop", "index": idx}))
		idx++
	}
	if r.Reasoning != "" {
		var ds []obj
		for _, f := range fragments(r.Reasoning, r.Split) {
			ds = append(ds, obj{"type": "thinking_delta", "thinking": f})
		}
		if r.Signature != "" {
			ds = append(ds, obj{"type": "signature_delta", "signature": r.Signature})
		}
		block(obj{"type": "thinking", "thinking": ""}, ds)
	}
	if r.Text != "" {
		var ds []obj
		for _, f := range fragments(r.Text, r.Split) {
			ds = append(ds, obj{"type": "text_delta", "text": f})
		}
		block(obj{"type": "text", "text": ""}, ds)
	}
	for _, tc := range r.ToolCalls {
		ds := []obj{{"type": "input_json_delta", "partial_json": ""}}
		for _, f := range fragments(tc.Arguments, r.Split) {
			ds = append(ds, obj{"type": "input_json_delta", "partial_json": f})
		}
		block(obj{"type": "tool_use", "id": tc.ID, "name": tc.Name, "input": obj{}}, ds)
	}
	reason := map[llm.Finish]string{llm.FinishStop: "end_turn", llm.FinishToolCalls: "tool_use", llm.FinishMaxTokens: "max_tokens", llm.FinishError: "refusal"}[finishOf(r)]
	out = append(out, event("message_delta", obj{"type": "message_delta", "delta": obj{"stop_reason": reason, "stop_sequence": nil}, "usage": obj{"output_tokens": r.Usage.Output}}))
	return append(out, event("message_stop", obj{"type": "message_stop"}))
}

func (anthropicDialect) empty() []string {
	return []string{
		messageStart(llm.Usage{}),
		event("message_delta", obj{"type": "message_delta", "delta": obj{"stop_reason": "end_turn", "stop_sequence": nil}, "usage": obj{"output_tokens": 0}}),
		event("message_stop", obj{"type": "message_stop"}),
	}
}

func (anthropicDialect) malformed() string {
	return "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_del\n\n"
}

func (anthropicDialect) streamError() string {
	return event("error", obj{"type": "error", "error": obj{"type": "overloaded_error", "message": "Overloaded"}})
}

func (anthropicDialect) errorBody(typ, msg string) string {
	return mustJSON(obj{"type": "error", "error": obj{"type": typ, "message": msg}, "request_id": "req_mock"})
}

func (anthropicDialect) overflowMessage() string {
	return "prompt is too long: 208310 tokens > 200000 maximum"
}
