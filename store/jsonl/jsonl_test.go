package jsonl

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/reinhq/rein/llm"
	"github.com/reinhq/rein/session"
	"github.com/reinhq/rein/store"
	"github.com/reinhq/rein/store/storetest"
)

// TestMain doubles as the helper process of the cross-process lock test.
func TestMain(m *testing.M) {
	if root := os.Getenv("JSONL_LOCK_HELPER"); root != "" {
		os.Exit(lockHelper(root))
	}
	os.Exit(m.Run())
}

func newStore(t testing.TB) *Store {
	t.Helper()
	s, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestConformance(t *testing.T) {
	storetest.Run(t, storetest.Harness{
		New:     func(t *testing.T) store.Store { return newStore(t) },
		Tamper:  tamper,
		Crash:   func(t *testing.T, w store.Writer) { w.(*writer).abandon() },
		PutFile: putFile,
	})
}

// putFile writes a crafted session file, with no sidecars.
func putFile(t *testing.T, st store.Store, id string, file []byte) {
	t.Helper()
	s := st.(*Store)
	if err := os.WriteFile(s.Path(id), file, 0o600); err != nil {
		t.Fatal(err)
	}
	os.Remove(s.metaPath(id))
	os.Remove(s.idxPath(id))
}

func tamper(t *testing.T, st store.Store, id string, how storetest.Tamper) {
	t.Helper()
	path := st.(*Store).Path(id)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfter(string(b), "\n")
	lines = lines[:len(lines)-1] // the empty string after the final '\n'
	switch how {
	case storetest.TornTail:
		n := len(lines) - 1
		ev := session.Event{Seq: int64(n), Type: session.TypeSessionTitle, Time: time.Now(), Data: []byte(`{"title":"never finished"}`)}
		line := ev.AppendLine(nil)
		lines = append(lines, string(line[:len(line)/2]))
	case storetest.CorruptMiddle:
		lines[2] = `{"seq":1,"type":"user/mes` + "\x00garbage\n"
	case storetest.BadVersion:
		lines[0] = strings.Replace(lines[0], `"version":1`, `"version":99`, 1)
	case storetest.SeqGap:
		lines = append(lines[:2], lines[3:]...)
	default:
		t.Fatalf("unknown tamper %v", how)
	}
	if err := os.WriteFile(path, []byte(strings.Join(lines, "")), 0o600); err != nil {
		t.Fatal(err)
	}
	os.Remove(st.(*Store).metaPath(id))
}

var bg = context.Background()

func event(t testing.TB, l *session.Log, p session.Payload) session.Event {
	t.Helper()
	ev, err := l.Append(time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC).Add(time.Duration(l.Len())*time.Millisecond), p)
	if err != nil {
		t.Fatal(err)
	}
	return ev
}

func ctxMsg(i int) *session.UserMessage {
	return &session.UserMessage{ID: fmt.Sprintf("c%d", i), Content: llm.Text(fmt.Sprintf("context %d", i)), Source: session.Source{Kind: session.SourcePlugin, Name: "p"}}
}

// TestFileFormat pins the bytes: header line, then Event.AppendLine lines.
func TestFileFormat(t *testing.T) {
	s := newStore(t)
	h := session.Header{ID: "f", Cwd: "/w", CreatedAt: time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)}
	w, err := s.Create(bg, h)
	if err != nil {
		t.Fatal(err)
	}
	l := session.NewLog(h)
	if err := w.Append(bg, []session.Event{event(t, l, ctxMsg(0))}); err != nil {
		t.Fatal(err)
	}
	w.Close()
	got, _ := os.ReadFile(s.Path("f"))
	want := `{"type":"session","version":1,"id":"f","cwd":"/w","createdAt":"2026-11-30T10:00:00.000Z"}` + "\n" +
		`{"seq":0,"type":"user/message","time":"2026-11-30T10:00:00.000Z","data":{"id":"c0","content":[{"type":"text","text":"context 0"}],"source":{"kind":"plugin","name":"p"}}}` + "\n"
	if string(got) != want {
		t.Errorf("file:\n%s\nwant:\n%s", got, want)
	}
	if _, err := os.Stat(filepath.Join(s.Root(), "sessions", "f.meta")); err != nil {
		t.Errorf("no sidecar after Close: %v", err)
	}
}

