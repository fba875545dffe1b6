package session

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/reinhq/rein/session/internal/wire"
)

// Loss is a stretch of damaged lines that Salvage did not keep as they
// were: replaced by tombstones, or dropped.
type Loss struct {
	// Line is the first line, counted as in Salvage's firstLine, and Lines
	// how many lines the loss covers (0 for tombstones that stand for
	// events no line held).
	Line, Lines int
	// Seq is the seq of the first lost event; Tombstones how many
	// tombstones were written for it, from Seq on (0: a cut, the lines
	// and everything after them dropped).
	Seq        int64
	Tombstones int
	// Err is why the first line was not kept.
	Err error
}

// salvageLook bounds how many lines Salvage reads past a damaged one to
// find where the log goes on and the assistant/message that proves
// chunks.
const salvageLook = 1 << 16

// Salvage appends the event lines of data to l as AppendLines does, but
// where AppendLines stops at a line it cannot take, Salvage keeps every
// event it can prove consistent, and returns what it did not keep:
//
//   - Damaged lines (or missing ones: a seq gap) that stood for
//     assistant/chunk events the step's later assistant/message cites are
//     replaced by tombstones with the same seqs: chunks of that step with
//     an empty delta and Lost set, since their content is in the message.
//     So is a damaged line that is marked ignorable and of a type this
//     reader does not know (any reader may skip it): a tombstone of that
//     type, ignorable, with data {"lost":…}. Tombstones take the time of
//     the event before them. The lines after them are read on.
//   - Anything else cuts the log: the damaged line and every line after it
//     are dropped. The events before it are a consistent prefix (Repair
//     closes what it leaves open).
//
// firstLine is the number to give data's first line in Losses and
// tombstones (2 for a file's first event line, the header being 1). A
// final line without '\n' is taken as AppendLines takes it: the caller
// decides about torn tails first.
func (l *Log) Salvage(data []byte, firstLine int) []Loss {
	var losses []Loss
	line := firstLine
	for len(data) > 0 {
		err := l.AppendLines(data)
		if err == nil {
			break
		}
		var le *LineError
		if !errors.As(err, &le) {
			return append(losses, Loss{Line: line, Lines: countLines(data), Seq: l.Len(), Err: err})
		}
		// The failing line starts after the '\n' before its end.
		start := bytes.LastIndexByte(data[:max(le.End-1, 0)], '\n') + 1
		data, line = data[start:], line+le.Line
		size, run, seqs, ok := l.tombstones(data, line, le.Err)
		if !ok {
			return append(losses, Loss{Line: line, Lines: countLines(data), Seq: l.Len(), Err: le.Err})
		}
		losses = append(losses, Loss{Line: line, Lines: run, Seq: l.Len() - int64(seqs), Tombstones: seqs, Err: le.Err})
		data, line = data[size:], line+run
	}
	return losses
}

// salvageLine is one line after a damaged one, as Salvage reads it.
type salvageLine struct {
	ev  Event
	p   Payload
	end int // offset just past the line
	err error
}

// readLines reads up to n lines of data (parse and decode only, no
// checks).
func readLines(data []byte, n int) []salvageLine {
	var out []salvageLine
	for off := 0; off < len(data) && len(out) < n; {
		ln := data[off:]
		end := len(data)
		if j := bytes.IndexByte(ln, '\n'); j >= 0 {
			ln, end = ln[:j], off+j+1
		}
		s := salvageLine{end: end}
		if s.ev, s.err = ParseLine(ln); s.err == nil {
			s.p, s.err = decodeAny(s.ev)
		}
		out = append(out, s)
		off = end
	}
	return out
}

