package postgres

import (
	"bytes"
	"context"
	"iter"
)

// Segments: rein_segments holds a session's lines in runs of consecutive
// positions, one row per commit of a writer. An agent commits at its
// checkpoints (a model request, a tool call, the end of a turn), so a
// segment holds from a few to a few hundred events; a writer that appends
// event by event leaves a row per event. The packer merges runs of small
// segments into one, in the background, so that a session at rest is a
// few large values however it was written: loading it then costs little
// more per byte than reading a file.
//
// A writer asks for a pack after a commit holding a turn/end, when more
// than one segment was stored since its last request, or after packEvery
// segments without one (a long turn). Open asks for the whole session
// (catching up with what a crashed writer left). A pack merges, left to
// right, consecutive segments below the request's end into groups of at
// most Options.PackSize bytes; each group is merged by one statement, so a
// reader sees either the old rows or the new one, never both nor neither.
// The statement is fenced by the token: it holds the session row (FOR
// SHARE) and checks that the token is still the session's, so nothing is
// merged once another writer has taken the session (taking it changes the
// row, so it waits for a merge in progress). The lease itself need not
// hold: what a writer asked for is still packed after it closed, as long
// as nobody has written since. Appends wait for a merge too (it takes a
// few milliseconds).

// packEvery is how many segments a writer stores before it asks for a pack
// without a turn/end.
const packEvery = 64

// DefaultPackSize is the default of Options.PackSize.
const DefaultPackSize = 16 << 10

// packJob asks for the segments of a session in [from, upto) to be packed
// under the lease of token.
type packJob struct {
	token, from, upto int64
}

// queuePack queues job for session id. Jobs queued before a pass takes them
// are joined; a job under a newer lease replaces an older one's.
func (s *Store) queuePack(id string, job packJob) {
	if s.opts.PackSize < 0 {
		return
	}
	s.packMu.Lock()
	if old, ok := s.packs[id]; ok && old.token == job.token {
		job.from, job.upto = min(old.from, job.from), max(old.upto, job.upto)
	} else if ok && old.token > job.token {
		job = old
	}
	s.packs[id] = job
	s.packMu.Unlock()
	s.packer.add(id)
}

func (s *Store) packAll(ctx context.Context, ids []string) {
	for _, id := range ids {
		s.packMu.Lock()
		job, ok := s.packs[id]
		delete(s.packs, id)
		s.packMu.Unlock()
		if ok {
			_ = s.pack(ctx, id, job)
		}
	}
}

// packSQL merges the segments of session $1 from seq $3 to $4, which must
// be $5 segments tiling that range, into one, while $2 is the session's
// token. It returns a row when it merged them.
const packSQL = `
WITH s AS (
	SELECT id FROM rein_sessions WHERE id = $1 AND lease_token = $2 FOR SHARE),
r AS (
	SELECT first_seq, last_seq FROM rein_segments
	WHERE session_id IN (SELECT id FROM s) AND first_seq >= $3 AND last_seq <= $4
	FOR UPDATE),
ok AS (
	SELECT 1 FROM r
	HAVING count(*) = $5 AND min(first_seq) = $3 AND max(last_seq) = $4 AND sum(last_seq - first_seq + 1) = $4 - $3 + 1),
d AS (
	DELETE FROM rein_segments
	WHERE session_id = $1 AND first_seq >= $3 AND last_seq <= $4 AND EXISTS (SELECT 1 FROM ok)
	RETURNING first_seq, last_seq, first_byte, lines)
INSERT INTO rein_segments (session_id, first_seq, last_seq, first_byte, lines)
SELECT $1, min(first_seq), max(last_seq), min(first_byte), string_agg(lines, '\x0a'::bytea ORDER BY first_seq)
FROM d HAVING count(*) > 0
RETURNING 1`

// pack merges the small segments job covers. It stops at the first group
// that is not merged: the lease is gone, or the segments changed.
func (s *Store) pack(ctx context.Context, id string, job packJob) error {
	rows, err := s.pool.Query(ctx, `
SELECT first_seq, last_seq, octet_length(lines) FROM rein_segments
WHERE session_id = $1 AND first_seq >= $2 AND last_seq < $3 ORDER BY first_seq`, id, job.from, job.upto)
	if err != nil {
		return err
	}
	var segs []segInfo
	for rows.Next() {
		var g segInfo
		if err := rows.Scan(&g.first, &g.last, &g.size); err != nil {
			rows.Close()
			return err
		}
		segs = append(segs, g)
	}
	if err := rows.Err(); err != nil {
		return err
	}
	for _, g := range packGroups(segs, s.opts.PackSize) {
		var one int
		err := s.pool.QueryRow(ctx, packSQL, id, job.token, g.first, g.last, g.n).Scan(&one)
		if err != nil {
			return err // pgx.ErrNoRows: not merged
		}
	}
	return nil
}

// segInfo describes a segment (size: the length of its lines) or a group
// of n segments.
type segInfo struct {
	first, last int64
	size        int64
	n           int
}

// packGroups returns the groups of two or more consecutive segments of
// segs (in seq order) that pack merges: left to right, each as long as its
// merged lines stay within max bytes.
func packGroups(segs []segInfo, max int) []segInfo {
	var out []segInfo
	var cur segInfo
	flush := func() {
		if cur.n > 1 {
			out = append(out, cur)
		}
		cur = segInfo{}
	}
	for _, g := range segs {
		if cur.n > 0 && (g.first != cur.last+1 || cur.size+1+g.size > int64(max)) {
			flush()
		}
		if g.size >= int64(max) {
			continue
		}
		if cur.n == 0 {
			cur = segInfo{first: g.first, size: -1}
		}
		cur.last, cur.size, cur.n = g.last, cur.size+1+g.size, cur.n+1
	}
	flush()
	return out
}

// segLines yields the lines of a segment whose first line is at position
// first, with their positions. The lines alias lines.
func segLines(first int64, lines []byte) iter.Seq2[int64, []byte] {
	return func(yield func(int64, []byte) bool) {
		for seq := first; ; seq++ {
			i := bytes.IndexByte(lines, '\n')
			if i < 0 {
				yield(seq, lines)
				return
			}
			if !yield(seq, lines[:i]) {
				return
			}
			lines = lines[i+1:]
		}
	}
}

// lineAt returns line k (0-based) of lines joined by '\n'.
func lineAt(lines []byte, k int64) ([]byte, bool) {
	for ; k > 0; k-- {
		i := bytes.IndexByte(lines, '\n')
		if i < 0 {
			return nil, false
		}
		lines = lines[i+1:]
	}
	if i := bytes.IndexByte(lines, '\n'); i >= 0 {
		lines = lines[:i]
	}
	return lines, true
}