func TestDefaultRoot(t *testing.T) {
	t.Setenv("REIN_HOME", "/r")
	t.Setenv("XDG_DATA_HOME", "/x")
	if r, _ := DefaultRoot(); r != "/r" {
		t.Errorf("REIN_HOME: %s", r)
	}
	t.Setenv("REIN_HOME", "")
	if r, _ := DefaultRoot(); r != "/x/rein" {
		t.Errorf("XDG_DATA_HOME: %s", r)
	}
	t.Setenv("XDG_DATA_HOME", "")
	t.Setenv("HOME", "/home/ana")
	if r, _ := DefaultRoot(); r != "/home/ana/.local/share/rein" {
		t.Errorf("HOME: %s", r)
	}
}

func TestUnreadableRoot(t *testing.T) {
	f := filepath.Join(t.TempDir(), "file")
	os.WriteFile(f, nil, 0o600)
	if _, err := Open(f); !errors.Is(err, store.ErrUnreadable) {
		t.Errorf("Open on a file: %v, want ErrUnreadable", err)
	}
}

func TestInvalidID(t *testing.T) {
	s := newStore(t)
	for _, id := range []string{"", "../x", "a/b", ".hidden"} {
		if _, err := s.Create(bg, session.Header{ID: id}); err == nil {
			t.Errorf("Create(%q) succeeded", id)
		}
	}
}

// flaky wraps a file and fails the next n writes or syncs on demand.
type flaky struct {
	file
	failWrite, failSync atomic.Int32
	syncs               atomic.Int32
	slow                time.Duration // every sync takes this long
	partial             bool          // a failing write still writes half
}

var errDisk = errors.New("disk on fire")

func (f *flaky) WriteAt(b []byte, off int64) (int, error) {
	if f.failWrite.Add(-1) >= 0 {
		if f.partial {
			n, _ := f.file.WriteAt(b[:len(b)/2], off)
			return n, errDisk
		}
		return 0, errDisk
	}
	return f.file.WriteAt(b, off)
}

func (f *flaky) Sync() error {
	f.syncs.Add(1)
	time.Sleep(f.slow)
	if f.failSync.Add(-1) >= 0 {
		return errDisk
	}
	return f.file.Sync()
}

func flakyStore(t *testing.T) (*Store, *flaky) {
	s := newStore(t)
	fl := &flaky{}
	s.wrap = func(f file) file { fl.file = f; return fl }
	return s, fl
}

// TestFailedAppendStoresNothing: a failed write or fsync leaves nothing of
// the batch, and a retry stores each event exactly once.
func TestFailedAppendStoresNothing(t *testing.T) {
	for _, tc := range []struct {
		name    string
		arm     func(*flaky)
		partial bool
	}{
		{"write", func(f *flaky) { f.failWrite.Store(1) }, true},
		{"sync", func(f *flaky) { f.failSync.Store(1) }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, fl := flakyStore(t)
			fl.partial = tc.partial
			h := session.Header{ID: "x"}
			w, err := s.Create(bg, h)
			if err != nil {
				t.Fatal(err)
			}
			defer w.Close()
			l := session.NewLog(h)
			first := []session.Event{event(t, l, ctxMsg(0))}
			if err := w.Append(bg, first); err != nil {
				t.Fatal(err)
			}
			batch := []session.Event{event(t, l, ctxMsg(1)), event(t, l, ctxMsg(2))}
			tc.arm(fl)
			if err := w.Append(bg, batch); !errors.Is(err, errDisk) {
				t.Fatalf("Append: %v, want the disk error", err)
			}
			ld, err := s.Load(bg, "x", store.LoadOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if ld.Log.Len() != 1 || ld.TornBytes != 0 {
				t.Errorf("after failure: %d events, %d torn bytes; want 1, 0", ld.Log.Len(), ld.TornBytes)
			}
			if err := w.Append(bg, batch); err != nil {
				t.Fatalf("retry: %v", err)
			}
			w.Close()
			ld, err = s.Load(bg, "x", store.LoadOptions{})
			if err != nil {
				t.Fatal(err)
			}
			var got, want []byte
			for _, ev := range ld.Log.Events(0) {
				got = ev.AppendLine(got)
			}
			for _, ev := range l.Events(0) {
				want = ev.AppendLine(want)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("after retry:\n%s\nwant\n%s", got, want)
			}
		})
	}
}

