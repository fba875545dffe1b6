package jsonl

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/reinhq/rein/session"
	"github.com/reinhq/rein/store"
)

// A file another program replaces (rename over it, as editors and sed -i
// do) must not take acknowledged appends into the orphaned file: the
// writer notices at its next commit and fails the batch.
func TestReplacedFileFailsAppend(t *testing.T) {
	s := newStore(t)
	h := session.Header{ID: "x"}
	w, err := s.Create(bg, h)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	l := session.NewLog(h)
	if err := w.Append(bg, []session.Event{event(t, l, ctxMsg(0))}); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(s.Path("x"))
	if err := os.WriteFile(s.Path("x")+".new", b, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(s.Path("x")+".new", s.Path("x")); err != nil {
		t.Fatal(err)
	}
	// The writer's lock is on the session's lock file, not on the
	// replaced file: a second writer is still kept out.
	if _, _, err := s.Open(bg, "x"); !errors.Is(err, store.ErrLocked) {
		t.Errorf("Open of a replaced session while its writer lives: %v, want ErrLocked", err)
	}
	err = w.Append(bg, []session.Event{event(t, l, ctxMsg(1))})
	if err == nil || !strings.Contains(err.Error(), "replaced") {
		t.Fatalf("append to a replaced file: %v, want a failure", err)
	}
}

// Delete removes the lock file with the session; a new session of the same
// id locks afresh, and listing never shows lock files.
func TestLockFileLifecycle(t *testing.T) {
	s := newStore(t)
	w, err := s.Create(bg, session.Header{ID: "x"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Create(bg, session.Header{ID: "x"}); !errors.Is(err, store.ErrExists) && !errors.Is(err, store.ErrLocked) {
		t.Errorf("second Create: %v", err)
	}
	if err := s.Delete(bg, "x"); !errors.Is(err, store.ErrLocked) {
		t.Errorf("Delete while locked: %v, want ErrLocked", err)
	}
	w.Close()
	if err := s.Delete(bg, "x"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(s.lockPath("x")); !os.IsNotExist(err) {
		t.Errorf("lock file left after Delete: %v", err)
	}
	w, err = s.Create(bg, session.Header{ID: "x"})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	infos, err := s.List(bg)
	if err != nil {
		t.Fatal(err)
	}
	if len(infos) != 1 || infos[0].ID != "x" {
		t.Errorf("List: %+v", infos)
	}
}

// A final line whose prefix parses but which is not JSON (a lost page of
// the last, unsynced commit reads back as zeros) is a torn tail.
func TestFinalLineNotJSONIsTorn(t *testing.T) {
	s := newStore(t)
	h := session.Header{ID: "z"}
	w, err := s.Create(bg, h)
	if err != nil {
		t.Fatal(err)
	}
	l := session.NewLog(h)
	if err := w.Append(bg, []session.Event{event(t, l, ctxMsg(0))}); err != nil {
		t.Fatal(err)
	}
	w.Close()
	ln := event(t, l, ctxMsg(1)).AppendLine(nil)
	i := strings.Index(string(ln), "context 1")
	copy(ln[i:], make([]byte, 9))
	f, _ := os.OpenFile(s.Path("z"), os.O_WRONLY|os.O_APPEND, 0)
	f.Write(ln)
	f.Close()
	ld, err := s.Load(bg, "z", store.LoadOptions{})
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	if ld.Log.Len() != 1 || ld.TornBytes != len(ln) {
		t.Errorf("loaded %d events, torn %d; want 1 and %d", ld.Log.Len(), ld.TornBytes, len(ln))
	}
}

// An event whose data holds a newline would split its line: Append refuses
// it instead of acknowledging a file Load cannot read.
func TestAppendRefusesMultilineData(t *testing.T) {
	s := newStore(t)
	h := session.Header{ID: "n"}
	w, err := s.Create(bg, h)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	l := session.NewLog(h)
	e0 := event(t, l, ctxMsg(0))
	bad := session.Event{Seq: 1, Type: session.TypeSessionTitle, Time: e0.Time, Data: []byte("{\"title\":\n\"t\"}")}
	if err := w.Append(bg, []session.Event{e0, bad}); !errors.Is(err, session.ErrCorrupt) {
		t.Fatalf("Append of multi-line data: %v, want ErrCorrupt", err)
	}
	if err := w.Append(bg, []session.Event{e0}); err != nil {
		t.Fatalf("a refused batch must leave the writer usable: %v", err)
	}
	weird := session.Event{Seq: 1, Type: `bad"type`, Time: e0.Time, Ignorable: true, Data: []byte(`{}`)}
	if err := w.Append(bg, []session.Event{weird}); !errors.Is(err, session.ErrCorrupt) {
		t.Fatalf("Append of a quoted type: %v, want ErrCorrupt", err)
	}
}

// Errors name the session's file, never the temporary file it was first
// written under (gone by then), and a write the store cannot do says what,
// where and why.
func TestErrorsNameRealPaths(t *testing.T) {
	s := newStore(t)
	w, err := s.Create(bg, session.Header{ID: "x"})
	if err != nil {
		t.Fatal(err)
	}
	if got := w.(*writer).osf.Name(); got != s.Path("x") {
		t.Errorf("the writer's file is named %s, want %s", got, s.Path("x"))
	}
	w.Close()
	err = s.writeError("create session y", &os.PathError{Op: "open", Path: filepath.Join(s.dir, ".y.tmp-123"), Err: syscall.EACCES})
	if !errors.Is(err, store.ErrUnwritable) || strings.Contains(err.Error(), ".tmp-") || !strings.Contains(err.Error(), "create session y in "+s.dir+": permission denied") {
		t.Errorf("writeError = %v", err)
	}
	err = s.writeError("sync session y", &os.PathError{Op: "sync", Path: "x", Err: syscall.EROFS})
	if !errors.Is(err, store.ErrUnwritable) || !strings.Contains(err.Error(), "read-only file system") {
		t.Errorf("writeError = %v", err)
	}
}

// A read-only store directory: listing and loading work; creating,
// forking and deleting say the store cannot be written, and where.
func TestReadOnlyStore(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("skipped: running as root, which ignores the directory's permissions")
	}
	s := newStore(t)
	w, _ := s.Create(bg, session.Header{ID: "x"})
	w.Close()
	os.Chmod(s.dir, 0o500)
	defer os.Chmod(s.dir, 0o700)
	if _, err := s.Load(bg, "x", store.LoadOptions{}); err != nil {
		t.Errorf("Load: %v", err)
	}
	if _, err := s.Create(bg, session.Header{ID: "y"}); !errors.Is(err, store.ErrUnwritable) || !strings.Contains(err.Error(), s.dir) {
		t.Errorf("Create: %v, want ErrUnwritable naming %s", err, s.dir)
	}
	if _, err := s.Fork(bg, "x", -1, session.Header{ID: "y"}); !errors.Is(err, store.ErrUnwritable) || strings.Contains(err.Error(), ".tmp-") {
		t.Errorf("Fork: %v, want ErrUnwritable", err)
	}
}

// The lock file names the process holding the session; Load reports it
// and Open, Delete refuse with it.
func TestLockHolder(t *testing.T) {
	s := newStore(t)
	w, err := s.Create(bg, session.Header{ID: "x"})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	var le *store.LockedError
	if _, _, err := s.Open(bg, "x"); !errors.As(err, &le) || le.PID != os.Getpid() || le.ID != "x" {
		t.Errorf("Open: %v, want a *LockedError with pid %d", err, os.Getpid())
	}
	if err := s.Delete(bg, "x"); !errors.As(err, &le) || le.PID != os.Getpid() {
		t.Errorf("Delete: %v", err)
	}
	ld, err := s.Load(bg, "x", store.LoadOptions{})
	if err != nil || ld.Locked == nil || ld.Locked.PID != os.Getpid() {
		t.Errorf("Load: %v, Locked %v", err, ld.Locked)
	}
	// Checking the lock does not keep a writer out for long.
	w.Close()
	ld, _ = s.Load(bg, "x", store.LoadOptions{})
	if ld.Locked != nil {
		t.Errorf("Load after Close: Locked %v", ld.Locked)
	}
	w2, _, err := s.Open(bg, "x")
	if err != nil {
		t.Fatal(err)
	}
	w2.Close()
}

// Delete removes the session's scratch directory with it.
func TestDeleteRemovesScratch(t *testing.T) {
	s := newStore(t)
	w, _ := s.Create(bg, session.Header{ID: "x"})
	w.Close()
	if err := os.MkdirAll(filepath.Join(s.ScratchDir("x"), "sub"), 0o700); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(s.ScratchDir("x"), "sub", "bash-1.log"), []byte("out"), 0o600)
	if err := s.Delete(bg, "x"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(s.ScratchDir("x")); !os.IsNotExist(err) {
		t.Errorf("scratch directory left: %v", err)
	}
	infos, _ := s.List(bg)
	if len(infos) != 0 {
		t.Errorf("List: %+v", infos)
	}
}

// No descriptor of a session file reaches a child process: a tool's
// command, a hook or an MCP server that inherited one could rewrite the
// log behind the writer, or keep its lock after rein exited. Checked for
// a created and an opened session.
func TestSessionFileNotInherited(t *testing.T) {
	if _, err := os.Stat("/proc/self/fd"); err != nil {
		t.Skip("no /proc/self/fd:", err)
	}
	s := newStore(t)
	h := session.Header{ID: "x"}
	w, err := s.Create(bg, h)
	if err != nil {
		t.Fatal(err)
	}
	l := session.NewLog(h)
	if err := w.Append(bg, []session.Event{event(t, l, ctxMsg(0))}); err != nil {
		t.Fatal(err)
	}
	child := func() string {
		t.Helper()
		out, err := exec.Command("/bin/sh", "-c", `for f in /proc/self/fd/*; do readlink "$f"; done; true`).Output()
		if err != nil {
			t.Fatal(err)
		}
		return string(out)
	}
	if fds := child(); strings.Contains(fds, filepath.Dir(s.Path("x"))) {
		t.Errorf("a child of a process writing a new session holds its file:\n%s", fds)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	w, _, err = s.Open(bg, "x")
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if fds := child(); strings.Contains(fds, filepath.Dir(s.Path("x"))) {
		t.Errorf("a child of a process writing a resumed session holds its file:\n%s", fds)
	}
}
