// Package postgres is a store.Store in PostgreSQL, for services that run
// sessions on several machines: any node can run any session, and two nodes
// never write one session.
//
// Layout (schema.go; versioned migrations, applied by Open): a row per
// session in rein_sessions (the header line, a summary kept by every append
// for listing, and the writer's lease) and the events' JSONL lines, byte for
// byte, in rein_segments: a row per commit holding a run of consecutive
// lines, so a session exports to exactly the file the JSONL store would
// hold and imports back, and loading reads few rows (load.go). Small
// segments are merged in the background (pack.go). Message text is indexed
// for search (a tsvector, 'simple' configuration) in the background, off
// the append path (background.go).
//
// Writers hold leases, not locks: Create and Open take the session's lease
// (holder, expiry by the server's clock, and a fencing token drawn from one
// sequence, so tokens only grow), and every append is one statement, hence
// one transaction, that stores the batch only if the token still holds the
// lease and the batch continues the stored seqs. The writer renews the lease
// in the background (and every append extends it). A writer that cannot
// renew in time (paused, partitioned, slow) has lost it: its Lost channel
// (store.Leased) closes and everything it is asked to write fails with
// store.ErrLeaseLost, before or, fenced by the token, at the server; a
// batch is stored whole or not at all. Once the lease has expired another
// writer's Open (or OpenWait) takes the session over, repairs the
// interrupted turn and continues.
//
// Followers (Follow, store.Follower) see appends from any process at once:
// each commit is announced on a channel (NOTIFY, sent right after the
// commit) that the store's listener connection (LISTEN) fans out to the
// followers of that session.
//
// Concurrency: a Store and its Writers are safe for concurrent use;
// concurrent Appends to one writer are committed in groups, one statement
// per group. This package imports store and session (and llm through
// session) and pgx; it must not import agent or anything above it.
package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/reinhq/rein/session"
	"github.com/reinhq/rein/store"
)

// Defaults of Options.
const (
	DefaultLeaseTTL = 10 * time.Second
)

// Options tune a Store.
type Options struct {
	// Holder names this process in lease records (shown when another
	// process finds a session locked). Default: hostname:pid.
	Holder string
	// LeaseTTL is how long a lease lasts without renewal: how long a
	// session stays locked after its writer's process died. Default 10 s.
	LeaseTTL time.Duration
	// RenewEvery is the interval of background renewals. Default LeaseTTL/3;
	// at most LeaseTTL/2.
	RenewEvery time.Duration
	// NoMigrate makes Open fail with ErrSchema when the schema is older
	// than this package's instead of migrating it (run Migrate as a role
	// that may change the schema).
	NoMigrate bool
	// PackSize is the size in bytes up to which small segments of a
	// session are merged into one in the background (pack.go). Default
	// DefaultPackSize; negative: never.
	PackSize int
}

// Store is a PostgreSQL session store. Close it to release its connections.
type Store struct {
	pool    *pgxpool.Pool
	opts    Options
	channel string // NOTIFY channel of this store's schema

	lnMu sync.Mutex
	ln   *listener // started by the first Follow or OpenWait

	notifier *worker // announces commits (notifyAll)
	indexer  *worker // keeps the search index (indexAll)
	packer   *worker // merges small segments (packAll)

	packMu sync.Mutex
	packs  map[string]packJob // queued for packer
}

var (
	_ store.Store    = (*Store)(nil)
	_ store.Follower = (*Store)(nil)
	_ store.Pager    = (*Store)(nil)
	_ store.Searcher = (*Store)(nil)
)

