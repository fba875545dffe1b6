package session

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/reinhq/rein/llm"
	"github.com/reinhq/rein/session/internal/wire"
)

// Tests of the loading fast paths (lines.go, decode.go): each agrees with
// the slow path it shortcuts.

func TestTypeIdx(t *testing.T) {
	for i, typ := range Types {
		if got := typeIdx(string(typ)); got != i {
			t.Errorf("typeIdx(%q) = %d, want %d", typ, got, i)
		}
		// Same length, one byte off: not a type.
		for j := range len(typ) {
			b := []byte(typ)
			b[j] ^= 0x20
			if got := typeIdx(string(b)); got >= 0 && Types[got] != Type(b) {
				t.Errorf("typeIdx(%q) = %d", b, got)
			}
		}
	}
	for _, s := range []string{"", "turn", "turn/star", "turn/startx", "x/chunk", "assistant/chunkk"} {
		if got := typeIdx(s); got != -1 {
			t.Errorf("typeIdx(%q) = %d, want -1", s, got)
		}
	}
}

// chunkLines returns rein's encodings of chunk lines with awkward text.
func chunkLines(t testing.TB) [][]byte {
	var out [][]byte
	for i, d := range []llm.Delta{{Text: "a"}, {Reasoning: "r\n\"q\"\\"}, {Text: "}}}"}, {Text: "é 你好 \u2028 \x01"}, {Reasoning: strings.Repeat("x", 300)}} {
		ev, err := NewEvent(int64(i*1234567), t0.Add(time.Duration(i)*time.Hour+123*time.Millisecond), &AssistantChunk{Turn: 12, Step: 3, Delta: d})
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, ev.AppendLine(nil))
	}
	return out
}

// TestChunkLineFastPath: the chunks rein writes take the fast path, with
// the same record the general path makes.
func TestChunkLineFastPath(t *testing.T) {
	for _, line := range chunkLines(t) {
		var tc wire.TimeCache
		c, next := wire.ChunkLine(line, 0, &tc)
		if next != len(line) {
			t.Fatalf("fast path refused %s", line)
		}
		checkChunkLine(t, line[:len(line)-1], c)
	}
}

// checkChunkLine compares wire.ChunkLine's record of line (without '\n')
// with the general decoder's event and payload.
func checkChunkLine(t *testing.T, line []byte, c wire.Chunk) {
	t.Helper()
	ev, err := parseLineGeneral(line)
	if err != nil || ev.Type != TypeAssistantChunk || ev.Ignorable {
		t.Fatalf("fast path took a line the general path reads otherwise (%v): %q", err, line)
	}
	p, err := decodeGeneral(ev)
	if err != nil {
		t.Fatalf("fast path took a chunk whose data the general decoder refuses (%v): %q", err, line)
	}
	d := p.(*AssistantChunk)
	data := line[c.Off : c.Off+c.Len]
	if c.Seq != ev.Seq || c.Ms != ev.Time.UnixMilli() || ev.Time.Nanosecond()%1e6 != 0 || int(c.Turn) != d.Turn || int(c.Step) != d.Step || !jsonEqual(data, ev.Data) {
		t.Fatalf("fast %+v %q\ngeneral %+v %+v\nline %q", c, data, ev, d, line)
	}
}

