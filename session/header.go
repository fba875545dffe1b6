package session

import (
	"encoding/json"
	"fmt"
	"time"
	"unicode/utf8"
)

// Version is the session file format version this package reads and writes.
const Version = 1

// Header is a session's first line (docs/format.md, "The header"). Unknown fields are
// kept in Extra and written back unchanged.
type Header struct {
	ID        string
	Cwd       string
	CreatedAt time.Time
	Parent    string // only on forks
	ForkSeq   int64  // only on forks (meaningful when Parent != "")
	Title     string
	Version   int
	Extra     map[string]json.RawMessage
}

type wireHeader struct {
	Type      string `json:"type"`
	Version   int    `json:"version"`
	ID        string `json:"id"`
	Cwd       string `json:"cwd"`
	CreatedAt string `json:"createdAt"`
	Parent    string `json:"parent,omitempty"`
	ForkSeq   *int64 `json:"forkSeq,omitempty"`
	Title     string `json:"title,omitempty"`
}

var headerFields = map[string]bool{"type": true, "version": true, "id": true, "cwd": true, "createdAt": true, "parent": true, "forkSeq": true, "title": true}

// MarshalJSON writes the header line's object.
func (h Header) MarshalJSON() ([]byte, error) {
	w := wireHeader{Type: "session", Version: Version, ID: h.ID, Cwd: h.Cwd, CreatedAt: h.CreatedAt.UTC().Format(TimeLayout), Parent: h.Parent, Title: h.Title}
	if h.Parent != "" {
		fs := h.ForkSeq
		w.ForkSeq = &fs
	}
	b, err := json.Marshal(w)
	if err != nil || len(h.Extra) == 0 {
		return b, err
	}
	m := map[string]json.RawMessage{}
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	for k, v := range h.Extra {
		if !headerFields[k] {
			m[k] = v
		}
	}
	return json.Marshal(m)
}

// UnmarshalJSON reads a header line's object.
func (h *Header) UnmarshalJSON(b []byte) error {
	if !utf8.Valid(b) {
		return fmt.Errorf("%w: header: not valid UTF-8", ErrCorrupt)
	}
	var w wireHeader
	if err := json.Unmarshal(b, &w); err != nil {
		return fmt.Errorf("%w: header: %v", ErrCorrupt, err)
	}
	if w.Type != "session" {
		return fmt.Errorf("%w: header: type %q, want \"session\"", ErrCorrupt, w.Type)
	}
	if w.Version != Version {
		return fmt.Errorf("%w: %d (this rein reads version %d)", ErrVersion, w.Version, Version)
	}
	if w.ID == "" {
		return fmt.Errorf("%w: header: missing id", ErrCorrupt)
	}
	t, err := time.Parse(time.RFC3339Nano, w.CreatedAt)
	if err != nil {
		return fmt.Errorf("%w: header: bad createdAt %q", ErrCorrupt, w.CreatedAt)
	}
	*h = Header{ID: w.ID, Cwd: w.Cwd, CreatedAt: t.UTC(), Parent: w.Parent, Title: w.Title, Version: w.Version}
	if w.ForkSeq != nil {
		h.ForkSeq = *w.ForkSeq
	}
	var all map[string]json.RawMessage
	if err := json.Unmarshal(b, &all); err == nil {
		for k, v := range all {
			if !headerFields[k] {
				if h.Extra == nil {
					h.Extra = map[string]json.RawMessage{}
				}
				h.Extra[k] = v
			}
		}
	}
	return nil
}