// Open connects to the database at url (a postgres:// URL or a key=value
// connection string; pool settings such as pool_max_conns are honoured),
// migrates its schema to SchemaVersion (see Options.NoMigrate) and returns
// the store. An unreachable server is an error wrapping store.ErrUnreadable.
func Open(ctx context.Context, url string, opts Options) (*Store, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("postgres: %w", err)
	}
	if opts.Holder == "" {
		host, _ := os.Hostname()
		opts.Holder = fmt.Sprintf("%s:%d", host, os.Getpid())
	}
	if opts.LeaseTTL <= 0 {
		opts.LeaseTTL = DefaultLeaseTTL
	}
	if opts.RenewEvery <= 0 || opts.RenewEvery > opts.LeaseTTL/2 {
		opts.RenewEvery = opts.LeaseTTL / 3
	}
	if opts.PackSize == 0 {
		opts.PackSize = DefaultPackSize
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("%w: postgres: %v", store.ErrUnreadable, err)
	}
	s := &Store{pool: pool, opts: opts, packs: map[string]packJob{}}
	err = pool.AcquireFunc(ctx, func(c *pgxpool.Conn) error {
		if _, _, err := migrate(ctx, c.Conn(), opts.NoMigrate); err != nil {
			return err
		}
		var schema string
		if err := c.QueryRow(ctx, "SELECT current_schema()").Scan(&schema); err != nil {
			return err
		}
		s.channel = channelName(schema)
		return nil
	})
	if err != nil {
		pool.Close()
		if errors.Is(err, ErrSchema) {
			return nil, err
		}
		return nil, fmt.Errorf("%w: postgres: %v", store.ErrUnreadable, err)
	}
	s.notifier = startWorker(s.notifyAll)
	s.indexer = startWorker(s.indexAll)
	s.packer = startWorker(s.packAll)
	if err := s.indexBacklog(ctx); err != nil {
		s.Close()
		return nil, fmt.Errorf("%w: postgres: %v", store.ErrUnreadable, err)
	}
	return s, nil
}

// channelName is the NOTIFY channel of the store in schema (channel names
// are identifiers of at most 63 bytes).
func channelName(schema string) string {
	c := "rein_events:" + schema
	if len(c) > 63 {
		c = c[:63]
	}
	return c
}

// Close lets queued announcements, packing and indexing finish (for a few
// seconds at most; what is left is indexed by the next Store opened on the
// database, and packed by the session's next writer), stops the listener
// and closes the connections. Writers still open stop working (their
// leases expire).
func (s *Store) Close() {
	s.notifier.stop(2 * time.Second)
	s.packer.stop(5 * time.Second)
	s.indexer.stop(10 * time.Second)
	s.lnMu.Lock()
	if s.ln != nil {
		s.ln.stop()
		s.ln = nil
	}
	s.lnMu.Unlock()
	s.pool.Close()
}

// Options returns the store's effective options.
func (s *Store) Options() Options { return s.opts }

func checkID(id string) error {
	if id == "" || len(id) > 200 || !utf8.ValidString(id) || strings.ContainsAny(id, "/\\\x00") || strings.HasPrefix(id, ".") {
		return fmt.Errorf("postgres: invalid session id %q", id)
	}
	return nil
}

func notFound(id string) error { return fmt.Errorf("%w: %s", store.ErrNotFound, id) }

// unreadable wraps a database failure.
func unreadable(err error) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return fmt.Errorf("%w: postgres: %v", store.ErrUnreadable, err)
}

// ms is a duration as the integer milliseconds the SQL multiplies by
// interval '1 millisecond'.
func ms(d time.Duration) int64 { return d.Milliseconds() }

// headerLine encodes h as the JSONL header line, without its newline.
func headerLine(h session.Header) ([]byte, error) {
	b, err := json.Marshal(h)
	if err != nil {
		return nil, fmt.Errorf("postgres: encode header: %w", err)
	}
	return b, nil
}

// Create implements store.Store: the session row, holding a fresh lease for
// the returned writer, is committed when it returns.
func (s *Store) Create(ctx context.Context, h session.Header) (store.Writer, error) {
	if err := checkID(h.ID); err != nil {
		return nil, err
	}
	h.Version = session.Version
	if h.CreatedAt.IsZero() {
		h.CreatedAt = time.Now()
	}
	h.CreatedAt = h.CreatedAt.UTC().Truncate(time.Millisecond)
	line, err := headerLine(h)
	if err != nil {
		return nil, err
	}
	sent := time.Now()
	var token int64
	err = s.pool.QueryRow(ctx, `
INSERT INTO rein_sessions (id, header, cwd, parent, created_at, title, updated_at, size,
	lease_token, lease_holder, lease_expires)
VALUES ($1, $2, $3, $4, $5, $6, $5, $7, nextval('rein_lease_tokens'), $8, now() + $9 * interval '1 millisecond')
ON CONFLICT (id) DO NOTHING
RETURNING lease_token`,
		h.ID, line, h.Cwd, h.Parent, h.CreatedAt, h.Title, len(line)+1, s.opts.Holder, ms(s.opts.LeaseTTL)).Scan(&token)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("%w: %s", store.ErrExists, h.ID)
	}
	if err != nil {
		return nil, unreadable(err)
	}
	return s.newWriter(h, token, 0, 0, sent), nil
}

