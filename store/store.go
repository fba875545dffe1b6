// Package store defines where session logs live: the Store interface that
// every backend implements, its sentinel errors, and (in store/storetest)
// the conformance suite every backend must pass.
//
// A Store holds sessions as a header plus an append-only sequence of
// session.Events. Writing needs a Writer, which holds the session's lock
// (one writer per session across processes). Reading (Load, Stream, List)
// needs no lock and never changes the stored log: crash repair happens in
// memory on Load, and is written back only by a Writer (see Open). Stream
// reads a session once without holding it (stream.go).
//
// This package imports only session (and llm through it).
package store

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"strconv"
	"time"

	"github.com/reinhq/rein/session"
)

// Sentinel errors. Backends wrap them with %w and add the detail (file,
// line, id).
var (
	// ErrNotFound: no session with that id.
	ErrNotFound = errors.New("store: session not found")
	// ErrExists: Create with an id that is taken.
	ErrExists = errors.New("store: session already exists")
	// ErrLocked: another writer (maybe another process) holds the session.
	// Backends return a *LockedError, which says who when they know.
	ErrLocked = errors.New("store: session is locked by another writer")
	// ErrClosed: the writer or store was closed.
	ErrClosed = errors.New("store: closed")
	// ErrSeq: an appended batch does not continue the stored seqs.
	ErrSeq = errors.New("store: seq gap")
	// ErrUnreadable: the store's directory or a session cannot be read.
	// The error says what and why.
	ErrUnreadable = errors.New("store: unreadable")
	// ErrLeaseLost: the writer's hold on its session was a lease (a store
	// shared by several machines) and it ran out or was taken over by
	// another writer. Nothing more can be written through that writer;
	// Open the session again to continue it.
	ErrLeaseLost = errors.New("store: session lease lost")
	// ErrUnwritable: the store cannot write what it must (a read-only
	// directory or file system, no permission, a full disk). The error
	// says what and why.
	ErrUnwritable = errors.New("store: cannot write")
)

// LockedError is ErrLocked with who holds the lock.
type LockedError struct {
	ID string
	// PID is the process that holds the session's writer, when the
	// backend knows it (0 when not; this process's pid when the other
	// writer is in this process).
	PID int
	// Holder names the holder in the backend's words when it is no local
	// process (a lease's holder, host:pid), else "".
	Holder string
}

func (e *LockedError) Error() string {
	switch {
	case e.PID > 0:
		return fmt.Sprintf("%v: %s (pid %d)", ErrLocked, e.ID, e.PID)
	case e.Holder != "":
		return fmt.Sprintf("%v: %s (held by %s)", ErrLocked, e.ID, e.Holder)
	}
	return fmt.Sprintf("%v: %s", ErrLocked, e.ID)
}

func (e *LockedError) Unwrap() error { return ErrLocked }

// Store is a session backend. Implementations are safe for concurrent use.
type Store interface {
	// Create makes a new, empty session with header h (h.ID must be set and
	// unused; ErrExists otherwise) and returns its writer, holding its lock.
	Create(ctx context.Context, h session.Header) (Writer, error)

	// Open locks session id for writing and loads it. When the load
	// repaired the log (torn tail, interrupted turn), Open makes the repair
	// durable before returning: the torn tail is truncated and the synthetic
	// closing events are appended. Returns ErrNotFound, ErrLocked, or a
	// load error (see Load).
	Open(ctx context.Context, id string) (Writer, *Loaded, error)

	// Load reads session id without locking and without writing, every
	// line validated in full. The result is repaired in memory: a torn
	// final line is dropped (Loaded.TornBytes) and an open final turn is
	// closed with synthetic events, listed in Loaded.Repair, unless a
	// writer holds the session (Loaded.Locked: the turn is running, not
	// interrupted). Any other line that does not parse or does not fit the
	// log fails the load with a *LineError (wrapping session.ErrCorrupt,
	// ErrSeq, ...) that names the file and line, unless opts.Salvage is
	// set: then the log keeps what session.(*Log).Salvage can prove, and
	// Loaded.Dropped says what was replaced or dropped and why.
	Load(ctx context.Context, id string, opts LoadOptions) (*Loaded, error)

	// List returns every session's summary, newest update first. Its cost
	// does not grow with the size of the sessions.
	List(ctx context.Context) ([]Info, error)

	// Fork creates a child of session id holding its events up to and
	// including seq at (at = -1 for an empty child, which still records its
	// parent). It is refused with session.ErrOpenTurn when at is not a
	// stable point (session.ForkPoint), and with a load error when a line
	// it would copy does not validate: a child never holds what its parent
	// could not load. The child's header names parent and fork seq; h
	// supplies the child's id, cwd and creation time.
	Fork(ctx context.Context, id string, at int64, h session.Header) (session.Header, error)

	// Delete removes session id and everything the store keeps for it
	// (its scratch directory included, see ScratchStore). It returns
	// ErrLocked while a writer holds it.
	Delete(ctx context.Context, id string) error
}

// Writer appends to one locked session.
type Writer interface {
	// Header returns the session's header.
	Header() session.Header
	// Append writes a batch and returns once it is durable. Batches must
	// continue the stored seqs (ErrSeq otherwise). Concurrent Appends are
	// committed in groups (one sync per group). After a failed Append
	// nothing of the batch is stored and it may be retried.
	Append(ctx context.Context, batch []session.Event) error
	// Flush returns once everything appended so far is durable.
	Flush(ctx context.Context) error
	// Close flushes and releases the lock. Further calls return ErrClosed.
	Close() error
}