// TestGroupCommit: concurrent appends share fsyncs.
func TestGroupCommit(t *testing.T) {
	s, fl := flakyStore(t)
	h := session.Header{ID: "g"}
	w, err := s.Create(bg, h)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	l := session.NewLog(h)
	const n = 200
	evs := make([]session.Event, n)
	for i := range evs {
		evs[i] = event(t, l, ctxMsg(i))
	}
	fl.slow = time.Millisecond
	var wg sync.WaitGroup
	for g := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := g; i < n; i += 16 {
				for {
					err := w.Append(bg, evs[i:i+1])
					if errors.Is(err, store.ErrSeq) {
						time.Sleep(20 * time.Microsecond)
						continue // an earlier event is not queued yet
					}
					if err != nil {
						t.Error(err)
					}
					break
				}
			}
		}()
	}
	wg.Wait()
	if err := w.Flush(bg); err != nil {
		t.Fatal(err)
	}
	syncs := fl.syncs.Load()
	t.Logf("%d appends, %d fsyncs", n, syncs)
	if syncs >= n {
		t.Errorf("%d fsyncs for %d concurrent appends: no grouping", syncs, n)
	}
	ld, err := s.Load(bg, "g", store.LoadOptions{})
	if err != nil || ld.Log.Len() != n {
		t.Fatalf("load: %v, %d events", err, ld.Log.Len())
	}
}

// TestTornTailTruncatedOnDisk: Open truncates the torn tail before the next
// append, and removes a sidecar that could describe it.
func TestTornTailTruncatedOnDisk(t *testing.T) {
	s := newStore(t)
	h := session.Header{ID: "t"}
	w, _ := s.Create(bg, h)
	l := session.NewLog(h)
	w.Append(bg, []session.Event{event(t, l, ctxMsg(0))})
	w.Close()
	good, _ := os.ReadFile(s.Path("t"))
	f, _ := os.OpenFile(s.Path("t"), os.O_WRONLY|os.O_APPEND, 0)
	f.WriteString(`{"seq":1,"type":"user/mess`)
	f.Close()
	ld, err := s.Load(bg, "t", store.LoadOptions{})
	if err != nil || ld.TornBytes != len(`{"seq":1,"type":"user/mess`) {
		t.Fatalf("Load: %v, torn %d", err, ld.TornBytes)
	}
	if b, _ := os.ReadFile(s.Path("t")); len(b) == len(good) {
		t.Fatalf("Load wrote to the file")
	}
	w2, _, err := s.Open(bg, "t")
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(s.Path("t")); !bytes.Equal(b, good) {
		t.Errorf("after Open the file is\n%s\nwant\n%s", b, good)
	}
	w2.Close()
}

// TestCrossProcessLock: a writer in another process makes Open fail with
// ErrLocked; when that process dies, Open works.
func TestCrossProcessLock(t *testing.T) {
	s := newStore(t)
	w, _ := s.Create(bg, session.Header{ID: "x"})
	w.Close()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "JSONL_LOCK_HELPER="+s.Root())
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 6)
	if _, err := stdout.Read(buf); err != nil || string(buf) != "locked" {
		t.Fatalf("helper: %q %v", buf, err)
	}
	if _, _, err := s.Open(bg, "x"); !errors.Is(err, store.ErrLocked) {
		t.Errorf("Open while another process writes: %v, want ErrLocked", err)
	}
	if err := s.Delete(bg, "x"); !errors.Is(err, store.ErrLocked) {
		t.Errorf("Delete while another process writes: %v, want ErrLocked", err)
	}
	stdin.Close() // the helper exits without closing its writer
	cmd.Wait()
	w, _, err := s.Open(bg, "x")
	if err != nil {
		t.Fatalf("Open after the other process died: %v", err)
	}
	w.Close()
}

func lockHelper(root string) int {
	s, err := Open(root)
	if err != nil {
		return 2
	}
	if _, _, err := s.Open(context.Background(), "x"); err != nil {
		fmt.Println(err)
		return 3
	}
	os.Stdout.WriteString("locked")
	var b [1]byte
	os.Stdin.Read(b[:])
	return 0 // dies holding the lock
}