func FuzzChunkLine(f *testing.F) {
	for _, l := range chunkLines(f) {
		f.Add(l)
	}
	f.Add([]byte(`{"seq":1,"type":"assistant/chunk","time":"2026-11-30T10:00:00.000Z","data":{"turn":1,"step":1,"delta":{"text":"\` + "\n" + `"}}}`))
	f.Add([]byte(`{"seq":1,"type":"assistant/chunk","time":"2026-11-30T10:00:00.000Z","ignorable":true,"data":{"turn":1,"step":1,"delta":{"text":""}}}`))
	f.Add([]byte(`{"seq":1,"type":"assistant/chunk","time":"2026-11-30T10:00:00.000Z","data":{"turn":1,"step":1,"delta":{"text":"a"}}}}`))
	f.Add([]byte(`{"seq":01,"type":"assistant/chunk","time":"2026-11-30T10:00:00.000Z","data":{"turn":01,"step":1,"delta":{"text":"\u00e9\x"}}}`))
	f.Add([]byte("{\"seq\":1,\"type\":\"assistant/chunk\",\"time\":\"2026-11-30T10:00:00.000Z\",\"data\":{\"turn\":1,\"step\":1,\"delta\":{\"text\":\"\xe9\"}}}"))
	f.Fuzz(func(t *testing.T, data []byte) {
		var tc wire.TimeCache
		for pos := 0; pos < len(data); {
			c, next := wire.ChunkLine(data, pos, &tc)
			end := bytes.IndexByte(data[pos:], '\n')
			if end < 0 {
				end = len(data)
			} else {
				end += pos
			}
			if next > 0 {
				if want := min(end+1, len(data)); next != want {
					t.Fatalf("next %d, line ends at %d", next, want)
				}
				c.Off -= uint32(pos)
				checkChunkLine(t, data[pos:end], c)
			}
			pos = end + 1
		}
	})
}

// FuzzLoadDecode: decoding for a log (aliased strings, arena copies, lazy
// request headers and tool calls) never accepts what the general decoder
// refuses, and gives what it gives (the fields a lazy decode keeps).
func FuzzLoadDecode(f *testing.F) {
	for _, c := range fastDecodeCases {
		f.Add(string(c.t), c.data)
	}
	f.Add(string(TypeToolCall), `{"turn":2,"step":1,"callID":"c\"1","name":"read","arguments":"{\"a\":\"\\u00e9\"}","originalArguments":null}`)
	f.Add(string(TypeRequestHeader), `{"turn":3,"step":2,"reason":"change","model":"m","system":"\ud83d\ude00\t","tools":[{"name":"x","description":"\u0041","parameters":{"a":[1,-2.5e3,true,null,"\\"],"b":{}}}],"params":{"topP":1}}`)
	f.Add(string(TypeRequestHeader), `{"turn":1,"step":1,"tools":[{"name":"x","parameters":{"a":01}}]}`)
	f.Add(string(TypeRequestHeader), `{"turn":1,"step":1,"system":"bad \x escape"}`)
	f.Fuzz(func(t *testing.T, typ, data string) {
		if !Type(typ).Known() {
			typ = string(Types[len(typ)%len(Types)])
		}
		checkLoadDecode(t, Type(typ), []byte(data))
	})
}

func checkLoadDecode(t *testing.T, typ Type, data []byte) {
	t.Helper()
	want, jerr := decodeGeneral(Event{Type: typ, Data: data})
	got, ok := decodeWith(typ, data, new(wire.Arena), false)
	if !ok {
		return
	}
	if jerr != nil {
		t.Fatalf("%s %s: load decode accepted what the general decoder refuses (%v)", typ, data, jerr)
	}
	switch w := want.(type) {
	case *RequestHeader:
		g := got.(*RequestHeader)
		if g.Turn != w.Turn || g.Step != w.Step {
			t.Fatalf("%s %s: lazy turn/step %d/%d, want %d/%d", typ, data, g.Turn, g.Step, w.Turn, w.Step)
		}
	case *ToolCall:
		g := got.(*ToolCall)
		if g.Turn != w.Turn || g.Step != w.Step || g.CallID != w.CallID {
			t.Fatalf("%s %s: lazy %+v, want %+v", typ, data, g, w)
		}
	default:
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%s %s:\nload %#v\njson %#v", typ, data, got, want)
		}
	}
}

// loadLog is a log with every kind of payload, request headers that
// change, tool calls with escapes, and runs of chunks, as a test input.
func loadLog(t testing.TB, turns int) (*Log, []byte) {
	src := NewLog(Header{ID: "x"})
	at := t0
	var data []byte
	add := func(p Payload) {
		at = at.Add(1700 * time.Microsecond)
		ev, err := src.Append(at, p)
		if err != nil {
			t.Fatal(err)
		}
		data = ev.AppendLine(data)
	}
	for turn := 1; turn <= turns; turn++ {
		add(ctx(fmt.Sprintf("c%d", turn), strings.Repeat("ctx\n", turn%7)))
		add(&TurnStart{Turn: turn, Trigger: Trigger{Kind: TriggerSend, MessageID: fmt.Sprintf("m%d", turn)}})
		add(um(fmt.Sprintf("m%d", turn), "q \"é\" \u2028"))
		for step := 1; step <= 2; step++ {
			add(ss(turn, step))
			if step == 1 {
				add(&RequestHeader{Turn: turn, Step: step, Reason: HeaderChange, Model: "p:m", System: fmt.Sprintf("sys %d\n\t\"x\"", turn),
					Tools:  []llm.ToolSpec{{Name: "read", Description: "reads\n", Parameters: json.RawMessage(`{"type":"object","n":[1,2.5]}`)}},
					Params: llm.Params{MaxTokens: turn}})
			}
			var seqs []int64
			for k := range 30 {
				seqs = append(seqs, src.Len())
				if k%2 == 0 {
					add(chunk(turn, step, "w\n"))
				} else {
					add(&AssistantChunk{Turn: turn, Step: step, Delta: llm.Delta{Reasoning: "r"}})
				}
			}
			id := fmt.Sprintf("call_%d_%d", turn, step)
			if step == 1 {
				m := am(turn, step, "look\tthere", id)
				m.ChunkSeqs = seqs
				add(m)
				add(&ToolCall{Turn: turn, Step: step, CallID: id, Name: "read", Arguments: `{"path":"a\"b"}`})
				add(&ToolResult{Turn: turn, Step: step, CallID: id, Content: llm.Text("out\n\t1")})
			} else {
				m := am(turn, step, "done")
				m.ChunkSeqs = seqs
				add(m)
			}
			add(se(turn, step))
		}
		add(te(turn))
	}
	return src, data
}

// TestLazyHeader: a log loaded by AppendLines (request headers validated,
// only the last decoded) answers RequestHeader as one built event by
// event, after every piece of input, and its events decode in full.
func TestLazyHeader(t *testing.T) {
	src, data := loadLog(t, 40)
	lines := bytes.SplitAfter(data, []byte("\n"))
	lines = lines[:len(lines)-1] // after the last '\n'
	l := NewLog(Header{ID: "x"})
	ref := NewLog(Header{ID: "x"})
	// Feed pieces of various sizes, comparing after each.
	for i, n := 0, 1; i < len(lines); n = n*3 + 1 {
		j := min(i+n, len(lines))
		if err := l.AppendLines(bytes.Join(lines[i:j], nil)); err != nil {
			t.Fatal(err)
		}
		for _, ln := range lines[i:j] {
			ev, err := ParseLine(ln[:len(ln)-1])
			if err != nil {
				t.Fatal(err)
			}
			if err := ref.AppendEvent(ev); err != nil {
				t.Fatal(err)
			}
		}
		if l.hdrLazy {
			t.Fatal("AppendLines returned with the last request header not decoded")
		}
		if !reflect.DeepEqual(l.RequestHeader(), ref.RequestHeader()) {
			t.Fatalf("after %d lines: header %+v, want %+v", j, l.RequestHeader(), ref.RequestHeader())
		}
		i = j
	}
	if !reflect.DeepEqual(l.RequestHeader(), src.RequestHeader()) {
		t.Errorf("header %+v, want %+v", l.RequestHeader(), src.RequestHeader())
	}
	if !reflect.DeepEqual(l.Messages(), src.Messages()) {
		t.Errorf("projection differs")
	}
	for s := range l.Len() {
		got, err := l.Event(s).Decode()
		if err != nil {
			t.Fatal(err)
		}
		want, _ := src.Event(s).Decode()
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("seq %d: %+v, want %+v", s, got, want)
		}
	}
	// A header appended the ordinary way replaces the lazy one.
	h := &RequestHeader{Turn: 41, Step: 1, Reason: HeaderChange, Model: "other", Tools: []llm.ToolSpec{}}
	for _, p := range []Payload{ts(41), ss(41, 1), h} {
		if _, err := l.Append(l.LastTime(), p); err != nil {
			t.Fatal(err)
		}
	}
	if got := l.RequestHeader(); !reflect.DeepEqual(got, h) {
		t.Errorf("header after Append %+v, want %+v", got, h)
	}
}

