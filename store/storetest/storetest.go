// Package storetest is the conformance suite every store.Store backend must
// pass: round trips, seq continuity, durability of Flush, group commit
// under concurrent appends, locking, listing, fork rules, delete, every
// typed load error, the crash scenarios as golden logs (testdata/*.golden;
// go test -update rewrites them), crafted damaged files (validation, torn
// tails, salvage with tombstones), and Fuzz, which mutates real session
// files and checks load, open, fork and salvage on them.
//
// The suite runs session.Check on every log it loads. It imports store,
// session and llm only; backends call Run from their own tests.
package storetest

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/reinhq/rein/llm"
	"github.com/reinhq/rein/session"
	"github.com/reinhq/rein/store"
)

var update = flag.Bool("update", false, "rewrite storetest golden files")

// Tamper names a way to damage a stored session, as a crash or a bad
// editor would. The suite damages sessions of at least three events.
type Tamper int

const (
	// TornTail appends the first half of a valid event line (seq Len())
	// without its newline: a crash while writing.
	TornTail Tamper = iota + 1
	// CorruptMiddle replaces the event of seq 1 with bytes that do not
	// parse, leaving the later events intact.
	CorruptMiddle
	// BadVersion sets the header's format version to 99.
	BadVersion
	// SeqGap removes the event of seq 1.
	SeqGap
)

func (k Tamper) String() string {
	switch k {
	case TornTail:
		return "torn-tail"
	case CorruptMiddle:
		return "corrupt-middle"
	case BadVersion:
		return "bad-version"
	case SeqGap:
		return "seq-gap"
	}
	return fmt.Sprintf("tamper(%d)", int(k))
}

// Harness adapts a backend to the suite.
type Harness struct {
	// New returns a fresh, empty store for one subtest.
	New func(t *testing.T) store.Store
	// Tamper damages the stored session id (no writer holds it).
	Tamper func(t *testing.T, s store.Store, id string, how Tamper)
	// Crash drops w as a dying process would: nothing is flushed beyond
	// what Appends already made durable, nothing is closed or repaired,
	// and the lock is released.
	Crash func(t *testing.T, w store.Writer)
	// PutFile stores file, the bytes of a session file (a header line,
	// then event lines, as docs/format.md has it; the suite damages them),
	// as session id, replacing any, with no writer holding it. A backend
	// that keeps sessions another way stores what its loader will read
	// back as those lines (raw, for a database). The crafted-file cases
	// and Fuzz skip when it is nil.
	PutFile func(t *testing.T, s store.Store, id string, file []byte)
	// NoTornTails says the backend's storage cannot hold a final line cut
	// short (a table of rows, each a whole line): the crafted case of a
	// line without its newline skips.
	NoTornTails bool
}

// crash drops w through the harness, skipping the test when the backend
// cannot simulate a crash.
func crash(t *testing.T, h Harness, w store.Writer) {
	t.Helper()
	if h.Crash == nil {
		t.Skip("backend has no Crash")
	}
	h.Crash(t, w)
}

// Run runs the conformance suite. Tests that need Tamper or Crash skip
// when the harness leaves them nil.
func Run(t *testing.T, h Harness) {
	tests := []struct {
		name string
		fn   func(t *testing.T, h Harness)
	}{
		{"RoundTrip", testRoundTrip},
		{"AppendSeq", testAppendSeq},
		{"FlushDurable", testFlushDurable},
		{"ConcurrentAppends", testConcurrentAppends},
		{"Lock", testLock},
		{"List", testList},
		{"Fork", testFork},
		{"ForkRefused", testForkRefused},
		{"Delete", testDelete},
		{"NotFound", testNotFound},
		{"UnknownType", testUnknownType},
		{"Tamper", testTamper},
		{"Scenario20OutOfTurnTail", testScenario20},
		{"Scenario21CrashInTurn", testScenario21},
		{"Scenario22TornTail", testScenario22},
		{"Scenario23ForkInOpenTurn", testScenario23},
		{"Scenario24CompactionShape", testScenario24},
		{"ForkInsideCompaction", testForkInsideCompaction},
		{"Running", testRunning},
		{"Crafted", testCrafted},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, h) })
	}
}

var ctx = context.Background()

func header(id string) session.Header {
	return session.Header{ID: id, Cwd: "/w/" + id, CreatedAt: epoch, Title: "title of " + id}
}

// create makes session id and returns its writer and a builder for it.
func create(t *testing.T, s store.Store, id string) (store.Writer, *builder) {
	t.Helper()
	w, err := s.Create(ctx, header(id))
	if err != nil {
		t.Fatalf("Create(%s): %v", id, err)
	}
	t.Cleanup(func() { w.Close() })
	return w, newBuilder(t, header(id))
}

