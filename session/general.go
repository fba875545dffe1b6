package session

import (
	"encoding/json"
	"fmt"
	"time"
	"unicode/utf8"
)

// The general decoder: encoding/json over the whole line and over the
// payload, plus the format's rule that a file is UTF-8 (encoding/json would
// take invalid bytes and substitute U+FFFD). It reads lines in any field
// order and payloads of any shape encoding/json takes; the fast path
// (wire, decode.go, lines.go) falls back to it and is tested against it.

// parseLineGeneral is ParseLine's general path.
func parseLineGeneral(line []byte) (Event, error) {
	if !utf8.Valid(line) {
		return Event{}, fmt.Errorf("%w: not valid UTF-8", ErrCorrupt)
	}
	var w struct {
		Seq       *int64          `json:"seq"`
		Type      string          `json:"type"`
		Time      string          `json:"time"`
		Ignorable bool            `json:"ignorable"`
		Data      json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(line, &w); err != nil {
		return Event{}, fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	if w.Seq == nil || w.Type == "" || w.Data == nil {
		return Event{}, fmt.Errorf("%w: missing seq, type or data", ErrCorrupt)
	}
	t, err := time.Parse(time.RFC3339Nano, w.Time)
	if err != nil {
		return Event{}, fmt.Errorf("%w: bad time %q", ErrCorrupt, w.Time)
	}
	typ := internType(w.Type)
	if typ == "" {
		typ = Type(w.Type)
	}
	return Event{Seq: *w.Seq, Type: typ, Time: t.UTC(), Ignorable: w.Ignorable, Data: w.Data}, nil
}

// decodeGeneral is Decode's general path.
func decodeGeneral(e Event) (Payload, error) {
	p := NewPayload(e.Type)
	if p == nil {
		return nil, fmt.Errorf("%w: %q", ErrUnknownType, e.Type)
	}
	if !utf8.Valid(e.Data) {
		return nil, fmt.Errorf("%w: seq %d %s: not valid UTF-8", ErrCorrupt, e.Seq, e.Type)
	}
	if err := json.Unmarshal(e.Data, p); err != nil {
		return nil, fmt.Errorf("%w: seq %d %s: %v", ErrCorrupt, e.Seq, e.Type, err)
	}
	return p, nil
}