// Leased is implemented by writers whose hold on the session is a lease
// that can be lost while the writer is open (store/postgres): the holder
// stopped renewing it in time (paused, partitioned, slow), and another
// writer may have taken the session over. Lost is closed once that has
// happened; from then on Append and Flush fail with ErrLeaseLost, nothing
// of a failed batch is stored, and Close returns ErrLeaseLost too. An agent
// running the session must stop.
type Leased interface {
	Lost() <-chan struct{}
}

// Follower is implemented by stores whose sessions can be watched while
// another process (maybe on another machine) appends to them.
type Follower interface {
	// Follow yields session id's durable events from seq from on, in
	// order, then each later event as soon as it is durable, whoever
	// appends it. It ends when ctx ends (yielding ctx's error last) or on
	// an error (ErrNotFound when the session does not exist or is
	// deleted). The yielded events' Data belong to the caller.
	Follow(ctx context.Context, id string, from int64) iter.Seq2[session.Event, error]
}

// Pager is implemented by stores that list sessions a page at a time.
type Pager interface {
	// ListPage returns up to opts.Limit summaries, newest update first,
	// starting after opts.Cursor, and the cursor of the next page ("" when
	// this page is the last).
	ListPage(ctx context.Context, opts PageOptions) (infos []Info, next string, err error)
}

// Searcher is implemented by stores with a full-text index over message
// text (user, steering and assistant messages, tool results).
type Searcher interface {
	// Search returns up to opts.Limit events whose text matches query,
	// best match first, starting after opts.Cursor, and the cursor of the
	// next page ("" when this page is the last). The query syntax is the
	// backend's (store/postgres: words, "quoted phrases", -excluded, or).
	Search(ctx context.Context, query string, opts PageOptions) (hits []Hit, next string, err error)
}

// PageOptions select one page of a listing or a search.
type PageOptions struct {
	// Limit is the page size; 0 means 50.
	Limit int
	// Cursor continues after the page that returned it; "" starts at the
	// beginning.
	Cursor string
	// Cwd, when set, keeps only sessions whose working directory it is.
	Cwd string
}

// Hit is one event found by Search.
type Hit struct {
	Session string
	Seq     int64
	Type    session.Type
	Time    time.Time
	// Text is the event's message text.
	Text string
}

// LoadOptions tune Load.
type LoadOptions struct {
	// Salvage keeps what it can of a damaged log instead of failing (see
	// session.(*Log).Salvage), reporting the rest in Loaded.Dropped.
	Salvage bool
}

// Loaded is a session as read, repaired in memory.
type Loaded struct {
	// Log holds the stored events followed by the repair events.
	Log *session.Log
	// Repair lists the synthetic events that crash repair added (already
	// part of Log).
	Repair []session.Event
	// TornBytes is the size of a torn final line that was dropped (0 when
	// there was none): one without '\n', a write a crash cut short.
	TornBytes int
	// TornZeros is set when the torn line ended in '\n' but held zero
	// bytes: a page of the last write that a crash lost. Unlike a line
	// cut short, that is worth telling the user.
	TornZeros bool
	// Dropped lists what a salvaging load did not keep as it was.
	Dropped []Dropped
	// Locked is set when another writer held the session while it was
	// read: the log is as far as it was written, and not repaired.
	Locked *LockedError
}

// Dropped is a stretch of damaged lines a salvaging load did not keep as
// it was.
type Dropped struct {
	// Line is the first line (1-based, the header being line 1).
	Line int
	// Lines is how many lines: with Tombstones 0 the damaged line and
	// every line after it, all dropped (the log was cut there).
	Lines int
	// Seq is the seq of the first event lost; Tombstones how many
	// tombstones stand, from Seq on, for events whose lines were damaged
	// but whose loss changes nothing (see session.(*Log).Salvage).
	Seq        int64
	Tombstones int
	Err        error
}

func (d Dropped) String() string {
	return session.Loss{Line: d.Line, Lines: d.Lines, Seq: d.Seq, Tombstones: d.Tombstones, Err: d.Err}.String()
}

// ScratchStore is a Store that gives each session a scratch directory for
// files that belong to the session but not to its log (a tool's spilled
// output). Delete removes it with the session.
type ScratchStore interface {
	Store
	// ScratchDir returns session id's scratch directory. It need not
	// exist yet; whoever writes there creates it.
	ScratchDir(id string) string
}

// Info summarises a session for listings.
type Info struct {
	ID        string
	Title     string
	Cwd       string
	Parent    string
	CreatedAt time.Time
	UpdatedAt time.Time
	// Events is the number of events stored.
	Events int64
	// Turns is the number of turns opened.
	Turns int
	// Size is the stored size in bytes, when the backend knows it.
	Size int64
}

// LineError locates a load failure in a stored session: File is the path (or
// another backend-specific name) and Line the 1-based line, the header being
// line 1. It wraps the cause (session.ErrCorrupt, session.ErrUnknownType,
// session.ErrVersion, ErrSeq, session.ErrInvariant), so callers branch with
// errors.Is and locate with errors.As.
type LineError struct {
	File string
	Line int
	Err  error
}

func (e *LineError) Error() string {
	return e.File + ":" + strconv.Itoa(e.Line) + ": " + e.Err.Error()
}

func (e *LineError) Unwrap() error { return e.Err }
