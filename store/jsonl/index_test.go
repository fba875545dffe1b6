package jsonl

import (
	"bytes"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/reinhq/rein/llm"
	"github.com/reinhq/rein/session"
	"github.com/reinhq/rein/store"
)

func ip(n int) *int { return &n }

func userMsg(id, text string) *session.UserMessage {
	return &session.UserMessage{ID: id, Content: llm.Text(text), Source: session.Source{Kind: session.SourceUser}}
}

// turnEvents appends a complete turn n (with an in-turn compaction when
// comp is set, and a tool call in its first step) to l.
func turnEvents(t testing.TB, l *session.Log, n int, comp bool) []session.Event {
	t.Helper()
	var evs []session.Event
	add := func(p session.Payload) { evs = append(evs, event(t, l, p)) }
	add(&session.TurnStart{Turn: n, Trigger: session.Trigger{Kind: session.TriggerSend}})
	add(userMsg(fmt.Sprintf("u%d", n), strings.Repeat("prompt ", n)))
	if comp {
		add(&session.CompactionStart{Turn: ip(n), ID: fmt.Sprintf("ct%d", n), Reason: session.CompactManual})
		add(&session.CompactionEnd{Turn: ip(n), ID: fmt.Sprintf("ct%d", n), Reason: session.CompactManual})
	}
	add(&session.StepStart{Turn: n, Step: 1})
	add(&session.AssistantChunk{Turn: n, Step: 1, Delta: llm.Delta{Text: "x"}})
	id := fmt.Sprintf("k%d", n)
	add(&session.AssistantMessage{Turn: n, Step: 1, Content: llm.Text("x"), ToolCalls: []llm.ToolCall{{ID: id, Name: "read", Arguments: `{}`}}, Finish: llm.FinishToolCalls})
	add(&session.ToolCall{Turn: n, Step: 1, CallID: id, Name: "read", Arguments: `{}`})
	add(&session.ToolResult{Turn: n, Step: 1, CallID: id, Content: llm.Text(strings.Repeat("r", 300))})
	add(&session.StepEnd{Turn: n, Step: 1})
	add(&session.StepStart{Turn: n, Step: 2})
	add(&session.AssistantMessage{Turn: n, Step: 2, Content: llm.Text("done"), ToolCalls: []llm.ToolCall{}, Finish: llm.FinishStop})
	add(&session.StepEnd{Turn: n, Step: 2})
	add(&session.TurnEnd{Turn: n, Reason: session.Reason{Kind: session.ReasonCompleted}})
	return evs
}

// richSession writes session id: titles, turns (one with an in-turn
// compaction), out-of-turn messages (one of 3 KB), a between-turn
// compaction pair with a message landing inside it, in several Appends.
// It returns the events and the fork index file's content after the first
// half (a stale sidecar for later).
func richSession(t testing.TB, s *Store, id string) ([]session.Event, []byte) {
	t.Helper()
	h := session.Header{ID: id, Title: "header title"}
	w, err := s.Create(bg, h)
	if err != nil {
		t.Fatal(err)
	}
	l := session.NewLog(h)
	var all []session.Event
	appendEvs := func(evs ...session.Event) {
		t.Helper()
		if err := w.Append(bg, evs); err != nil {
			t.Fatal(err)
		}
		all = append(all, evs...)
	}
	appendEvs(event(t, l, &session.SessionTitle{Title: "first"}))
	appendEvs(turnEvents(t, l, 1, false)...)
	appendEvs(event(t, l, ctxMsg(0)), event(t, l, &session.UserMessage{ID: "big", Content: llm.Text(strings.Repeat("b", 3000)), Source: session.Source{Kind: session.SourcePlugin, Name: "p"}}))
	appendEvs(turnEvents(t, l, 2, true)...)
	half, _ := os.ReadFile(s.idxPath(id))
	a := event(t, l, ctxMsg(1))
	appendEvs(a)
	appendEvs(event(t, l, &session.CompactionStart{ID: "c1", Reason: session.CompactManual}),
		event(t, l, ctxMsg(2)),
		event(t, l, &session.UserMessage{ID: "sum", Content: llm.Text("summary"), Source: session.Source{Kind: session.SourceSystem, Name: "compaction"},
			Replaces: &session.Replaces{Start: a.Seq, End: a.Seq, Seqs: []int64{a.Seq}}}),
		event(t, l, &session.CompactionEnd{ID: "c1", Reason: session.CompactManual}))
	appendEvs(event(t, l, &session.SessionTitle{Title: "second"}))
	for n := 3; n <= 5; n++ {
		appendEvs(turnEvents(t, l, n, false)...)
	}
	for i := 3; i < 12; i++ {
		appendEvs(event(t, l, ctxMsg(i)))
	}
	appendEvs(turnEvents(t, l, 6, false)...)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return all, half
}