func appendAll(t *testing.T, w store.Writer, b *builder) {
	t.Helper()
	if evs := b.take(); len(evs) > 0 {
		if err := w.Append(ctx, evs); err != nil {
			t.Fatalf("Append: %v", err)
		}
	}
}

// checked runs session.Check over a loaded log.
func checked(t *testing.T, ld *store.Loaded) *store.Loaded {
	t.Helper()
	if vs := session.Check(ld.Log.Events(0)); len(vs) > 0 {
		t.Errorf("loaded log breaks the invariant: %v", vs)
	}
	return ld
}

func load(t *testing.T, s store.Store, id string) *store.Loaded {
	t.Helper()
	ld, err := s.Load(ctx, id, store.LoadOptions{})
	if err != nil {
		t.Fatalf("Load(%s): %v", id, err)
	}
	return checked(t, ld)
}

func open(t *testing.T, s store.Store, id string) (store.Writer, *store.Loaded) {
	t.Helper()
	w, ld, err := s.Open(ctx, id)
	if err != nil {
		t.Fatalf("Open(%s): %v", id, err)
	}
	t.Cleanup(func() { w.Close() })
	return w, checked(t, ld)
}

// lines renders events as stored lines.
func lines(evs []session.Event) string {
	var b []byte
	for _, ev := range evs {
		b = ev.AppendLine(b)
	}
	return string(b)
}

func sameEvents(t *testing.T, what string, got, want []session.Event) {
	t.Helper()
	if g, w := lines(got), lines(want); g != w {
		t.Errorf("%s: events differ\n got: %s\nwant: %s", what, g, w)
	}
}

func testRoundTrip(t *testing.T, h Harness) {
	s := h.New(t)
	w, b := create(t, s, "rt")
	if got := w.Header(); got.ID != "rt" || got.Cwd != "/w/rt" || !got.CreatedAt.Equal(epoch) {
		t.Errorf("Writer.Header = %+v", got)
	}
	b.add(contextMsg("c0", "CI is red on main", "ci-watch"))
	appendAll(t, w, b)
	b.turn("why?", "because \"quotes\", \\ and\nnewlines \u00e9 \U0001F600")
	appendAll(t, w, b)
	b.add(&session.SessionTitle{Title: "Fix CI"})
	b.add(&session.HookResult{Point: "SessionStart", Hook: "h#1", Decision: "pass", DurationMs: 3})
	appendAll(t, w, b)
	if err := w.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	ld := load(t, s, "rt")
	if len(ld.Repair) != 0 || ld.TornBytes != 0 || len(ld.Dropped) != 0 {
		t.Errorf("clean log repaired: repair %d, torn %d, dropped %v", len(ld.Repair), ld.TornBytes, ld.Dropped)
	}
	hd := ld.Log.Header()
	if hd.ID != "rt" || hd.Cwd != "/w/rt" || hd.Title != "title of rt" || !hd.CreatedAt.Equal(epoch) || hd.Version != session.Version || hd.Parent != "" {
		t.Errorf("header = %+v", hd)
	}
	sameEvents(t, "round trip", ld.Log.Events(0), b.log.Events(0))
	if ld.Log.Title() != "Fix CI" {
		t.Errorf("Title = %q, want the session/title event's", ld.Log.Title())
	}
	if g, w := fmt.Sprint(ld.Log.Messages()), fmt.Sprint(b.log.Messages()); g != w {
		t.Errorf("projection differs:\n got %s\nwant %s", g, w)
	}
	if err := w.Append(ctx, nil); !errors.Is(err, store.ErrClosed) {
		t.Errorf("Append after Close: %v, want ErrClosed", err)
	}
	if err := w.Flush(ctx); !errors.Is(err, store.ErrClosed) {
		t.Errorf("Flush after Close: %v, want ErrClosed", err)
	}
	if err := w.Close(); !errors.Is(err, store.ErrClosed) {
		t.Errorf("second Close: %v, want ErrClosed", err)
	}
	if _, err := s.Create(ctx, header("rt")); !errors.Is(err, store.ErrExists) {
		t.Errorf("Create of an existing id: %v, want ErrExists", err)
	}
}

