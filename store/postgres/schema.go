package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// migrations are the schema's versions: migrations[i] takes the schema from
// version i to i+1. Never edit a released one; append a new one.
//
// Tables are created in the first schema of the connection's search_path,
// so one database can hold several independent stores (add search_path to
// the URL).
var migrations = []string{
	// 1: sessions, events, lease tokens, the search index.
	`
CREATE TABLE rein_sessions (
	id            text PRIMARY KEY,
	header        bytea NOT NULL,            -- the JSONL header line, without its newline
	cwd           text NOT NULL,
	parent        text NOT NULL DEFAULT '',
	created_at    timestamptz NOT NULL,
	-- Summary of the events, kept by every append (and recomputed by Open):
	title         text NOT NULL,             -- the latest session/title, else the header's
	updated_at    timestamptz NOT NULL,      -- the last event's time, else created_at
	next_seq      bigint NOT NULL DEFAULT 0, -- the number of events
	turns         integer NOT NULL DEFAULT 0,
	size          bigint NOT NULL,           -- bytes of the session as a JSONL file
	-- The writer's lease: a session is held while lease_expires is in the
	-- future (the server's clock); lease_token fences the holder's writes.
	lease_token   bigint NOT NULL DEFAULT 0,
	lease_holder  text,
	lease_expires timestamptz
);
CREATE INDEX rein_sessions_updated ON rein_sessions (updated_at DESC, id);
CREATE INDEX rein_sessions_cwd ON rein_sessions (cwd, updated_at DESC, id);

CREATE TABLE rein_events (
	session_id text NOT NULL,
	seq        bigint NOT NULL,               -- the line's position: the event's seq in a sound log
	type       text,                          -- NULL for a line that did not parse (imported or damaged)
	line       bytea NOT NULL,                -- the event's JSONL line, byte for byte, without its newline
	PRIMARY KEY (session_id, seq)
);

-- The search index, filled in the background (index.go): message text of
-- the events of seq < rein_search_state.indexed.
CREATE TABLE rein_search (
	session_id text NOT NULL,
	seq        bigint NOT NULL,
	tsv        tsvector NOT NULL,
	PRIMARY KEY (session_id, seq)
);
CREATE INDEX rein_search_tsv ON rein_search USING gin (tsv);
CREATE TABLE rein_search_state (
	session_id text PRIMARY KEY,
	indexed    bigint NOT NULL
);

-- Fencing tokens: one sequence for every session, so that a token is never
-- reused, not even by a session created again under a deleted one's id.
CREATE SEQUENCE rein_lease_tokens;
`,
	// 2: events in segments. A row of rein_segments holds a run of
	// consecutive lines (what one commit appended, or what the packer
	// merged), so that loading a session reads a few large values rather
	// than a row per event. rein_search learns where each indexed line lies
	// in the session's bytes, which segments cannot change. Existing events
	// move into segments of runs of consecutive seqs, cut where a 16 KB
	// window of the session's bytes ends (as the packer would merge them).
	`
CREATE TABLE rein_segments (
	session_id text NOT NULL,
	first_seq  bigint NOT NULL,   -- the position of its first line: the event's seq in a sound log
	last_seq   bigint NOT NULL,   -- the position of its last line
	first_byte bigint NOT NULL,   -- the offset of its first line in the session's lines (after the header line)
	lines      bytea NOT NULL,    -- lines first_seq..last_seq byte for byte, each without its newline, joined by '\n'
	PRIMARY KEY (session_id, first_seq),
	CHECK (last_seq >= first_seq)
);
-- Loading pays for every byte the server decompresses and every TOAST
-- chunk it fetches: lz4 decompresses several times faster than the default
-- pglz (a server built without lz4 keeps pglz), and STORAGE MAIN keeps a
-- compressed segment in its row while the row fits in a page, rather than
-- in TOAST chunks beyond 2 KB.
DO $$ BEGIN
	EXECUTE 'ALTER TABLE rein_segments ALTER COLUMN lines SET COMPRESSION lz4';
EXCEPTION WHEN feature_not_supported THEN NULL;
END $$;
ALTER TABLE rein_segments ALTER COLUMN lines SET STORAGE MAIN;

WITH e AS (
	SELECT session_id, seq, line,
		seq - row_number() OVER w AS run,
		sum(length(line) + 1) OVER w - length(line) - 1 AS off
	FROM rein_events WINDOW w AS (PARTITION BY session_id ORDER BY seq))
INSERT INTO rein_segments (session_id, first_seq, last_seq, first_byte, lines)
SELECT session_id, min(seq), max(seq), min(off), string_agg(line, '\x0a'::bytea ORDER BY seq)
FROM e GROUP BY session_id, run, off / 16384;

-- Where an indexed line lies: its offset in the session's lines and its
-- length, so that a hit's line is cut out of its segment.
ALTER TABLE rein_search ADD COLUMN off bigint, ADD COLUMN len integer;
WITH e AS (
	SELECT session_id, seq, length(line) AS len, sum(length(line) + 1) OVER w - length(line) - 1 AS off
	FROM rein_events WINDOW w AS (PARTITION BY session_id ORDER BY seq))
UPDATE rein_search x SET off = e.off, len = e.len FROM e WHERE e.session_id = x.session_id AND e.seq = x.seq;
DELETE FROM rein_search WHERE off IS NULL;
ALTER TABLE rein_search ALTER COLUMN off SET NOT NULL, ALTER COLUMN len SET NOT NULL;

DROP TABLE rein_events;
`,
}

