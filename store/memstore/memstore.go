// Package memstore is an in-memory store.Store: each session is the bytes
// of a session file held in process memory, and vanishes with it. It is
// meant for tests and for embedders that persist elsewhere; it reads with
// store.ReadFile, so it validates, repairs and salvages exactly as the
// durable backends do, and it passes the same conformance suite
// (durability here means "visible to later Loads").
//
// Tests can slow down or fail appends with Options to exercise the agent's
// flush paths, and store a crafted file with PutFile.
package memstore

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"slices"
	"sort"
	"sync"

	"github.com/reinhq/rein/session"
	"github.com/reinhq/rein/store"
)

// Options tune a Store for tests.
type Options struct {
	// BeforeAppend, when set, runs before every Append is applied. A
	// non-nil error fails the Append (nothing of the batch is stored). It
	// may block (a slow disk).
	BeforeAppend func(ctx context.Context, id string, batch []session.Event) error
}

// Store is an in-memory store.Store.
type Store struct {
	opts     Options
	mu       sync.Mutex
	sessions map[string]*sess
}

// sess is one session: a file's bytes.
type sess struct {
	file   []byte // header line, then event lines
	events int64  // lines the writer appended after the header (Create, Open)
	locked bool
}

// New returns an empty store.
func New(opts Options) *Store {
	return &Store{opts: opts, sessions: map[string]*sess{}}
}

var (
	_ store.Store    = (*Store)(nil)
	_ store.Streamer = (*Store)(nil)
)

// Create implements store.Store.
func (s *Store) Create(ctx context.Context, h session.Header) (store.Writer, error) {
	if h.ID == "" {
		return nil, fmt.Errorf("memstore: create: empty id")
	}
	h, line, err := store.HeaderLine(h)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.sessions[h.ID]; ok {
		return nil, fmt.Errorf("%w: %s", store.ErrExists, h.ID)
	}
	s.sessions[h.ID] = &sess{file: line, locked: true}
	return &writer{s: s, id: h.ID, header: h}, nil
}

// PutFile stores file (the bytes of a session file: a header line, then
// event lines) as session id, replacing any, as a crafted or damaged file
// for tests.
func (s *Store) PutFile(id string, file []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sessions[id] = &sess{file: slices.Clone(file)}
}

// File returns a copy of session id's bytes, or nil.
func (s *Store) File(id string) []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	if se, ok := s.sessions[id]; ok {
		return slices.Clone(se.file)
	}
	return nil
}

func (s *Store) read(id string) ([]byte, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	se, ok := s.sessions[id]
	if !ok {
		return nil, false, fmt.Errorf("%w: %s", store.ErrNotFound, id)
	}
	// Appends only ever add bytes after what is read here, so the clip
	// is a stable snapshot.
	return slices.Clip(se.file), se.locked, nil
}

func name(id string) string { return "memstore:" + id }

// Open implements store.Store.
func (s *Store) Open(ctx context.Context, id string) (store.Writer, *store.Loaded, error) {
	s.mu.Lock()
	se, ok := s.sessions[id]
	if !ok {
		s.mu.Unlock()
		return nil, nil, fmt.Errorf("%w: %s", store.ErrNotFound, id)
	}
	if se.locked {
		s.mu.Unlock()
		return nil, nil, &store.LockedError{ID: id, PID: os.Getpid()}
	}
	se.locked = true
	file := slices.Clip(se.file)
	s.mu.Unlock()
	ld, err := store.ReadFile(name(id), file, store.LoadOptions{}, true)
	if err != nil {
		s.unlock(id)
		return nil, nil, err
	}
	s.mu.Lock()
	// Drop a torn tail before anything is appended after it (into a new
	// array: a snapshot may hold the torn bytes).
	if ld.TornBytes > 0 {
		se.file = slices.Clone(se.file[:len(file)-ld.TornBytes])
	}
	se.events = ld.Log.Len() - int64(len(ld.Repair))
	s.mu.Unlock()
	w := &writer{s: s, id: id, header: ld.Log.Header()}
	if len(ld.Repair) > 0 {
		if err := w.Append(ctx, ld.Repair); err != nil {
			s.unlock(id)
			return nil, nil, err
		}
	}
	return w, ld, nil
}

func (s *Store) unlock(id string) {
	s.mu.Lock()
	if se, ok := s.sessions[id]; ok {
		se.locked = false
	}
	s.mu.Unlock()
}

// Load implements store.Store. A session a writer holds is not repaired.
func (s *Store) Load(ctx context.Context, id string, opts store.LoadOptions) (*store.Loaded, error) {
	file, locked, err := s.read(id)
	if err != nil {
		return nil, err
	}
	ld, err := store.ReadFile(name(id), file, opts, !locked)
	if err != nil {
		return nil, err
	}
	if locked {
		ld.Locked = &store.LockedError{ID: id, PID: os.Getpid()}
	}
	return ld, nil
}

// Stream implements store.Streamer over the session's bytes as they stand
// now (store.StreamFile).
func (s *Store) Stream(ctx context.Context, id string, opts store.StreamOptions, fn func(ev session.Event, p session.Payload) error) (*store.Streamed, error) {
	file, locked, err := s.read(id)
	if err != nil {
		return nil, err
	}
	held := func() *store.LockedError {
		if locked {
			return &store.LockedError{ID: id, PID: os.Getpid()}
		}
		return nil
	}
	return store.StreamFile(ctx, name(id), bytes.NewReader(file), int64(len(file)), held, opts, fn)
}

