package jsonl

import (
	"bytes"
	"errors"
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"os"
	"slices"
	"sort"
	"sync"
	"testing"

	"github.com/reinhq/rein/llm"
	"github.com/reinhq/rein/session"
	"github.com/reinhq/rein/store"
)

// forkPoints returns the seqs of the loaded session id where a fork is
// allowed, -1 included.
func forkPoints(t testing.TB, s *Store, id string) []int64 {
	t.Helper()
	ld, err := s.Load(bg, id, store.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ats := []int64{-1}
	for at := range ld.Log.Len() {
		if session.ForkPoint(ld.Log, at) == nil {
			ats = append(ats, at)
		}
	}
	return ats
}

// created creates session id and returns its writer and a log to make its
// events with.
func created(t *testing.T, s *Store, id string) (store.Writer, *session.Log) {
	t.Helper()
	h := session.Header{ID: id}
	w, err := s.Create(bg, h)
	if err != nil {
		t.Fatal(err)
	}
	return w, session.NewLog(h)
}

// reopen opens session id for writing and closes it again, as a resume
// that appends nothing does.
func reopen(t *testing.T, s *Store, id string) *store.Loaded {
	t.Helper()
	w, ld, err := s.Open(bg, id)
	if err != nil {
		t.Fatal(err)
	}
	w.Close()
	return ld
}

// forkVia forks p at at as child id and reports which path Fork took:
// true when the checksum vouched for the copy.
func forkVia(t *testing.T, s *Store, p string, at int64, id string) (bool, error) {
	t.Helper()
	before := s.ForkStats()
	_, err := s.Fork(bg, p, at, session.Header{ID: id})
	after := s.ForkStats()
	if err != nil {
		if after != before {
			t.Errorf("a refused fork was counted: %+v, then %+v", before, after)
		}
		return false, err
	}
	switch {
	case after.Checksummed == before.Checksummed+1 && after.Validated == before.Validated:
		return true, nil
	case after.Validated == before.Validated+1 && after.Checksummed == before.Checksummed:
		return false, nil
	}
	t.Fatalf("fork at %d: stats %+v, then %+v", at, before, after)
	return false, nil
}

// TestForkChecksummed: a parent whose every line a rein writer wrote (so
// validated) forks at every allowed point without validating again: the
// checksum of the copied bytes is the one its sidecar holds. The child's
// sidecar inherits the checksums, so a fork of the child is checksummed
// too. So is a fork of a parent whose sidecar Open rebuilt (from the bytes
// it loaded and validated), or whose sidecar was of the previous version.
func TestForkChecksummed(t *testing.T) {
	s := newStore(t)
	richSession(t, s, "p")
	v2 := bytes.Replace(mustRead(t, s.idxPath("p")), []byte(`{"v":3,`), []byte(`{"v":2,`), 1)
	for _, how := range []string{"writer", "rebuilt", "version 2"} {
		switch how {
		case "rebuilt":
			os.Remove(s.idxPath("p"))
		case "version 2":
			os.WriteFile(s.idxPath("p"), v2, 0o600)
		}
		if how != "writer" {
			if by, _ := forkVia(t, s, "p", -1, "e"); !by {
				t.Errorf("%s: an empty fork was validated", how)
			}
			s.Delete(bg, "e")
			if by, err := forkVia(t, s, "p", forkPoints(t, s, "p")[3], "x"); err != nil || by {
				t.Errorf("%s: before Open, a fork took the checksum (%v, %v)", how, by, err)
			}
			s.Delete(bg, "x")
			reopen(t, s, "p")
		}
		checkIndexFile(t, s, "p")
		if !vouched(t, s, "p") {
			t.Fatalf("%s: the sidecar lacks checksums", how)
		}
		ats := forkPoints(t, s, "p")
		if len(ats) < 20 {
			t.Fatalf("only %d fork points", len(ats))
		}
		for _, at := range ats {
			by, err := forkVia(t, s, "p", at, "c")
			if err != nil || !by {
				t.Fatalf("%s: fork at %d: %v, checksummed %v", how, at, err, by)
			}
			checkIndexFile(t, s, "c")
			if !vouched(t, s, "c") {
				t.Errorf("%s: fork at %d: the child's sidecar lacks checksums", how, at)
			}
			if by, err := forkVia(t, s, "c", at, "g"); err != nil || !by {
				t.Errorf("%s: fork of the child at %d: %v, checksummed %v", how, at, err, by)
			}
			if ld, err := s.Load(bg, "g", store.LoadOptions{}); err != nil || ld.Log.Len() != at+1 {
				t.Errorf("%s: grandchild at %d: %v", how, at, err)
			}
			s.Delete(bg, "g")
			s.Delete(bg, "c")
		}
	}
}

// TestForkTamperedParent: bytes changed in place since the writer vouched
// for them — a byte flipped, a line rewritten to the same length, the
// whole file rewritten to the same size — are never taken on the
// checksum's word. Valid changes fork by validation (and the child's
// sidecar vouches for nothing until the child is opened); invalid ones are
// refused, naming the line, and leave no child.
func TestForkTamperedParent(t *testing.T) {
	for name, tc := range map[string]struct {
		tamper func(b []byte, ends []int64) []byte
		line   int // the damaged line; 0: a valid change
	}{
		"title edited": {func(b []byte, ends []int64) []byte {
			return bytes.Replace(b, []byte(`"title":"first"`), []byte(`"title":"fir5t"`), 1)
		}, 0},
		"every prompt edited": {func(b []byte, ends []int64) []byte {
			return bytes.ReplaceAll(b, []byte("prompt"), []byte("prumpt"))
		}, 0},
		"byte flipped to non-UTF-8": {func(b []byte, ends []int64) []byte {
			b[bytes.Index(b, []byte(`"title":"first"`))+10] = 0xff
			return b
		}, 2},
		"byte flipped in an envelope": {func(b []byte, ends []int64) []byte {
			b[ends[2]+1] = '\'' // {"seq" → {'seq"
			return b
		}, 4},
		"chunk names another turn": {func(b []byte, ends []int64) []byte {
			i := bytes.Index(b, []byte(`"data":{"turn":2,"step":1,"delta"`))
			b[i+15] = '3'
			return b
		}, -1},
		"line rewritten, same length": {func(b []byte, ends []int64) []byte {
			ln := b[ends[2]:ends[3]]
			copy(ln, bytes.Repeat([]byte("x"), len(ln)-1))
			return b
		}, 4},
		"two lines of a turn rewritten, offsets kept": {func(b []byte, ends []int64) []byte {
			// The prompt one byte shorter, the tool result one longer
			// (with an escape that is not one).
			i := bytes.Index(b, []byte(`"prompt prompt prompt "}`))
			j := i + bytes.Index(b[i:], []byte(`"text":"rrrr`)) + 8
			out := append(bytes.Clone(b[:i]), `"prompt prompt prompt"}`...)
			out = append(append(out, b[i+24:j]...), `\q`...)
			return append(out, b[j+1:]...)
		}, 43},
		"file rewritten, same size": {func(b []byte, ends []int64) []byte {
			return bytes.ReplaceAll(b, []byte(`"turn":2,`), []byte(`"turn":3,`))
		}, -1},
	} {
		t.Run(name, func(t *testing.T) {
			s := newStore(t)
			evs, _ := richSession(t, s, "p")
			clean := mustRead(t, s.Path("p"))
			b := tc.tamper(bytes.Clone(clean), lineEnds(clean))
			if len(b) != len(clean) || bytes.Equal(b, clean) {
				t.Fatalf("the tampering changed the size or nothing")
			}
			// In place, as an editor that writes through would.
			f, err := os.OpenFile(s.Path("p"), os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			f.WriteAt(b, 0)
			f.Close()
			at := evs[len(evs)-1].Seq // the last turn/end
			if !vouched(t, s, "p") {
				t.Fatal("the writer's sidecar lacks checksums")
			}
			by, err := forkVia(t, s, "p", at, "c")
			if tc.line != 0 {
				var lerr *store.LineError
				if !errors.As(err, &lerr) || (tc.line > 0 && lerr.Line != tc.line) {
					t.Fatalf("fork past the damage: %v, want an error at line %d", err, tc.line)
				}
				noChild(t, s, "c")
				return
			}
			if err != nil || by {
				t.Fatalf("fork: %v, checksummed %v", err, by)
			}
			cb := mustRead(t, s.Path("c"))
			if !bytes.Equal(cb[lineEnds(cb)[0]:], b[lineEnds(b)[0]:]) {
				t.Errorf("the child is not the parent's bytes")
			}
			if vouched(t, s, "c") {
				t.Errorf("a validated fork's child has checksums it did not compute")
			}
			// Open rebuilds the parent's index from what it holds now.
			reopen(t, s, "p")
			checkIndexFile(t, s, "p")
			if by, err := forkVia(t, s, "p", at, "d"); err != nil || !by {
				t.Errorf("after Open: %v, checksummed %v", err, by)
			}
			// And the child's, from its own bytes.
			reopen(t, s, "c")
			checkIndexFile(t, s, "c")
			if !vouched(t, s, "c") {
				t.Errorf("Open did not vouch for the child's bytes")
			}
		})
	}
}

// TestWriterVouchesOnlyForValid: a writer takes a batch that does not
// validate (as the store's contract has it, Append checks only that each
// event is one line), but from there on records no checksum: a fork before
// it is checksummed, a fork after it validates and refuses the bad line.
func TestWriterVouchesOnlyForValid(t *testing.T) {
	s := newStore(t)
	w, l := created(t, s, "p")
	if err := w.Append(bg, turnEvents(t, l, 1, false)); err != nil {
		t.Fatal(err)
	}
	before := l.Len() - 1
	bad := event(t, l, ctxMsg(1))
	bad.Data = []byte(`{"id":7,"content":[],"source":{"kind":"plugin"}}`) // id not a string
	if err := w.Append(bg, []session.Event{bad}); err != nil {
		t.Fatalf("Append of an invalid event: %v", err)
	}
	if err := w.Append(bg, turnEvents(t, l, 2, false)); err != nil {
		t.Fatal(err)
	}
	w.Close()
	x, _ := readIndex(s.idxPath("p"), lineEnds(mustRead(t, s.Path("p")))[0], 1<<40)
	if x.Sum != -1 || x.Marks[len(x.Marks)-1] != -1 {
		t.Errorf("the writer vouched past a line that does not validate: %v, sum %d", x.Marks, x.Sum)
	}
	if by, err := forkVia(t, s, "p", before, "a"); err != nil || !by {
		t.Errorf("fork before the bad line: %v, checksummed %v", err, by)
	}
	var lerr *store.LineError
	if _, err := forkVia(t, s, "p", l.Len()-1, "b"); !errors.As(err, &lerr) || lerr.Line != int(bad.Seq)+2 {
		t.Errorf("fork after the bad line: %v", err)
	}
	noChild(t, s, "b")
}

// TestSalvagedCopyVouched: a salvaged log stored as a new session, as
// 'rein sessions repair' does (tombstones included), is validated by its
// writer like any other, so its forks are checksummed.
func TestSalvagedCopyVouched(t *testing.T) {
	s := newStore(t)
	w, l := created(t, s, "p")
	evs := []session.Event{event(t, l, ctxMsg(0)),
		event(t, l, &session.TurnStart{Turn: 1, Trigger: session.Trigger{Kind: session.TriggerSend}}),
		event(t, l, userMsg("u1", "prompt")), event(t, l, &session.StepStart{Turn: 1, Step: 1})}
	c1 := event(t, l, &session.AssistantChunk{Turn: 1, Step: 1, Delta: llm.Delta{Text: "one "}})
	c2 := event(t, l, &session.AssistantChunk{Turn: 1, Step: 1, Delta: llm.Delta{Text: "two"}})
	evs = append(evs, c1, c2,
		event(t, l, &session.AssistantMessage{Turn: 1, Step: 1, Content: llm.Text("one two"), ToolCalls: []llm.ToolCall{}, Finish: llm.FinishStop, ChunkSeqs: []int64{c1.Seq, c2.Seq}}),
		event(t, l, &session.StepEnd{Turn: 1, Step: 1}),
		event(t, l, &session.TurnEnd{Turn: 1, Reason: session.Reason{Kind: session.ReasonCompleted}}))
	if err := w.Append(bg, evs); err != nil {
		t.Fatal(err)
	}
	w.Close()
	b := mustRead(t, s.Path("p"))
	i := bytes.Index(b, []byte(`"one "`))
	b[i+2] = 0xff // a chunk the message cites, not UTF-8: a tombstone in the copy
	os.WriteFile(s.Path("p"), b, 0o600)
	ld, err := s.Load(bg, "p", store.LoadOptions{Salvage: true})
	if err != nil || len(ld.Dropped) != 1 || ld.Dropped[0].Tombstones != 1 {
		t.Fatalf("salvage: %v, dropped %v", err, ld.Dropped)
	}
	w, _ = created(t, s, "r")
	if err := w.Append(bg, ld.Log.Events(0)); err != nil {
		t.Fatal(err)
	}
	w.Close()
	if !vouched(t, s, "r") {
		t.Fatal("the writer did not vouch for the salvaged events")
	}
	if by, err := forkVia(t, s, "r", ld.Log.Len()-1, "c"); err != nil || !by {
		t.Errorf("fork of the repaired copy: %v, checksummed %v", err, by)
	}
}

// TestOpenTrustsNoSizeAlone: a sidecar is trusted by Open only when the
// checksums it holds are those of the bytes Open loaded; a session file
// that another program rewrote to the same size (here: a title changed)
// gets its index rebuilt, where a check by size would keep the old title.
func TestOpenTrustsNoSizeAlone(t *testing.T) {
	s := newStore(t)
	richSession(t, s, "p")
	b := mustRead(t, s.Path("p"))
	b = bytes.Replace(b, []byte(`"title":"second"`), []byte(`"title":"sec0nd"`), 1)
	os.WriteFile(s.Path("p"), b, 0o600)
	ld := reopen(t, s, "p")
	checkIndexFile(t, s, "p")
	x, _ := readIndex(s.idxPath("p"), lineEnds(b)[0], 1<<40)
	if tl, _ := x.title(ld.Log.Len()); tl != "sec0nd" {
		t.Errorf("title %q after Open", tl)
	}
}

// TestForkWhileAppending: forks at the latest stable point while the
// parent's writer appends turns: every child loads, and forks at points
// the sidecar covers are checksummed.
func TestForkWhileAppending(t *testing.T) {
	s := newStore(t)
	w, l := created(t, s, "p")
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for n := 1; n <= 40; n++ {
			evs := turnEvents(t, l, n, n%5 == 0)
			if err := w.Append(bg, evs[:len(evs)/2]); err != nil {
				t.Error(err)
				return
			}
			if err := w.Append(bg, evs[len(evs)/2:]); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	checksummed := 0
	for i := 0; i < 40; i++ {
		fp, err := s.LastForkPoint(bg, "p")
		if err != nil {
			t.Fatal(err)
		}
		id := fmt.Sprintf("c%d", i)
		by, err := forkVia(t, s, "p", fp.At, id)
		if err != nil {
			t.Fatalf("fork at %d: %v", fp.At, err)
		}
		if by {
			checksummed++
		}
		if ld, err := s.Load(bg, id, store.LoadOptions{}); err != nil || ld.Log.Len() != fp.At+1 || len(ld.Repair) != 0 {
			t.Fatalf("child at %d: %v", fp.At, err)
		}
	}
	wg.Wait()
	w.Close()
	if checksummed == 0 {
		t.Errorf("no fork of a live parent was checksummed")
	}
}

// FuzzForkTampered changes a session file that a writer wrote (cut bytes
// at an offset, put others in their place), leaving the writer's sidecar
// as it is, and forks at the first allowed point whose copy holds the
// change and at the last: a fork either is refused or makes a child that
// loads, every line valid, and holds the parent's bytes. Where the change
// keeps the sidecar's offsets right (same length), only the checksum tells
// the changed bytes from the ones the writer validated.
func FuzzForkTampered(f *testing.F) {
	// A session a writer wrote, its sidecar, and its allowed fork points
	// with the offset where each ends.
	s := newStore(f)
	richSession(f, s, "p")
	file, idx := mustRead(f, s.Path("p")), mustRead(f, s.idxPath("p"))
	var points, ends []int64
	for _, at := range forkPoints(f, s, "p")[1:] {
		points, ends = append(points, at), append(ends, lineEnds(file)[at+1])
	}
	n := uint32(len(file))
	f.Add(uint32(0), uint8(0), []byte(nil))
	for _, off := range []uint32{n / 5, n / 3, n / 2, n - 40} {
		f.Add(off, uint8(1), []byte("\xff"))
		f.Add(off, uint8(1), []byte("x"))
		f.Add(off, uint8(1), []byte(`"`))
		f.Add(off, uint8(2), []byte(`\q`))
		f.Add(off, uint8(0), []byte(","))
	}
	f.Fuzz(func(t *testing.T, at uint32, cut uint8, ins []byte) {
		if len(ins) > 64 {
			return
		}
		i := int(at) % len(file)
		j := min(i+int(cut), len(file))
		damaged := append(append(append([]byte(nil), file[:i]...), ins...), file[j:]...)
		s := newStore(t)
		os.WriteFile(s.Path("p"), damaged, 0o600)
		os.WriteFile(s.idxPath("p"), idx, 0o600)
		k := sort.Search(len(ends), func(k int) bool { return ends[k] > int64(i) })
		for _, k := range []int{k, len(points) - 1} {
			if _, err := os.Stat(s.Path(fmt.Sprintf("c%d", k))); k >= len(points) || err == nil {
				continue // past the end, or done
			}
			at := points[k]
			id := fmt.Sprintf("c%d", k)
			if _, err := s.Fork(bg, "p", at, session.Header{ID: id}); err != nil {
				noChild(t, s, id)
				continue
			}
			ld, err := s.Load(bg, id, store.LoadOptions{})
			if err != nil || ld.Log.Len() != at+1 || len(ld.Repair) != 0 {
				t.Fatalf("fork at %d of a changed parent made a child that does not load: %v", at, err)
			}
			cb := mustRead(t, s.Path(id))
			pe := lineEnds(damaged)
			if at+1 >= int64(len(pe)) || !bytes.Equal(cb[lineEnds(cb)[0]:], damaged[pe[0]:pe[at+1]]) {
				t.Fatalf("fork at %d: the child is not the parent's lines", at)
			}
		}
	})
}

// TestSums: the checksums the loader's plan computes as the bytes arrive
// in pieces, and those computed over a loaded image's segments, are
// CRC-32C of the event bytes up to each offset, wherever the pieces and
// segments end.
func TestSums(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	file := make([]byte, 5000)
	for i := range file {
		file[i] = byte('a' + r.IntN(26))
	}
	hdr := int64(37)
	want := func(off int64) uint32 { return crc32.Checksum(file[hdr:off], castagnoli) }
	for range 200 {
		var at []int64
		for range r.IntN(6) {
			at = append(at, hdr+r.Int64N(int64(len(file))-hdr+1))
		}
		slices.Sort(at)
		at = slices.Compact(at)
		plan := &sumPlan{hdr: hdr, at: at}
		var segs [][]byte
		for b := file; len(b) > 0; {
			n := 1 + r.IntN(min(len(b), 900))
			plan.feed(b[:n])
			segs = append(segs, b[:n])
			b = b[n:]
		}
		m := newImage(segs)
		for _, off := range at {
			if got, ok := plan.sum(off); !ok || got != want(off) {
				t.Fatalf("plan: up to %d: %08x (%v), want %08x", off, got, ok, want(off))
			}
			from := hdr + r.Int64N(off-hdr+1)
			if got := m.sum(want(from), from, off); got != want(off) {
				t.Fatalf("image: %d..%d: %08x, want %08x", from, off, got, want(off))
			}
		}
		if _, ok := plan.sum(hdr - 1); ok {
			t.Fatalf("a sum the plan did not ask for")
		}
	}
}