func testAppendSeq(t *testing.T, h Harness) {
	s := h.New(t)
	w, b := create(t, s, "seq")
	b.turn("a", "b")
	evs := b.take()
	if err := w.Append(ctx, evs[1:]); !errors.Is(err, store.ErrSeq) {
		t.Errorf("batch not starting at 0: %v, want ErrSeq", err)
	}
	gap := append([]session.Event{evs[0]}, evs[2:]...)
	if err := w.Append(ctx, gap); !errors.Is(err, store.ErrSeq) {
		t.Errorf("batch with a gap: %v, want ErrSeq", err)
	}
	if err := w.Append(ctx, evs[:3]); err != nil {
		t.Fatal(err)
	}
	if err := w.Append(ctx, evs[:3]); !errors.Is(err, store.ErrSeq) {
		t.Errorf("repeated batch: %v, want ErrSeq", err)
	}
	if err := w.Append(ctx, evs[3:]); err != nil {
		t.Fatal(err)
	}
	w.Close()
	sameEvents(t, "after refused batches", load(t, s, "seq").Log.Events(0), evs)
}

func testFlushDurable(t *testing.T, h Harness) {
	s := h.New(t)
	w, b := create(t, s, "fl")
	if err := w.Flush(ctx); err != nil {
		t.Fatalf("Flush of nothing: %v", err)
	}
	b.turn("a", "b")
	appendAll(t, w, b)
	b.add(contextMsg("c", "later", "p"))
	appendAll(t, w, b)
	if err := w.Flush(ctx); err != nil {
		t.Fatalf("Flush: %v", err)
	}
	// A reader sees everything while the writer still holds the lock.
	sameEvents(t, "read while open", load(t, s, "fl").Log.Events(0), b.log.Events(0))
	crash(t, h, w)
	ld := load(t, s, "fl")
	sameEvents(t, "after crash", ld.Log.Events(0), b.log.Events(0))
	if len(ld.Repair) != 0 {
		t.Errorf("out-of-turn tail repaired: %v", ld.Repair)
	}
}

