package acp

import (
	"encoding/json"
	"strconv"
	"unicode/utf8"

	sdk "github.com/coder/acp-go-sdk"
)

// The encoder of session/update notifications. The SDK encodes each union
// (update, content block, tool content) by marshalling the variant, decoding
// it into a map and marshalling the map again: about 18 MB/s for a 2 KB text
// chunk, against 340 MB/s for encoding/json on a plain struct. A replay sends
// every message, tool call and result of a session, so it writes the
// notifications of the variants rein sends itself, straight from the SDK's
// typed values, and falls back to the SDK's encoding for anything else. The
// bytes are JSON equal to the SDK's encoding of the same value (a test
// checks every variant rein sends, and a fuzz test arbitrary text).

// appendNotification appends the JSON-RPC line of a session/update
// notification (with its newline) to b.
func appendNotification(b []byte, sid string, u *sdk.SessionUpdate) []byte {
	mark := len(b)
	b = append(b, `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":`...)
	b = appendString(b, sid)
	b = append(b, `,"update":`...)
	pos := len(b)
	var ok bool
	if b, ok = appendUpdate(b, u); !ok {
		b = b[:pos]
		raw, err := json.Marshal(u)
		if err != nil {
			return b[:mark]
		}
		b = append(b, raw...)
	}
	return append(b, "}}\n"...)
}

