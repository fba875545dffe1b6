// Package store defines where session logs live: the Store interface that
// every backend implements, its sentinel errors, and (in store/storetest)
// the conformance suite every backend must pass.
//
// A Store holds sessions as a header plus an append-only sequence of
// session.Events. Writing needs a Writer, which holds the session's lock
// (one writer per session across processes). Reading (Load, List) needs no
// lock and never changes the stored log: crash repair happens in memory on
// Load, and is written back only by a Writer (see Open).
//
// This package imports only session (and llm through it).
package store

import (
	"context"
	"errors"
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
	ErrLocked = errors.New("store: session is locked by another writer")
	// ErrClosed: the writer or store was closed.
	ErrClosed = errors.New("store: closed")
	// ErrSeq: an appended batch does not continue the stored seqs.
	ErrSeq = errors.New("store: seq gap")
	// ErrUnreadable: the store's directory or a session cannot be read.
	ErrUnreadable = errors.New("store: unreadable")
	// ErrLeaseLost: the writer's hold on its session was a lease (a store
	// shared by several machines) and it ran out or was taken over by
	// another writer. Nothing more can be written through that writer;
	// Open the session again to continue it.
	ErrLeaseLost = errors.New("store: session lease lost")
)

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

	// Load reads session id without locking and without writing. The result
	// is repaired in memory (SPEC §4): a torn final line is dropped and an
	// open final turn is closed with synthetic events, listed in
	// Loaded.Repair. Corruption followed by valid lines fails with an error
	// wrapping session.ErrCorrupt that names the file and line, unless
	// opts.Salvage is set, in which case bad lines are skipped and reported.
	Load(ctx context.Context, id string, opts LoadOptions) (*Loaded, error)

	// List returns every session's summary, newest update first. Its cost
	// does not grow with the size of the sessions.
	List(ctx context.Context) ([]Info, error)

	// Fork creates a child of session id holding its events up to and
	// including seq at (at = -1 for an empty child, which still records its
	// parent). It is refused with session.ErrOpenTurn when at lies inside
	// an open turn. The child's header names parent and fork seq; h supplies
	// the child's id, cwd and creation time.
	Fork(ctx context.Context, id string, at int64, h session.Header) (session.Header, error)

	// Delete removes session id. It returns ErrLocked while a writer holds
	// it.
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
	// Salvage skips corrupt lines instead of failing, reporting them in
	// Loaded.Dropped.
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
	// there was none).
	TornBytes int
	// Dropped lists lines skipped under Salvage.
	Dropped []Dropped
}

// Dropped is a line skipped by a salvaging load.
type Dropped struct {
	Line int
	Err  error
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