func testConcurrentAppends(t *testing.T, h Harness) {
	s := h.New(t)
	w, b := create(t, s, "cc")
	const workers, perWorker = 8, 12
	// Pre-build the log: batches of 1..3 events.
	for b.log.Len() < workers*perWorker*2 {
		b.add(contextMsg(fmt.Sprintf("c%d", b.log.Len()), strings.Repeat("x", int(b.log.Len()%50)), "load"))
	}
	all := b.take()
	var batches [][]session.Event
	for i := 0; i < len(all); {
		n := min(1+i%3, len(all)-i)
		batches = append(batches, all[i:i+n])
		i += n
	}
	// Each worker appends every workers-th batch, in seq order: it waits
	// for its turn to call Append, then retries while an earlier batch
	// has not reached the writer yet (ErrSeq happens before anything is
	// queued).
	var mu sync.Mutex
	cond := sync.NewCond(&mu)
	next := 0
	var wg sync.WaitGroup
	errs := make(chan error, len(batches))
	for g := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := g; i < len(batches); i += workers {
				mu.Lock()
				for next != i {
					cond.Wait()
				}
				next++
				cond.Broadcast()
				mu.Unlock()
				for {
					err := w.Append(ctx, batches[i])
					if errors.Is(err, store.ErrSeq) {
						time.Sleep(50 * time.Microsecond)
						continue
					}
					if err != nil {
						errs <- err
					}
					break
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("Append: %v", err)
	}
	if err := w.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	sameEvents(t, "concurrent appends", load(t, s, "cc").Log.Events(0), all)
}

func testLock(t *testing.T, h Harness) {
	s := h.New(t)
	w, b := create(t, s, "lk")
	b.turn("a", "b")
	appendAll(t, w, b)
	if _, _, err := s.Open(ctx, "lk"); !errors.Is(err, store.ErrLocked) {
		t.Errorf("Open of a session being written: %v, want ErrLocked", err)
	}
	if err := s.Delete(ctx, "lk"); !errors.Is(err, store.ErrLocked) {
		t.Errorf("Delete of a locked session: %v, want ErrLocked", err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	w2, ld := open(t, s, "lk")
	sameEvents(t, "reopened", ld.Log.Events(0), b.log.Events(0))
	if _, _, err := s.Open(ctx, "lk"); !errors.Is(err, store.ErrLocked) {
		t.Errorf("second Open: %v, want ErrLocked", err)
	}
	b2 := resume(t, ld.Log)
	b2.turn("c", "d")
	appendAll(t, w2, b2)
	if err := w2.Close(); err != nil {
		t.Fatal(err)
	}
	w3, ld := open(t, s, "lk")
	w3.Close()
	if got, _ := ld.Log.Turn(); got != 2 {
		t.Errorf("turns after reopen = %d, want 2", got)
	}
}

func testList(t *testing.T, h Harness) {
	s := h.New(t)
	if infos, err := s.List(ctx); err != nil || len(infos) != 0 {
		t.Fatalf("List of an empty store = %v, %v", infos, err)
	}
	wa, ba := create(t, s, "a")
	ba.turn("1", "2")
	ba.turn("3", "4")
	ba.add(&session.SessionTitle{Title: "renamed a"})
	appendAll(t, wa, ba)
	wa.Close()

	wb, bb := create(t, s, "b")
	bb.turn("1", "2")
	bb.now = bb.now.Add(time.Hour) // b is the newest
	bb.add(contextMsg("c", "x", "p"))
	appendAll(t, wb, bb)
	// b stays open: listing must see its appends without a Close.
	if err := wb.Flush(ctx); err != nil {
		t.Fatal(err)
	}

	wc, _ := create(t, s, "c") // empty
	wc.Close()

	infos, err := s.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, in := range infos {
		got = append(got, fmt.Sprintf("%s title=%q cwd=%s turns=%d events=%d updated=%s parent=%q",
			in.ID, in.Title, in.Cwd, in.Turns, in.Events, in.UpdatedAt.UTC().Format(time.RFC3339), in.Parent))
	}
	want := []string{
		fmt.Sprintf("b title=%q cwd=/w/b turns=1 events=%d updated=%s parent=\"\"", "title of b", bb.log.Len(), bb.log.LastTime().Format(time.RFC3339)),
		fmt.Sprintf("a title=%q cwd=/w/a turns=2 events=%d updated=%s parent=\"\"", "renamed a", ba.log.Len(), ba.log.LastTime().Format(time.RFC3339)),
		fmt.Sprintf("c title=%q cwd=/w/c turns=0 events=0 updated=%s parent=\"\"", "title of c", epoch.Format(time.RFC3339)),
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("List:\n got %s\nwant %s", strings.Join(got, "\n    "), strings.Join(want, "\n    "))
	}
	// More appends after a listing are seen by the next one.
	bb.turn("5", "6")
	appendAll(t, wb, bb)
	infos, _ = s.List(ctx)
	if len(infos) == 0 || infos[0].ID != "b" || infos[0].Turns != 2 || infos[0].Events != bb.log.Len() {
		t.Errorf("List after more appends: %+v", infos)
	}
}

func testFork(t *testing.T, h Harness) {
	s := h.New(t)
	w, b := create(t, s, "p")
	b.turn("1", "2")
	at := b.add(contextMsg("cA", "out of turn", "p")).Seq
	b.turn("3", "4")
	appendAll(t, w, b)
	parentBefore := b.log.Events(0)

	ch, err := s.Fork(ctx, "p", at, session.Header{ID: "child", Cwd: "/w/child", CreatedAt: epoch.Add(time.Hour)})
	if err != nil {
		t.Fatalf("Fork at an out-of-turn user/message: %v", err)
	}
	if ch.Parent != "p" || ch.ForkSeq != at || ch.ID != "child" {
		t.Errorf("child header = %+v", ch)
	}
	// The parent goes on; the child must not see it.
	b.turn("5", "6")
	appendAll(t, w, b)

	cw, ld := open(t, s, "child")
	if hd := ld.Log.Header(); hd.Parent != "p" || hd.ForkSeq != at || hd.Cwd != "/w/child" || !hd.CreatedAt.Equal(epoch.Add(time.Hour)) {
		t.Errorf("loaded child header = %+v", hd)
	}
	sameEvents(t, "child", ld.Log.Events(0), parentBefore[:at+1])
	if len(ld.Repair) != 0 {
		t.Errorf("child repaired: %v", ld.Repair)
	}
	cb := resume(t, ld.Log)
	cb.turn("child prompt", "child answer")
	appendAll(t, cw, cb)
	if n, _ := ld.Log.Turn(); n != 2 {
		t.Errorf("child's first turn is %d, want 2 (continues the parent's numbering)", n)
	}
	cw.Close()
	ld2 := load(t, s, "child")
	sameEvents(t, "child after its own turn", ld2.Log.Events(0), cb.log.Events(0))

	// The parent is unchanged by the child.
	w.Close()
	sameEvents(t, "parent", load(t, s, "p").Log.Events(0), b.log.Events(0))

	// An empty fork and a fork at the last event.
	if _, err := s.Fork(ctx, "p", -1, session.Header{ID: "empty"}); err != nil {
		t.Errorf("Fork at -1: %v", err)
	} else if ld := load(t, s, "empty"); ld.Log.Len() != 0 || ld.Log.Header().Parent != "p" || ld.Log.Header().ForkSeq != -1 {
		t.Errorf("empty fork: %d events, header %+v", ld.Log.Len(), ld.Log.Header())
	}
	if _, err := s.Fork(ctx, "p", b.log.Len()-1, session.Header{ID: "end"}); err != nil {
		t.Errorf("Fork at the final turn/end: %v", err)
	}
	if _, err := s.Fork(ctx, "p", at, session.Header{ID: "child"}); !errors.Is(err, store.ErrExists) {
		t.Errorf("Fork onto an existing id: %v, want ErrExists", err)
	}
	if _, err := s.Fork(ctx, "nope", 0, session.Header{ID: "x"}); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Fork of a missing session: %v, want ErrNotFound", err)
	}
	if _, err := s.Fork(ctx, "p", b.log.Len()+5, session.Header{ID: "far"}); err == nil {
		t.Errorf("Fork beyond the end succeeded")
	}
	infos, _ := s.List(ctx)
	parents := map[string]string{}
	for _, in := range infos {
		parents[in.ID] = in.Parent
	}
	if parents["child"] != "p" || parents["empty"] != "p" {
		t.Errorf("List parents = %v", parents)
	}
	if _, ok := parents["far"]; ok {
		t.Errorf("a refused fork left a child")
	}
}

func testForkRefused(t *testing.T, h Harness) {
	s := h.New(t)
	w, b := create(t, s, "p")
	b.turn("1", "2")
	n, _ := b.log.Turn()
	start := b.add(&session.TurnStart{Turn: n + 1, Trigger: session.Trigger{Kind: session.TriggerSend, MessageID: "mx"}}).Seq
	b.add(userMsg("mx", "in the turn"))
	b.step(n+1, 1, "partial", nil)
	b.add(&session.StepEnd{Turn: n + 1, Step: 1})
	end := b.add(&session.TurnEnd{Turn: n + 1, Reason: session.Reason{Kind: session.ReasonCompleted}}).Seq
	appendAll(t, w, b)
	for at := start; at < end; at++ {
		_, err := s.Fork(ctx, "p", at, session.Header{ID: fmt.Sprintf("in%d", at)})
		if !errors.Is(err, session.ErrOpenTurn) {
			t.Errorf("Fork at seq %d inside a turn: %v, want ErrOpenTurn", at, err)
		}
		if _, err := s.Load(ctx, fmt.Sprintf("in%d", at), store.LoadOptions{}); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("refused fork left child in%d: %v", at, err)
		}
	}
	if _, err := s.Fork(ctx, "p", end, session.Header{ID: "ok"}); err != nil {
		t.Errorf("Fork at turn/end: %v", err)
	}
}

func testDelete(t *testing.T, h Harness) {
	s := h.New(t)
	w, b := create(t, s, "d")
	b.turn("1", "2")
	appendAll(t, w, b)
	w.Close()
	if _, err := s.Fork(ctx, "d", b.log.Len()-1, session.Header{ID: "dchild"}); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, "d"); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	if _, err := s.Load(ctx, "d", store.LoadOptions{}); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Load after Delete: %v, want ErrNotFound", err)
	}
	if _, _, err := s.Open(ctx, "d"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Open after Delete: %v, want ErrNotFound", err)
	}
	if err := s.Delete(ctx, "d"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("second Delete: %v, want ErrNotFound", err)
	}
	infos, _ := s.List(ctx)
	if len(infos) != 1 || infos[0].ID != "dchild" {
		t.Errorf("List after Delete = %+v", infos)
	}
	// A child outlives its parent.
	sameEvents(t, "orphan child", load(t, s, "dchild").Log.Events(0), b.log.Events(0))
	// The id is free again.
	w2, _ := create(t, s, "d")
	w2.Close()
}

