package storetest

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/reinhq/rein/llm"
	"github.com/reinhq/rein/session"
	"github.com/reinhq/rein/store"
)

// testForkInsideCompaction: an out-of-turn user/message that an idle inject
// placed inside a between-turn compaction is not a stable point (the
// compaction has not ended there): a fork at it is refused, naming the
// stable points on either side, the later being the compaction/end, where
// a fork is allowed.
func testForkInsideCompaction(t *testing.T, h Harness) {
	s := h.New(t)
	w, b := create(t, s, "pc")
	u1, a1 := b.turn("u1", "a1")
	before := b.add(contextMsg("cA", "A", "p")).Seq
	b.add(&session.CompactionStart{ID: "c_1", Reason: session.CompactManual})
	inject := b.add(contextMsg("cB", "lands during the compaction", "p")).Seq
	b.add(&session.UserMessage{ID: "sum", Content: llm.Text("summary"), Source: session.Source{Kind: session.SourceSystem, Name: "compaction"},
		Replaces: &session.Replaces{Start: u1, End: before, Seqs: []int64{u1, a1, before}}})
	end := b.add(&session.CompactionEnd{ID: "c_1", Reason: session.CompactManual}).Seq
	appendAll(t, w, b)
	w.Close()
	_, err := s.Fork(ctx, "pc", inject, session.Header{ID: "pc-at-inject"})
	if !errors.Is(err, session.ErrOpenTurn) || !strings.Contains(err.Error(), fmt.Sprintf("seq %d and seq %d", before, end)) {
		t.Errorf("Fork at an inject inside a between-turn compaction: %v, want a refusal naming seq %d and seq %d", err, before, end)
	}
	if _, err := s.Load(ctx, "pc-at-inject", store.LoadOptions{}); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("refused fork left a child: %v", err)
	}
	if _, err := s.Fork(ctx, "pc", end, session.Header{ID: "pc-at-end"}); err != nil {
		t.Errorf("Fork at the compaction/end: %v", err)
	} else if ld := load(t, s, "pc-at-end"); ld.Log.Len() != end+1 || len(ld.Repair) != 0 {
		t.Errorf("child: %d events, repair %v", ld.Log.Len(), ld.Repair)
	}
}

