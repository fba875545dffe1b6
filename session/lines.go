package session

import (
	"bytes"
	"strconv"
)

// LineError locates the line that stopped AppendLines.
type LineError struct {
	// Line is the 0-based index of the failing line within the data.
	Line int
	// End is the offset just past the failing line (after its '\n').
	End int
	// Seq is the seq the line carries, or -1 when it did not parse.
	Seq int64
	Err error
}

func (e *LineError) Error() string {
	return "line " + strconv.Itoa(e.Line) + ": " + e.Err.Error()
}

func (e *LineError) Unwrap() error { return e.Err }

// AppendLines parses JSONL event lines (each ending in '\n'; a final line
// without one is taken whole) and appends them to l in order, as
// AppendEvent would. The events' Data alias data, which must not be
// modified afterwards. It stops at the first line that does not parse or
// is refused, returning a *LineError; the lines before it stay appended.
func (l *Log) AppendLines(data []byte) error {
	line := 0
	for off := 0; off < len(data); line++ {
		end := len(data)
		ln := data[off:]
		if j := bytes.IndexByte(ln, '\n'); j >= 0 {
			end = off + j + 1
			ln = ln[:j]
		}
		ev, err := ParseLine(ln)
		if err != nil {
			return &LineError{Line: line, End: end, Seq: -1, Err: err}
		}
		if err := l.AppendEvent(ev); err != nil {
			return &LineError{Line: line, End: end, Seq: ev.Seq, Err: err}
		}
		off = end
	}
	return nil
}