func testNotFound(t *testing.T, h Harness) {
	s := h.New(t)
	if _, err := s.Load(ctx, "missing", store.LoadOptions{}); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Load: %v, want ErrNotFound", err)
	}
	if _, _, err := s.Open(ctx, "missing"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Open: %v, want ErrNotFound", err)
	}
	if err := s.Delete(ctx, "missing"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Delete: %v, want ErrNotFound", err)
	}
}

func testUnknownType(t *testing.T, h Harness) {
	s := h.New(t)
	w, b := create(t, s, "u")
	b.turn("1", "2")
	evs := b.take()
	n := int64(len(evs))
	tm := evs[n-1].Time
	ign := session.Event{Seq: n, Type: "future/thing", Time: tm, Ignorable: true, Data: []byte(`{"x":1}`)}
	if err := w.Append(ctx, append(evs, ign)); err != nil {
		t.Fatal(err)
	}
	w.Close()
	ld := load(t, s, "u")
	if ld.Log.Len() != n+1 || ld.Log.Event(n).Type != "future/thing" || !ld.Log.Event(n).Ignorable {
		t.Errorf("ignorable unknown event not kept: len %d", ld.Log.Len())
	}

	w, _ = open(t, s, "u")
	bad := session.Event{Seq: n + 1, Type: "future/other", Time: tm, Data: []byte(`{}`)}
	ok := session.Event{Seq: n + 2, Type: session.TypeSessionTitle, Time: tm, Data: []byte(`{"title":"t"}`)}
	if err := w.Append(ctx, []session.Event{bad, ok}); err != nil {
		t.Fatal(err)
	}
	w.Close()
	_, err := s.Load(ctx, "u", store.LoadOptions{})
	wantLineErr(t, err, session.ErrUnknownType, int(n+1)+2)
	if _, _, err := s.Open(ctx, "u"); !errors.Is(err, session.ErrUnknownType) {
		t.Errorf("Open: %v, want ErrUnknownType", err)
	}
	ld, err = s.Load(ctx, "u", store.LoadOptions{Salvage: true})
	if err != nil {
		t.Fatalf("salvage: %v", err)
	}
	checked(t, ld)
	if len(ld.Dropped) == 0 || ld.Dropped[0].Line != int(n+1)+2 || !errors.Is(ld.Dropped[0].Err, session.ErrUnknownType) {
		t.Errorf("salvage dropped %v", ld.Dropped)
	}
	if ld.Log.Len() != n+1 {
		t.Errorf("salvage kept %d events, want %d", ld.Log.Len(), n+1)
	}
}

