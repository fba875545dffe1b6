// Package jsonl is rein's default, embedded session store: one JSONL file
// per session under <root>/sessions/<id>.jsonl, in the format of docs/format.md
// (a header line, then one event per line).
//
// On-disk layout (see docs/notes/2026-11-30-jsonl-store.md):
//   - <id>.jsonl holds the session. Files are published complete: Create and
//     Fork write a temporary file, fsync it and hard-link it into place, so a
//     session file always starts with a whole header.
//   - <id>.meta is a small JSON summary (event count, turns, title, last
//     time, and the file size it describes) that makes List independent of
//     session size. It is a cache: written without fsync, trusted only up to
//     the size it names; List scans the few lines after that size and falls
//     back to a full scan when the sidecar is missing.
//   - <id>.idx is the fork index (index.go): turn and between-turn
//     compaction spans, titles and the offset of every between-turn line,
//     so that Fork decides session.ForkPoint's rule and finds the bytes to
//     copy without parsing the parent, and at each such line a CRC-32C of
//     the event bytes before it, recorded only over validated bytes, so
//     that Fork need not validate again what it copies. Same trust rule as
//     .meta for the spans: lines after the size it names are scanned by
//     their fixed prefix only; a missing or mismatched one means a prefix
//     scan. It is a log of checksummed records: the writer appends one when
//     a commit leaves the session between turns with new spans, marks or
//     titles (and on Close), and writes a new snapshot only when the
//     appended records outgrow the last one; Open keeps it only when its
//     checksums are those of the bytes it loaded, cuts a torn or damaged
//     tail off, and rebuilds a missing or mismatched sidecar from the bytes
//     it loaded (prefix scan).
//   - A Writer holds an exclusive flock(2) on the session's lock file
//     .<id>.lock (and on the session file), so a second writer, in this
//     process or another, gets store.ErrLocked, even if another program
//     replaced <id>.jsonl meanwhile. Delete removes the lock file while it
//     holds it; a writer that finds its path no longer naming its file
//     fails its next commit.
//
// Concurrency: a Store is safe for concurrent use; so is a Writer, whose
// concurrent Appends are committed in groups, one write and one fsync per
// group. This package imports only store and session (and the standard
// library); it must not import agent or anything above it.
package jsonl

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/reinhq/rein/session"
	"github.com/reinhq/rein/store"
)

// DefaultRoot returns the default store root: $REIN_HOME when set, else
// $XDG_DATA_HOME/rein, else ~/.local/share/rein.
func DefaultRoot() (string, error) {
	if d := os.Getenv("REIN_HOME"); d != "" {
		return d, nil
	}
	if d := os.Getenv("XDG_DATA_HOME"); d != "" {
		return filepath.Join(d, "rein"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("jsonl: no data directory: %w", err)
	}
	return filepath.Join(home, ".local", "share", "rein"), nil
}

// Store is the JSONL store rooted at one directory.
type Store struct {
	root string
	dir  string // root/sessions
	// wrap, when set (tests), wraps every writer's file to inject failures.
	wrap func(file) file
	// metaEvery is the minimum interval between sidecar rewrites while a
	// writer appends (Close always writes it).
	metaEvery time.Duration
	// forks counts the forks that took each path (ForkStats).
	forks struct{ checksummed, validated atomic.Int64 }
}

// ForkStats counts the forks this Store made: Checksummed, those whose
// copied bytes had the checksum recorded by the writer (or load) that
// validated them, so they were not validated again; Validated, those whose
// every copied line was validated (no checksum recorded, or a different
// one: the parent was changed since, or written by another program). For
// tests and benchmarks.
type ForkStats struct{ Checksummed, Validated int64 }

// ForkStats returns how many forks took each path.
func (s *Store) ForkStats() ForkStats {
	return ForkStats{Checksummed: s.forks.checksummed.Load(), Validated: s.forks.validated.Load()}
}

var (
	_ store.ScratchStore = (*Store)(nil)
	_ store.Streamer     = (*Store)(nil)
)

// Open opens (creating as needed) the store at root. An unreadable or
// uncreatable directory is an error wrapping store.ErrUnreadable.
func Open(root string) (*Store, error) {
	dir := filepath.Join(root, "sessions")
	s := &Store{root: root, dir: dir, metaEvery: time.Second}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		if err := s.writeError("create the store directory", err); errors.Is(err, store.ErrUnwritable) {
			return nil, err
		}
		return nil, fmt.Errorf("%w: create the store directory %s: %v", store.ErrUnreadable, dir, err)
	}
	d, err := os.Open(dir)
	if err != nil {
		return nil, fmt.Errorf("%w: open the store directory: %v", store.ErrUnreadable, err)
	}
	_, err = d.ReadDir(1)
	d.Close()
	if err != nil && err != io.EOF {
		return nil, fmt.Errorf("%w: list the store directory %s: %v", store.ErrUnreadable, dir, err)
	}
	s.removeStaleTemps()
	return s, nil
}

