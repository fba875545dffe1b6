package scripted

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/reinhq/rein/llm"
)

// ErrInvalidScript is wrapped by every error Parse and Load return for a
// script that cannot be used (bad JSON, unknown field, bad value).
var ErrInvalidScript = errors.New("invalid script")

// Load reads the JSON script at path (format in the package comment). Its
// errors name the file, the call and the field.
func Load(path string) (*Model, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	m, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return m, nil
}

// Parse reads a JSON script (format in the package comment). Unknown fields
// are errors; errors wrap ErrInvalidScript and name the bad field, e.g.
// "calls[2].reply.toolCalls[0].name: required".
func Parse(data []byte) (*Model, error) {
	var f fileScript
	if err := decodeStrict(data, &f); err != nil {
		return nil, invalid("", describe(data, err))
	}
	if f.Calls == nil {
		return nil, invalid("calls", "required (use [] for a model that expects no calls)")
	}
	m := &Model{display: f.Model}
	for i, raw := range *f.Calls {
		at := fmt.Sprintf("calls[%d]", i)
		var fc fileCall
		if err := decodeStrict(raw, &fc); err != nil {
			return nil, invalid(at, describe(raw, err))
		}
		c, err := fc.call(at)
		if err != nil {
			return nil, err
		}
		m.calls = append(m.calls, c)
	}
	return m, nil
}

type fileScript struct {
	Model   string             `json:"model"`
	Comment string             `json:"comment"`
	Calls   *[]json.RawMessage `json:"calls"`
}

type fileCall struct {
	Comment      string      `json:"comment"`
	Expect       *fileExpect `json:"expect"`
	Reply        *fileReply  `json:"reply"`
	Error        *fileError  `json:"error"`
	DelayMs      int64       `json:"delayMs"`
	ChunkDelayMs int64       `json:"chunkDelayMs"`
	Hang         bool        `json:"hang"`
}

type fileExpect struct {
	LastUser string   `json:"lastUser"`
	Contains []string `json:"contains"`
	Messages *int     `json:"messages"`
	Tools    []string `json:"tools"`
	System   string   `json:"system"`
}

type fileReply struct {
	Reasoning []string       `json:"reasoning"`
	Signature string         `json:"signature"`
	Text      []string       `json:"text"`
	ToolCalls []fileToolCall `json:"toolCalls"`
	Finish    llm.Finish     `json:"finish"`
	Usage     *llm.Usage     `json:"usage"`
}

type fileToolCall struct {
	ID        string    `json:"id"`
	Name      string    `json:"name"`
	Arguments arguments `json:"arguments"`
	Split     int       `json:"split"`
}

type fileError struct {
	Code         llm.Code `json:"code"`
	Message      string   `json:"message"`
	Status       int      `json:"status"`
	RetryAfterMs int64    `json:"retryAfterMs"`
}

// arguments accepts a JSON string (kept verbatim) or any other JSON value
// (re-encoded compactly).
type arguments string

func (a *arguments) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	switch {
	case bytes.Equal(b, []byte("null")):
		*a = ""
		return nil
	case len(b) > 0 && b[0] == '"':
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		*a = arguments(s)
		return nil
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, b); err != nil {
		return err
	}
	*a = arguments(buf.String())
	return nil
}