// refusal is the error of a fork at seq at of session id that the lines up
// to at refused (err): when the session loads, session.ForkPoint's on the
// whole of it, which names the nearest stable points on both sides.
func (s *Store) refusal(ctx context.Context, id string, at int64, err error) error {
	if p, lerr := s.load(ctx, id, store.LoadOptions{Salvage: true}, false, 0); lerr == nil {
		if ferr := session.ForkPoint(p.loaded.Log, at); errors.Is(ferr, session.ErrOpenTurn) {
			err = ferr
		}
	}
	return fmt.Errorf("postgres: fork %s: %w", id, err)
}

// LockedError is the store.ErrLocked of a session whose lease another
// writer holds: who, and for how much longer unless renewed.
type LockedError struct {
	ID     string
	Holder string
	Left   time.Duration
}

func (e *LockedError) Error() string {
	return fmt.Sprintf("%v: %s (held by %s for %s more unless renewed)", store.ErrLocked, e.ID, e.Holder, e.Left.Round(time.Millisecond))
}

func (e *LockedError) Unwrap() error { return store.ErrLocked }

// acquire takes session id's lease when it is free (never held, released,
// or expired) and returns the new token; a *LockedError when another
// writer holds it.
func (s *Store) acquire(ctx context.Context, id string) (int64, error) {
	for range 3 {
		var token int64
		err := s.pool.QueryRow(ctx, `
UPDATE rein_sessions SET lease_token = nextval('rein_lease_tokens'), lease_holder = $2,
	lease_expires = now() + $3 * interval '1 millisecond'
WHERE id = $1 AND (lease_expires IS NULL OR lease_expires <= now())
RETURNING lease_token`, id, s.opts.Holder, ms(s.opts.LeaseTTL)).Scan(&token)
		if err == nil {
			return token, nil
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return 0, unreadable(err)
		}
		if err := s.held(ctx, id); err != nil {
			return 0, err
		}
		// Expired between the two statements: try again.
	}
	return 0, fmt.Errorf("%w: %s: its lease keeps changing hands", store.ErrLocked, id)
}

// held returns store.ErrNotFound for a missing session, a *LockedError for
// one whose lease is held, and nil for a free one.
func (s *Store) held(ctx context.Context, id string) error {
	var holder string
	var leftMs float64
	err := s.pool.QueryRow(ctx, `
SELECT coalesce(lease_holder, ''), coalesce(extract(epoch FROM lease_expires - now()) * 1000, 0)
FROM rein_sessions WHERE id = $1`, id).Scan(&holder, &leftMs)
	if errors.Is(err, pgx.ErrNoRows) {
		return notFound(id)
	}
	if err != nil {
		return unreadable(err)
	}
	if leftMs > 0 {
		return &LockedError{ID: id, Holder: holder, Left: time.Duration(leftMs * float64(time.Millisecond))}
	}
	return nil
}

// release gives up a lease (a no-op when token no longer holds it) and
// wakes writers waiting for the session.
func (s *Store) release(ctx context.Context, id string, token int64) error {
	_, err := s.pool.Exec(ctx, `
WITH r AS (
	UPDATE rein_sessions SET lease_holder = NULL, lease_expires = NULL
	WHERE id = $1 AND lease_token = $2 RETURNING id)
SELECT count(*) FROM r CROSS JOIN LATERAL pg_notify($3, r.id)`, id, token, s.channel)
	return err
}