// lineEnds returns the offset just past each line of b (the header first).
func lineEnds(b []byte) []int64 {
	var ends []int64
	for off := 0; ; {
		i := bytes.IndexByte(b[off:], '\n')
		if i < 0 {
			return ends
		}
		off += i + 1
		ends = append(ends, int64(off))
	}
}

// checkIndexFile compares the fork index sidecar of id with a prefix scan
// of its file: same spans, titles and counts, and marks that name the right
// offsets, each with the checksum of the bytes before it.
func checkIndexFile(t *testing.T, s *Store, id string) { checkIndex(t, s, id, true) }

func checkIndex(t *testing.T, s *Store, id string, marks bool) {
	t.Helper()
	b, err := os.ReadFile(s.Path(id))
	if err != nil {
		t.Fatal(err)
	}
	ends := lineEnds(b)
	x, ok := readIndex(s.idxPath(id), ends[0], int64(len(b)))
	if !ok {
		t.Fatalf("%s: no valid fork index", id)
	}
	f, _ := os.Open(s.Path(id))
	defer f.Close()
	y := newIndex(ends[0])
	if err := y.scan(f, id, int64(len(b)), -1); err != nil {
		t.Fatal(err)
	}
	if x.Size != y.Size || x.Events != y.Events || !reflect.DeepEqual(x.Turns, y.Turns) || !reflect.DeepEqual(x.Comps, y.Comps) ||
		!reflect.DeepEqual(x.Titles, y.Titles) || x.TurnOpen != y.TurnOpen || x.CompOpen != y.CompOpen {
		t.Errorf("%s: sidecar %+v\nscan %+v", id, x, y)
	}
	if marks && !reflect.DeepEqual(marksOf(x), marksOf(y)) {
		t.Errorf("%s: marks %v, a scan's %v", id, marksOf(x), marksOf(y))
	}
	for i := 0; marks && i < len(x.Marks); i += 3 {
		seq, end, sum := x.Marks[i], x.Marks[i+1], x.Marks[i+2]
		if seq+1 >= int64(len(ends)) || ends[seq+1] != end {
			t.Errorf("%s: mark seq %d at %d is wrong", id, seq, end)
		} else if sum >= 0 && uint32(sum) != crc32.Checksum(b[ends[0]:end], castagnoli) {
			t.Errorf("%s: mark seq %d: checksum %08x, want %08x", id, seq, sum, crc32.Checksum(b[ends[0]:end], castagnoli))
		}
	}
	if marks && x.Sum >= 0 && uint32(x.Sum) != crc32.Checksum(b[ends[0]:x.Size], castagnoli) {
		t.Errorf("%s: checksum of the whole %08x is wrong", id, x.Sum)
	}
}

// marksOf returns x's marks without their checksums.
func marksOf(x *index) []int64 {
	var m []int64
	for i := 0; i < len(x.Marks); i += 3 {
		m = append(m, x.Marks[i], x.Marks[i+1])
	}
	return m
}

// vouched reports whether the sidecar of id has a checksum at every mark
// and for the whole.
func vouched(t *testing.T, s *Store, id string) bool {
	t.Helper()
	x, ok := readIndex(s.idxPath(id), lineEnds(mustRead(t, s.Path(id)))[0], 1<<40)
	return ok && x.Sum >= 0 && x.unsummed() == 0
}