// tombstones tries to replace the damaged run of lines that data starts
// with (the first at number line, failing with cause) by tombstones,
// appending them to l. It returns the bytes and lines of the run, the
// number of tombstones, and whether it could; when it could not, it
// appended nothing.
func (l *Log) tombstones(data []byte, line int, cause error) (size, run, seqs int, ok bool) {
	ls := readLines(data, salvageLook)
	s := l.Len()
	// Where the log goes on: the first line j that reads with seq s+j
	// (each damaged line stood for one event), else the first that reads
	// with a later seq than s (lines are missing or merged).
	j := -1
	for i := 1; i < len(ls) && j < 0; i++ {
		if ls[i].err == nil && ls[i].ev.Seq == s+int64(i) {
			j = i
		}
	}
	for i := 0; i < len(ls) && j < 0; i++ {
		if ls[i].err == nil && ls[i].ev.Seq > s {
			j = i
		}
	}
	if j < 0 {
		return 0, 0, 0, false
	}
	q := ls[j].ev.Seq
	aligned := q-s == int64(j)
	cited := l.citedChunks(ls[j:])
	var evs []Event
	for x := s; x < q; x++ {
		lost := Lost{Line: line, Error: cause.Error()}
		switch {
		case j == 0:
			lost = Lost{Error: "no line holds this event"}
		case aligned:
			i := int(x - s)
			lost.Line = line + i
			if i > 0 && ls[i].err != nil {
				lost.Error = ls[i].err.Error()
			} else if i > 0 {
				lost.Error = "follows a damaged line"
			}
		}
		t := l.LastTime()
		if len(evs) > 0 {
			t = evs[len(evs)-1].Time
		}
		var ev Event
		var err error
		switch {
		case cited[x]:
			ev, err = NewEvent(x, t, &AssistantChunk{Turn: l.checker.turn, Step: l.checker.step, Lost: &lost})
		case aligned && ignorableUnknown(data, ls, int(x-s), x):
			typ := ignorableType(data, ls, int(x-s))
			var b []byte
			b, err = json.Marshal(struct {
				Lost Lost `json:"lost"`
			}{lost})
			ev = Event{Seq: x, Type: typ, Time: t, Ignorable: true, Data: b}
		default:
			return 0, 0, 0, false
		}
		if err != nil {
			return 0, 0, 0, false
		}
		evs = append(evs, ev)
	}
	// Tombstones that pass these conditions pass the checker; should one
	// not, the ones before it stay (they are consistent) and the caller
	// cuts the rest.
	for _, ev := range evs {
		if err := l.AppendEvent(ev); err != nil {
			return 0, 0, 0, false
		}
	}
	size = 0
	if j > 0 {
		size = ls[j-1].end
	}
	return size, j, len(evs), true
}

// citedChunks returns the seqs that the open step's assistant/message,
// among lines ls (read by readLines), cites as its chunks: what that
// message holds the content of. It is empty unless the log is inside a
// step that has no assistant/message yet, and when the message's turn or
// step is not the open one. Lines that do not read are passed over; a
// step or turn boundary ends the search.
func (l *Log) citedChunks(ls []salvageLine) map[int64]bool {
	c := &l.checker
	if !c.turnOpen || !c.stepOpen || c.asstSeen {
		return nil
	}
	for _, s := range ls {
		if s.err != nil {
			continue
		}
		switch s.ev.Type {
		case TypeStepStart, TypeStepEnd, TypeTurnStart, TypeTurnEnd:
			return nil
		case TypeAssistantMessage:
			m, ok := s.p.(*AssistantMessage)
			if !ok || m.Turn != c.turn || m.Step != c.step {
				return nil
			}
			out := make(map[int64]bool, len(m.ChunkSeqs))
			for _, x := range m.ChunkSeqs {
				out[x] = true
			}
			return out
		}
	}
	return nil
}

// ignorableUnknown reports whether damaged line i of ls (in data) was
// marked ignorable, with seq x and a type this reader does not know, as
// far as its fixed prefix can tell.
func ignorableUnknown(data []byte, ls []salvageLine, i int, x int64) bool {
	h, ok := wire.ReadHead(lineOf(data, ls, i))
	return ok && h.Ignorable && h.Seq == x && !Type(h.Type).Known()
}

func ignorableType(data []byte, ls []salvageLine, i int) Type {
	h, _ := wire.ReadHead(lineOf(data, ls, i))
	return Type(h.Type)
}

// lineOf returns line i of ls in data, without its '\n'.
func lineOf(data []byte, ls []salvageLine, i int) []byte {
	start := 0
	if i > 0 {
		start = ls[i-1].end
	}
	return bytes.TrimSuffix(data[start:ls[i].end], []byte("\n"))
}

func countLines(data []byte) int {
	n := bytes.Count(data, []byte("\n"))
	if len(data) > 0 && data[len(data)-1] != '\n' {
		n++
	}
	return n
}

// String describes a loss for a person: which lines, which seqs, why, and
// what became of them.
func (x Loss) String() string {
	seqs := func(n int) string {
		if n <= 1 {
			return fmt.Sprintf("seq %d", x.Seq)
		}
		return fmt.Sprintf("seqs %d-%d", x.Seq, x.Seq+int64(n)-1)
	}
	lines := fmt.Sprintf("line %d", x.Line)
	if x.Lines > 1 {
		lines = fmt.Sprintf("lines %d-%d", x.Line, x.Line+x.Lines-1)
	}
	switch {
	case x.Tombstones > 0 && x.Lines == 0:
		return fmt.Sprintf("%s: no line holds them (%v); kept as tombstones: the step's assistant/message holds their content", seqs(x.Tombstones), x.Err)
	case x.Tombstones > 0:
		return fmt.Sprintf("%s (%s): %v; kept as tombstone(s): the step's assistant/message holds the content, or the event was ignorable", lines, seqs(x.Tombstones), x.Err)
	case x.Lines > 1:
		return fmt.Sprintf("%s (from seq %d on): line %d: %v; dropped, with every line after it (their events cannot be kept without it)", lines, x.Seq, x.Line, x.Err)
	}
	return fmt.Sprintf("%s (seq %d): %v; dropped", lines, x.Seq, x.Err)
}
