package openai

// The encoding before the cache, kept as the oracle the cached encoding
// must match byte for byte: a map of the top-level fields, one
// encoding/json pass over the whole request.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"testing"

	"pgregory.net/rapid"

	"github.com/reinhq/rein/llm"
	"github.com/reinhq/rein/llm/wire"
	"github.com/reinhq/rein/llm/wire/wiretest"
)

func referenceBody(p *Provider, req *llm.Request) ([]byte, error) {
	if req.Model == "" {
		return nil, errNoModel
	}
	msgs := make([]wireMessage, 0, len(req.Messages)+1)
	// Images of a run of tool results wait until the run ends: a user
	// message may not sit between the tool messages of one batch.
	var pending []wirePart
	flush := func() {
		if len(pending) > 0 {
			parts := append([]wirePart{{Type: "text", Text: "Attached image(s) from tool result:"}}, pending...)
			msgs = append(msgs, wireMessage{Role: "user", Content: parts})
			pending = nil
		}
	}
	if req.System != "" {
		msgs = append(msgs, wireMessage{Role: "system", Content: req.System})
	}
	for i := range req.Messages {
		m := &req.Messages[i]
		if m.Role != llm.RoleTool {
			flush()
		}
		switch m.Role {
		case llm.RoleUser:
			msgs = append(msgs, wireMessage{Role: "user", Content: userContent(m.Content)})
		case llm.RoleAssistant:
			w := wireMessage{Role: "assistant", Content: llm.PlainText(m.Content)}
			for _, tc := range m.ToolCalls {
				var c wireCall
				c.ID, c.Type = tc.ID, "function"
				c.Function.Name, c.Function.Arguments = tc.Name, tc.Arguments
				if c.Function.Arguments == "" {
					c.Function.Arguments = "{}"
				}
				w.ToolCalls = append(w.ToolCalls, c)
			}
			if p.cfg.ReasoningContent {
				if r := reasoningText(m.Content); r != "" || len(m.ToolCalls) > 0 {
					w.ReasoningContent = &r
				}
			}
			msgs = append(msgs, w)
		case llm.RoleTool:
			msgs = append(msgs, wireMessage{Role: "tool", ToolCallID: m.ToolCallID, Content: llm.PlainText(m.Content)})
			pending = append(pending, images(m.Content)...)
		default:
			return nil, fmt.Errorf("openai: message %d has unknown role %q", i, m.Role)
		}
	}
	flush()
	body := map[string]any{
		"model":          req.Model,
		"messages":       msgs,
		"stream":         true,
		"stream_options": map[string]bool{"include_usage": true},
	}
	if len(req.Tools) > 0 {
		tools := make([]wireTool, len(req.Tools))
		for i, t := range req.Tools {
			tools[i].Type = "function"
			tools[i].Function.Name = t.Name
			tools[i].Function.Description = t.Description
			tools[i].Function.Parameters = t.Parameters
		}
		body["tools"] = tools
	}
	pr := req.Params
	if pr.MaxTokens > 0 {
		body[p.cfg.MaxTokensField] = pr.MaxTokens
	}
	if pr.Temperature != nil {
		body["temperature"] = *pr.Temperature
	}
	if pr.TopP != nil {
		body["top_p"] = *pr.TopP
	}
	if pr.ReasoningEffort != "" {
		body["reasoning_effort"] = pr.ReasoningEffort
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(body); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// TestCachedBodyMatchesScratch encodes random conversations request after
// request through one llm.Cache and checks every body, byte for byte,
// against the whole-request encoding, and what Prepare reports as shared
// against how the request was made: a compaction, an edited or dropped
// message, or a message with equal content in new arrays must be encoded
// again.
func TestCachedBodyMatchesScratch(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		cfg := rapid.SampledFrom([]Config{{}, {ReasoningContent: true, MaxTokensField: "max_completion_tokens"}}).Draw(t, "config")
		p := New(cfg)
		wiretest.Check(t, wiretest.Encoder{
			Prepare: p.Prepare,
			Sent: func(req *llm.Request) ([]byte, error) {
				b, _, err := p.encode(req, wire.State[cache](req.Cache, p))
				return b.Bytes(), err
			},
			Body:      p.Body,
			Reference: func(req *llm.Request) ([]byte, error) { return referenceBody(p, req) },
		})
	})
}