// removeStaleTemps deletes temporary files that a crashed Create or Fork
// left behind. A live one is locked by its writer and stays.
func (s *Store) removeStaleTemps() {
	ents, err := os.ReadDir(s.dir)
	if err != nil {
		return
	}
	for _, e := range ents {
		name := e.Name()
		if !strings.HasPrefix(name, ".") || !strings.Contains(name, ".tmp-") {
			continue
		}
		f, err := os.Open(filepath.Join(s.dir, name))
		if err != nil {
			continue
		}
		if lockFile(f) == nil {
			os.Remove(f.Name())
		}
		f.Close()
	}
}

// Root returns the store's root directory.
func (s *Store) Root() string { return s.root }

// Path returns the file that holds session id.
func (s *Store) Path(id string) string { return filepath.Join(s.dir, id+".jsonl") }

func (s *Store) metaPath(id string) string { return filepath.Join(s.dir, id+".meta") }

func (s *Store) idxPath(id string) string { return filepath.Join(s.dir, id+".idx") }

// ScratchDir implements store.ScratchStore: <root>/sessions/<id>.scratch,
// removed by Delete. Listing and Open ignore it.
func (s *Store) ScratchDir(id string) string { return filepath.Join(s.dir, id+".scratch") }

// lockPath is the session's lock file. Writers lock it, not the session
// file: another program may replace <id>.jsonl (an editor's rename, a
// restore), and a lock on the old file would then keep no one out. The
// lock file is never rewritten; Delete removes it while holding it.
func (s *Store) lockPath(id string) string { return filepath.Join(s.dir, "."+id+".lock") }

// lockSession takes session id's writer lock: a *store.LockedError when
// another writer (in any process) holds it. The lock file then holds the
// pid of the process that has it, for that error. The caller closes the
// returned file to release it.
func (s *Store) lockSession(id string) (*os.File, error) {
	for range 3 {
		f, err := os.OpenFile(s.lockPath(id), os.O_RDWR|os.O_CREATE, 0o600)
		if err != nil {
			return nil, s.writeError("lock session "+id+" for writing", err)
		}
		if err := lockRetry(f); err != nil {
			f.Close()
			if errors.Is(err, store.ErrLocked) {
				return nil, &store.LockedError{ID: id, PID: lockHolder(s.lockPath(id))}
			}
			return nil, fmt.Errorf("%w: %s", err, id)
		}
		// A Delete may have removed the lock file between our open and
		// our lock: then we hold a lock nobody else will see. Retry.
		fi, ferr := f.Stat()
		pfi, perr := os.Stat(s.lockPath(id))
		if ferr == nil && perr == nil && os.SameFile(fi, pfi) {
			if f.Truncate(0) == nil {
				_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
			}
			return f, nil
		}
		f.Close()
	}
	return nil, fmt.Errorf("%w: %s: its lock file keeps changing", store.ErrLocked, id)
}

// lockRetry is lockFile, tried a few times over a few milliseconds: a
// reader checking whether the session is held (Load) holds a shared lock
// for an instant.
func lockRetry(f *os.File) error {
	err := lockFile(f)
	for i := 0; i < 5 && errors.Is(err, store.ErrLocked); i++ {
		time.Sleep(time.Millisecond)
		err = lockFile(f)
	}
	return err
}

// lockHolder returns the pid a writer wrote into the lock file at path,
// or 0.
func lockHolder(path string) int {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 {
		return 0
	}
	return pid
}

// holder returns who holds session id's writer lock, or nil when nobody
// does.
func (s *Store) holder(id string) *store.LockedError {
	if !held(s.lockPath(id)) {
		return nil
	}
	return &store.LockedError{ID: id, PID: lockHolder(s.lockPath(id))}
}

// writeError describes a failure to write what the store must: what it was
// doing, in which directory, and the system's reason, without the name of
// a temporary file (which is gone by the time anyone reads the error).
// Permission and read-only errors wrap store.ErrUnwritable.
func (s *Store) writeError(what string, err error) error {
	cause := err
	var pe *fs.PathError
	if errors.As(err, &pe) {
		cause = pe.Err
	}
	if errors.Is(cause, fs.ErrPermission) || errors.Is(cause, syscall.EROFS) || errors.Is(cause, syscall.ENOSPC) || errors.Is(cause, syscall.EDQUOT) {
		return fmt.Errorf("%w: %s in %s: %v", store.ErrUnwritable, what, s.dir, cause)
	}
	return fmt.Errorf("jsonl: %s in %s: %v", what, s.dir, cause)
}

