package postgres

import (
	"context"
	"encoding/base64"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/reinhq/rein/session"
	"github.com/reinhq/rein/store"
)

// defaultPage is the page size when PageOptions.Limit is 0; maxPage caps
// it.
const (
	defaultPage = 50
	maxPage     = 1000
)

func pageSize(n int) int {
	if n <= 0 {
		return defaultPage
	}
	return min(n, maxPage)
}

// errCursor reports a cursor this store did not hand out.
func errCursor(c string) error { return fmt.Errorf("postgres: invalid page cursor %q", c) }

// ListPage implements store.Pager: keyset pages over (updated_at desc, id),
// served by an index, so every page costs the same however deep it is.
func (s *Store) ListPage(ctx context.Context, opts store.PageOptions) ([]store.Info, string, error) {
	n := pageSize(opts.Limit)
	var after *time.Time
	var afterID string
	if opts.Cursor != "" {
		raw, err := base64.RawURLEncoding.DecodeString(opts.Cursor)
		us, id, ok := strings.Cut(string(raw), " ")
		v, perr := strconv.ParseInt(us, 10, 64)
		if err != nil || !ok || perr != nil {
			return nil, "", errCursor(opts.Cursor)
		}
		t := time.UnixMicro(v).UTC()
		after, afterID = &t, id
	}
	rows, err := s.pool.Query(ctx, `SELECT `+infoColumns+` FROM rein_sessions
WHERE ($1 = '' OR cwd = $1)
	AND ($2::timestamptz IS NULL OR updated_at < $2 OR (updated_at = $2 AND id > $3))
ORDER BY updated_at DESC, id LIMIT $4`, opts.Cwd, after, afterID, n+1)
	if err != nil {
		return nil, "", unreadable(err)
	}
	infos, err := pgx.CollectRows(rows, scanInfo)
	if err != nil {
		return nil, "", unreadable(err)
	}
	if len(infos) <= n {
		return infos, "", nil
	}
	infos = infos[:n]
	last := infos[n-1]
	next := base64.RawURLEncoding.EncodeToString([]byte(strconv.FormatInt(last.UpdatedAt.UnixMicro(), 10) + " " + last.ID))
	return infos, next, nil
}

// Search implements store.Searcher over the message text index
// ('simple' configuration: words are lower-cased, not stemmed). The query
// is web-search syntax: words (all must match), "a phrase", -word, or.
// Hits come best first (ts_rank), then by session and seq; the cursor is
// an offset. The index is kept in the background: what this Store's
// writers appended is found as soon as their Appends returned; what other
// processes appended, once their indexers caught up (normally within a
// commit's time).
func (s *Store) Search(ctx context.Context, query string, opts store.PageOptions) ([]store.Hit, string, error) {
	n := pageSize(opts.Limit)
	off := 0
	if opts.Cursor != "" {
		raw, err := base64.RawURLEncoding.DecodeString(opts.Cursor)
		v, perr := strconv.Atoi(strings.TrimPrefix(string(raw), "o"))
		if err != nil || perr != nil || v < 0 || !strings.HasPrefix(string(raw), "o") {
			return nil, "", errCursor(opts.Cursor)
		}
		off = v
	}
	// What this process appended is searchable once it returns.
	if err := s.indexer.wait(ctx); err != nil {
		return nil, "", err
	}
	// The page of hits first, then each hit's line, cut out of the
	// segment that holds it.
	rows, err := s.pool.Query(ctx, `
WITH q AS (SELECT websearch_to_tsquery('simple', $1) AS q),
h AS (
	SELECT x.session_id, x.seq, x.off, x.len, ts_rank(x.tsv, q.q) AS rank FROM rein_search x, q
	WHERE x.tsv @@ q.q
		AND ($2 = '' OR x.session_id IN (SELECT id FROM rein_sessions WHERE cwd = $2))
	ORDER BY rank DESC, x.session_id, x.seq
	LIMIT $3 OFFSET $4)
SELECT h.session_id, h.seq, (
	SELECT substring(g.lines FROM (h.off - g.first_byte + 1)::integer FOR h.len) FROM rein_segments g
	WHERE g.session_id = h.session_id AND g.first_seq <= h.seq ORDER BY g.first_seq DESC LIMIT 1)
FROM h ORDER BY h.rank DESC, h.session_id, h.seq`, query, opts.Cwd, n+1, off)
	if err != nil {
		return nil, "", unreadable(err)
	}
	defer rows.Close()
	var hits []store.Hit
	for rows.Next() {
		var h store.Hit
		var line []byte
		if err := rows.Scan(&h.Session, &h.Seq, &line); err != nil {
			return nil, "", unreadable(err)
		}
		if ev, err := session.ParseLine(line); err == nil {
			h.Type, h.Time = ev.Type, ev.Time
			if t := messageText(ev); t != nil {
				h.Text = *t
			}
		}
		hits = append(hits, h)
	}
	if err := rows.Err(); err != nil {
		return nil, "", unreadable(err)
	}
	if len(hits) <= n {
		return hits, "", nil
	}
	return hits[:n], base64.RawURLEncoding.EncodeToString([]byte("o" + strconv.Itoa(off+n))), nil
}
