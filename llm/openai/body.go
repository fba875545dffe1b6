package openai

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/reinhq/rein/llm"
	"github.com/reinhq/rein/llm/wire"
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
// messages, which must follow their assistant message directly). Tool call
// arguments are sent verbatim, "{}" when empty. The top-level fields are in
// alphabetical order.
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

// cache is the adapter's state in an llm.Cache: the messages' encodings
// (with, for a tool message, its images as encoded parts, which go into
// the user message after its run), and the last system message and tool
// list encoded.
type cache struct {
	msgs     wire.Messages[[]byte]
	system   string
	sysEnc   []byte
	tools    []llm.ToolSpec
	toolsEnc []byte
}

// encode brings c up to date with req and returns the body, as segments
// that share c's buffers, and what req shares with the previous request
// encoded through c.
func (p *Provider) encode(req *llm.Request, c *cache) (wire.Body, llm.Shared, error) {
	if req.Model == "" {
		return nil, llm.Shared{}, errNoModel
	}
	msgs := req.Messages
	sh, err := c.msgs.Update(req, func(b []byte, i int) ([]byte, []byte, error) { return p.appendMessage(b, c, msgs, i) })
	if err != nil {
		return nil, sh, err
	}
	if req.System != c.system || (req.System != "" && c.sysEnc == nil) {
		c.system, c.sysEnc = req.System, nil
		if req.System != "" {
			b, err := wire.AppendJSON(nil, wireMessage{Role: "system", Content: req.System})
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
				tools[i].Type = "function"
				tools[i].Function.Name = t.Name
				tools[i].Function.Description = t.Description
				tools[i].Function.Parameters = t.Parameters
			}
			b, err := wire.AppendJSON(nil, tools)
			if err != nil {
				return nil, sh, err
			}
			c.toolsEnc = b
		}
	}

	// The messages: the system message, then each message's encoding
	// (every one starts with a comma), then the images of a run of tool
	// messages that ends the request.
	encoded := c.msgs.Bytes()
	messages := wire.Body{c.sysEnc, encoded}
	if c.sysEnc == nil && len(encoded) > 0 {
		messages[1] = encoded[1:]
	}
	if n := len(msgs); n > 0 && msgs[n-1].Role == llm.RoleTool {
		if f := flush(nil, c, msgs, n); len(f) > 0 {
			messages = append(messages, f)
		}
	}

	// The other fields, in the alphabetical order encoding/json gives a
	// map's keys.
	type field struct {
		key string
		val []byte
	}
	var fields []field
	add := func(key string, v any) error {
		b, err := wire.AppendJSON(nil, v)
		fields = append(fields, field{key, b})
		return err
	}
	pr := req.Params
	errs := []error{add("model", req.Model)}
	fields = append(fields, field{"messages", nil}, field{"stream", []byte("true")}, field{"stream_options", []byte(`{"include_usage":true}`)})
	if c.toolsEnc != nil {
		fields = append(fields, field{"tools", c.toolsEnc})
	}
	if pr.MaxTokens > 0 {
		fields = append(fields, field{p.cfg.MaxTokensField, strconv.AppendInt(nil, int64(pr.MaxTokens), 10)})
	}
	if pr.Temperature != nil {
		errs = append(errs, add("temperature", *pr.Temperature))
	}
	if pr.TopP != nil {
		errs = append(errs, add("top_p", *pr.TopP))
	}
	if pr.ReasoningEffort != "" {
		errs = append(errs, add("reasoning_effort", pr.ReasoningEffort))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, sh, err
	}
	slices.SortFunc(fields, func(a, b field) int { return strings.Compare(a.key, b.key) })

	body := make(wire.Body, 0, 2*len(fields)+len(messages)+2)
	for i, f := range fields {
		glue := []byte{','}
		if i == 0 {
			glue[0] = '{'
		}
		glue = append(strconv.AppendQuote(glue, f.key), ':')
		if f.key == "messages" {
			body = append(body, append(glue, '['))
			body = append(body, messages...)
			body = append(body, []byte{']'})
			continue
		}
		body = append(body, glue, f.val)
	}
	body = append(body, []byte{'}'})
	return body, sh, nil
}

// appendMessage appends the encoding of msgs[i], led by a comma, to b; a
// user or assistant message after a run of tool messages is led by the
// user message holding the run's images. It returns the message's images
// when it is a tool message.
func (p *Provider) appendMessage(b []byte, c *cache, msgs []llm.Message, i int) ([]byte, []byte, error) {
	m := &msgs[i]
	var w wireMessage
	var imgs []byte
	switch m.Role {
	case llm.RoleUser:
		w = wireMessage{Role: "user", Content: userContent(m.Content)}
	case llm.RoleAssistant:
		w = wireMessage{Role: "assistant", Content: llm.PlainText(m.Content)}
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
	case llm.RoleTool:
		w = wireMessage{Role: "tool", ToolCallID: m.ToolCallID, Content: llm.PlainText(m.Content)}
		for _, part := range images(m.Content) {
			if len(imgs) > 0 {
				imgs = append(imgs, ',')
			}
			var err error
			if imgs, err = wire.AppendJSON(imgs, part); err != nil {
				return b, nil, err
			}
		}
	default:
		return b, nil, fmt.Errorf("openai: message %d has unknown role %q", i, m.Role)
	}
	if m.Role != llm.RoleTool && i > 0 && msgs[i-1].Role == llm.RoleTool {
		b = flush(b, c, msgs, i)
	}
	b, err := wire.AppendJSON(append(b, ','), w)
	return b, imgs, err
}

// flush appends to b, led by a comma, the user message carrying the images
// of the run of tool messages that ends before msgs[end], all of them
// encoded in c; nothing when the run has none.
func flush(b []byte, c *cache, msgs []llm.Message, end int) []byte {
	start := end
	for start > 0 && msgs[start-1].Role == llm.RoleTool {
		start--
	}
	open := false
	for i := start; i < end; i++ {
		if img := c.msgs.Meta(i); len(img) > 0 {
			if !open {
				b = append(b, `,{"role":"user","content":[{"type":"text","text":"Attached image(s) from tool result:"}`...)
				open = true
			}
			b = append(b, ',')
			b = append(b, img...)
		}
	}
	if open {
		b = append(b, "]}"...)
	}
	return b
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