func checkID(id string) error {
	if id == "" || strings.ContainsAny(id, "/\\\x00") || strings.HasPrefix(id, ".") || len(id) > 200 {
		return fmt.Errorf("jsonl: invalid session id %q", id)
	}
	return nil
}

func notFound(id string, err error) error {
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%w: %s", store.ErrNotFound, id)
	}
	return fmt.Errorf("%w: %v", store.ErrUnreadable, err)
}

// publish writes content to a temporary file, fsyncs it and links it into
// place as session id (ErrExists when taken). It returns the open, locked
// file positioned nowhere in particular (writers use WriteAt) when keep is
// set, else closes it.
func (s *Store) publish(id string, parts [][]byte, keep bool) (*os.File, error) {
	tmp, err := os.CreateTemp(s.dir, "."+id+".tmp-*")
	if err != nil {
		return nil, s.writeError("create session "+id, err)
	}
	ok := false
	defer func() {
		os.Remove(tmp.Name())
		if !ok {
			tmp.Close()
		}
	}()
	if keep {
		if err := lockFile(tmp); err != nil {
			return nil, err
		}
	}
	for _, p := range parts {
		if _, err := tmp.Write(p); err != nil {
			return nil, s.writeError("write session "+id, err)
		}
	}
	if err := tmp.Sync(); err != nil {
		return nil, s.writeError("sync session "+id, err)
	}
	if err := os.Link(tmp.Name(), s.Path(id)); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return nil, fmt.Errorf("%w: %s", store.ErrExists, id)
		}
		return nil, s.writeError("publish session "+id, err)
	}
	if err := syncDir(s.dir); err != nil {
		return nil, err
	}
	ok = true
	if !keep {
		tmp.Close()
		return nil, nil
	}
	return renamed(tmp, s.Path(id))
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("jsonl: sync dir: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("jsonl: sync dir: %w", err)
	}
	return nil
}

// Create implements store.Store. The session file is durable (header
// written and fsynced, directory fsynced) when Create returns.
func (s *Store) Create(ctx context.Context, h session.Header) (store.Writer, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := checkID(h.ID); err != nil {
		return nil, err
	}
	if _, err := os.Lstat(s.Path(h.ID)); err == nil {
		return nil, fmt.Errorf("%w: %s", store.ErrExists, h.ID)
	}
	h, line, err := store.HeaderLine(h)
	if err != nil {
		return nil, err
	}
	lk, err := s.lockSession(h.ID)
	if err != nil {
		return nil, err
	}
	f, err := s.publish(h.ID, [][]byte{line}, true)
	if err != nil {
		lk.Close()
		return nil, err
	}
	m := meta{Size: int64(len(line)), Title: h.Title, Updated: h.CreatedAt}
	w := s.newWriter(h, f, m, newIndex(int64(len(line))), session.NewValidator(h))
	w.lock = lk
	w.writeMeta()
	return w, nil
}

// Open implements store.Store.
func (s *Store) Open(ctx context.Context, id string) (store.Writer, *store.Loaded, error) {
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	if err := checkID(id); err != nil {
		return nil, nil, err
	}
	if _, err := os.Lstat(s.Path(id)); err != nil {
		return nil, nil, notFound(id, err)
	}
	lk, err := s.lockSession(id)
	if err != nil {
		return nil, nil, err
	}
	f, err := os.OpenFile(s.Path(id), os.O_RDWR, 0)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			os.Remove(s.lockPath(id)) // deleted meanwhile: leave no lock file
		}
		lk.Close()
		return nil, nil, notFound(id, err)
	}
	// Also lock the file itself, so that a rein from before the lock file
	// (which locked the session file) is kept out too.
	if err := lockRetry(f); err != nil {
		f.Close()
		lk.Close()
		if errors.Is(err, store.ErrLocked) {
			// A writer from before the lock file (which locked only
			// the session file).
			return nil, nil, &store.LockedError{ID: id}
		}
		return nil, nil, fmt.Errorf("%w: %s", err, id)
	}
	closeAll := func() { f.Close(); lk.Close() }
	raw, plan := s.indexPlan(id, f)
	p, err := loadFile(s.Path(id), f, true, plan)
	if err != nil {
		closeAll()
		return nil, nil, err
	}
	l := p.loaded.Log
	stored := l.Len() - int64(len(p.loaded.Repair))
	x, sc := s.openIndex(id, p, raw, stored)
	if p.good < p.size {
		// Drop the sidecar first: it may describe bytes about to vanish.
		// (The fork index describes p.good bytes at most: openIndex.)
		os.Remove(s.metaPath(id))
		if err := f.Truncate(p.good); err != nil {
			closeAll()
			return nil, nil, fmt.Errorf("jsonl: truncate torn tail of %s: %w", id, err)
		}
		if err := f.Sync(); err != nil {
			closeAll()
			return nil, nil, fmt.Errorf("jsonl: sync %s: %w", id, err)
		}
	}
	turns, _ := l.Turn()
	m := meta{Size: p.good, Events: stored, Turns: turns, Title: l.Title(), Updated: l.LastTime()}
	if stored == 0 {
		m.Updated = p.header.CreatedAt
	}
	w := s.newWriter(p.header, f, m, x, p.v)
	w.idx = sc
	w.lock = lk
	if len(p.loaded.Repair) > 0 {
		if err := w.Append(ctx, p.loaded.Repair); err != nil {
			w.abandon()
			return nil, nil, fmt.Errorf("jsonl: write repair of %s: %w", id, err)
		}
	}
	w.writeMeta()
	return w, p.loaded, nil
}