func wantLineErr(t *testing.T, err, kind error, line int) {
	t.Helper()
	if !errors.Is(err, kind) {
		t.Errorf("error %v, want %v", err, kind)
		return
	}
	var le *store.LineError
	if !errors.As(err, &le) {
		t.Errorf("error %v is not a *store.LineError", err)
		return
	}
	if le.Line != line || le.File == "" {
		t.Errorf("error at %s:%d, want line %d", le.File, le.Line, line)
	}
}

func testTamper(t *testing.T, h Harness) {
	if h.Tamper == nil {
		t.Skip("backend has no Tamper")
	}
	build := func(t *testing.T, s store.Store) *builder {
		w, b := create(t, s, "t")
		b.turn("1", "2")
		appendAll(t, w, b)
		w.Close()
		return b
	}
	t.Run("CorruptMiddle", func(t *testing.T) {
		s := h.New(t)
		b := build(t, s)
		h.Tamper(t, s, "t", CorruptMiddle)
		_, err := s.Load(ctx, "t", store.LoadOptions{})
		wantLineErr(t, err, session.ErrCorrupt, 3)
		if _, _, err := s.Open(ctx, "t"); !errors.Is(err, session.ErrCorrupt) {
			t.Errorf("Open: %v, want ErrCorrupt", err)
		}
		ld, err := s.Load(ctx, "t", store.LoadOptions{Salvage: true})
		if err != nil {
			t.Fatalf("salvage: %v", err)
		}
		checked(t, ld)
		if len(ld.Dropped) == 0 || ld.Dropped[0].Line != 3 {
			t.Errorf("salvage dropped %v, want line 3 first", ld.Dropped)
		}
		// Everything after the bad line breaks seq continuity, so the
		// salvaged log is the prefix; nothing was written.
		sameEvents(t, "salvaged", ld.Log.Events(0)[:ld.Log.Len()-int64(len(ld.Repair))], b.log.Events(0)[:1])
		if _, err := s.Load(ctx, "t", store.LoadOptions{}); !errors.Is(err, session.ErrCorrupt) {
			t.Errorf("salvage changed the stored log: %v", err)
		}
	})
	t.Run("BadVersion", func(t *testing.T) {
		s := h.New(t)
		build(t, s)
		h.Tamper(t, s, "t", BadVersion)
		_, err := s.Load(ctx, "t", store.LoadOptions{})
		wantLineErr(t, err, session.ErrVersion, 1)
		if _, _, err := s.Open(ctx, "t"); !errors.Is(err, session.ErrVersion) {
			t.Errorf("Open: %v, want ErrVersion", err)
		}
	})
	t.Run("SeqGap", func(t *testing.T) {
		s := h.New(t)
		build(t, s)
		h.Tamper(t, s, "t", SeqGap)
		_, err := s.Load(ctx, "t", store.LoadOptions{})
		wantLineErr(t, err, store.ErrSeq, 3)
	})
	t.Run("TornTail", func(t *testing.T) {
		s := h.New(t)
		b := build(t, s)
		h.Tamper(t, s, "t", TornTail)
		ld := load(t, s, "t")
		if ld.TornBytes == 0 || len(ld.Repair) != 0 {
			t.Errorf("torn %d, repair %v", ld.TornBytes, ld.Repair)
		}
		sameEvents(t, "torn", ld.Log.Events(0), b.log.Events(0))
		w, ld := open(t, s, "t")
		b2 := resume(t, ld.Log)
		b2.turn("3", "4")
		appendAll(t, w, b2)
		w.Close()
		ld = load(t, s, "t")
		if ld.TornBytes != 0 {
			t.Errorf("torn tail still there after Open and Append: %d bytes", ld.TornBytes)
		}
		sameEvents(t, "appended after torn tail", ld.Log.Events(0), b2.log.Events(0))
	})
}

