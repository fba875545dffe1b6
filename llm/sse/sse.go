// Package sse is the HTTP streaming transport shared by rein's model
// adapters: a server-sent events reader, an idle-stream watchdog, and the
// normalisation of HTTP and transport failures into llm.Error codes.
//
// It owns no adapter state. A Reader and a Watchdog serve one response body
// and are not safe for concurrent use, except Watchdog.Stop and the timer
// that closes the stream, which may race safely with reads.
//
// It imports only the standard library, llm, llm/wire and redact; it must not import an
// adapter (llm/openai, llm/anthropic) or anything above llm.
package sse

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"strings"
)

// MaxEventSize bounds one event's data. A provider that sends a larger event
// gets ErrEventTooLarge (classified as a malformed stream).
const MaxEventSize = 16 << 20

// ErrEventTooLarge reports an event or line longer than MaxEventSize.
var ErrEventTooLarge = errors.New("sse: event too large")

// Event is one dispatched server-sent event.
type Event struct {
	// Type is the "event:" field, empty for the default "message" type.
	Type string
	// Data is the "data:" lines joined with "\n".
	Data string
	// ID is the last "id:" field seen.
	ID string
}

// Reader parses the text/event-stream format (WHATWG HTML §9.2): lines end
// in LF, CRLF or CR; a line starting with ':' is a comment; a blank line
// dispatches the event; an event with no data lines is not dispatched.
type Reader struct {
	sc   *bufio.Scanner
	id   string
	done bool
}

// NewReader returns a Reader over r.
func NewReader(r io.Reader) *Reader {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), MaxEventSize)
	sc.Split(scanLines)
	return &Reader{sc: sc}
}

// Next returns the next event. It returns io.EOF when the stream ended
// cleanly at an event boundary, io.ErrUnexpectedEOF when it ended inside an
// event, ErrEventTooLarge, or the underlying read error.
func (r *Reader) Next() (Event, error) {
	if r.done {
		return Event{}, io.EOF
	}
	var (
		typ     string
		data    strings.Builder
		hasData bool
		partial bool
	)
	for r.sc.Scan() {
		line := r.sc.Bytes()
		if len(line) == 0 {
			if hasData {
				return Event{Type: typ, Data: data.String(), ID: r.id}, nil
			}
			typ, partial = "", false
			continue
		}
		if line[0] == ':' {
			continue
		}
		partial = true
		field, value := line, []byte(nil)
		if i := bytes.IndexByte(line, ':'); i >= 0 {
			field, value = line[:i], line[i+1:]
			if len(value) > 0 && value[0] == ' ' {
				value = value[1:]
			}
		}
		switch string(field) {
		case "event":
			typ = string(value)
		case "data":
			if hasData {
				data.WriteByte('\n')
			}
			if data.Len()+len(value) > MaxEventSize {
				return Event{}, ErrEventTooLarge
			}
			data.Write(value)
			hasData = true
		case "id":
			if bytes.IndexByte(value, 0) < 0 {
				r.id = string(value)
			}
		}
	}
	r.done = true
	if err := r.sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return Event{}, ErrEventTooLarge
		}
		return Event{}, err
	}
	if partial {
		return Event{}, io.ErrUnexpectedEOF
	}
	return Event{}, io.EOF
}

// scanLines splits on LF, CRLF or a lone CR.
func scanLines(data []byte, atEOF bool) (advance int, token []byte, err error) {
	for i, b := range data {
		switch b {
		case '\n':
			return i + 1, data[:i], nil
		case '\r':
			if i+1 < len(data) {
				if data[i+1] == '\n' {
					return i + 2, data[:i], nil
				}
				return i + 1, data[:i], nil
			}
			if atEOF {
				return i + 1, data[:i], nil
			}
			// Need one more byte to tell CR from CRLF.
			return 0, nil, nil
		}
	}
	if atEOF && len(data) > 0 {
		// A final line without terminator never completes an event; it is
		// returned so Next can report the stream as cut inside an event.
		return len(data), data, nil
	}
	return 0, nil, nil
}
