package anthropic

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/reinhq/rein/llm"
)

type cacheControl struct {
	Type string `json:"type"`
}

var ephemeral = &cacheControl{Type: "ephemeral"}

type wireMessage struct {
	Role    string      `json:"role"`
	Content []wireBlock `json:"content"`
}

// wireBlock is one content block; fields are set per type.
type wireBlock struct {
	Type         string          `json:"type"`
	Text         *string         `json:"text,omitempty"`
	Thinking     *string         `json:"thinking,omitempty"`
	Signature    string          `json:"signature,omitempty"`
	Source       *imageSource    `json:"source,omitempty"`
	ID           string          `json:"id,omitempty"`
	Name         string          `json:"name,omitempty"`
	Input        json.RawMessage `json:"input,omitempty"`
	ToolUseID    string          `json:"tool_use_id,omitempty"`
	Content      []wireBlock     `json:"content,omitempty"`
	IsError      bool            `json:"is_error,omitempty"`
	CacheControl *cacheControl   `json:"cache_control,omitempty"`
}

type imageSource struct {
	Type      string `json:"type"`
	MediaType string `json:"media_type"`
	Data      string `json:"data"`
}

type wireTool struct {
	Name         string          `json:"name"`
	Description  string          `json:"description,omitempty"`
	InputSchema  json.RawMessage `json:"input_schema"`
	CacheControl *cacheControl   `json:"cache_control,omitempty"`
}

type thinking struct {
	Type         string `json:"type"`
	BudgetTokens int    `json:"budget_tokens"`
}

type wireRequest struct {
	Model       string        `json:"model"`
	MaxTokens   int           `json:"max_tokens"`
	System      []wireBlock   `json:"system,omitempty"`
	Messages    []wireMessage `json:"messages"`
	Tools       []wireTool    `json:"tools,omitempty"`
	Thinking    *thinking     `json:"thinking,omitempty"`
	Temperature *float64      `json:"temperature,omitempty"`
	TopP        *float64      `json:"top_p,omitempty"`
	Stream      bool          `json:"stream"`
}

var errNoModel = errors.New("anthropic: request has no model")

// emptyText stands in for a message with no content: the API rejects empty
// content and empty text blocks.
const emptyText = "(empty)"

func str(s string) *string { return &s }