// noChild checks that nothing of session id exists, temporary files
// included.
func noChild(t *testing.T, s *Store, id string) {
	t.Helper()
	ents, _ := os.ReadDir(filepath.Join(s.Root(), "sessions"))
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), id+".") || strings.HasPrefix(e.Name(), "."+id+".") {
			t.Errorf("refused fork left %s", e.Name())
		}
	}
}

// forkAll forks parent p at every seq from -2 to past its end and checks
// each outcome against session.ForkPoint on the loaded parent; allowed
// forks must hold exactly the parent's bytes up to line at, load as its
// events 0..at, and carry sidecars that agree with a scan.
//
// With bogus set the parent's sidecar has wrong offsets; a child derived
// from it where Fork did not need them inherits them (the sidecar is
// trusted up to its size), and a fork of that child must still be right.
func forkAll(t *testing.T, s *Store, p string, bogus bool, prepare func()) {
	t.Helper()
	ld, err := s.Load(bg, p, store.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pb, _ := os.ReadFile(s.Path(p))
	ends := lineEnds(pb)
	n := ld.Log.Len()
	for at := int64(-2); at <= n+1; at++ {
		prepare()
		id := fmt.Sprintf("c%d", at+2)
		want := error(nil)
		if at < -1 || at >= n {
			want = errBeyond
		} else if err := session.ForkPoint(ld.Log, at); err != nil {
			want = session.ErrOpenTurn
		}
		_, err := s.Fork(bg, p, at, session.Header{ID: id})
		switch {
		case want == nil && err != nil:
			t.Fatalf("Fork at %d: %v", at, err)
		case want == session.ErrOpenTurn && !errors.Is(err, session.ErrOpenTurn):
			t.Fatalf("Fork at %d: %v, want ErrOpenTurn", at, err)
		case want == errBeyond && (err == nil || errors.Is(err, session.ErrOpenTurn)):
			t.Fatalf("Fork at %d: %v, want a range error", at, err)
		}
		if want != nil {
			noChild(t, s, id)
			continue
		}
		cb, _ := os.ReadFile(s.Path(id))
		cends := lineEnds(cb)
		if !bytes.Equal(cb[cends[0]:], pb[ends[0]:ends[at+1]]) {
			t.Fatalf("Fork at %d: child's events are not the parent's bytes", at)
		}
		cl, err := s.Load(bg, id, store.LoadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if cl.Log.Len() != at+1 || len(cl.Repair) != 0 || cl.Log.Header().ForkSeq != at || cl.Log.Header().Parent != p {
			t.Fatalf("Fork at %d: child has %d events, repair %v, header %+v", at, cl.Log.Len(), cl.Repair, cl.Log.Header())
		}
		checkIndex(t, s, id, !bogus)
		if bogus {
			if _, err := s.Fork(bg, id, at, session.Header{ID: "g" + id}); err != nil {
				t.Fatalf("Fork of the child at %d: %v", at, err)
			}
			gb, _ := os.ReadFile(s.Path("g" + id))
			if !bytes.Equal(gb[lineEnds(gb)[0]:], cb[cends[0]:]) {
				t.Errorf("Fork of the child at %d: not the child's bytes", at)
			}
			s.Delete(bg, "g"+id)
		}
		listed, _ := s.info(id)
		os.Remove(s.metaPath(id))
		scanned, _ := s.info(id)
		// (The sidecar's time is that of event at, as before; a scan
		// takes the later of it and the child's creation.)
		if at >= 0 && !listed.UpdatedAt.Equal(ld.Log.Event(at).Time) {
			t.Errorf("Fork at %d: child updated at %v, want %v", at, listed.UpdatedAt, ld.Log.Event(at).Time)
		}
		listed.UpdatedAt = scanned.UpdatedAt
		if listed != scanned || listed.Events != at+1 {
			t.Errorf("Fork at %d: sidecar lists %+v, a scan %+v", at, listed, scanned)
		}
		if err := s.Delete(bg, id); err != nil {
			t.Fatal(err)
		}
	}
}

// TestForkIndex: Fork decides like session.ForkPoint and copies exactly
// the parent's lines, with the writer's sidecar, without one, with a stale
// one, with one that does not match the file and with one of another
// version, for several mark spacings and scan buffer sizes.
func TestForkIndex(t *testing.T) {
	defer func(c, b int) { scanChunk, copyBuf = c, b }(scanChunk, copyBuf)
	for _, c := range []struct{ chunk, copy int }{{16, 7}, {1 << 20, 1 << 20}} {
		scanChunk, copyBuf = c.chunk, c.copy
		s := newStore(t)
		_, half := richSession(t, s, "p")
		checkIndexFile(t, s, "p")
		good, _ := os.ReadFile(s.idxPath("p"))
		hdr := lineEnds(mustRead(t, s.Path("p")))[0]
		bogus, _, _, ok := parseIndex(good, hdr, 1<<40)
		if !ok {
			t.Fatal("the writer's sidecar does not parse")
		}
		for i := 1; i < len(bogus.Marks); i += 3 {
			bogus.Marks[i]-- // every mark one byte short
		}
		bb := bogus.snapshot()
		r := bogus.record(true)
		r.V = 1
		ob := appendRecord(nil, r)
		for name, content := range map[string][]byte{"sidecar": good, "none": nil, "stale": half, "bogus": bb, "version": ob} {
			t.Run(fmt.Sprintf("chunk%d/copy%d/%s", c.chunk, c.copy, name), func(t *testing.T) {
				forkAll(t, s, "p", name == "bogus", func() {
					if content == nil {
						os.Remove(s.idxPath("p"))
					} else {
						os.WriteFile(s.idxPath("p"), content, 0o600)
					}
				})
			})
		}
	}
}

// TestForkValidatesWhatItCopies: Fork validates every line it copies, as
// a load of the parent would, with or without the sidecar: damage before
// the fork point refuses the fork (naming the line) and leaves no child;
// damage after it is neither copied nor read.
func TestForkValidatesWhatItCopies(t *testing.T) {
	s := newStore(t)
	evs, _ := richSession(t, s, "p")
	clean, _ := os.ReadFile(s.Path("p"))
	ends := lineEnds(clean)
	at := int64(-1)
	for _, ev := range evs {
		if ev.Type == session.TypeTurnEnd && ev.Seq < int64(len(evs))-2 {
			at = ev.Seq
		}
	}
	for _, side := range []bool{true, false} {
		for name, damage := range map[string]func(b []byte){
			"envelope": func(b []byte) { copy(b[ends[2]:], `{"seq":x`) },
			"data":     func(b []byte) { i := bytes.Index(b[ends[2]:], []byte(`"data":{`)); b[int(ends[2])+i+8] = '!' },
			"utf8":     func(b []byte) { i := bytes.Index(b[ends[2]:], []byte(`"type":"`)); b[int(ends[2])+i+9] = 0xff },
		} {
			b := bytes.Clone(clean)
			damage(b)
			os.WriteFile(s.Path("p"), b, 0o600)
			if !side {
				os.Remove(s.idxPath("p"))
			}
			_, err := s.Fork(bg, "p", at, session.Header{ID: "d"})
			var lerr *store.LineError
			if !errors.As(err, &lerr) || lerr.Line != 4 {
				t.Errorf("%s (sidecar %v): Fork past a damaged line: %v", name, side, err)
			}
			noChild(t, s, "d")
		}
	}
	// Damage after the fork point.
	b := bytes.Clone(clean)
	copy(b[ends[len(ends)-2]:], `{"seq":x`)
	os.WriteFile(s.Path("p"), b, 0o600)
	if _, err := s.Fork(bg, "p", at, session.Header{ID: "c"}); err != nil {
		t.Errorf("Fork before a damaged line: %v", err)
	}
}

// TestForkTornTail: a parent ending in a torn line (without '\n', or a
// final line of zeros a crash left) forks up to its last good event; the
// torn bytes are never copied and a fork at the torn seq is refused. A
// complete final line that does not parse and is no torn write does not
// stop a fork before it, but Open refuses the parent.
func TestForkTornTail(t *testing.T) {
	for _, torn := range []string{`{"seq":%d,"type":"turn/start","ti`, "{\"seq\":%d,\"type\":\"turn/start\",\"time\":\"\x00\x00\x00\x00\",\"data\":{}}\n",
		`{"seq":%d,"type":"turn/start","time":"x","data":{}}` + "\n"} {
		damaged := strings.HasSuffix(torn, "}}\n") && !strings.Contains(torn, "\x00")
		for _, side := range []bool{true, false} {
			s := newStore(t)
			evs, _ := richSession(t, s, "p")
			last := int64(len(evs)) - 1
			f, _ := os.OpenFile(s.Path("p"), os.O_WRONLY|os.O_APPEND, 0)
			fmt.Fprintf(f, torn, last+1)
			f.Close()
			if !side {
				os.Remove(s.idxPath("p"))
			}
			if _, err := s.Fork(bg, "p", last+1, session.Header{ID: "t"}); err == nil || errors.Is(err, session.ErrOpenTurn) {
				t.Errorf("Fork at the torn seq: %v, want a range error", err)
			}
			noChild(t, s, "t")
			if _, err := s.Fork(bg, "p", last, session.Header{ID: "c"}); err != nil {
				t.Fatalf("Fork at the last good event: %v", err)
			}
			cb, _ := os.ReadFile(s.Path("c"))
			if bytes.Contains(cb, []byte(fmt.Sprintf(`"seq":%d,`, last+1))) {
				t.Errorf("child holds the torn line")
			}
			ld, err := s.Load(bg, "c", store.LoadOptions{})
			if err != nil || ld.Log.Len() != last+1 || ld.TornBytes != 0 {
				t.Errorf("child: %v, torn %d", err, ld.TornBytes)
			}
			w, _, err := s.Open(bg, "p")
			if damaged {
				var lerr *store.LineError
				if !errors.As(err, &lerr) || !errors.Is(err, session.ErrCorrupt) || lerr.Line != int(last)+3 {
					t.Errorf("Open of a parent whose final line is damaged: %v", err)
				}
				continue
			}
			// Open truncates the tail; the writer's index still matches.
			if err != nil {
				t.Fatal(err)
			}
			w.Close()
			checkIndexFile(t, s, "p")
		}
	}
}

// TestForkLiveParent: a parent whose writer is in the middle of a turn
// (the sidecar written at the last turn/end, the open turn's lines after
// it) forks at that turn/end and at an out-of-turn message, and refuses
// inside the open turn and inside an open between-turn compaction.
func TestForkLiveParent(t *testing.T) {
	s := newStore(t)
	richSession(t, s, "p")
	w, ld, err := s.Open(bg, "p")
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	l := ld.Log
	ctxAt := event(t, l, ctxMsg(100))
	compAt := event(t, l, &session.CompactionStart{ID: "c9", Reason: session.CompactManual})
	w.Append(bg, []session.Event{ctxAt, compAt})
	if _, err := s.Fork(bg, "p", ctxAt.Seq, session.Header{ID: "a"}); err != nil {
		t.Errorf("Fork at an out-of-turn message: %v", err)
	}
	if _, err := s.Fork(bg, "p", compAt.Seq, session.Header{ID: "b"}); !errors.Is(err, session.ErrOpenTurn) {
		t.Errorf("Fork at an open between-turn compaction/start: %v", err)
	}
	end := event(t, l, &session.CompactionEnd{ID: "c9", Reason: session.CompactManual})
	evs := append([]session.Event{end}, turnEvents(t, l, 7, false)...)
	w.Append(bg, evs)
	var open []session.Event
	for _, p := range []session.Payload{&session.TurnStart{Turn: 8, Trigger: session.Trigger{Kind: session.TriggerSend}}, userMsg("u8", "x"), &session.StepStart{Turn: 8, Step: 1}} {
		open = append(open, event(t, l, p))
	}
	w.Append(bg, open)
	for _, ev := range open {
		if _, err := s.Fork(bg, "p", ev.Seq, session.Header{ID: "o"}); !errors.Is(err, session.ErrOpenTurn) {
			t.Errorf("Fork in the open turn at %d: %v", ev.Seq, err)
		}
		noChild(t, s, "o")
	}
	last := evs[len(evs)-1].Seq
	if _, err := s.Fork(bg, "p", last, session.Header{ID: "e"}); err != nil {
		t.Fatalf("Fork at the last turn/end: %v", err)
	}
	if ld, err := s.Load(bg, "e", store.LoadOptions{}); err != nil || ld.Log.Len() != last+1 {
		t.Errorf("child: %v", err)
	}
	if _, err := s.Fork(bg, "p", end.Seq, session.Header{ID: "f"}); err != nil {
		t.Errorf("Fork at a between-turn compaction/end: %v", err)
	}
}

// TestWriterIndex: the writer's sidecar matches a scan of the file after
// Create, appends in any batching, a crash and Open's repair.
func TestWriterIndex(t *testing.T) {
	s := newStore(t)
	richSession(t, s, "p")
	checkIndexFile(t, s, "p")
	// A crash inside a turn: the sidecar is behind; Open catches up, and
	// its repair closes the turn.
	w, ld, err := s.Open(bg, "p")
	if err != nil {
		t.Fatal(err)
	}
	l := ld.Log
	var evs []session.Event
	for _, p := range []session.Payload{&session.TurnStart{Turn: 7, Trigger: session.Trigger{Kind: session.TriggerSend}}, userMsg("u7", "x"), &session.StepStart{Turn: 7, Step: 1}} {
		evs = append(evs, event(t, l, p))
	}
	w.Append(bg, evs)
	w.(*writer).abandon()
	w, ld, err = s.Open(bg, "p")
	if err != nil || len(ld.Repair) == 0 {
		t.Fatalf("Open after crash: %v, repair %v", err, ld.Repair)
	}
	w.Close()
	checkIndexFile(t, s, "p")
	if !vouched(t, s, "p") {
		t.Errorf("the index lacks checksums after Open's repair")
	}
	x, _ := readIndex(s.idxPath("p"), lineEnds(mustRead(t, s.Path("p")))[0], 1<<40)
	if x.Events != ld.Log.Len() || x.TurnOpen {
		t.Errorf("index after repair: %d events, turn open %v; log has %d", x.Events, x.TurnOpen, ld.Log.Len())
	}
	// Without a sidecar, Open rebuilds it.
	os.Remove(s.idxPath("p"))
	w, _, err = s.Open(bg, "p")
	if err != nil {
		t.Fatal(err)
	}
	w.Close()
	checkIndexFile(t, s, "p")
	// Delete removes it.
	s.Delete(bg, "p")
	if _, err := os.Stat(s.idxPath("p")); err == nil {
		t.Errorf("Delete left the fork index")
	}
}

func mustRead(t testing.TB, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestCopyRangeShrunk: a parent that is shorter than the range to copy (it
// shrank meanwhile) fails the copy instead of publishing a short child.
func TestCopyRangeShrunk(t *testing.T) {
	defer func(b int) { copyBuf = b }(copyBuf)
	dir := t.TempDir()
	src, _ := os.Create(filepath.Join(dir, "src"))
	src.WriteString("header\n0123456789\n")
	for _, buf := range []int{3, 1 << 20} {
		copyBuf = buf
		dst, _ := os.Create(filepath.Join(dir, "dst"))
		if err := copyRange(dst, []byte("H\n"), src, 7, 18, nil); err != nil {
			t.Fatal(err)
		}
		if b, _ := os.ReadFile(dst.Name()); string(b) != "H\n0123456789\n" {
			t.Errorf("buffer %d: copied %q", buf, b)
		}
		if err := copyRange(dst, nil, src, 7, 30, nil); !errors.Is(err, errBeyond) {
			t.Errorf("buffer %d: copy past the end: %v", buf, err)
		}
		dst.Close()
	}
}

// TestSidecarAppends: the writer appends a record per turn to the fork
// index sidecar instead of rewriting it: the file keeps its identity and
// every earlier content is a prefix of the next, until the appended
// records outgrow the snapshot and a new snapshot replaces the file. Its
// size stays within a few times the snapshot's.
func TestSidecarAppends(t *testing.T) {
	s := newStore(t)
	w, err := s.Create(bg, session.Header{ID: "p"})
	if err != nil {
		t.Fatal(err)
	}
	l := session.NewLog(w.Header())
	prev, _ := os.ReadFile(s.idxPath("p"))
	fi, _ := os.Stat(s.idxPath("p"))
	appends, snapshots := 0, 0
	for n := 1; n <= 60; n++ {
		if err := w.Append(bg, turnEvents(t, l, n, n%7 == 0)); err != nil {
			t.Fatal(err)
		}
		cur, _ := os.ReadFile(s.idxPath("p"))
		cfi, _ := os.Stat(s.idxPath("p"))
		switch {
		case os.SameFile(fi, cfi) && bytes.HasPrefix(cur, prev) && len(cur) > len(prev):
			appends++
		case !os.SameFile(fi, cfi):
			snapshots++
			_, _, snap, ok := parseIndex(cur, lineEnds(mustRead(t, s.Path("p")))[0], 1<<40)
			if !ok || snap != len(cur) {
				t.Fatalf("turn %d: a new sidecar that is not one snapshot (%d of %d bytes)", n, snap, len(cur))
			}
		default:
			t.Fatalf("turn %d: the sidecar was rewritten in place", n)
		}
		prev, fi = cur, cfi
		checkIndexFile(t, s, "p")
	}
	if appends < 40 || snapshots == 0 || snapshots > 10 {
		t.Errorf("%d appends and %d snapshots in 60 turns", appends, snapshots)
	}
	w.Close()
}

// TestSidecarTornTail: a sidecar cut inside a record, with a record whose
// checksum fails, or with garbage after its last record is read up to its
// last good record (Fork scans the rest); the next writer cuts it back
// there and appends, so after it the sidecar agrees with the file.
func TestSidecarTornTail(t *testing.T) {
	for name, damage := range map[string]func(good []byte, ends []int64) ([]byte, int){
		"cut": func(good []byte, ends []int64) ([]byte, int) { return good[:ends[1]+5], 2 },
		"crc": func(good []byte, ends []int64) ([]byte, int) {
			b := bytes.Clone(good)
			b[ends[1]+12] ^= 1 // inside the third record's JSON
			return b, 2
		},
		"garbage": func(good []byte, ends []int64) ([]byte, int) {
			return append(bytes.Clone(good), "\x00\x00zz"...), len(ends)
		},
		"newline": func(good []byte, ends []int64) ([]byte, int) {
			return append(bytes.Clone(good), "0000 {}\n"...), len(ends)
		},
	} {
		t.Run(name, func(t *testing.T) {
			s := newStore(t)
			richSession(t, s, "p")
			good := mustRead(t, s.idxPath("p"))
			ends := lineEnds(good)
			if len(ends) < 3 {
				t.Fatalf("the sidecar has %d records", len(ends))
			}
			content, records := damage(good, ends)
			os.WriteFile(s.idxPath("p"), content, 0o600)
			hdr := lineEnds(mustRead(t, s.Path("p")))[0]
			n := int(ends[records-1])
			if _, got, _, ok := parseIndex(content, hdr, 1<<40); !ok || got != n {
				t.Fatalf("read %d bytes (ok %v), want %d records (%d bytes)", got, ok, records, n)
			}
			if _, err := s.Fork(bg, "p", -1, session.Header{ID: "c"}); err != nil {
				t.Fatal(err)
			}
			s.Delete(bg, "c")
			w, ld, err := s.Open(bg, "p")
			if err != nil {
				t.Fatal(err)
			}
			l := ld.Log
			turn, _ := l.Turn()
			if err := w.Append(bg, turnEvents(t, l, turn+1, false)); err != nil {
				t.Fatal(err)
			}
			w.Close()
			checkIndexFile(t, s, "p")
			got := mustRead(t, s.idxPath("p"))
			if _, all, _, _ := parseIndex(got, hdr, 1<<40); !bytes.HasPrefix(got, good[:n]) || all != len(got) {
				t.Errorf("the writer did not cut the sidecar back to its good records and append (%d of %d bytes read):\n%s", all, len(got), got)
			}
		})
	}
}