// TestListReadsLittle: listing uses the sidecar and reads only the header
// and the lines after the size it names, whatever the session's size.
func TestListReadsLittle(t *testing.T) {
	s := newStore(t)
	h := session.Header{ID: "big", Title: "big one"}
	w, _ := s.Create(bg, h)
	l := session.NewLog(h)
	var batch []session.Event
	for i := range 2000 {
		batch = append(batch, event(t, l, ctxMsg(i)))
	}
	w.Append(bg, batch)
	w.Close()
	// Corrupt the middle of the file: a listing that read it would not
	// count 2000 events.
	b, _ := os.ReadFile(s.Path("big"))
	mid := len(b) / 2
	copy(b[mid:], bytes.Repeat([]byte("#"), 100))
	os.WriteFile(s.Path("big"), b, 0o600)
	infos, err := s.List(bg)
	if err != nil || len(infos) != 1 || infos[0].Events != 2000 || infos[0].Title != "big one" {
		t.Fatalf("List = %+v, %v", infos, err)
	}
	// Without the sidecar, List scans and stops at the damage.
	os.Remove(s.metaPath("big"))
	infos, _ = s.List(bg)
	if infos[0].Events >= 2000 {
		t.Errorf("List without sidecar claims %d events past a corrupt line", infos[0].Events)
	}
}

// TestStaleSidecar: appends after the sidecar was written are counted.
func TestStaleSidecar(t *testing.T) {
	s := newStore(t)
	s.metaEvery = time.Hour
	h := session.Header{ID: "s"}
	w, _ := s.Create(bg, h)
	l := session.NewLog(h)
	w.Append(bg, []session.Event{event(t, l, ctxMsg(0))})
	w.Append(bg, []session.Event{event(t, l, &session.SessionTitle{Title: "late"})})
	infos, _ := s.List(bg)
	if infos[0].Events != 2 || infos[0].Title != "late" {
		t.Errorf("List with a stale sidecar = %+v", infos[0])
	}
	w.(*writer).abandon()
	infos, _ = s.List(bg)
	if infos[0].Events != 2 || infos[0].Title != "late" {
		t.Errorf("List after a crash = %+v", infos[0])
	}
}

// TestConformanceSmallChunks runs the suite with the streaming loader
// handing over a few hundred bytes at a time, so that reading, parsing,
// torn tails and bad lines meet chunk boundaries.
func TestConformanceSmallChunks(t *testing.T) {
	defer func(c int) { segment = c }(segment)
	for _, c := range []int{1, 97, 700} {
		segment = c
		t.Run(fmt.Sprint(c), TestConformance)
	}
}

