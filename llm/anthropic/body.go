package anthropic

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/reinhq/rein/llm"
	"github.com/reinhq/rein/llm/wire"
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
	b, _, err := p.encode(req, &cache{})
	if err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// Prepare implements llm.Preparer.
func (p *Provider) Prepare(req *llm.Request) (llm.Shared, error) {
	_, sh, err := p.encode(req, wire.State[cache](req.Cache, p))
	return sh, err
}

// cache is the adapter's state in an llm.Cache: the messages' encodings,
// each with the offset where a cache_control breakpoint goes when the
// wire message ends with it (-1: none can), and the last system prompt
// and tool list encoded.
type cache struct {
	msgs     wire.Messages[int]
	system   string
	sysEnc   []byte
	tools    []llm.ToolSpec
	toolsEnc []byte
}

// breakpoint is inserted before the closing brace of a block; cache_control
// is the last field of every block.
var breakpoint = []byte(`,"cache_control":{"type":"ephemeral"}`)

// encode brings c up to date with req and returns the body, as segments
// that share c's buffers, and what req shares with the previous request
// encoded through c.
func (p *Provider) encode(req *llm.Request, c *cache) (wire.Body, llm.Shared, error) {
	if req.Model == "" {
		return nil, llm.Shared{}, errNoModel
	}
	msgs := req.Messages
	sh, err := c.msgs.Update(req, func(b []byte, i int) ([]byte, int, error) { return appendMessage(b, msgs, i) })
	if err != nil {
		return nil, sh, err
	}
	if req.System != c.system || (req.System != "" && c.sysEnc == nil) {
		c.system, c.sysEnc = req.System, nil
		if req.System != "" {
			blk := wireBlock{Type: "text", Text: str(req.System)}
			if !p.cfg.NoCache {
				blk.CacheControl = ephemeral
			}
			b, err := wire.AppendJSON(append([]byte(nil), `,"system":`...), []wireBlock{blk})
			if err != nil {
				return nil, sh, err
			}
			c.sysEnc = b
		}
	}
	if !wire.SameTools(c.tools, req.Tools) || (len(req.Tools) > 0 && c.toolsEnc == nil) {
		c.tools, c.toolsEnc = req.Tools, nil
		if len(req.Tools) > 0 {
			tools := make([]wireTool, len(req.Tools))
			for i, t := range req.Tools {
				schema := t.Parameters
				if len(schema) == 0 {
					schema = json.RawMessage(`{"type":"object"}`)
				}
				tools[i] = wireTool{Name: t.Name, Description: t.Description, InputSchema: schema}
			}
			if !p.cfg.NoCache {
				tools[len(tools)-1].CacheControl = ephemeral
			}
			b, err := wire.AppendJSON(append([]byte(nil), `,"tools":`...), tools)
			if err != nil {
				return nil, sh, err
			}
			c.toolsEnc = b
		}
	}

	// The fields in wireRequest's order.
	pr := req.Params
	maxTokens := p.cfg.MaxTokens
	if pr.MaxTokens > 0 {
		maxTokens = pr.MaxTokens
	}
	var think *thinking
	if pr.ThinkingBudget > 0 {
		think = &thinking{Type: "enabled", BudgetTokens: max(pr.ThinkingBudget, 1024)}
		if maxTokens <= think.BudgetTokens {
			maxTokens = think.BudgetTokens + p.cfg.MaxTokens
		}
	}
	head, err := wire.AppendJSON([]byte(`{"model":`), req.Model)
	if err != nil {
		return nil, sh, err
	}
	head = strconv.AppendInt(append(head, `,"max_tokens":`...), int64(maxTokens), 10)
	body := wire.Body{head, c.sysEnc, []byte(`,"messages":[`)}
	body = append(body, p.messages(c, msgs)...)
	body = append(body, []byte{']'}, c.toolsEnc)
	tail := []byte(nil)
	if think != nil {
		tail, _ = wire.AppendJSON(append(tail, `,"thinking":`...), think)
	}
	if pr.Temperature != nil {
		tail, _ = wire.AppendJSON(append(tail, `,"temperature":`...), *pr.Temperature)
	}
	if pr.TopP != nil {
		tail, _ = wire.AppendJSON(append(tail, `,"top_p":`...), *pr.TopP)
	}
	body = append(body, append(tail, `,"stream":true}`...))
	return body, sh, nil
}

// messages returns the encoded messages with their breakpoints: on the
// wire message before the last assistant message and on the last one.
func (p *Provider) messages(c *cache, msgs []llm.Message) wire.Body {
	enc := c.msgs.Bytes()
	if len(msgs) == 0 {
		return nil
	}
	var marks []int
	if !p.cfg.NoCache {
		la := len(msgs) - 1
		for la >= 0 && msgs[la].Role != llm.RoleAssistant {
			la--
		}
		if la > 0 {
			if m := c.msgs.Meta(la - 1); m >= 0 {
				marks = append(marks, m)
			}
		}
		if m := c.msgs.Meta(len(msgs) - 1); m >= 0 {
			marks = append(marks, m)
		}
	}
	out := make(wire.Body, 0, 2*len(marks)+2)
	at := 0
	for _, m := range marks {
		out = append(out, enc[at:m], breakpoint)
		at = m
	}
	// The last wire message is still open.
	return append(out, enc[at:], []byte("]}"))
}

// appendMessage appends the encoding of msgs[i] to b: a new wire message
// (closing the one before), or, for a tool message after another, one more
// tool_result block in the same user message. It returns the offset of the
// closing brace of the last block that may carry a breakpoint, -1 when
// none may (thinking blocks cannot).
func appendMessage(b []byte, msgs []llm.Message, i int) ([]byte, int, error) {
	m := &msgs[i]
	var blocks []wireBlock
	role := "user"
	switch m.Role {
	case llm.RoleUser:
		blocks = userBlocks(m.Content)
	case llm.RoleAssistant:
		role, blocks = "assistant", assistantBlocks(m)
	case llm.RoleTool:
		res := wireBlock{Type: "tool_result", ToolUseID: m.ToolCallID, IsError: m.IsError}
		for _, b := range userBlocks(m.Content) {
			if b.Type == "text" && *b.Text == emptyText {
				continue
			}
			res.Content = append(res.Content, b)
		}
		blocks = []wireBlock{res}
	default:
		return b, -1, fmt.Errorf("anthropic: message %d has unknown role %q", i, m.Role)
	}
	switch {
	case m.Role == llm.RoleTool && i > 0 && msgs[i-1].Role == llm.RoleTool:
		b = append(b, ',')
	case i > 0:
		b = append(b, "]},"...)
		fallthrough
	default:
		b = append(b, `{"role":"`...)
		b = append(b, role...)
		b = append(b, `","content":[`...)
	}
	mark := -1
	for j, blk := range blocks {
		if j > 0 {
			b = append(b, ',')
		}
		var err error
		if b, err = wire.AppendJSON(b, blk); err != nil {
			return b, -1, err
		}
		if blk.Type != "thinking" && blk.Type != "redacted_thinking" {
			mark = len(b) - 1
		}
	}
	return b, mark, nil
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