func appendUpdate(b []byte, u *sdk.SessionUpdate) ([]byte, bool) {
	switch {
	case u.UserMessageChunk != nil:
		c := u.UserMessageChunk
		return appendChunk(b, "user_message_chunk", c.Content, c.MessageId, c.Meta)
	case u.AgentMessageChunk != nil:
		c := u.AgentMessageChunk
		return appendChunk(b, "agent_message_chunk", c.Content, c.MessageId, c.Meta)
	case u.AgentThoughtChunk != nil:
		c := u.AgentThoughtChunk
		return appendChunk(b, "agent_thought_chunk", c.Content, c.MessageId, c.Meta)
	case u.ToolCall != nil:
		t := u.ToolCall
		b = append(b, `{"sessionUpdate":"tool_call","toolCallId":`...)
		b = appendString(b, string(t.ToolCallId))
		b = append(b, `,"title":`...)
		b = appendString(b, t.Title)
		if t.Kind != "" {
			b = append(b, `,"kind":`...)
			b = appendString(b, string(t.Kind))
		}
		if t.Status != "" {
			b = append(b, `,"status":`...)
			b = appendString(b, string(t.Status))
		}
		return appendToolFields(b, t.Content, t.Locations, t.RawInput, t.RawOutput, t.Meta)
	case u.ToolCallUpdate != nil:
		t := u.ToolCallUpdate
		b = append(b, `{"sessionUpdate":"tool_call_update","toolCallId":`...)
		b = appendString(b, string(t.ToolCallId))
		if t.Title != nil {
			b = append(b, `,"title":`...)
			b = appendString(b, *t.Title)
		}
		if t.Kind != nil {
			b = append(b, `,"kind":`...)
			b = appendString(b, string(*t.Kind))
		}
		if t.Status != nil {
			b = append(b, `,"status":`...)
			b = appendString(b, string(*t.Status))
		}
		return appendToolFields(b, t.Content, t.Locations, t.RawInput, t.RawOutput, t.Meta)
	case u.Plan != nil:
		b = append(b, `{"sessionUpdate":"plan","entries":[`...)
		for i, e := range u.Plan.Entries {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"content":`...)
			b = appendString(b, e.Content)
			b = append(b, `,"priority":`...)
			b = appendString(b, string(e.Priority))
			b = append(b, `,"status":`...)
			b = appendString(b, string(e.Status))
			b = append(b, '}')
		}
		b = append(b, ']')
		return appendMeta(b, u.Plan.Meta), true
	case u.SessionInfoUpdate != nil && u.SessionInfoUpdate.Meta == nil:
		s := u.SessionInfoUpdate
		b = append(b, `{"sessionUpdate":"session_info_update"`...)
		if s.Title != nil {
			b = append(b, `,"title":`...)
			b = appendString(b, *s.Title)
		}
		if s.UpdatedAt != nil {
			b = append(b, `,"updatedAt":`...)
			b = appendString(b, *s.UpdatedAt)
		}
		return append(b, '}'), true
	}
	return b, false
}

func appendChunk(b []byte, kind string, c sdk.ContentBlock, id *string, meta map[string]any) ([]byte, bool) {
	b = append(b, `{"sessionUpdate":"`...)
	b = append(b, kind...)
	b = append(b, `","content":`...)
	var ok bool
	if b, ok = appendBlock(b, c); !ok {
		return b, false
	}
	if id != nil {
		b = append(b, `,"messageId":`...)
		b = appendString(b, *id)
	}
	return appendMeta(b, meta), true
}

// appendBlock writes text and image blocks as the SDK does (a text block
// keeps only type and text).
func appendBlock(b []byte, c sdk.ContentBlock) ([]byte, bool) {
	switch {
	case c.Text != nil:
		b = append(b, `{"type":"text","text":`...)
		b = appendString(b, c.Text.Text)
		return append(b, '}'), true
	case c.Image != nil:
		b = append(b, `{"type":"image","data":`...)
		b = appendString(b, c.Image.Data)
		b = append(b, `,"mimeType":`...)
		b = appendString(b, c.Image.MimeType)
		if c.Image.Uri != nil {
			b = append(b, `,"uri":`...)
			b = appendString(b, *c.Image.Uri)
		}
		return append(b, '}'), true
	}
	return b, false
}

func appendToolFields(b []byte, content []sdk.ToolCallContent, locs []sdk.ToolCallLocation, in, out any, meta map[string]any) ([]byte, bool) {
	if len(content) > 0 {
		b = append(b, `,"content":[`...)
		for i, c := range content {
			if i > 0 {
				b = append(b, ',')
			}
			switch {
			case c.Content != nil:
				b = append(b, `{"type":"content","content":`...)
				var ok bool
				if b, ok = appendBlock(b, c.Content.Content); !ok {
					return b, false
				}
				b = append(b, '}')
			case c.Diff != nil:
				b = append(b, `{"type":"diff","path":`...)
				b = appendString(b, c.Diff.Path)
				if c.Diff.OldText != nil {
					b = append(b, `,"oldText":`...)
					b = appendString(b, *c.Diff.OldText)
				}
				b = append(b, `,"newText":`...)
				b = appendString(b, c.Diff.NewText)
				b = append(b, '}')
			case c.Terminal != nil:
				b = append(b, `{"type":"terminal","terminalId":`...)
				b = appendString(b, c.Terminal.TerminalId)
				b = append(b, '}')
			default:
				return b, false
			}
		}
		b = append(b, ']')
	}
	if len(locs) > 0 {
		b = append(b, `,"locations":[`...)
		for i, l := range locs {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"path":`...)
			b = appendString(b, l.Path)
			if l.Line != nil {
				b = append(b, `,"line":`...)
				b = strconv.AppendInt(b, int64(*l.Line), 10)
			}
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	var ok bool
	if b, ok = appendAny(b, "rawInput", in); !ok {
		return b, false
	}
	if b, ok = appendAny(b, "rawOutput", out); !ok {
		return b, false
	}
	return appendMeta(b, meta), true
}

// appendAny writes ,"key":v for a raw JSON value or anything encoding/json
// encodes; nothing for nil.
func appendAny(b []byte, key string, v any) ([]byte, bool) {
	if v == nil {
		return b, true
	}
	b = append(b, `,"`...)
	b = append(b, key...)
	b = append(b, `":`...)
	if raw, ok := v.(json.RawMessage); ok && json.Valid(raw) {
		return append(b, raw...), true
	}
	raw, err := json.Marshal(v)
	if err != nil {
		return b, false
	}
	return append(b, raw...), true
}

// appendMeta writes ,"_meta":{...} (when set) and closes the object.
func appendMeta(b []byte, meta map[string]any) []byte {
	if meta != nil {
		if raw, err := json.Marshal(meta); err == nil {
			b = append(b, `,"_meta":`...)
			b = append(b, raw...)
		}
	}
	return append(b, '}')
}

const hexDigits = "0123456789abcdef"

// safe marks the ASCII bytes that need no escaping in a JSON string.
var safe = func() (t [utf8.RuneSelf]bool) {
	for i := 0x20; i < utf8.RuneSelf; i++ {
		t[i] = i != '"' && i != '\\'
	}
	return t
}()

// appendString appends s as a JSON string: quotes, backslashes and control
// characters escaped, invalid UTF-8 replaced by U+FFFD and U+2028/U+2029
// escaped, as encoding/json does (without its HTML escaping, which JSON
// does not need).
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if safe[c] {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