// indexPlan reads session id's fork index sidecar for Open and plans the
// checksums that will check it: of the event bytes up to each of its marks
// and up to its size, computed by the loader as it reads (see sumPlan).
func (s *Store) indexPlan(id string, f *os.File) ([]byte, *sumPlan) {
	plan := &sumPlan{}
	st, err := f.Stat()
	if err != nil {
		return nil, plan
	}
	line, err := readHeaderLine(f, st.Size())
	if err != nil {
		return nil, plan
	}
	plan.hdr = int64(len(line))
	raw, err := os.ReadFile(s.idxPath(id))
	if err != nil {
		return nil, plan
	}
	if x, _, _, ok := parseIndex(raw, plan.hdr, st.Size()); ok && x.Sum >= 0 {
		for i := 1; i < len(x.Marks); i += 3 {
			plan.at = append(plan.at, x.Marks[i])
		}
		plan.at = append(plan.at, x.Size)
		slices.Sort(plan.at)
		plan.at = slices.Compact(plan.at)
		plan.at = slices.DeleteFunc(plan.at, func(off int64) bool { return off < plan.hdr })
	}
	return raw, plan
}

// openIndex returns the fork index of the first good bytes of session id
// for its writer, with the writer's sidecar, derived from the bytes the
// load read and validated, checksums included: the sidecar's records
// (raw), when their checksums (that of every mark and of the whole) are
// those of these bytes, extended by a prefix scan of the lines after them;
// or, when the sidecar is missing, unusable or describes other bytes
// (another program rewrote the file, even to the same size), a prefix scan
// of the whole (the sidecar is then replaced by the writer's first write).
// When even a scan disagrees with the load it returns a nil index, and the
// writer keeps none (Fork then scans).
func (s *Store) openIndex(id string, p *parsed, raw []byte, stored int64) (*index, sidecar) {
	path := s.idxPath(id)
	m := p.image
	// complete extends x over the lines after its size and fills in the
	// checksums it lacks there.
	complete := func(x *index) bool {
		marks, off, crc := len(x.Marks)/3, x.Size, uint32(x.Sum)
		return x.scan(m, s.Path(id), p.good, -1) == nil && x.Events == stored && x.sumMarks(m, marks, off, crc)
	}
	if raw != nil && p.plan.hdr == p.hdr {
		x, n, snap, ok := parseIndex(raw, p.hdr, p.good)
		if ok && x.Sum >= 0 {
			unsummed := x.unsummed()
			if x.check(p.plan) && complete(x) {
				sc := sidecar{path: path}
				if unsummed == 0 {
					sc.open(n, snap) // else the filled checksums go into a new snapshot
				}
				return x, sc
			}
		}
	}
	os.Remove(path)
	if x := newIndex(p.hdr); complete(x) {
		return x, sidecar{path: path}
	}
	return nil, sidecar{path: path}
}