// testRunning: a session that a writer holds, in the middle of a turn,
// loads as far as it was written, unrepaired, and says it is held; once
// the writer is gone it loads repaired (the turn interrupted).
func testRunning(t *testing.T, h Harness) {
	s := h.New(t)
	w, b := create(t, s, "run")
	b.turn("1", "2")
	b.add(&session.TurnStart{Turn: 2, Trigger: session.Trigger{Kind: session.TriggerSend, MessageID: "m"}})
	b.add(userMsg("m", "still running"))
	appendAll(t, w, b)
	ld, err := s.Load(ctx, "run", store.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if ld.Locked == nil || !errors.Is(ld.Locked, store.ErrLocked) || ld.Locked.ID != "run" {
		t.Errorf("Load of a held session: Locked = %v", ld.Locked)
	}
	if len(ld.Repair) != 0 || ld.Log.Len() != b.log.Len() {
		t.Errorf("held session repaired: %d events, repair %v", ld.Log.Len(), ld.Repair)
	}
	if _, open := ld.Log.Turn(); !open {
		t.Errorf("the running turn was closed")
	}
	if _, _, err = s.Open(ctx, "run"); !errors.Is(err, store.ErrLocked) {
		t.Errorf("Open of a held session: %v, want ErrLocked", err)
	}
	streamAgrees(t, s, "run")
	crash(t, h, w)
	streamAgrees(t, s, "run")
	ld = load(t, s, "run")
	if ld.Locked != nil || len(ld.Repair) == 0 {
		t.Errorf("after the writer died: Locked %v, repair %v", ld.Locked, ld.Repair)
	}
}

// crafted is a session for the crafted-file cases: a context message,
// then three turns whose answers stream in four chunks each, as a file.
func crafted(t *testing.T) (*builder, []byte) {
	b := newBuilder(t, header("cr"))
	b.add(contextMsg("c0", "context", "p"))
	for i := 1; i <= 3; i++ {
		b.turn(fmt.Sprintf("prompt %d", i), fmt.Sprintf("one %d |two |three |four", i))
	}
	return b, b.file()
}

// lineOf returns the index of the first event line (0 for seq 0) of file
// that holds s.
func lineOf(t *testing.T, file []byte, s string) int {
	t.Helper()
	for i, ln := range strings.SplitAfter(string(file), "\n")[1:] {
		if strings.Contains(ln, s) {
			return i
		}
	}
	t.Fatalf("no line holds %q", s)
	return -1
}

// replaceLine returns file with event line i replaced by ln (which has its
// own '\n', or none).
func replaceLine(file []byte, i int, ln string) []byte {
	lines := strings.SplitAfter(string(file), "\n")
	lines[i+1] = ln
	return []byte(strings.Join(lines, ""))
}

func eventLine(file []byte, i int) string {
	return strings.SplitAfter(string(file), "\n")[i+1]
}

// testCrafted loads damaged files, put in place through Harness.PutFile,
// on every path: Load, Open, Fork, and a salvaging Load.
func testCrafted(t *testing.T, h Harness) {
	if h.PutFile == nil {
		t.Skip("backend has no PutFile")
	}
	// Refused on every path, salvaged into tombstones: the line stood for
	// a chunk its step's assistant/message cites.
	for name, damage := range map[string]func(ln string) string{
		"chunk not JSON":   func(ln string) string { return ln[:len(ln)/2] + "\n" },
		"chunk not UTF-8":  func(ln string) string { return strings.Replace(ln, "two", "tw\xff", 1) },
		"chunk wrong turn": func(ln string) string { return strings.Replace(ln, `"turn":2`, `"turn":1`, 1) },
		"chunk wrong step": func(ln string) string { return strings.Replace(ln, `"step":1`, `"step":2`, 1) },
		"chunk bad escape": func(ln string) string { return strings.Replace(ln, "two ", `tw\x `, 1) },
		"chunk deleted":    func(ln string) string { return "" },
	} {
		t.Run(name, func(t *testing.T) {
			b, file := crafted(t)
			i := lineOf(t, file, `{"turn":2,"step":1,"delta":{"text":"two "}}`) // turn 2's second chunk
			s := h.New(t)
			h.PutFile(t, s, "cr", replaceLine(file, i, damage(eventLine(file, i))))
			refusedEverywhere(t, s, i)
			ld := salvaged(t, s)
			if ld.Log.Len() != b.log.Len() || len(ld.Dropped) != 1 {
				t.Fatalf("salvage kept %d of %d events, dropped %v", ld.Log.Len(), b.log.Len(), ld.Dropped)
			}
			d := ld.Dropped[0]
			if d.Seq != int64(i) || d.Tombstones != 1 || d.Err == nil {
				t.Errorf("dropped %+v, want a tombstone for seq %d", d, i)
			}
			ts := ld.Log.Event(int64(i))
			if p, err := ts.Decode(); err != nil || ts.Type != session.TypeAssistantChunk || p.(*session.AssistantChunk).Lost == nil {
				t.Errorf("seq %d: %s, want a tombstone chunk", i, ts.AppendLine(nil))
			}
			if g, w := fmt.Sprint(ld.Log.Messages()), fmt.Sprint(b.log.Messages()); g != w {
				t.Errorf("salvage changed the projection:\n%s\n%s", g, w)
			}
			keepsSalvaged(t, s, ld)
		})
	}
	// Refused on every path, salvaged by cutting the log at the damage.
	for name, tc := range map[string]struct {
		find   string
		damage func(ln string) string
		kind   error
	}{
		"message not UTF-8":    {`"prompt 2"`, func(ln string) string { return strings.Replace(ln, "prompt", "pr\xc3\x28mpt", 1) }, session.ErrCorrupt},
		"message not JSON":     {`"prompt 2"`, func(ln string) string { return ln[:len(ln)-5] + "\n" }, session.ErrCorrupt},
		"turn number":          {`"turn":2,"trigger"`, func(ln string) string { return strings.Replace(ln, `"turn":2`, `"turn":7`, 1) }, session.ErrInvariant},
		"field type":           {`"turn":2,"trigger"`, func(ln string) string { return strings.Replace(ln, `"turn":2`, `"turn":"2"`, 1) }, session.ErrCorrupt},
		"leading zero":         {`"turn":2,"trigger"`, func(ln string) string { return strings.Replace(ln, `"turn":2`, `"turn":02`, 1) }, session.ErrCorrupt},
		"uncited chunk":        {`"prompt 2"`, func(ln string) string { return strings.Replace(ln, "user/message", "assistant/chunk", 1) }, session.ErrInvariant},
		"seq gap (not chunks)": {`"prompt 2"`, func(ln string) string { return "" }, store.ErrSeq},
	} {
		t.Run(name, func(t *testing.T) {
			b, file := crafted(t)
			i := lineOf(t, file, tc.find)
			s := h.New(t)
			h.PutFile(t, s, "cr", replaceLine(file, i, tc.damage(eventLine(file, i))))
			refusedEverywhere(t, s, i)
			_, err := s.Load(ctx, "cr", store.LoadOptions{})
			if !errors.Is(err, tc.kind) {
				t.Errorf("Load: %v, want %v", err, tc.kind)
			}
			ld := salvaged(t, s)
			stored := ld.Log.Len() - int64(len(ld.Repair))
			if stored != int64(i) || len(ld.Dropped) != 1 {
				t.Fatalf("salvage kept %d events (want %d), dropped %v, repair %d", stored, i, ld.Dropped, len(ld.Repair))
			}
			d := ld.Dropped[0]
			lines := int(b.log.Len()) - i
			if tc.kind == store.ErrSeq {
				lines--
			}
			if d.Line != i+2 || d.Lines != lines || d.Seq != int64(i) || d.Tombstones != 0 || d.Err == nil {
				t.Errorf("dropped %+v, want lines %d.. (%d of them) from seq %d", d, i+2, lines, i)
			}
			sameEvents(t, "salvaged prefix", ld.Log.EventRange(0, int64(i)), b.log.EventRange(0, int64(i)))
			keepsSalvaged(t, s, ld)
		})
	}
	t.Run("ignorable unknown type", func(t *testing.T) {
		b, file := crafted(t)
		n := b.log.Len()
		at := b.log.LastTime().Format(session.TimeLayout)
		file = append(file, fmt.Sprintf(`{"seq":%d,"type":"x/note","time":"%s","ignorable":true,"data":{"a":`+"\n", n, at)...)
		file = append(file, fmt.Sprintf(`{"seq":%d,"type":"session/title","time":"%s","data":{"title":"after"}}`+"\n", n+1, at)...)
		s := h.New(t)
		h.PutFile(t, s, "cr", file)
		refusedEverywhere(t, s, int(n))
		ld := salvaged(t, s)
		if ld.Log.Len() != n+2 || len(ld.Dropped) != 1 || ld.Dropped[0].Tombstones != 1 || ld.Log.Title() != "after" {
			t.Fatalf("salvage kept %d events, dropped %v", ld.Log.Len(), ld.Dropped)
		}
		if ev := ld.Log.Event(n); ev.Type != "x/note" || !ev.Ignorable || !bytes.Contains(ev.Data, []byte(`"lost":`)) {
			t.Errorf("tombstone %s", ev.AppendLine(nil))
		}
		keepsSalvaged(t, s, ld)
	})
	t.Run("final line damaged", func(t *testing.T) {
		b, file := crafted(t)
		last := int(b.log.Len()) - 1
		s := h.New(t)
		h.PutFile(t, s, "cr", replaceLine(file, last, `{"seq":`+fmt.Sprint(last)+`,"type":"turn/end","time":"x"}`+"\n"))
		// A complete final line is no torn write: refused, not dropped.
		refusedEverywhere(t, s, last)
		ld := salvaged(t, s)
		if len(ld.Dropped) != 1 || ld.Dropped[0].Line != last+2 || ld.Dropped[0].Lines != 1 || ld.TornBytes != 0 {
			t.Errorf("salvage: dropped %v, torn %d", ld.Dropped, ld.TornBytes)
		}
	})
	t.Run("torn final line", func(t *testing.T) {
		if h.NoTornTails {
			t.Skip("the backend's lines cannot be cut short")
		}
		b, file := crafted(t)
		ln := eventLine(file, int(b.log.Len())-1)
		s := h.New(t)
		h.PutFile(t, s, "cr", append(file, ln[:len(ln)/2]...))
		ld := load(t, s, "cr")
		if ld.TornBytes != len(ln)/2 || ld.TornZeros || ld.Log.Len() != b.log.Len() {
			t.Errorf("torn %d (zeros %v), %d events", ld.TornBytes, ld.TornZeros, ld.Log.Len())
		}
	})
	t.Run("lost page", func(t *testing.T) {
		b, file := crafted(t)
		ln := []byte(eventLine(file, int(b.log.Len())-1))
		copy(ln[8:len(ln)-1], make([]byte, len(ln)-9))
		s := h.New(t)
		h.PutFile(t, s, "cr", append(file, ln...))
		ld := load(t, s, "cr")
		// (A backend of rows counts the line without its newline.)
		if (ld.TornBytes != len(ln) && ld.TornBytes != len(ln)-1) || !ld.TornZeros || ld.Log.Len() != b.log.Len() {
			t.Errorf("lost page: torn %d (zeros %v), %d events", ld.TornBytes, ld.TornZeros, ld.Log.Len())
		}
		w, _ := open(t, s, "cr")
		w.Close()
		if ld := load(t, s, "cr"); ld.TornBytes != 0 {
			t.Errorf("Open left the lost page: torn %d", ld.TornBytes)
		}
	})
	t.Run("bad header", func(t *testing.T) {
		_, file := crafted(t)
		for name, hl := range map[string]string{
			"not JSON":  `{"type":"session","version":1,"id":` + "\n",
			"not UTF-8": `{"type":"session","version":1,"id":"cr","cwd":"/w/` + "\xff" + `","createdAt":"2026-11-30T10:00:00.000Z"}` + "\n",
			"version":   `{"type":"session","version":99,"id":"cr","cwd":"/w","createdAt":"2026-11-30T10:00:00.000Z"}` + "\n",
		} {
			s := h.New(t)
			h.PutFile(t, s, "cr", append([]byte(hl), file[bytes.IndexByte(file, '\n')+1:]...))
			for _, opts := range []store.LoadOptions{{}, {Salvage: true}} {
				_, err := s.Load(ctx, "cr", opts)
				var le *store.LineError
				if !errors.As(err, &le) || le.Line != 1 {
					t.Errorf("%s (salvage %v): %v, want an error at line 1", name, opts.Salvage, err)
				}
			}
		}
	})
}

// refusedEverywhere checks that session cr, whose event line i is
// damaged, is refused by Load and Open with a *LineError at that line, and
// by Fork at any point after it, which leaves no child; a fork before it
// works.
func refusedEverywhere(t *testing.T, s store.Store, i int) {
	t.Helper()
	streamAgrees(t, s, "cr")
	_, err := s.Load(ctx, "cr", store.LoadOptions{})
	var le *store.LineError
	if !errors.As(err, &le) || le.Line != i+2 || le.File == "" {
		t.Errorf("Load: %v, want an error at line %d", err, i+2)
	}
	if w, _, err := s.Open(ctx, "cr"); err == nil || !errors.As(err, &le) || le.Line != i+2 {
		t.Errorf("Open: %v, want an error at line %d", err, i+2)
		if err == nil {
			w.Close()
		}
	}
	ld, err := s.Load(ctx, "cr", store.LoadOptions{Salvage: true})
	if err != nil {
		t.Fatal(err)
	}
	// The last stable point of what was kept, and the first after the
	// damage, if any: the lines up to it include the damaged one.
	before := session.StablePoint(ld.Log, int64(i)-1)
	if _, err := s.Fork(ctx, "cr", before, session.Header{ID: "cr-before"}); err != nil {
		t.Errorf("Fork at %d, before the damage: %v", before, err)
	}
	for at := int64(i); at < ld.Log.Len()-int64(len(ld.Repair)); at++ {
		if session.ForkPoint(ld.Log, at) != nil {
			continue
		}
		if _, err := s.Fork(ctx, "cr", at, session.Header{ID: "cr-after"}); err == nil {
			t.Errorf("Fork at %d copied the damaged line %d", at, i+2)
		}
		if _, err := s.Load(ctx, "cr-after", store.LoadOptions{}); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("refused fork left a child: %v", err)
		}
		break
	}
}