func (fc *fileCall) call(at string) (Call, error) {
	var c Call
	if fc.DelayMs < 0 {
		return c, invalid(at+".delayMs", "must not be negative")
	}
	if fc.ChunkDelayMs < 0 {
		return c, invalid(at+".chunkDelayMs", "must not be negative")
	}
	c.Delay = time.Duration(fc.DelayMs) * time.Millisecond
	c.Reply.ChunkDelay = time.Duration(fc.ChunkDelayMs) * time.Millisecond
	c.Hang = fc.Hang
	if e := fc.Expect; e != nil {
		if e.Messages != nil && *e.Messages < 0 {
			return c, invalid(at+".expect.messages", "must not be negative")
		}
		c.Expect = &Expect{LastUser: e.LastUser, Contains: e.Contains, Messages: e.Messages, Tools: e.Tools, System: e.System}
	}
	if r := fc.Reply; r != nil {
		c.Reply.Reasoning, c.Reply.Signature, c.Reply.Text, c.Reply.Usage = r.Reasoning, r.Signature, r.Text, r.Usage
		switch r.Finish {
		case "", llm.FinishStop, llm.FinishToolCalls, llm.FinishMaxTokens, llm.FinishError:
		default:
			return c, invalid(at+".reply.finish", fmt.Sprintf("unknown finish reason %q (want stop, tool-calls, max-tokens or error)", r.Finish))
		}
		if r.Finish != "" && fc.Hang {
			return c, invalid(at+".reply.finish", "a hanging call never finishes; drop finish or hang")
		}
		c.Reply.Finish = r.Finish
		for k, tc := range r.ToolCalls {
			tat := fmt.Sprintf("%s.reply.toolCalls[%d]", at, k)
			if tc.Name == "" {
				return c, invalid(tat+".name", "required")
			}
			if tc.Split < 0 {
				return c, invalid(tat+".split", "must not be negative")
			}
			c.Reply.ToolCalls = append(c.Reply.ToolCalls, ToolCall{ID: tc.ID, Name: tc.Name, Arguments: string(tc.Arguments), Split: tc.Split})
		}
	}
	if e := fc.Error; e != nil {
		if fc.Hang {
			return c, invalid(at+".error", "a hanging call never fails; drop error or hang")
		}
		if e.Code == "" {
			return c, invalid(at+".error.code", "required")
		}
		if !knownCode(e.Code) {
			return c, invalid(at+".error.code", fmt.Sprintf("unknown code %q", e.Code))
		}
		if e.RetryAfterMs < 0 {
			return c, invalid(at+".error.retryAfterMs", "must not be negative")
		}
		c.Err = &ErrorReply{Code: e.Code, Message: e.Message, Status: e.Status, RetryAfter: time.Duration(e.RetryAfterMs) * time.Millisecond}
	}
	return c, nil
}

func knownCode(c llm.Code) bool {
	switch c {
	case llm.CodeAuth, llm.CodeRateLimit, llm.CodeOverloaded, llm.CodeContextOverflow,
		llm.CodeInvalidRequest, llm.CodeNetwork, llm.CodeTimeout, llm.CodeEmptyResponse,
		llm.CodeMalformedStream, llm.CodeServer, llm.CodeCanceled, llm.CodeUnknown:
		return true
	}
	return false
}

func invalid(at, msg string) error {
	if at == "" {
		return fmt.Errorf("%w: %s", ErrInvalidScript, msg)
	}
	return fmt.Errorf("%w: %s: %s", ErrInvalidScript, at, msg)
}

// decodeStrict decodes exactly one JSON value into v, refusing unknown
// fields and trailing data.
func decodeStrict(data []byte, v any) error {
	if len(bytes.TrimSpace(data)) == 0 {
		return errors.New("empty")
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("trailing data after the script")
	}
	return nil
}

// describe turns a decoding error into a message that names the position
// or the field.
func describe(data []byte, err error) string {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn):
		// Offset counts the bytes read, the offending one included.
		line, col := position(data, syn.Offset-1)
		return fmt.Sprintf("line %d, column %d: %s", line, col, trimJSON(syn.Error()))
	case errors.As(err, &typ):
		if typ.Field != "" {
			return fmt.Sprintf("%s: a JSON %s cannot be a %s", typ.Field, typ.Value, typ.Type)
		}
		return fmt.Sprintf("a JSON %s cannot be a %s", typ.Value, typ.Type)
	case errors.Is(err, io.ErrUnexpectedEOF):
		return "unexpected end of JSON"
	}
	return trimJSON(err.Error())
}

func trimJSON(s string) string {
	if len(s) > 6 && s[:6] == "json: " {
		return s[6:]
	}
	return s
}

// position converts a byte offset into a 1-based line and column.
func position(data []byte, off int64) (line, col int) {
	off = min(max(off, 0), int64(len(data)))
	before := data[:off]
	line = bytes.Count(before, []byte("\n")) + 1
	col = int(off) - (bytes.LastIndexByte(before, '\n') + 1) + 1
	return line, col
}