// TestLoadLargeFile loads a session of several read steps through the
// streaming loader, with a torn tail.
func TestLoadLargeFile(t *testing.T) {
	s := newStore(t)
	h := session.Header{ID: "L"}
	w, _ := s.Create(bg, h)
	l := session.NewLog(h)
	var batch []session.Event
	for i := 0; i < 60000; i++ {
		batch = append(batch, event(t, l, &session.UserMessage{ID: fmt.Sprintf("c%d", i), Content: llm.Text(strings.Repeat("x", i%300)), Source: session.Source{Kind: "plugin"}}))
	}
	if err := w.Append(bg, batch); err != nil {
		t.Fatal(err)
	}
	w.Close()
	f, _ := os.OpenFile(s.Path("L"), os.O_WRONLY|os.O_APPEND, 0)
	f.WriteString(`{"seq":60000,"type":"user/mess`)
	f.Close()
	st, _ := os.Stat(s.Path("L"))
	if st.Size() < 10<<20 {
		t.Fatalf("file of %d bytes is too small for the test", st.Size())
	}
	ld, err := s.Load(bg, "L", store.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if ld.Log.Len() != 60000 || ld.TornBytes == 0 {
		t.Errorf("loaded %d events, torn %d", ld.Log.Len(), ld.TornBytes)
	}
	if got, want := ld.Log.Event(59999).Data, l.Event(59999).Data; !bytes.Equal(got, want) {
		t.Errorf("last event data differs")
	}
}

// TestStaleTempsRemoved: Open(root) deletes what a crashed Create or Fork
// left, and keeps a temporary file that a live writer holds.
func TestStaleTempsRemoved(t *testing.T) {
	s := newStore(t)
	dir := filepath.Join(s.Root(), "sessions")
	stale := filepath.Join(dir, ".x.tmp-123")
	os.WriteFile(stale, []byte("partial"), 0o600)
	live, _ := os.CreateTemp(dir, ".y.tmp-*")
	defer live.Close()
	if err := lockFile(live); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(s.Root()); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(stale); err == nil {
		t.Errorf("stale temporary file kept")
	}
	if _, err := os.Stat(live.Name()); err != nil {
		t.Errorf("live temporary file removed: %v", err)
	}
}

// TestUnparsableFinalLine: a final complete line that does not parse is a
// torn tail too, wherever segment boundaries fall.
func TestUnparsableFinalLine(t *testing.T) {
	defer func(c int) { segment = c }(segment)
	for _, seg := range []int{1, 50, 300, 16 << 20} {
		segment = seg
		s := newStore(t)
		h := session.Header{ID: "u"}
		w, _ := s.Create(bg, h)
		l := session.NewLog(h)
		w.Append(bg, []session.Event{event(t, l, ctxMsg(0)), event(t, l, ctxMsg(1))})
		w.Close()
		f, _ := os.OpenFile(s.Path("u"), os.O_WRONLY|os.O_APPEND, 0)
		f.WriteString("{\"seq\":2,\"ty\x00\n")
		f.Close()
		ld, err := s.Load(bg, "u", store.LoadOptions{})
		if err != nil || ld.Log.Len() != 2 || ld.TornBytes != 14 {
			t.Errorf("segment %d: %v, %d events, torn %d", seg, err, ld.Log.Len(), ld.TornBytes)
		}
	}
}

// TestForkSidecar: a fork child's listing counts only the events up to the
// fork seq, and names the title in force there, whatever the parent holds
// after it.
func TestForkSidecar(t *testing.T) {
	defer func(c int) { segment = c }(segment)
	for _, seg := range []int{64, 16 << 20} {
		segment = seg
		s := newStore(t)
		h := session.Header{ID: "p", Title: "header title"}
		w, _ := s.Create(bg, h)
		l := session.NewLog(h)
		var evs []session.Event
		turn := func(n int) {
			evs = append(evs, event(t, l, &session.TurnStart{Turn: n, Trigger: session.Trigger{Kind: "send"}}))
			evs = append(evs, event(t, l, &session.TurnEnd{Turn: n, Reason: session.Reason{Kind: "completed"}}))
		}
		turn(1)
		evs = append(evs, event(t, l, &session.SessionTitle{Title: "first"}))
		turn(2)
		at := l.Len() - 1
		evs = append(evs, event(t, l, &session.SessionTitle{Title: "later"}))
		turn(3)
		for i := range 50 {
			evs = append(evs, event(t, l, ctxMsg(i)))
		}
		if err := w.Append(bg, evs); err != nil {
			t.Fatal(err)
		}
		w.Close()
		if _, err := s.Fork(bg, "p", at, session.Header{ID: "c"}); err != nil {
			t.Fatal(err)
		}
		infos, _ := s.List(bg)
		var c store.Info
		for _, in := range infos {
			if in.ID == "c" {
				c = in
			}
		}
		if c.Events != at+1 || c.Turns != 2 || c.Title != "first" || !c.UpdatedAt.Equal(l.Event(at).Time) {
			t.Errorf("segment %d: child listed as %+v", seg, c)
		}
		// The sidecar agrees with a full scan.
		os.Remove(s.metaPath("c"))
		infos, _ = s.List(bg)
		for _, in := range infos {
			if in.ID == "c" && (in.Events != c.Events || in.Turns != c.Turns || in.Title != c.Title) {
				t.Errorf("segment %d: scan says %+v, sidecar said %+v", seg, in, c)
			}
		}
	}
}

func FuzzStore(f *testing.F) {
	storetest.Fuzz(f, storetest.Harness{New: func(t *testing.T) store.Store { return newStore(t) }, PutFile: putFile})
}