func salvaged(t *testing.T, s store.Store) *store.Loaded {
	t.Helper()
	ld, err := s.Load(ctx, "cr", store.LoadOptions{Salvage: true})
	if err != nil {
		t.Fatalf("salvage: %v", err)
	}
	return checked(t, ld)
}

// keepsSalvaged stores a salvaged log as a new session, as 'rein sessions
// repair' does, and checks that it loads clean, tombstones and all.
func keepsSalvaged(t *testing.T, s store.Store, ld *store.Loaded) {
	t.Helper()
	w, err := s.Create(ctx, header("cr-repaired"))
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Append(ctx, ld.Log.Events(0)); err != nil {
		t.Fatalf("storing the salvaged log: %v", err)
	}
	w.Close()
	got := load(t, s, "cr-repaired")
	if len(got.Repair) != 0 || len(got.Dropped) != 0 {
		t.Errorf("the repaired session needs repair again: %v %v", got.Repair, got.Dropped)
	}
	sameEvents(t, "repaired session", got.Log.Events(0), ld.Log.Events(0))
}

// Fuzz checks a backend's Load, Open, Fork and salvaging Load on mutations
// of a real session file (the fuzzer picks an offset, how many bytes to
// cut there and what to put in their place). Whatever the damage:
//
//   - a salvaging Load succeeds unless the header is damaged, and keeps a
//     log that passes session.Check; it reports a loss exactly when a plain
//     Load refuses (torn tails apart), and then the plain Load names a line;
//   - a plain Load that succeeds keeps the events salvage keeps;
//   - Open succeeds exactly when a plain Load does, and what it writes
//     (truncated tail, repair) loads back with nothing left to repair;
//   - a Fork at the last stable point of what salvage kept succeeds only if
//     the lines it copies read, and its child loads as the parent's events
//     up to that point.
//
// Backends call it from a fuzz target of their own:
//
//	func FuzzStore(f *testing.F) { storetest.Fuzz(f, harness) }
func Fuzz(f *testing.F, h Harness) {
	b := newBuilder(f, header("fz"))
	b.add(contextMsg("c0", "context é", "p"))
	b.turn("prompt 1", "one |two |three")
	b.add(contextMsg("c1", "between", "p"))
	b.turn("prompt 2", "four |five")
	file := b.file()
	f.Add(file, uint32(0), uint8(0), []byte(nil))
	for _, ins := range []string{"x", "\n", "\xff", "0", `"`, "\x00\x00\x00\x00", `,"ignorable":true`, "}"} {
		f.Add(file, uint32(len(file)/2), uint8(1), []byte(ins))
		f.Add(file, uint32(len(file)-3), uint8(0), []byte(ins))
	}
	f.Add(file, uint32(len(file)/3), uint8(200), []byte(nil))
	// Every line damaged in its middle, in its data.
	for off := bytes.IndexByte(file, '\n') + 1; off < len(file); {
		end := off + bytes.IndexByte(file[off:], '\n') + 1
		f.Add(file, uint32(end-6), uint8(1), []byte("\xff"))
		off = end
	}
	f.Fuzz(func(t *testing.T, file []byte, at uint32, cut uint8, ins []byte) {
		if h.PutFile == nil {
			t.Skip("backend has no PutFile")
		}
		if len(file) == 0 || len(file) > 1<<16 || len(ins) > 256 {
			return
		}
		i := int(at) % len(file)
		j := min(i+int(cut), len(file))
		damaged := append(append(append([]byte(nil), file[:i]...), ins...), file[j:]...)
		fuzzOne(t, h, damaged)
	})
}