// SchemaVersion is the schema version this package writes.
var SchemaVersion = len(migrations)

// ErrSchema reports a database whose schema this rein cannot use: newer
// than it knows, or (with Options.NoMigrate) older.
var ErrSchema = errors.New("postgres: schema version mismatch")

// migrationLock is the advisory lock key that serialises migrations of
// every store in a database.
const migrationLock = 0x7265696e // "rein"

// migrate brings the schema to SchemaVersion (or, with check, only checks
// it) and returns the versions before and after.
func migrate(ctx context.Context, conn *pgx.Conn, check bool) (from, to int, err error) {
	return migrateTo(ctx, conn, check, SchemaVersion)
}

// migrateTo is migrate to version target (tests build older schemas).
func migrateTo(ctx context.Context, conn *pgx.Conn, check bool, target int) (from, to int, err error) {
	tx, err := conn.Begin(ctx)
	if err != nil {
		return 0, 0, err
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", migrationLock); err != nil {
		return 0, 0, err
	}
	var exists bool
	if err := tx.QueryRow(ctx, "SELECT to_regclass('rein_migrations') IS NOT NULL").Scan(&exists); err != nil {
		return 0, 0, err
	}
	if exists {
		if err := tx.QueryRow(ctx, "SELECT coalesce(max(version), 0) FROM rein_migrations").Scan(&from); err != nil {
			return 0, 0, err
		}
	}
	switch {
	case from > SchemaVersion:
		return from, from, fmt.Errorf("%w: the database is at version %d, this rein knows up to %d: upgrade rein", ErrSchema, from, SchemaVersion)
	case from >= target:
		return from, from, nil
	case check:
		return from, from, fmt.Errorf("%w: the database is at version %d, this rein needs %d: run 'rein store migrate'", ErrSchema, from, SchemaVersion)
	}
	if !exists {
		if _, err := tx.Exec(ctx, `CREATE TABLE rein_migrations (version integer PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())`); err != nil {
			return from, from, err
		}
	}
	for v := from; v < target; v++ {
		if _, err := tx.Exec(ctx, migrations[v]); err != nil {
			return from, from, fmt.Errorf("postgres: migration %d: %w", v+1, err)
		}
		if _, err := tx.Exec(ctx, "INSERT INTO rein_migrations (version) VALUES ($1)", v+1); err != nil {
			return from, from, err
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return from, from, err
	}
	return from, target, nil
}

// Migrate brings the schema of the database at url to SchemaVersion and
// returns the versions before and after. Open does the same unless
// Options.NoMigrate is set; Migrate is for running it explicitly (as a
// role allowed to change the schema).
func Migrate(ctx context.Context, url string) (from, to int, err error) {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return 0, 0, fmt.Errorf("postgres: connect: %w", err)
	}
	defer conn.Close(ctx)
	return migrate(ctx, conn, false)
}