// TestAppendLinesDamage: whatever line is damaged, and however, AppendLines
// (on several blocks in parallel) stops where appending the events one by
// one stops, and where the general decoder stops, with the same error.
func TestAppendLinesDamage(t *testing.T) {
	_, data := loadLog(t, 120) // several blocks
	if len(data) < 3*blockSize {
		t.Fatalf("input of %d bytes is too small", len(data))
	}
	lines := strings.SplitAfter(string(data), "\n")
	lines = lines[:len(lines)-1]
	r := rand.New(rand.NewPCG(3, 4))
	damages := []func(i int, ln string) string{
		// a seq off by one
		func(i int, ln string) string {
			return strings.Replace(ln, fmt.Sprintf(`{"seq":%d,`, i), fmt.Sprintf(`{"seq":%d,`, i+1), 1)
		},
		// time going back
		func(i int, ln string) string { return strings.Replace(ln, `"time":"2026`, `"time":"2025`, 1) },
		// a chunk outside its step: the step number bumped
		func(i int, ln string) string { return strings.Replace(ln, `,"step":`, `,"step":9`, 1) },
		// broken JSON in data
		func(i int, ln string) string { return strings.Replace(ln, `"data":{`, `"data":{"x":,`, 1) },
		// a bad escape in a string
		func(i int, ln string) string { return strings.Replace(ln, `\n`, `\q`, 1) },
		// fields reordered (takes the careful path, stays valid)
		func(i int, ln string) string {
			var m map[string]json.RawMessage
			if json.Unmarshal([]byte(ln), &m) != nil {
				return ln
			}
			b, _ := json.Marshal(m)
			return string(b) + "\n"
		},
		// an unknown type, not ignorable
		func(i int, ln string) string { return strings.Replace(ln, `"type":"`, `"type":"x`, 1) },
		// an unknown type, ignorable: appended
		func(i int, ln string) string {
			return strings.Replace(strings.Replace(ln, `"type":"`, `"type":"x`, 1), `,"data":`, `,"ignorable":true,"data":`, 1)
		},
		// an assistant/message citing a chunk twice
		func(i int, ln string) string { return strings.Replace(ln, `"chunkSeqs":[`, `"chunkSeqs":[0,`, 1) },
		// the line cut short
		func(i int, ln string) string { return ln[:len(ln)/2] + "\n" },
		// a byte that is not UTF-8 (in a chunk's text, or anywhere)
		func(i int, ln string) string { return strings.Replace(ln, "w", "w\xff", 1) },
		func(i int, ln string) string { return strings.Replace(ln, "\"}", "\xe9\"}", 1) },
		// a chunk naming another turn
		func(i int, ln string) string { return strings.Replace(ln, `{"turn":`, `{"turn":4`, 1) },
		// a number with a leading zero
		func(i int, ln string) string { return strings.Replace(ln, `{"turn":`, `{"turn":0`, 1) },
		// a raw control byte in a string
		func(i int, ln string) string { return strings.Replace(ln, `\n`, "\x01", 1) },
		// an escape that is not one
		func(i int, ln string) string { return strings.Replace(ln, `\n`, `\u00g1`, 1) },
	}
	for k, damage := range damages {
		for rep := range 2 {
			i := r.IntN(len(lines))
			bad := damage(i, lines[i])
			in := append(append(append([]string(nil), lines[:i]...), bad), lines[i+1:]...)
			buf := []byte(strings.Join(in, ""))
			l := NewLog(Header{ID: "x"})
			err := l.AppendLines(buf)
			ref, rerr, rline := appendOneByOne(in)
			if (err == nil) != (rerr == nil) || l.Len() != ref.Len() {
				t.Fatalf("damage %d at line %d: AppendLines %v with %d events, one by one %v with %d\n%s", k, i, err, l.Len(), rerr, ref.Len(), bad)
			}
			if err != nil {
				var le *LineError
				if !errors.As(err, &le) || le.Line != rline || errors.Is(err, ErrCorrupt) != errors.Is(rerr, ErrCorrupt) ||
					errors.Is(err, ErrInvariant) != errors.Is(rerr, ErrInvariant) || errors.Is(err, ErrUnknownType) != errors.Is(rerr, ErrUnknownType) {
					t.Fatalf("damage %d at line %d: %v, one by one %v at line %d", k, i, err, rerr, rline)
				}
				if want := len(strings.Join(in[:rline+1], "")); le.End != want {
					t.Fatalf("damage %d: End %d, want %d", k, le.End, want)
				}
			}
			if !reflect.DeepEqual(l.Messages(), ref.Messages()) || l.LastTime() != ref.LastTime() || !reflect.DeepEqual(l.RequestHeader(), ref.RequestHeader()) {
				t.Fatalf("damage %d at line %d: state differs", k, i)
			}
			var got, want []byte
			for s := range l.Len() {
				got = l.Event(s).AppendLine(got)
				want = ref.Event(s).AppendLine(want)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("damage %d at line %d: events differ", k, i)
			}
			if rep == 0 {
				sameLoad(t, buf, l, err) // slow: encoding/json
			}
			// A Validator (fed through one reused buffer) stops at the
			// same line for the same reason.
			v := NewValidator(Header{ID: "x"})
			verr := validateReusing(v, buf)
			var vle *LineError
			if v.Len() != l.Len() || (err == nil) != (verr == nil) || (verr != nil && (!errors.As(verr, &vle) || vle.Line != rline ||
				errors.Is(verr, ErrCorrupt) != errors.Is(err, ErrCorrupt) || errors.Is(verr, ErrInvariant) != errors.Is(err, ErrInvariant))) {
				t.Fatalf("damage %d at line %d: Validator %v with %d events, AppendLines %v with %d", k, i, verr, v.Len(), err, l.Len())
			}
			// A Validator taken from a log of the lines before some cut
			// goes on as that log would, even after the log went on by
			// itself first (they share no state: the validator would
			// trip over the step's chunks, tool calls or spans the log
			// had moved on).
			cut := r.IntN(i + 1)
			pre := NewLog(Header{ID: "x"})
			if perr := pre.AppendLines([]byte(strings.Join(in[:cut], ""))); perr == nil {
				rest := []byte(strings.Join(in[cut:], ""))
				cv := pre.Validator()
				perr = pre.AppendLines(rest)
				cerr := validateReusing(cv, rest)
				var cle, ple *LineError
				if cv.Len() != l.Len() || pre.Len() != l.Len() || (err == nil) != (cerr == nil) || (err == nil) != (perr == nil) ||
					(err != nil && (!errors.As(cerr, &cle) || !errors.As(perr, &ple) || cle.Line+cut != rline || ple.Line+cut != rline ||
						errors.Is(cerr, ErrInvariant) != errors.Is(err, ErrInvariant))) {
					t.Fatalf("damage %d at line %d, cut %d: validator %v with %d events, the log %v with %d; AppendLines %v with %d",
						k, i, cut, cerr, cv.Len(), perr, pre.Len(), err, l.Len())
				}
			}
		}
	}
}