func fuzzOne(t *testing.T, h Harness, file []byte) {
	s := h.New(t)
	h.PutFile(t, s, "fz", file)
	streamAgrees(t, s, "fz")
	sal, serr := s.Load(ctx, "fz", store.LoadOptions{Salvage: true})
	strict, lerr := s.Load(ctx, "fz", store.LoadOptions{})
	var le *store.LineError
	if serr != nil {
		if !errors.As(serr, &le) || le.Line != 1 {
			t.Fatalf("salvage failed other than on the header: %v", serr)
		}
		if lerr == nil {
			t.Fatalf("plain Load took a file salvage refuses")
		}
		return
	}
	if vs := session.Check(sal.Log.Events(0)); len(vs) > 0 {
		t.Fatalf("salvaged log breaks the invariant: %v", vs)
	}
	if (lerr == nil) != (len(sal.Dropped) == 0) {
		t.Fatalf("plain Load: %v; salvage dropped %v", lerr, sal.Dropped)
	}
	if lerr != nil && !errors.As(lerr, &le) {
		t.Fatalf("plain Load failed without naming a line: %v", lerr)
	}
	if lerr == nil {
		sameEvents(t, "plain and salvaging loads", strict.Log.Events(0), sal.Log.Events(0))
		if strict.TornBytes != sal.TornBytes {
			t.Fatalf("torn %d, salvage torn %d", strict.TornBytes, sal.TornBytes)
		}
	}
	w, _, oerr := s.Open(ctx, "fz")
	if (oerr == nil) != (lerr == nil) {
		t.Fatalf("Open: %v; plain Load: %v", oerr, lerr)
	}
	if oerr == nil {
		w.Close()
		again, err := s.Load(ctx, "fz", store.LoadOptions{})
		if err != nil || len(again.Repair) != 0 || again.TornBytes != 0 {
			t.Fatalf("after Open: %v, repair %v, torn %d", err, again, again.TornBytes)
		}
		sameEvents(t, "after Open", again.Log.Events(0), strict.Log.Events(0))
	}
	stored := sal.Log.Len() - int64(len(sal.Repair))
	at := session.StablePoint(sal.Log, stored-1)
	if _, err := s.Fork(ctx, "fz", at, session.Header{ID: "fz-child"}); err == nil {
		child, err := s.Load(ctx, "fz-child", store.LoadOptions{})
		if err != nil {
			t.Fatalf("Fork at %d made a child that does not load: %v", at, err)
		}
		sameEvents(t, "child", child.Log.Events(0), sal.Log.EventRange(0, at+1))
		for _, d := range sal.Dropped {
			if d.Seq <= at {
				t.Fatalf("Fork at %d copied damage at seq %d (%v)", at, d.Seq, d)
			}
		}
	} else if lerr == nil {
		t.Fatalf("Fork at the last stable point %d of a clean log: %v", at, err)
	}
}
