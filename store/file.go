package store

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/reinhq/rein/session"
)

// ReadFile reads a session held as the bytes of a session file: a header
// line, then one event line each. It is Load for backends that keep those
// bytes (jsonl reads large files the same way, streaming); name goes into
// errors. A final line without '\n' is a torn write and is dropped; so is
// a final complete line that does not parse and holds a zero byte (see
// LostWrite). Any other line that does not parse or does not fit fails
// with a *LineError, or under opts.Salvage is handled by
// session.(*Log).Salvage. With repair set, an open final turn is closed
// (session.Repair). The log aliases data, which must not change.
func ReadFile(name string, data []byte, opts LoadOptions, repair bool) (*Loaded, error) {
	nl := bytes.IndexByte(data, '\n')
	if nl < 0 {
		return nil, &LineError{File: name, Line: 1, Err: fmt.Errorf("%w: no complete header line", session.ErrCorrupt)}
	}
	h, err := ParseHeader(data[:nl])
	if err != nil {
		return nil, &LineError{File: name, Line: 1, Err: err}
	}
	body := data[nl+1:]
	ld := &Loaded{Log: session.NewLog(h)}
	// The torn tail.
	if i := bytes.LastIndexByte(body, '\n'); i+1 < len(body) {
		ld.TornBytes = len(body) - (i + 1)
		body = body[:i+1]
	} else if len(body) > 0 {
		last := body[bytes.LastIndexByte(body[:len(body)-1], '\n')+1:]
		if LostWrite(last[:len(last)-1]) {
			ld.TornBytes, ld.TornZeros = len(last), true
			body = body[:len(body)-len(last)]
		}
	}
	if opts.Salvage {
		for _, x := range ld.Log.Salvage(body, 2) {
			ld.Dropped = append(ld.Dropped, Dropped{Line: x.Line, Lines: x.Lines, Seq: x.Seq, Tombstones: x.Tombstones, Err: x.Err})
		}
	} else if err := ld.Log.AppendLines(body); err != nil {
		return nil, LoadError(name, ld.Log.Len(), 2, err)
	}
	if repair {
		if ld.Repair, err = session.Repair(ld.Log); err != nil {
			return nil, fmt.Errorf("store: repair %s: %w", name, err)
		}
	}
	return ld, nil
}

// HeaderLine returns the header of a new session file for h, with the
// format version set and CreatedAt (now when zero) in UTC milliseconds,
// and its line ('\n' included).
func HeaderLine(h session.Header) (session.Header, []byte, error) {
	h.Version = session.Version
	if h.CreatedAt.IsZero() {
		h.CreatedAt = time.Now()
	}
	h.CreatedAt = h.CreatedAt.UTC().Truncate(time.Millisecond)
	b, err := json.Marshal(h)
	if err != nil {
		return h, nil, fmt.Errorf("store: encode header of %s: %w", h.ID, err)
	}
	return h, append(b, '\n'), nil
}

// ParseHeader reads a session file's header line (without its '\n'),
// which must be valid UTF-8.
func ParseHeader(line []byte) (session.Header, error) {
	var h session.Header
	if err := json.Unmarshal(line, &h); err != nil {
		if !errors.Is(err, session.ErrCorrupt) && !errors.Is(err, session.ErrVersion) {
			err = fmt.Errorf("%w: header: %v", session.ErrCorrupt, err)
		}
		return session.Header{}, err
	}
	return h, nil
}

// LoadError turns the error of appending lines to a log of n events (a
// *session.LineError when a line failed), whose first line is line number
// first of name, into a *LineError. A line whose seq does not continue
// the log is ErrSeq.
func LoadError(name string, n int64, first int, err error) error {
	var le *session.LineError
	if !errors.As(err, &le) {
		return err
	}
	cause := le.Err
	if errors.Is(cause, session.ErrInvariant) && le.Seq >= 0 && le.Seq != n {
		cause = fmt.Errorf("%w: seq %d, want %d", ErrSeq, le.Seq, n)
	}
	return &LineError{File: name, Line: first + int(n), Err: cause}
}

// LostWrite reports whether a final line (without its '\n') that ends a
// session file is a write a crash lost rather than damage: it does not
// parse and holds a zero byte, what a page of the last, unsynced write
// reads back as. A line people or tools damaged has no zero bytes (JSON
// cannot hold one), so it is not taken for a torn write.
func LostWrite(line []byte) bool {
	if bytes.IndexByte(line, 0) < 0 {
		return false
	}
	_, err := session.ParseLine(line)
	return err != nil
}