// Open implements store.Store. It takes the session's lease (a
// *LockedError wrapping store.ErrLocked while another writer holds it),
// loads it, and makes the load's repair durable before returning: a torn
// final line is removed, the summary recomputed, and the synthetic events
// closing an interrupted turn appended.
func (s *Store) Open(ctx context.Context, id string) (store.Writer, *store.Loaded, error) {
	if err := checkID(id); err != nil {
		return nil, nil, err
	}
	sent := time.Now()
	token, err := s.acquire(ctx, id)
	if err != nil {
		return nil, nil, err
	}
	p, err := s.load(ctx, id, store.LoadOptions{}, true, token)
	if err != nil {
		_ = s.release(context.WithoutCancel(ctx), id, token)
		return nil, nil, err
	}
	l := p.loaded.Log
	stored := l.Len() - int64(len(p.loaded.Repair))
	w := s.newWriter(p.header, token, stored, p.body, sent)
	turns, _ := l.Turn()
	updated := l.LastTime()
	if stored == 0 {
		updated = p.header.CreatedAt
	}
	// The torn line (if any) goes, and the summary is made to match the
	// log, in one statement that the lease fences like an append. The
	// torn line is the last of the last segment: that segment is cut, or
	// deleted when it holds nothing else.
	var ok bool
	err = s.pool.QueryRow(ctx, `
WITH u AS (
	UPDATE rein_sessions SET next_seq = $3, turns = $4, title = $5, updated_at = $6, size = $7,
		lease_expires = now() + $8 * interval '1 millisecond'
	WHERE id = $1 AND lease_token = $2 AND lease_expires > now()
	RETURNING id),
d AS (DELETE FROM rein_segments WHERE session_id IN (SELECT id FROM u) AND first_seq >= $3),
t AS (
	UPDATE rein_segments SET lines = substring(lines FOR octet_length(lines) - $9 - 1), last_seq = $3 - 1
	WHERE session_id IN (SELECT id FROM u) AND first_seq < $3 AND last_seq >= $3)
SELECT count(*) = 1 FROM u`, id, token, stored, turns, l.Title(), updated, p.size, ms(s.opts.LeaseTTL), p.loaded.TornBytes).Scan(&ok)
	if err != nil {
		err = unreadable(err)
	} else if !ok {
		err = fmt.Errorf("%w: session %s: lost while opening", store.ErrLeaseLost, id)
	}
	if err != nil {
		w.abandon()
		_ = s.release(context.WithoutCancel(ctx), id, token)
		return nil, nil, err
	}
	if len(p.loaded.Repair) > 0 {
		if err := w.Append(ctx, p.loaded.Repair); err != nil {
			w.abandon()
			_ = s.release(context.WithoutCancel(ctx), id, token)
			return nil, nil, fmt.Errorf("postgres: write repair of %s: %w", id, err)
		}
	}
	s.indexer.add(id) // catch up with what a crashed writer left unindexed
	w.mu.Lock()
	job := packJob{token: token, from: 0, upto: w.stored}
	w.packFrom, w.packRows = w.stored, 0
	w.mu.Unlock()
	s.queuePack(id, job) // and with what it left unpacked
	return w, p.loaded, nil
}

// OpenWait is Open that waits while another writer holds the session: it
// tries again when the holder releases it or its lease runs out, until ctx
// ends. This is how a node takes over a session whose writer died.
func (s *Store) OpenWait(ctx context.Context, id string) (store.Writer, *store.Loaded, error) {
	var wake <-chan struct{}
	for {
		w, ld, err := s.Open(ctx, id)
		var le *LockedError
		if errors.Is(err, store.ErrLeaseLost) {
			// Our lease ran out while we loaded: someone may hold it.
			continue
		}
		if !errors.As(err, &le) {
			return w, ld, err
		}
		if wake == nil {
			ln, lerr := s.listener(ctx)
			if lerr != nil {
				return nil, nil, lerr
			}
			ch, stop := ln.subscribe(id)
			defer stop()
			wake = ch
			continue // a release may have come before we listened
		}
		t := time.NewTimer(le.Left + time.Millisecond)
		select {
		case <-t.C:
		case <-wake:
		case <-ctx.Done():
			t.Stop()
			return nil, nil, ctx.Err()
		}
		t.Stop()
	}
}

// BreakLease ends session id's lease now, whoever holds it, so that another
// writer can take the session over without waiting for the expiry: for an
// operator who knows the holder is dead. A holder that is alive after all
// loses the lease (its next renewal or append fails with
// store.ErrLeaseLost); nothing it writes afterwards is stored.
func (s *Store) BreakLease(ctx context.Context, id string) error {
	tag, err := s.pool.Exec(ctx, `
UPDATE rein_sessions SET lease_expires = now() - interval '1 millisecond'
WHERE id = $1 AND lease_expires > now()`, id)
	if err != nil {
		return unreadable(err)
	}
	if tag.RowsAffected() == 0 {
		return s.held(ctx, id) // not found, or not held: nothing to break
	}
	return nil
}

