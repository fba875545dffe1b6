package openai

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/reinhq/rein/llm"
)

// wireMessage is one Chat Completions message. Content is a string or a
// list of content parts.
type wireMessage struct {
	Role             string     `json:"role"`
	Content          any        `json:"content"`
	ReasoningContent *string    `json:"reasoning_content,omitempty"`
	ToolCalls        []wireCall `json:"tool_calls,omitempty"`
	ToolCallID       string     `json:"tool_call_id,omitempty"`
}

type wireCall struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

type wirePart struct {
	Type     string    `json:"type"`
	Text     string    `json:"text,omitempty"`
	ImageURL *imageURL `json:"image_url,omitempty"`
}

type imageURL struct {
	URL string `json:"url"`
}

type wireTool struct {
	Type     string `json:"type"`
	Function struct {
		Name        string          `json:"name"`
		Description string          `json:"description,omitempty"`
		Parameters  json.RawMessage `json:"parameters,omitempty"`
	} `json:"function"`
}

// errNoModel reports a request without a model name.
var errNoModel = errors.New("openai: request has no model")

// Body returns the JSON request body for req. It reads req and never
// modifies it.
//
// Mapping: System becomes a leading system message; each llm.Message
// becomes one wire message in order (consecutive user messages stay
// separate); a user message with only text is sent as a string, with images
// as a part list; an assistant message sends its text ("" when it has none)
// and tool calls, and, when Config.ReasoningContent is set, its reasoning as
// reasoning_content (always present on a message with tool calls, which
// DeepSeek requires; elsewhere only when non-empty); a tool message
// becomes a role "tool" message, followed by a user message carrying its
// images, which tool messages cannot hold (after the whole run of tool
// messages, which must follow their assistant message directly). Tool call arguments are sent
// verbatim, "{}" when empty.
func (p *Provider) Body(req *llm.Request) ([]byte, error) {
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

func userContent(parts []llm.Part) any {
	imgs := images(parts)
	if len(imgs) == 0 {
		return llm.PlainText(parts)
	}
	var out []wirePart
	for _, p := range parts {
		switch p.Type {
		case llm.PartText:
			out = append(out, wirePart{Type: "text", Text: p.Text})
		case llm.PartImage:
			out = append(out, imagePart(p))
		}
	}
	return out
}

func images(parts []llm.Part) []wirePart {
	var out []wirePart
	for _, p := range parts {
		if p.Type == llm.PartImage {
			out = append(out, imagePart(p))
		}
	}
	return out
}

func imagePart(p llm.Part) wirePart {
	return wirePart{Type: "image_url", ImageURL: &imageURL{URL: "data:" + p.MediaType + ";base64," + p.Data}}
}

func reasoningText(parts []llm.Part) string {
	var s string
	for _, p := range parts {
		if p.Type == llm.PartReasoning {
			s += p.Text
		}
	}
	return s
}