// Load implements store.Store. A session a writer holds (in this process
// or another) is read as far as it was written and not repaired; one that
// no writer holds is repaired in memory. Salvaging reads the whole file
// into memory first (store.ReadFile); a plain load streams it.
func (s *Store) Load(ctx context.Context, id string, opts store.LoadOptions) (*store.Loaded, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := checkID(id); err != nil {
		return nil, err
	}
	f, err := os.Open(s.Path(id))
	if err != nil {
		return nil, notFound(id, err)
	}
	defer f.Close()
	locked := s.holder(id)
	var ld *store.Loaded
	if opts.Salvage {
		data, rerr := io.ReadAll(f)
		if rerr != nil {
			return nil, fmt.Errorf("%w: read %s: %v", store.ErrUnreadable, s.Path(id), rerr)
		}
		ld, err = store.ReadFile(s.Path(id), data, opts, locked == nil)
	} else {
		var p *parsed
		if p, err = loadFile(s.Path(id), f, locked == nil, nil); err == nil {
			ld = p.loaded
		}
	}
	if err != nil {
		return nil, err
	}
	ld.Locked = locked
	return ld, nil
}

// List implements store.Store. Per session it reads the header line, the
// sidecar and the lines appended after the size the sidecar describes.
func (s *Store) List(ctx context.Context) ([]store.Info, error) {
	ents, err := os.ReadDir(s.dir)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", store.ErrUnreadable, err)
	}
	var out []store.Info
	for _, e := range ents {
		name := e.Name()
		if !strings.HasSuffix(name, ".jsonl") || strings.HasPrefix(name, ".") || e.IsDir() {
			continue
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		info, err := s.info(strings.TrimSuffix(name, ".jsonl"))
		if errors.Is(err, fs.ErrNotExist) {
			continue // deleted meanwhile
		}
		if err != nil {
			return nil, err
		}
		out = append(out, info)
	}
	slices.SortFunc(out, func(a, b store.Info) int {
		if c := b.UpdatedAt.Compare(a.UpdatedAt); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	return out, nil
}

// Info summarises session id as List does, reading only its header line,
// its sidecar and the lines after the size the sidecar describes.
func (s *Store) Info(ctx context.Context, id string) (store.Info, error) {
	if err := ctx.Err(); err != nil {
		return store.Info{}, err
	}
	if err := checkID(id); err != nil {
		return store.Info{}, err
	}
	info, err := s.info(id)
	if err != nil {
		return store.Info{}, notFound(id, err)
	}
	return info, nil
}

// info summarises one session. A session whose header cannot be read is
// still listed (ID, Size, file time) so that nothing disappears from view.
func (s *Store) info(id string) (store.Info, error) {
	f, err := os.Open(s.Path(id))
	if err != nil {
		return store.Info{}, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return store.Info{}, err
	}
	size := st.Size()
	info := store.Info{ID: id, Size: size, UpdatedAt: st.ModTime().UTC()}
	br := bufio.NewReaderSize(f, 4096)
	line, err := br.ReadBytes('\n')
	if err != nil {
		return info, nil
	}
	var h session.Header
	if err := json.Unmarshal(line[:len(line)-1], &h); err != nil {
		return info, nil
	}
	info.Title, info.Cwd, info.Parent, info.CreatedAt = h.Title, h.Cwd, h.Parent, h.CreatedAt
	m, ok := readMeta(s.metaPath(id))
	if !ok || m.Size < int64(len(line)) || m.Size > size {
		m = meta{Size: int64(len(line)), Title: h.Title, Updated: h.CreatedAt}
	}
	if m.Size < size {
		if _, err := f.Seek(m.Size, io.SeekStart); err != nil {
			return info, err
		}
		m.scan(bufio.NewReaderSize(f, 64<<10))
	}
	info.Title, info.UpdatedAt, info.Events, info.Turns = m.Title, m.Updated, m.Events, m.Turns
	return info, nil
}

// Fork implements store.Store by copying: the child file holds a new header
// (parent, forkSeq) followed by the parent's event lines 0..at verbatim,
// so it is a complete session in the format of docs/format.md. The parent's
// events are not parsed: the fork index sidecar (<id>.idx, see index.go)
// gives the turn and between-turn compaction spans and the offset where
// line at ends; lines past the size it describes, or all of them when it
// is missing or stale, are scanned by their fixed prefix. Line at itself
// is parsed (its seq checked, its time taken for the child's sidecar). The
// bytes are then copied, through a pipeline of buffers (see copyRange),
// and the child gets only lines that validate: when the index holds a
// checksum for the bytes up to line at (recorded by the writer that
// validated them as it appended them, or by Open over the bytes it loaded)
// and the bytes copied have it, they are those bytes; otherwise every line
// is validated while it is copied (ForkStats counts the two paths). A
// refused fork leaves no child.
func (s *Store) Fork(ctx context.Context, id string, at int64, h session.Header) (session.Header, error) {
	if err := ctx.Err(); err != nil {
		return session.Header{}, err
	}
	if err := checkID(id); err != nil {
		return session.Header{}, err
	}
	if err := checkID(h.ID); err != nil {
		return session.Header{}, err
	}
	if at < -1 {
		return session.Header{}, fmt.Errorf("jsonl: fork %s at seq %d: out of range", id, at)
	}
	if _, err := os.Lstat(s.Path(h.ID)); err == nil {
		return session.Header{}, fmt.Errorf("%w: %s", store.ErrExists, h.ID)
	}
	// The sidecar is read before the file's size is taken: it describes
	// durable bytes, so the file holds at least as many.
	idxRaw, _ := os.ReadFile(s.idxPath(id))
	pf, err := os.Open(s.Path(id))
	if err != nil {
		return session.Header{}, notFound(id, err)
	}
	defer pf.Close()
	// A writer may be mid-commit: make what the page cache holds durable
	// before it is copied, so a child never outlives bytes its parent could
	// lose in a power cut. (A commit that then fails and is truncated away
	// can still reach the child: see the design note.)
	_ = pf.Sync()
	st, err := pf.Stat()
	if err != nil {
		return session.Header{}, fmt.Errorf("%w: %v", store.ErrUnreadable, err)
	}
	// The parent's header, for defaults.
	line, err := readHeaderLine(pf, st.Size())
	if err != nil {
		return session.Header{}, &store.LineError{File: s.Path(id), Line: 1, Err: err}
	}
	var ph session.Header
	if err := json.Unmarshal(line[:len(line)-1], &ph); err != nil {
		return session.Header{}, &store.LineError{File: s.Path(id), Line: 1, Err: err}
	}
	hdr := int64(len(line))

	x, _, _, ok := parseIndex(idxRaw, hdr, st.Size())
	if !ok {
		x = newIndex(hdr)
	}
	end, atTime, err := forkPlan(pf, s.Path(id), x, at, st.Size())
	var lerr *store.LineError
	if err != nil && ok && (errors.Is(err, errStale) || errors.As(err, &lerr)) {
		x = newIndex(hdr) // the sidecar does not match the file: scan it
		end, atTime, err = forkPlan(pf, s.Path(id), x, at, st.Size())
	}
	if err != nil {
		return session.Header{}, fmt.Errorf("jsonl: fork %s at seq %d: %w", id, at, err)
	}

	h.Parent, h.ForkSeq = id, at
	if h.Title == "" {
		h.Title = ph.Title
	}
	h, hline, err := store.HeaderLine(h)
	if err != nil {
		return session.Header{}, err
	}
	tmp, err := os.CreateTemp(s.dir, "."+h.ID+".tmp-*")
	if err != nil {
		return session.Header{}, s.writeError("fork "+id+": create session "+h.ID, err)
	}
	defer func() {
		os.Remove(tmp.Name())
		tmp.Close()
	}()
	if err := lockFile(tmp); err != nil {
		return session.Header{}, err
	}
	// Every line the child gets is one a rein writer or load validated:
	// either the checksum of what was copied is the one recorded for those
	// bytes, or the lines are validated while they are copied.
	want, vouched := x.sumAt(at, end)
	trusted := false
	if vouched {
		var got uint32
		err = copyRange(tmp, hline, pf, hdr, end, func(b []byte) error {
			got = crc32.Update(got, castagnoli, b)
			return nil
		})
		if trusted = err == nil && got == want; !trusted && err == nil {
			// Not the bytes that were validated: start again, validating.
			if err = tmp.Truncate(0); err == nil {
				_, err = tmp.Seek(0, io.SeekStart)
			}
		}
	}
	if !trusted && err == nil {
		v := session.NewValidator(ph)
		err = copyRange(tmp, hline, pf, hdr, end, func(lines []byte) error {
			if err := v.AppendLines(lines); err != nil {
				return store.LoadError(s.Path(id), v.Len(), 2, err)
			}
			return nil
		})
		if err == nil && v.Len() != at+1 {
			err = fmt.Errorf("%w: seq %d ends at byte %d, where the file holds %d events", errStale, at, end, v.Len())
		}
		if err == nil {
			err = v.ForkPoint(at)
		}
	}
	var lerr2 *store.LineError
	switch {
	case errors.As(err, &lerr2) || errors.Is(err, errStale) || errors.Is(err, session.ErrOpenTurn) || errors.Is(err, errBeyond):
		return session.Header{}, fmt.Errorf("jsonl: fork %s at seq %d: %w", id, at, err)
	case err != nil:
		return session.Header{}, s.writeError("fork "+id+": write session "+h.ID, err)
	}
	if err := os.Link(tmp.Name(), s.Path(h.ID)); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return session.Header{}, fmt.Errorf("%w: %s", store.ErrExists, h.ID)
		}
		return session.Header{}, s.writeError("fork "+id+": publish session "+h.ID, err)
	}
	if err := syncDir(s.dir); err != nil {
		return session.Header{}, err
	}
	cx := x.child(at, end, int64(len(hline)))
	if trusted {
		s.forks.checksummed.Add(1)
	} else {
		// The parent's index may describe other bytes than those
		// copied: the child's first Open rebuilds it from its own.
		cx.unvouched()
		s.forks.validated.Add(1)
	}
	m := meta{Size: cx.Size, Events: at + 1, Turns: startsUpTo(x.Turns, at), Title: h.Title, Updated: h.CreatedAt}
	if t, ok := x.title(at); ok {
		m.Title = t
	}
	if at >= 0 {
		m.Updated = atTime
	}
	m.write(s.metaPath(h.ID))
	writeFileAtomic(s.idxPath(h.ID), cx.snapshot())
	return h, nil
}

