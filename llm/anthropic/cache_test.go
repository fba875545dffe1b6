package anthropic

// The encoding before the cache, kept as the oracle the cached encoding
// must match byte for byte: one wireRequest, one encoding/json pass.

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

func referenceBody(p *Provider, req *llm.Request) ([]byte, error) {
	if req.Model == "" {
		return nil, errNoModel
	}
	// (One change since: no messages are sent as [], not null.)
	w := wireRequest{Model: req.Model, MaxTokens: p.cfg.MaxTokens, Stream: true, Messages: []wireMessage{}}
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

// TestCachedBodyMatchesScratch encodes random conversations request after
// request through one llm.Cache and checks every body, byte for byte,
// against the whole-request encoding (breakpoints included), and what
// Prepare reports as shared against how the request was made.
func TestCachedBodyMatchesScratch(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		p := New(Config{NoCache: rapid.Bool().Draw(t, "nocache")})
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