// Load implements store.Store: the header and events are read in one
// snapshot and repaired in memory (unless another writer holds the
// session's lease: its open turn is running, not interrupted; then
// Loaded.Locked says who), nothing is written.
func (s *Store) Load(ctx context.Context, id string, opts store.LoadOptions) (*store.Loaded, error) {
	if err := checkID(id); err != nil {
		return nil, err
	}
	p, err := s.load(ctx, id, opts, true, 0)
	if err != nil {
		return nil, err
	}
	return p.loaded, nil
}

const infoColumns = `id, title, cwd, parent, created_at, updated_at, next_seq, turns, size`

func scanInfo(rows pgx.CollectableRow) (store.Info, error) {
	var in store.Info
	err := rows.Scan(&in.ID, &in.Title, &in.Cwd, &in.Parent, &in.CreatedAt, &in.UpdatedAt, &in.Events, &in.Turns, &in.Size)
	in.CreatedAt, in.UpdatedAt = in.CreatedAt.UTC(), in.UpdatedAt.UTC()
	return in, err
}

// List implements store.Store from the sessions' summaries (one row each).
func (s *Store) List(ctx context.Context) ([]store.Info, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+infoColumns+` FROM rein_sessions ORDER BY updated_at DESC, id`)
	if err != nil {
		return nil, unreadable(err)
	}
	out, err := pgx.CollectRows(rows, scanInfo)
	if err != nil {
		return nil, unreadable(err)
	}
	return out, nil
}

