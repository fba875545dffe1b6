// Package memstore is an in-memory store.Store: sessions live in process
// memory and vanish with it. It is meant for tests and for embedders that
// persist elsewhere; it passes the same conformance suite as the durable
// backends (durability here means "visible to later Loads").
//
// Tests can slow down or fail appends with Options to exercise the agent's
// flush paths.
package memstore

import (
	"context"
	"fmt"
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

type sess struct {
	header session.Header
	events []session.Event
	locked bool
}

// New returns an empty store.
func New(opts Options) *Store {
	return &Store{opts: opts, sessions: map[string]*sess{}}
}

var _ store.Store = (*Store)(nil)

// Create implements store.Store.
func (s *Store) Create(ctx context.Context, h session.Header) (store.Writer, error) {
	if h.ID == "" {
		return nil, fmt.Errorf("memstore: create: empty id")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.sessions[h.ID]; ok {
		return nil, fmt.Errorf("%w: %s", store.ErrExists, h.ID)
	}
	h.Version = session.Version
	s.sessions[h.ID] = &sess{header: h, locked: true}
	return &writer{s: s, id: h.ID, header: h}, nil
}

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
		return nil, nil, fmt.Errorf("%w: %s", store.ErrLocked, id)
	}
	se.locked = true
	s.mu.Unlock()
	ld, err := s.Load(ctx, id, store.LoadOptions{})
	if err != nil {
		s.unlock(id)
		return nil, nil, err
	}
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

// Load implements store.Store.
func (s *Store) Load(ctx context.Context, id string, opts store.LoadOptions) (*store.Loaded, error) {
	s.mu.Lock()
	se, ok := s.sessions[id]
	if !ok {
		s.mu.Unlock()
		return nil, fmt.Errorf("%w: %s", store.ErrNotFound, id)
	}
	h, events := se.header, slices.Clip(se.events)
	s.mu.Unlock()
	l := session.NewLog(h)
	var dropped []store.Dropped
	for _, ev := range events {
		if err := l.AppendEvent(ev); err != nil {
			// Lines are numbered as in a JSONL file: the header is line 1.
			le := &store.LineError{File: "memstore:" + id, Line: int(ev.Seq) + 2, Err: err}
			if !opts.Salvage {
				return nil, le
			}
			dropped = append(dropped, store.Dropped{Line: le.Line, Err: err})
		}
	}
	repair, err := session.Repair(l)
	if err != nil {
		return nil, err
	}
	return &store.Loaded{Log: l, Repair: repair, Dropped: dropped}, nil
}

// List implements store.Store.
func (s *Store) List(ctx context.Context) ([]store.Info, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]store.Info, 0, len(s.sessions))
	for _, se := range s.sessions {
		info := store.Info{ID: se.header.ID, Title: se.header.Title, Cwd: se.header.Cwd, Parent: se.header.Parent,
			CreatedAt: se.header.CreatedAt, UpdatedAt: se.header.CreatedAt, Events: int64(len(se.events))}
		for _, ev := range se.events {
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
	sort.Slice(out, func(i, j int) bool { return out[i].UpdatedAt.After(out[j].UpdatedAt) })
	return out, nil
}

// Fork implements store.Store.
func (s *Store) Fork(ctx context.Context, id string, at int64, h session.Header) (session.Header, error) {
	ld, err := s.Load(ctx, id, store.LoadOptions{})
	if err != nil {
		return session.Header{}, err
	}
	if err := session.ForkPoint(ld.Log, at); err != nil {
		return session.Header{}, err
	}
	h.Parent, h.ForkSeq, h.Version = id, at, session.Version
	if h.Title == "" {
		h.Title = ld.Log.Title()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.sessions[h.ID]; ok {
		return session.Header{}, fmt.Errorf("%w: %s", store.ErrExists, h.ID)
	}
	s.sessions[h.ID] = &sess{header: h, events: slices.Clone(ld.Log.Events(0)[:at+1])}
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
		return fmt.Errorf("%w: %s", store.ErrLocked, id)
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
		if ev.Seq != int64(len(se.events)+i) {
			return fmt.Errorf("%w: got %d, want %d", store.ErrSeq, ev.Seq, len(se.events)+i)
		}
	}
	for _, ev := range batch {
		ev.Data = slices.Clone(ev.Data)
		se.events = append(se.events, ev)
	}
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
