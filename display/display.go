// Package display makes text that rein did not write safe to show on a
// terminal. A model's answer, a tool's output, a hook's message or a value
// from a repository's settings file may hold control characters: an escape
// sequence that moves the cursor, erases a line, retitles the window or
// writes the clipboard (OSC 52), a carriage return that overprints, or a
// Unicode bidirectional override that shows text in another order than it
// is. Shown as they are, they can make a command look like another one.
//
// Quote is for one value on one line (a hook command in the trust
// question); Writer is for a stream of text (the model's answer on a
// terminal). Both turn every Unsafe rune into a visible escape such as
// \x1b (Quote) or \u001b (Writer) and \u202e, so nothing is hidden and
// nothing is lost.
//
// This package imports only the standard library and stays on the bottom
// floor.
package display

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"
)

// Unsafe reports whether r must not reach a terminal as it is: the C0
// controls other than tab and newline (escape, carriage return, backspace,
// bell, ...), DEL, the C1 controls (U+0080–U+009F, some terminals read
// U+009B as an escape sequence), and the Unicode bidirectional controls
// (U+061C, U+200E, U+200F, U+202A–U+202E, U+2066–U+2069), which reorder
// the text around them. utf8.RuneError stands for a byte that is not UTF-8
// and is unsafe too.
func Unsafe(r rune) bool {
	switch {
	case r == '\t' || r == '\n':
		return false
	case r < 0x20 || r == 0x7f || r >= 0x80 && r <= 0x9f:
		return true
	case r == 0x061c || r == 0x200e || r == 0x200f || r >= 0x202a && r <= 0x202e || r >= 0x2066 && r <= 0x2069:
		return true
	}
	return r == utf8.RuneError
}

// Quote returns s for one line of a listing: as it is when it holds only
// printable characters (strconv.IsPrint: no controls, no newline, no
// invisible formatting), else quoted with Go's escapes ("a\x1b[2Kb"), and
// marked "[N lines]" when it spans several lines.
func Quote(s string) string {
	if strings.IndexFunc(s, func(r rune) bool { return r != ' ' && !strconv.IsPrint(r) || r == utf8.RuneError }) < 0 {
		return s
	}
	q := strconv.Quote(s)
	if n := strings.Count(strings.TrimRight(s, "\n"), "\n"); n > 0 {
		q += fmt.Sprintf(" [%d lines]", n+1)
	}
	return q
}

// Escape returns s with every Unsafe rune written as a visible escape
// (\u001b, \u000d, \u202e; \x9b for a byte that is not UTF-8); newlines
// and tabs stay as they are, and so does a carriage return right before a
// newline.
func Escape(s string) string {
	var b strings.Builder
	escapeTo(&b, s)
	return b.String()
}

// escapeTo writes s to b, escaping Unsafe runes.
func escapeTo(b *strings.Builder, s string) {
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == '\r' && i+1 < len(s) && s[i+1] == '\n':
			b.WriteByte('\r')
		case r == utf8.RuneError && n == 1:
			fmt.Fprintf(b, `\x%02x`, s[i])
		case Unsafe(r):
			// \u form, not \x: inside a JSON string (stream-json on a
			// terminal) the escape stays valid JSON for the same rune.
			fmt.Fprintf(b, `\u%04x`, r)
		default:
			b.WriteString(s[i : i+n])
		}
		i += n
	}
}

// Writer wraps w so that what is written through it reaches w escaped
// (see Escape). A rune or a "\r\n" cut between two writes is held back
// until the next write completes it, so a stream of chunks is escaped as
// its whole text would be; Flush writes what is held. It is safe for
// concurrent use.
func Writer(w io.Writer) *EscapeWriter { return &EscapeWriter{w: w} }

// EscapeWriter is the io.Writer Writer returns.
type EscapeWriter struct {
	mu   sync.Mutex
	w    io.Writer
	held []byte // an incomplete rune, or a "\r", from the end of the last write
}

// Write escapes p and writes it to the underlying writer. It reports
// len(p) written when the underlying write succeeds.
func (e *EscapeWriter) Write(p []byte) (int, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	buf := append(e.held, p...)
	e.held = nil
	cut := len(buf)
	// Hold back a rune not complete yet, or a final "\r" that a "\n" may
	// follow.
	if cut > 0 && buf[cut-1] == '\r' {
		cut--
	} else {
		for k := 1; k <= 3 && k <= cut; k++ {
			c := buf[cut-k]
			if c < 0x80 {
				break
			}
			if utf8.RuneStart(c) {
				if !utf8.FullRune(buf[cut-k:]) {
					cut -= k
				}
				break
			}
		}
	}
	e.held = append([]byte(nil), buf[cut:]...)
	if cut == 0 {
		return len(p), nil
	}
	var b strings.Builder
	escapeTo(&b, string(buf[:cut]))
	if _, err := io.WriteString(e.w, b.String()); err != nil {
		return 0, err
	}
	return len(p), nil
}

// Flush writes, escaped, what a previous write held back.
func (e *EscapeWriter) Flush() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.held) == 0 {
		return nil
	}
	s := Escape(string(e.held))
	e.held = nil
	_, err := io.WriteString(e.w, s)
	return err
}

// Unwrap returns the underlying writer.
func (e *EscapeWriter) Unwrap() io.Writer { return e.w }