// Fork implements store.Store by copying rows in one transaction: the
// child's header and summary, then the parent's segments up to seq at, the
// one holding at cut after it. The lines up to at are read and parsed as
// loading does (a line that would not load is refused with its error, as
// loading it would be), and the fork point is checked on them by
// session.ForkPoint.
func (s *Store) Fork(ctx context.Context, id string, at int64, h session.Header) (session.Header, error) {
	if err := checkID(id); err != nil {
		return session.Header{}, err
	}
	if err := checkID(h.ID); err != nil {
		return session.Header{}, err
	}
	if at < -1 {
		return session.Header{}, fmt.Errorf("postgres: fork %s at seq %d: out of range", id, at)
	}
	tx, err := s.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead})
	if err != nil {
		return session.Header{}, unreadable(err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	var praw []byte
	var stored int64
	err = tx.QueryRow(ctx, `SELECT header, next_seq FROM rein_sessions WHERE id = $1`, id).Scan(&praw, &stored)
	if errors.Is(err, pgx.ErrNoRows) {
		return session.Header{}, notFound(id)
	}
	if err != nil {
		return session.Header{}, unreadable(err)
	}
	ph, err := store.ParseHeader(praw)
	if err != nil {
		return session.Header{}, &store.LineError{File: fileName(id), Line: 1, Err: err}
	}
	if at >= stored {
		// A torn final line, if any, is not an event either.
		return session.Header{}, fmt.Errorf("postgres: fork %s at seq %d: out of range -1..%d", id, at, stored-1)
	}
	h.Parent, h.ForkSeq, h.Version = id, at, session.Version
	if h.CreatedAt.IsZero() {
		h.CreatedAt = time.Now()
	}
	h.CreatedAt = h.CreatedAt.UTC().Truncate(time.Millisecond)
	if h.Title == "" {
		h.Title = ph.Title
	}
	title, updated, turns, body := h.Title, h.CreatedAt, 0, int64(0)
	cutSeq, cutLen := int64(-1), 0
	if at >= 0 {
		// The lines 0..at are validated as a load of the parent would
		// (a child never holds what its parent could not load), without
		// keeping them; the child's summary is taken on the way.
		pc := tx.Conn().PgConn()
		lit, err := pc.EscapeString(id)
		if err != nil {
			return session.Header{}, unreadable(err)
		}
		sql := planSegments + fmt.Sprintf(`;
COPY (SELECT first_seq, lines FROM rein_segments WHERE session_id = '%s' AND first_seq <= %d ORDER BY session_id, first_seq) TO STDOUT (FORMAT binary)`, lit, at)
		v := session.NewValidator(ph)
		summary := func(lines []byte) {
			for _, line := range segLines(0, lines[:len(lines)-1]) {
				ev, err := session.ParseLine(line)
				if err != nil {
					continue // validated: cannot happen
				}
				updated = ev.Time
				switch ev.Type {
				case session.TypeTurnStart:
					turns++
				case session.TypeSessionTitle:
					if t, ok := titleOf(ev); ok {
						title = t
					}
				}
			}
		}
		p, err := readLines(ctx, pc, sql, id, at+1, func([]byte) (lineSink, []byte, error) { return v, nil, nil }, summary)
		if err != nil {
			return session.Header{}, fmt.Errorf("postgres: fork %s at seq %d: %w", id, at, err)
		}
		if v.Len() != at+1 {
			return session.Header{}, fmt.Errorf("postgres: fork %s at seq %d: %w: %d events up to seq %d", id, at, store.ErrSeq, v.Len(), at)
		}
		if err := v.ForkPoint(at); err != nil {
			return session.Header{}, s.refusal(ctx, id, at, err)
		}
		body, cutSeq, cutLen = p.body, p.cutSeq, p.cutLen
	}
	hline, err := headerLine(h)
	if err != nil {
		return session.Header{}, err
	}
	tag, err := tx.Exec(ctx, `
INSERT INTO rein_sessions (id, header, cwd, parent, created_at, title, updated_at, next_seq, turns, size)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)
ON CONFLICT (id) DO NOTHING`,
		h.ID, hline, h.Cwd, id, h.CreatedAt, title, updated, at+1, turns, body+int64(len(hline))+1)
	if err != nil {
		return session.Header{}, unreadable(err)
	}
	if tag.RowsAffected() == 0 {
		return session.Header{}, fmt.Errorf("%w: %s", store.ErrExists, h.ID)
	}
	if at >= 0 {
		// The segments, and as much of the search index as the parent has.
		if _, err := tx.Exec(ctx, `
WITH e AS (
	INSERT INTO rein_segments (session_id, first_seq, last_seq, first_byte, lines)
	SELECT $3, first_seq, least(last_seq, $2), first_byte,
		CASE WHEN first_seq = $4 THEN substring(lines FOR $5) ELSE lines END
	FROM rein_segments WHERE session_id = $1 AND first_seq <= $2),
x AS (
	SELECT least(coalesce((SELECT indexed FROM rein_search_state WHERE session_id = $1), 0), $2 + 1) AS indexed),
st AS (INSERT INTO rein_search_state (session_id, indexed) SELECT $3, indexed FROM x)
INSERT INTO rein_search (session_id, seq, off, len, tsv)
SELECT $3, seq, off, len, tsv FROM rein_search, x WHERE session_id = $1 AND seq < x.indexed`, id, at, h.ID, cutSeq, cutLen); err != nil {
			return session.Header{}, unreadable(err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return session.Header{}, unreadable(err)
	}
	s.indexer.add(h.ID)
	return h, nil
}

// titleOf returns the title of a session/title event.
func titleOf(ev session.Event) (string, bool) {
	p, err := ev.Decode()
	if err != nil {
		return "", false
	}
	t, ok := p.(*session.SessionTitle)
	if !ok {
		return "", false
	}
	return t.Title, true
}

// Delete implements store.Store. A session whose lease is held is refused
// with store.ErrLocked; one whose holder's lease has expired is deleted (its
// writer's next append fails with store.ErrLeaseLost).
func (s *Store) Delete(ctx context.Context, id string) error {
	if err := checkID(id); err != nil {
		return err
	}
	var n int
	err := s.pool.QueryRow(ctx, `
WITH d AS (
	DELETE FROM rein_sessions WHERE id = $1 AND (lease_expires IS NULL OR lease_expires <= now())
	RETURNING id),
e AS (DELETE FROM rein_segments WHERE session_id IN (SELECT id FROM d)),
x AS (DELETE FROM rein_search WHERE session_id IN (SELECT id FROM d)),
y AS (DELETE FROM rein_search_state WHERE session_id IN (SELECT id FROM d))
SELECT count(*) FROM d CROSS JOIN LATERAL pg_notify($2, d.id)`, id, s.channel).Scan(&n)
	if err != nil {
		return unreadable(err)
	}
	if n == 1 {
		return nil
	}
	if err := s.held(ctx, id); err != nil {
		return err
	}
	return fmt.Errorf("%w: %s: its lease changed hands while deleting", store.ErrLocked, id)
}

// fileName names a session in errors (store.LineError.File).
func fileName(id string) string { return "postgres:" + id }