// Body returns the JSON request body for req. It reads req and never
// modifies it.
//
// Mapping: each user message becomes its own user message, in order —
// the API accepts consecutive user messages and combines them into one
// turn itself, so nothing is merged or dropped here. A run of consecutive
// tool messages becomes one user message of tool_result blocks in order,
// which is the documented form for parallel tool use (all results in the
// next user message). An assistant message sends its reasoning parts that
// carry a signature as thinking blocks first (the API requires the
// thinking blocks of a tool-use turn back, signature intact; a reasoning
// part without a signature came from another provider and cannot be
// verified, so it is dropped), then its text, then tool_use blocks.
// Tool call arguments that are not a JSON object are sent as {}.
//
// Prompt caching puts cache_control breakpoints (at most 4) on the system
// prompt, the last tool, the last message of the previous request (the
// message before the last assistant message) and the last message.
func (p *Provider) Body(req *llm.Request) ([]byte, error) {
	if req.Model == "" {
		return nil, errNoModel
	}
	w := wireRequest{Model: req.Model, MaxTokens: p.cfg.MaxTokens, Stream: true}
	pr := req.Params
	if pr.MaxTokens > 0 {
		w.MaxTokens = pr.MaxTokens
	}
	if pr.ThinkingBudget > 0 {
		w.Thinking = &thinking{Type: "enabled", BudgetTokens: max(pr.ThinkingBudget, 1024)}
		if w.MaxTokens <= w.Thinking.BudgetTokens {
			w.MaxTokens = w.Thinking.BudgetTokens + p.cfg.MaxTokens
		}
	}
	w.Temperature, w.TopP = pr.Temperature, pr.TopP
	if req.System != "" {
		w.System = []wireBlock{{Type: "text", Text: str(req.System)}}
	}
	for _, t := range req.Tools {
		schema := t.Parameters
		if len(schema) == 0 {
			schema = json.RawMessage(`{"type":"object"}`)
		}
		w.Tools = append(w.Tools, wireTool{Name: t.Name, Description: t.Description, InputSchema: schema})
	}
	lastAssistant := -1
	for i := range req.Messages {
		m := &req.Messages[i]
		switch m.Role {
		case llm.RoleUser:
			w.Messages = append(w.Messages, wireMessage{Role: "user", Content: userBlocks(m.Content)})
		case llm.RoleAssistant:
			lastAssistant = len(w.Messages)
			w.Messages = append(w.Messages, wireMessage{Role: "assistant", Content: assistantBlocks(m)})
		case llm.RoleTool:
			res := wireBlock{Type: "tool_result", ToolUseID: m.ToolCallID, IsError: m.IsError}
			for _, b := range userBlocks(m.Content) {
				if b.Type == "text" && *b.Text == emptyText {
					continue
				}
				res.Content = append(res.Content, b)
			}
			if i > 0 && req.Messages[i-1].Role == llm.RoleTool {
				last := &w.Messages[len(w.Messages)-1]
				last.Content = append(last.Content, res)
			} else {
				w.Messages = append(w.Messages, wireMessage{Role: "user", Content: []wireBlock{res}})
			}
		default:
			return nil, fmt.Errorf("anthropic: message %d has unknown role %q", i, m.Role)
		}
	}
	if !p.cfg.NoCache {
		if len(w.System) > 0 {
			w.System[len(w.System)-1].CacheControl = ephemeral
		}
		if len(w.Tools) > 0 {
			w.Tools[len(w.Tools)-1].CacheControl = ephemeral
		}
		if lastAssistant > 0 {
			markCache(&w.Messages[lastAssistant-1])
		}
		if n := len(w.Messages); n > 0 {
			markCache(&w.Messages[n-1])
		}
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(w); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// markCache sets a breakpoint on the message's last block that may carry
// one (thinking blocks cannot).
func markCache(m *wireMessage) {
	for i := len(m.Content) - 1; i >= 0; i-- {
		if t := m.Content[i].Type; t != "thinking" && t != "redacted_thinking" {
			m.Content[i].CacheControl = ephemeral
			return
		}
	}
}

func userBlocks(parts []llm.Part) []wireBlock {
	var out []wireBlock
	for _, p := range parts {
		switch p.Type {
		case llm.PartText:
			if p.Text != "" {
				out = append(out, wireBlock{Type: "text", Text: str(p.Text)})
			}
		case llm.PartImage:
			out = append(out, wireBlock{Type: "image", Source: &imageSource{Type: "base64", MediaType: p.MediaType, Data: p.Data}})
		}
	}
	if len(out) == 0 {
		out = []wireBlock{{Type: "text", Text: str(emptyText)}}
	}
	return out
}

func assistantBlocks(m *llm.Message) []wireBlock {
	var out []wireBlock
	for _, p := range m.Content {
		if p.Type == llm.PartReasoning && p.Signature != "" {
			out = append(out, wireBlock{Type: "thinking", Thinking: str(p.Text), Signature: p.Signature})
		}
	}
	for _, p := range m.Content {
		if p.Type == llm.PartText && p.Text != "" {
			out = append(out, wireBlock{Type: "text", Text: str(p.Text)})
		}
	}
	for _, tc := range m.ToolCalls {
		in := json.RawMessage(tc.Arguments)
		var obj map[string]json.RawMessage
		if json.Unmarshal(in, &obj) != nil || obj == nil {
			in = json.RawMessage(`{}`)
		}
		out = append(out, wireBlock{Type: "tool_use", ID: tc.ID, Name: tc.Name, Input: in})
	}
	if len(out) == 0 {
		out = []wireBlock{{Type: "text", Text: str(emptyText)}}
	}
	return out
}