// golden compares the printed log with testdata/<name>.golden.
func golden(t *testing.T, name, got string) {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	path := filepath.Join(filepath.Dir(file), "testdata", name+".golden")
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if got != string(want) {
		t.Errorf("%s differs from %s:\n--- got\n%s--- want\n%s", name, path, got, want)
	}
}

// printLog renders a loaded log one event per line: seq, type, data, with
// "+" marking the events crash repair added.
func printLog(ld *store.Loaded) string {
	var b bytes.Buffer
	fmt.Fprintf(&b, "# torn=%d repaired=%d\n", ld.TornBytes, len(ld.Repair))
	first := ld.Log.Len() - int64(len(ld.Repair))
	for _, ev := range ld.Log.Events(0) {
		mark := " "
		if ev.Seq >= first {
			mark = "+"
		}
		fmt.Fprintf(&b, "%s%d %s %s\n", mark, ev.Seq, ev.Type, ev.Data)
	}
	fmt.Fprintf(&b, "# projection\n")
	for _, m := range ld.Log.Messages() {
		fmt.Fprintf(&b, "%s %q", m.Role, llm.PlainText(m.Content))
		for _, c := range m.ToolCalls {
			fmt.Fprintf(&b, " call:%s", c.ID)
		}
		if m.ToolCallID != "" {
			fmt.Fprintf(&b, " for:%s", m.ToolCallID)
		}
		b.WriteByte('\n')
	}
	return b.String()
}

// threeTurns builds turns 1..3 and the out-of-turn context c:A.
func threeTurns(t *testing.T, s store.Store, id string) (store.Writer, *builder) {
	w, b := create(t, s, id)
	b.turn("p1", "a1")
	b.turn("p2", "a2")
	b.turn("p3", "a3")
	b.add(contextMsg("cA", "A", "ci-watch"))
	appendAll(t, w, b)
	return w, b
}

// Scenario 20: a log ending with an out-of-turn message loads unrepaired;
// the next turn is 4 and its request ends [..., A, P].
func testScenario20(t *testing.T, h Harness) {
	s := h.New(t)
	w, b := threeTurns(t, s, "s20")
	crash(t, h, w)
	ld := load(t, s, "s20")
	sameEvents(t, "s20", ld.Log.Events(0), b.log.Events(0))
	if len(ld.Repair) != 0 || ld.TornBytes != 0 {
		t.Errorf("repaired: %v, torn %d", ld.Repair, ld.TornBytes)
	}
	w, ld = open(t, s, "s20")
	if n, open := ld.Log.Turn(); n != 3 || open {
		t.Errorf("Turn() = %d, %v; want 3, closed", n, open)
	}
	r := resume(t, ld.Log)
	r.add(&session.TurnStart{Turn: 4, Trigger: session.Trigger{Kind: session.TriggerSend, MessageID: "mP"}})
	r.add(userMsg("mP", "P"))
	msgs := ld.Log.Messages()
	if n := len(msgs); n < 2 || llm.PlainText(msgs[n-2].Content) != "A" || llm.PlainText(msgs[n-1].Content) != "P" {
		t.Errorf("request tail = %v, want [... A P]", msgs)
	}
	appendAll(t, w, r)
	w.Close()
	golden(t, "scenario20", printLog(ld))
}

