package session

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/reinhq/rein/session/internal/wire"
)

// FuzzParseLine: ParseLine never panics, and whatever line its fast path
// takes, the general decoder takes too, with the same event (the same line
// with its keys reordered, which only the general decoder reads).
func FuzzParseLine(f *testing.F) {
	tm := time.Date(2026, 11, 30, 10, 0, 3, 512e6, time.UTC)
	for i, p := range validLog() {
		ev, err := NewEvent(int64(i), tm, p)
		if err != nil {
			f.Fatal(err)
		}
		ev.Ignorable = i%3 == 0
		line := ev.AppendLine(nil)
		f.Add(line[:len(line)-1])
	}
	f.Add([]byte(`{"seq":0,"type":"x","time":"2026-11-30T10:00:03.512Z","data":{},"data":{"a":1}}`))
	f.Add([]byte(`{"seq":0,"type":"","time":"2026-11-30T10:00:03.512Z","data":{}}`))
	f.Add([]byte(`{"seq":0,"type":"x","time":"2026-02-30T10:00:03.512Z","data":{}}`))
	f.Add([]byte(`{"seq":0,"type":"x","time":"2026-12-31T23:59:60.000Z","data":{}}`))
	f.Add([]byte("{\"seq\":0,\"type\":\"\xff\",\"time\":\"2026-11-30T10:00:03.512Z\",\"data\":{}}"))
	f.Add([]byte(`{"seq":0,"type":"0","time":"2026-11-30T10:00:03.512Z","data":{"":"&"}}`))
	f.Add([]byte(`{"type":"turn/start","seq":1,"time":"2026-11-30T10:00:03Z","data":{"turn":1}}`))
	f.Fuzz(func(t *testing.T, line []byte) {
		ev, err := ParseLine(line)
		e, ok := wire.Prefix(line, nil)
		if !ok || !wire.Valid(e.Data) {
			return
		}
		fast := envelopeEvent(e)
		if err != nil {
			t.Fatalf("fast path accepted what ParseLine refused: %v", err)
		}
		// Same object, keys in another order: ParseLine must fall back.
		var m map[string]json.RawMessage
		if err := json.Unmarshal(line, &m); err != nil {
			return
		}
		other, err := json.Marshal(m) // sorted keys: "data" first
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := wire.Prefix(other, nil); ok {
			t.Fatalf("reordered line took the fast path: %s", other)
		}
		slow, err := parseLineGeneral(other)
		if err != nil {
			t.Fatalf("fallback refused a line the fast path accepted: %v\n%s\n%s", err, line, other)
		}
		if fast.Seq != slow.Seq || fast.Type != slow.Type || !fast.Time.Equal(slow.Time) || fast.Ignorable != slow.Ignorable || !jsonEqual(fast.Data, slow.Data) {
			t.Fatalf("fast %+v\nslow %+v\nline %s", fast, slow, line)
		}
		if ev.Seq != fast.Seq || !bytes.Equal(ev.Data, fast.Data) {
			t.Fatal("ParseLine did not take the fast path")
		}
	})
}

// jsonEqual compares two JSON texts by value (json.Marshal re-escapes
// strings, so bytes may differ).
func jsonEqual(a, b []byte) bool {
	decode := func(b []byte) (any, bool) {
		d := json.NewDecoder(bytes.NewReader(b))
		d.UseNumber()
		var v any
		return v, d.Decode(&v) == nil
	}
	x, ok1 := decode(a)
	y, ok2 := decode(b)
	return ok1 && ok2 && reflect.DeepEqual(x, y)
}

// generalLoad is the oracle of the loader: the general decoder line by
// line (encoding/json for the envelope and the payload, valid UTF-8) and
// the checker. It returns the events it appended, and the index of the
// line it stopped at with the error (-1, nil when none).
func generalLoad(data []byte) ([]Event, int, error) {
	var c Checker
	var evs []Event
	lines := bytes.SplitAfter(data, []byte("\n"))
	if len(lines[len(lines)-1]) == 0 {
		lines = lines[:len(lines)-1]
	}
	for i, ln := range lines {
		ev, err := parseLineGeneral(bytes.TrimSuffix(ln, []byte("\n")))
		if err != nil {
			return evs, i, err
		}
		var p Payload
		if ev.Type.Known() {
			if p, err = decodeGeneral(ev); err != nil {
				return evs, i, err
			}
		}
		// The loader's order: what does not parse, then seq, then types.
		if ev.Seq != c.next {
			return evs, i, ErrInvariant
		}
		if !ev.Type.Known() && !ev.Ignorable {
			return evs, i, ErrUnknownType
		}
		if vs := c.Add(ev, p); len(vs) > 0 {
			return evs, i, &InvariantError{Violations: vs}
		}
		evs = append(evs, ev)
	}
	return evs, -1, nil
}

// sameLoad compares what AppendLines did with data (l, err) with the
// oracle's reading of it.
func sameLoad(t *testing.T, data []byte, l *Log, err error) {
	t.Helper()
	want, wline, werr := generalLoad(data)
	var le *LineError
	gline := -1
	if errors.As(err, &le) {
		gline = le.Line
	}
	kinds := []error{ErrCorrupt, ErrInvariant, ErrUnknownType}
	for _, k := range kinds {
		if errors.Is(err, k) != errors.Is(werr, k) {
			t.Fatalf("loader: %v (line %d); general: %v (line %d)", err, gline, werr, wline)
		}
	}
	if (err == nil) != (werr == nil) || gline != wline || l.Len() != int64(len(want)) {
		t.Fatalf("loader: %v at line %d with %d events; general: %v at line %d with %d", err, gline, l.Len(), werr, wline, len(want))
	}
	for i, w := range want {
		g := l.Event(int64(i))
		if !bytes.Equal(g.AppendLine(nil), w.AppendLine(nil)) {
			t.Fatalf("event %d: loader %s general %s", i, g.AppendLine(nil), w.AppendLine(nil))
		}
		if !w.Type.Known() {
			continue
		}
		gp, gerr := g.Decode()
		wp, _ := decodeGeneral(w)
		if gerr != nil || !reflect.DeepEqual(gp, wp) {
			t.Fatalf("event %d: loader's payload %#v (%v), general %#v", i, gp, gerr, wp)
		}
	}
}

// FuzzAppendLines: the loader (wire's fast paths, the runs of chunks, the
// lazy payloads) against the general decoder on mutations of a real
// session's lines: the fuzzer rewrites line at (which may become several
// lines, or none), and both must keep the same events and stop at the
// same line for the same kind of reason.
func FuzzAppendLines(f *testing.F) {
	_, data := loadLog(f, 2)
	lines := bytes.SplitAfter(data, []byte("\n"))
	lines = lines[:len(lines)-1]
	for i, ln := range lines {
		f.Add(uint16(i), bytes.TrimSuffix(ln, []byte("\n")))
	}
	f.Fuzz(func(t *testing.T, at uint16, line []byte) {
		i := int(at) % len(lines)
		var in []byte
		for _, ln := range lines[:i] {
			in = append(in, ln...)
		}
		in = append(append(in, line...), '\n')
		for _, ln := range lines[i+1:] {
			in = append(in, ln...)
		}
		l := NewLog(Header{ID: "x"})
		err := l.AppendLines(in)
		sameLoad(t, in, l, err)
	})
}