// validateReusing feeds data to v in pieces of whole lines through one
// buffer, which it scribbles over after each call: a Validator must not
// keep what it was given. Lines are numbered across pieces, as AppendLines
// numbers them.
func validateReusing(v *Validator, data []byte) error {
	buf := make([]byte, 0, 64<<10)
	line := 0
	for len(data) > 0 {
		n := min(len(data), 40<<10)
		if j := bytes.IndexByte(data[n:], '\n'); j >= 0 && n < len(data) {
			n += j + 1
		} else {
			n = len(data)
		}
		buf = append(buf[:0], data[:n]...)
		err := v.AppendLines(buf)
		for i := range buf {
			buf[i] = '#'
		}
		if err != nil {
			var le *LineError
			if errors.As(err, &le) {
				le.Line += line
			}
			return err
		}
		line += bytes.Count(data[:n], []byte("\n"))
		data = data[n:]
	}
	return nil
}

// appendOneByOne appends lines with ParseLine and AppendEvent, returning
// the log, the first error and its line.
func appendOneByOne(lines []string) (*Log, error, int) {
	l := NewLog(Header{ID: "x"})
	for i, ln := range lines {
		ev, err := ParseLine([]byte(strings.TrimSuffix(ln, "\n")))
		if err == nil {
			err = l.AppendEvent(ev)
		}
		if err != nil {
			return l, err, i
		}
	}
	return l, nil, -1
}