// forkPlan decides whether the parent (f, holding size bytes, indexed by
// x, which it extends as needed) may be forked at seq at, and returns the
// offset just past line at and that event's time. Line at is parsed: when
// it does not parse and is the final line it is a torn tail (errBeyond);
// otherwise the error is a *store.LineError (or wraps errStale when the
// index names lines the file does not have). A fork point inside a turn
// is refused without reading its line, unless it is the last line a scan
// found: a torn line is out of range, not inside a turn.
func forkPlan(f *os.File, file string, x *index, at, size int64) (int64, time.Time, error) {
	if at >= x.Events {
		if err := x.scan(f, file, size, at); err != nil {
			return 0, time.Time{}, err
		}
	}
	refused := x.forkPoint(at)
	if refused != nil && (!errors.Is(refused, session.ErrOpenTurn) || at < x.Events-1 || x.tail == 0) {
		return 0, time.Time{}, refused
	}
	if at == -1 {
		return x.Hdr, time.Time{}, nil
	}
	var line []byte
	var end int64
	if refused != nil {
		line, end = make([]byte, x.Size-x.tail-1), x.Size
		if _, err := f.ReadAt(line, x.tail); err != nil {
			return 0, time.Time{}, fmt.Errorf("%w: %v", store.ErrUnreadable, err)
		}
	} else {
		var err error
		if line, end, err = x.lineAt(f, at); err != nil {
			return 0, time.Time{}, err
		}
	}
	ev, err := session.ParseLine(line)
	if err != nil {
		if finalLine(f, end, size) {
			return 0, time.Time{}, fmt.Errorf("%w: seq %d is a torn final line", errBeyond, at)
		}
		return 0, time.Time{}, &store.LineError{File: file, Line: int(at) + 2, Err: err}
	}
	if ev.Seq != at {
		return 0, time.Time{}, &store.LineError{File: file, Line: int(at) + 2, Err: fmt.Errorf("%w: seq %d, want %d", store.ErrSeq, ev.Seq, at)}
	}
	if refused != nil {
		return 0, time.Time{}, refused
	}
	return end, ev.Time, nil
}