// List implements store.Store. It reads each session's lines as far as
// they parse.
func (s *Store) List(ctx context.Context) ([]store.Info, error) {
	s.mu.Lock()
	files := make(map[string][]byte, len(s.sessions))
	for id, se := range s.sessions {
		files[id] = slices.Clip(se.file)
	}
	s.mu.Unlock()
	out := make([]store.Info, 0, len(files))
	for id, file := range files {
		info := store.Info{ID: id, Size: int64(len(file))}
		nl := bytes.IndexByte(file, '\n')
		if nl < 0 {
			out = append(out, info)
			continue
		}
		h, err := store.ParseHeader(file[:nl])
		if err == nil {
			info.Title, info.Cwd, info.Parent, info.CreatedAt, info.UpdatedAt = h.Title, h.Cwd, h.Parent, h.CreatedAt, h.CreatedAt
		}
		for _, ln := range bytes.SplitAfter(file[nl+1:], []byte("\n")) {
			ev, err := session.ParseLine(bytes.TrimSuffix(ln, []byte("\n")))
			if err != nil || len(ln) == 0 || ln[len(ln)-1] != '\n' {
				break
			}
			info.Events = ev.Seq + 1
			switch ev.Type {
			case session.TypeTurnStart:
				info.Turns++
			case session.TypeSessionTitle:
				if p, err := ev.Decode(); err == nil {
					info.Title = p.(*session.SessionTitle).Title
				}
			}
			info.UpdatedAt = ev.Time
		}
		out = append(out, info)
	}
	sort.Slice(out, func(i, j int) bool {
		if !out[i].UpdatedAt.Equal(out[j].UpdatedAt) {
			return out[i].UpdatedAt.After(out[j].UpdatedAt)
		}
		return out[i].ID < out[j].ID
	})
	return out, nil
}

// Fork implements store.Store: the child is a new header line and the
// parent's lines 0..at byte for byte, every one of them validated first.
func (s *Store) Fork(ctx context.Context, id string, at int64, h session.Header) (session.Header, error) {
	parent, _, err := s.read(id)
	if err != nil {
		return session.Header{}, err
	}
	hdr := bytes.IndexByte(parent, '\n') + 1
	end := hdr
	for range at + 1 {
		j := bytes.IndexByte(parent[end:], '\n')
		if j < 0 {
			return session.Header{}, fmt.Errorf("memstore: fork %s: seq %d out of range", id, at)
		}
		end += j + 1
	}
	// The rule on what can be read of the whole parent (a refusal names
	// the stable points after at too), the lines up to at validated.
	all, err := store.ReadFile(name(id), parent, store.LoadOptions{Salvage: true}, false)
	if err != nil {
		return session.Header{}, err
	}
	if err := session.ForkPoint(all.Log, at); err != nil {
		return session.Header{}, err
	}
	ld, err := store.ReadFile(name(id), parent[:end], store.LoadOptions{}, false)
	if err != nil {
		return session.Header{}, err
	}
	if ld.Log.Len() != at+1 {
		return session.Header{}, fmt.Errorf("memstore: fork %s: seq %d out of range -1..%d", id, at, ld.Log.Len()-1)
	}
	h.Parent, h.ForkSeq = id, at
	if h.Title == "" {
		h.Title = ld.Log.Header().Title
	}
	h, file, err := store.HeaderLine(h)
	if err != nil {
		return session.Header{}, err
	}
	file = append(file, parent[hdr:end]...)
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.sessions[h.ID]; ok {
		return session.Header{}, fmt.Errorf("%w: %s", store.ErrExists, h.ID)
	}
	s.sessions[h.ID] = &sess{file: file}
	return h, nil
}

// Delete implements store.Store.
func (s *Store) Delete(ctx context.Context, id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	se, ok := s.sessions[id]
	if !ok {
		return fmt.Errorf("%w: %s", store.ErrNotFound, id)
	}
	if se.locked {
		return &store.LockedError{ID: id, PID: os.Getpid()}
	}
	delete(s.sessions, id)
	return nil
}

type writer struct {
	s      *Store
	id     string
	header session.Header
	mu     sync.Mutex // serialises Appends, like a file writer
	closed bool
}

func (w *writer) Header() session.Header { return w.header }

func (w *writer) Append(ctx context.Context, batch []session.Event) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return store.ErrClosed
	}
	if w.s.opts.BeforeAppend != nil {
		if err := w.s.opts.BeforeAppend(ctx, w.id, batch); err != nil {
			return err
		}
	}
	w.s.mu.Lock()
	defer w.s.mu.Unlock()
	se := w.s.sessions[w.id]
	for i, ev := range batch {
		if ev.Seq != se.events+int64(i) {
			return fmt.Errorf("%w: got %d, want %d", store.ErrSeq, ev.Seq, se.events+int64(i))
		}
		if bytes.IndexByte(ev.Data, '\n') >= 0 {
			return fmt.Errorf("%w: seq %d: data holds a newline", session.ErrCorrupt, ev.Seq)
		}
	}
	// Readers hold clipped snapshots (see read): appending writes only
	// past what any of them can see.
	for _, ev := range batch {
		se.file = ev.AppendLine(se.file)
	}
	se.events += int64(len(batch))
	return nil
}

func (w *writer) Flush(ctx context.Context) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return store.ErrClosed
	}
	return nil
}

func (w *writer) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return store.ErrClosed
	}
	w.closed = true
	w.s.unlock(w.id)
	return nil
}

// Crash drops w as a dying process would: its lock is released, nothing is
// closed or repaired. For conformance tests.
func Crash(w store.Writer) {
	mw := w.(*writer)
	mw.mu.Lock()
	mw.closed = true
	mw.mu.Unlock()
	mw.s.unlock(mw.id)
}