// Scenario 21: a crash inside turn 4 after out-of-turn context closes the
// turn with synthetic results and leaves c:A untouched.
func testScenario21(t *testing.T, h Harness) {
	s := h.New(t)
	w, b := threeTurns(t, s, "s21")
	b.add(&session.TurnStart{Turn: 4, Trigger: session.Trigger{Kind: session.TriggerSend, MessageID: "mP"}})
	b.add(userMsg("mP", "P"))
	calls := []llm.ToolCall{{ID: "k1", Name: "read", Arguments: `{"file_path":"a"}`}, {ID: "k2", Name: "read", Arguments: `{"file_path":"b"}`}}
	b.step(4, 1, "", calls)
	b.add(&session.ToolCall{Turn: 4, Step: 1, CallID: "k1", Name: "read", Arguments: calls[0].Arguments})
	appendAll(t, w, b)
	crash(t, h, w)
	streamAgrees(t, s, "s21")
	ld := load(t, s, "s21")
	got := printLog(ld)
	golden(t, "scenario21", got)
	// Open writes the repair; a later load needs none and shows the same.
	w, ld2 := open(t, s, "s21")
	w.Close()
	if printLog(ld2) != got {
		t.Errorf("Open's repair differs from Load's:\n%s", printLog(ld2))
	}
	ld3 := load(t, s, "s21")
	if len(ld3.Repair) != 0 || ld3.Log.Len() != ld.Log.Len() {
		t.Errorf("repair not durable: %d repair events, len %d want %d", len(ld3.Repair), ld3.Log.Len(), ld.Log.Len())
	}
	sameEvents(t, "durable repair", ld3.Log.Events(0), ld.Log.Events(0))
}

// Scenario 22: a torn tail after out-of-turn context is dropped; c:A stays
// and nothing is closed.
func testScenario22(t *testing.T, h Harness) {
	if h.Tamper == nil {
		t.Skip("backend has no Tamper")
	}
	s := h.New(t)
	w, b := threeTurns(t, s, "s22")
	w.Close()
	h.Tamper(t, s, "s22", TornTail)
	streamAgrees(t, s, "s22")
	ld := load(t, s, "s22")
	if ld.TornBytes == 0 {
		t.Errorf("no torn tail reported")
	}
	sameEvents(t, "s22", ld.Log.Events(0), b.log.Events(0))
	golden(t, "scenario22", printLog(ld))
}

// Scenario 23: a fork inside an open turn is refused and leaves no child,
// also when the turn is the crashed final one.
func testScenario23(t *testing.T, h Harness) {
	s := h.New(t)
	w, b := threeTurns(t, s, "s23")
	start := b.add(&session.TurnStart{Turn: 4, Trigger: session.Trigger{Kind: session.TriggerSend, MessageID: "mP"}}).Seq
	b.add(userMsg("mP", "P"))
	appendAll(t, w, b)
	crash(t, h, w)
	for _, at := range []int64{start, start + 1} {
		_, err := s.Fork(ctx, "s23", at, session.Header{ID: "s23-child"})
		if !errors.Is(err, session.ErrOpenTurn) {
			t.Errorf("Fork at %d: %v, want ErrOpenTurn", at, err)
		}
	}
	infos, _ := s.List(ctx)
	var ids []string
	for _, in := range infos {
		ids = append(ids, in.ID)
	}
	if len(ids) != 1 || ids[0] != "s23" {
		t.Errorf("sessions after refused forks: %v", ids)
	}
	if _, err := s.Fork(ctx, "s23", start-1, session.Header{ID: "s23-child"}); err != nil {
		t.Errorf("Fork at c:A, just before the open turn: %v", err)
	}
	golden(t, "scenario23", printLog(load(t, s, "s23-child")))
}

// Scenario 24 (log shape): a compaction across out-of-turn messages.
func testScenario24(t *testing.T, h Harness) {
	s := h.New(t)
	w, b := create(t, s, "s24")
	u1, a1 := b.turn("u1", "a1")
	cA := b.add(contextMsg("cA", "A", "p")).Seq
	u2, a2 := b.turn("u2", "a2")
	b.add(contextMsg("cB", "B", "p"))
	b.add(&session.CompactionStart{ID: "c_1", Reason: session.CompactManual})
	b.add(&session.UserMessage{ID: "sum", Content: llm.Text("summary"), Source: session.Source{Kind: session.SourceSystem, Name: "compaction"},
		Replaces: &session.Replaces{Start: u1, End: a2, Seqs: []int64{u1, a1, cA, u2, a2}}})
	b.add(&session.CompactionEnd{ID: "c_1", Reason: session.CompactManual})
	b.turn("u3", "a3")
	appendAll(t, w, b)
	w.Close()
	ld := load(t, s, "s24")
	msgs := ld.Log.Messages()
	var texts []string
	for _, m := range msgs {
		texts = append(texts, llm.PlainText(m.Content))
	}
	if got := strings.Join(texts, ","); got != "summary,B,u3,a3" {
		t.Errorf("projection = %s, want summary,B,u3,a3", got)
	}
	golden(t, "scenario24", printLog(ld))
}