// finalLine reports whether no complete line follows offset end in f.
func finalLine(f *os.File, end, size int64) bool {
	buf := make([]byte, 4096)
	for end < size {
		n, err := f.ReadAt(buf[:min(int64(len(buf)), size-end)], end)
		if bytes.IndexByte(buf[:n], '\n') >= 0 {
			return false
		}
		if n == 0 || err != nil {
			break
		}
		end += int64(n)
	}
	return true
}

// copyBuf is the size of each of copyRange's buffers.
var copyBuf = 1 << 20

// copyRange writes hline and then bytes [from, to) of src to dst, and
// fsyncs dst. With check set it also hands the same bytes to check, in
// pieces of whole lines (but maybe the last), as they are copied: a reader
// goroutine fills buffers, this one writes them and another checks them,
// and a buffer is read again only when both are done with it. So the
// source is read once, and checking overlaps writing. (copy_file_range,
// which io.Copy would use, is as fast as a raw copy only when source and
// destination offsets agree modulo the page size; behind a child header of
// another length it copied and synced 167 MB about 1.5× slower than this.)
func copyRange(dst *os.File, hline []byte, src *os.File, from, to int64, check func([]byte) error) error {
	if _, err := dst.Write(hline); err != nil {
		return err
	}
	type chunk struct {
		b    []byte // the bytes to copy (and check)
		buf  []byte // the buffer they are in
		err  error
		left atomic.Int32 // consumers still using buf
	}
	const nbuf = 3
	free := make(chan []byte, nbuf)
	for range nbuf {
		free <- make([]byte, copyBuf)
	}
	consumers := int32(1)
	if check != nil {
		consumers = 2
	}
	done := func(c *chunk) {
		if c.left.Add(-1) == 0 && len(c.buf) == copyBuf {
			free <- c.buf
		}
	}
	stop := make(chan struct{})
	toWrite, toCheck := make(chan *chunk, nbuf), make(chan *chunk, nbuf)
	go func() {
		defer close(toWrite)
		defer close(toCheck)
		var carry []byte // the start of a line the last piece did not hold
		var buf []byte
		for off := from; off < to || len(carry) > 0; {
			if buf == nil {
				select {
				case buf = <-free:
				case <-stop:
					return
				}
			}
			if len(carry) >= len(buf) {
				// A long line's end: it needs a bigger buffer.
				if len(buf) == copyBuf {
					free <- buf
				}
				buf = make([]byte, 2*len(carry))
			}
			n := copy(buf, carry)
			var err error
			if off < to {
				var k int
				k, err = src.ReadAt(buf[n:min(int64(len(buf)), int64(n)+to-off)], off)
				off += int64(k)
				n += k
				if err == io.EOF || (err == nil && k == 0) {
					err = fmt.Errorf("%w: parent shrank while copied", errBeyond)
				}
			}
			end := n
			if err == nil && off < to {
				end = bytes.LastIndexByte(buf[:n], '\n') + 1
				if end == 0 {
					// A line longer than the buffer: read on into a
					// bigger one.
					carry = append(carry[:0], buf[:n]...)
					if len(buf) == copyBuf {
						free <- buf
					}
					buf = make([]byte, 2*len(buf))
					continue
				}
			}
			carry = append(carry[:0], buf[end:n]...)
			c := &chunk{b: buf[:end], buf: buf, err: err}
			c.left.Store(consumers)
			buf = nil
			for _, ch := range []chan *chunk{toWrite, toCheck}[:consumers] {
				select {
				case ch <- c:
				case <-stop:
					return
				}
			}
			if err != nil {
				return
			}
		}
	}()
	checked := make(chan error, 1)
	if check != nil {
		go func() {
			var err error
			for c := range toCheck {
				if err == nil && c.err == nil {
					err = check(c.b)
				}
				done(c)
			}
			checked <- err
		}()
	} else {
		checked <- nil
	}
	var err error
	for c := range toWrite {
		if err == nil {
			if _, werr := dst.Write(c.b); werr != nil {
				err = werr
			} else if c.err != nil {
				err = c.err
			}
			if err != nil {
				close(stop)
			}
		}
		done(c)
	}
	if cerr := <-checked; cerr != nil {
		return cerr
	}
	if err != nil {
		return err
	}
	return dst.Sync()
}