// TestAppendLinesChunkRules: runs of chunks appended at once obey the
// rules for chunks exactly as one by one (each case several blocks long,
// so the runs are long).
func TestAppendLinesChunkRules(t *testing.T) {
	cases := map[string][]Payload{
		"after assistant/message": {ts(1), ss(1, 1), am(1, 1, "x")},
		"between turns":           {ts(1), ss(1, 1), se(1, 1), te(1)},
		"outside a step":          {ts(1), ss(1, 1), se(1, 1)},
		"inside a step":           {ts(1), ss(1, 1)},
		"before any turn":         {},
	}
	for name, pre := range cases {
		for _, back := range []bool{false, true} {
			var lines []string
			at := t0
			for i, p := range pre {
				ev, err := NewEvent(int64(i), at, p)
				if err != nil {
					t.Fatal(err)
				}
				lines = append(lines, string(ev.AppendLine(nil)))
			}
			n := int64(len(pre))
			for k := range 5000 {
				at = at.Add(time.Millisecond)
				if back && k == 3000 {
					at = at.Add(-time.Second)
				}
				ev, _ := NewEvent(n+int64(k), at, chunk(1, 1, "chunk text "+strings.Repeat("y", k%50)))
				lines = append(lines, string(ev.AppendLine(nil)))
			}
			l := NewLog(Header{ID: "x"})
			err := l.AppendLines([]byte(strings.Join(lines, "")))
			ref, rerr, rline := appendOneByOne(lines)
			var le *LineError
			if l.Len() != ref.Len() || (err == nil) != (rerr == nil) || (err != nil && (!errors.As(err, &le) || le.Line != rline || fmt.Sprint(rules(err)) != fmt.Sprint(rules(rerr)))) {
				t.Errorf("%s (back %v): %v with %d events, one by one %v with %d", name, back, err, l.Len(), rerr, ref.Len())
			}
			if l.LastTime() != ref.LastTime() {
				t.Errorf("%s: last time %v, want %v", name, l.LastTime(), ref.LastTime())
			}
		}
	}
}

// BenchmarkChunkLine: the fast path of the bulk of a log's lines.
func BenchmarkChunkLine(b *testing.B) {
	var data []byte
	for i := range 1000 {
		data = append(data, `{"seq":`...)
		data = append(data, []byte(string(rune('1'+i%9))+"2345")...)
		data = append(data, `,"type":"assistant/chunk","time":"2026-11-01T09:00:00.128Z","data":{"turn":12,"step":3,"delta":{"reasoning":"{x}\nab"}}}`+"\n"...)
	}
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		var tc wire.TimeCache
		for pos := 0; pos < len(data); {
			_, next := wire.ChunkLine(data, pos, &tc)
			if next == 0 {
				b.Fatal("no")
			}
			pos = next
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*1000), "ns/line")
}