// readHeaderLine returns the first line of f (with its '\n').
func readHeaderLine(f *os.File, size int64) ([]byte, error) {
	line, err := bufio.NewReaderSize(io.NewSectionReader(f, 0, size), 4096).ReadBytes('\n')
	if err != nil {
		return nil, fmt.Errorf("%w: no complete header line", session.ErrCorrupt)
	}
	return line, nil
}

// Delete implements store.Store.
func (s *Store) Delete(ctx context.Context, id string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := checkID(id); err != nil {
		return err
	}
	if _, err := os.Lstat(s.Path(id)); err != nil {
		return notFound(id, err)
	}
	lk, err := s.lockSession(id)
	if err != nil {
		return err
	}
	defer lk.Close()
	f, err := os.Open(s.Path(id))
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			os.Remove(s.lockPath(id))
		}
		return notFound(id, err)
	}
	defer f.Close()
	if err := lockRetry(f); err != nil {
		if errors.Is(err, store.ErrLocked) {
			return &store.LockedError{ID: id}
		}
		return fmt.Errorf("%w: %s", err, id)
	}
	// The scratch directory first: should that fail, the session is still
	// there to delete again.
	if err := os.RemoveAll(s.ScratchDir(id)); err != nil {
		return s.writeError("remove the scratch files of session "+id, err)
	}
	os.Remove(s.metaPath(id))
	os.Remove(s.idxPath(id))
	if err := os.Remove(s.Path(id)); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return notFound(id, err)
		}
		return s.writeError("remove session "+id, err)
	}
	// Removed while held: an Open that opened it meanwhile sees the change
	// and retries on a fresh lock file (lockSession).
	os.Remove(s.lockPath(id))
	return syncDir(s.dir)
}
