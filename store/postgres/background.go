package postgres

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/reinhq/rein/session"
)

// worker runs a store's background work for a set of sessions: a goroutine
// takes every pending session id at once and hands them to do, again and
// again while more arrive. Adding an id never blocks.
type worker struct {
	do func(ctx context.Context, ids []string)

	mu      sync.Mutex
	pending map[string]struct{}
	running bool
	idle    chan struct{} // closed (and replaced) whenever a pass ends with nothing pending
	wake    chan struct{}
	ctx     context.Context
	cancel  context.CancelFunc
	done    chan struct{}
}

func startWorker(do func(ctx context.Context, ids []string)) *worker {
	ctx, cancel := context.WithCancel(context.Background())
	w := &worker{do: do, pending: map[string]struct{}{}, idle: make(chan struct{}), wake: make(chan struct{}, 1),
		ctx: ctx, cancel: cancel, done: make(chan struct{})}
	go w.run()
	return w
}

func (w *worker) add(ids ...string) {
	w.mu.Lock()
	for _, id := range ids {
		w.pending[id] = struct{}{}
	}
	w.mu.Unlock()
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

func (w *worker) run() {
	defer close(w.done)
	for {
		select {
		case <-w.wake:
		case <-w.ctx.Done():
			return
		}
		for {
			w.mu.Lock()
			if len(w.pending) == 0 {
				w.running = false
				close(w.idle)
				w.idle = make(chan struct{})
				w.mu.Unlock()
				break
			}
			ids := make([]string, 0, len(w.pending))
			for id := range w.pending {
				ids = append(ids, id)
			}
			clear(w.pending)
			w.running = true
			w.mu.Unlock()
			w.do(w.ctx, ids)
		}
	}
}

// wait returns once nothing is pending or running (or ctx ends).
func (w *worker) wait(ctx context.Context) error {
	for {
		w.mu.Lock()
		quiet, idle := len(w.pending) == 0 && !w.running, w.idle
		w.mu.Unlock()
		if quiet {
			return nil
		}
		select {
		case <-idle:
		case <-ctx.Done():
			return ctx.Err()
		case <-w.done:
			return nil
		}
	}
}

// stop lets pending work finish for up to grace, then stops the worker.
func (w *worker) stop(grace time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), grace)
	_ = w.wait(ctx)
	cancel()
	w.cancel()
	<-w.done
}

// notifyAll tells the followers of sessions ids, in every process, that
// they changed. Commits are announced by this separate statement, after
// they are durable, rather than by NOTIFY inside the append: a notifying
// commit takes a database-wide lock, which would be paid by every append.
// Announcements coalesce while one is in flight. One lost with a dying
// process is made up for by the followers' periodic reads.
func (s *Store) notifyAll(ctx context.Context, ids []string) {
	_, _ = s.pool.Exec(ctx, `SELECT pg_notify($1, x) FROM unnest($2::text[]) AS x`, s.channel, ids)
}

// The search index is kept in the background, off the append path:
// rein_search holds the tsvector of the message text of every event below
// rein_search_state.indexed. A writer's commits queue their session here;
// Open queues the session it takes over (catching up after a crash), and a
// new Store queues every session behind its watermark. Each pass indexes
// one session in transactions of at most indexChunk events, the watermark
// advancing in the same transaction, so a pass that dies leaves nothing
// half done and any process may take over.
const indexChunk = 5000

func (s *Store) indexAll(ctx context.Context, ids []string) {
	for _, id := range ids {
		for {
			more, err := s.indexStep(ctx, id)
			if err != nil || !more {
				break
			}
		}
	}
}

// indexStep indexes up to indexChunk events of session id past its
// watermark and reports whether more remain.
func (s *Store) indexStep(ctx context.Context, id string) (more bool, err error) {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return false, err
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	if _, err := tx.Exec(ctx, `INSERT INTO rein_search_state (session_id, indexed) VALUES ($1, 0) ON CONFLICT DO NOTHING`, id); err != nil {
		return false, err
	}
	var indexed, next int64
	err = tx.QueryRow(ctx, `
SELECT x.indexed, coalesce((SELECT next_seq FROM rein_sessions WHERE id = $1), -1)
FROM rein_search_state x WHERE x.session_id = $1 FOR UPDATE`, id).Scan(&indexed, &next)
	if err != nil {
		return false, err
	}
	if next < 0 { // deleted
		_, err := tx.Exec(ctx, `DELETE FROM rein_search_state WHERE session_id = $1`, id)
		if err == nil {
			err = tx.Commit(ctx)
		}
		return false, err
	}
	if indexed >= next {
		return false, nil
	}
	upto := min(next, indexed+indexChunk)
	rows, err := tx.Query(ctx, `
SELECT first_seq, first_byte, lines FROM rein_segments
WHERE session_id = $1 AND first_seq < $3 AND first_seq >= coalesce(
	(SELECT max(first_seq) FROM rein_segments WHERE session_id = $1 AND first_seq <= $2), 0)
ORDER BY first_seq`, id, indexed, upto)
	if err != nil {
		return false, err
	}
	var seqs, offs []int64
	var lens []int32
	var texts []string
	for rows.Next() {
		var first, off int64
		var lines []byte
		if err := rows.Scan(&first, &off, &lines); err != nil {
			rows.Close()
			return false, err
		}
		for seq, line := range segLines(first, lines) {
			if seq >= indexed && seq < upto {
				if ev, err := session.ParseLine(line); err == nil {
					if t := messageText(ev); t != nil {
						seqs, offs, lens, texts = append(seqs, seq), append(offs, off), append(lens, int32(len(line))), append(texts, *t)
					}
				}
			}
			off += int64(len(line)) + 1
		}
	}
	if err := rows.Err(); err != nil {
		return false, err
	}
	if len(seqs) > 0 {
		if _, err := tx.Exec(ctx, `
INSERT INTO rein_search (session_id, seq, off, len, tsv)
SELECT $1, u.seq, u.off, u.len, to_tsvector('simple', u.txt)
FROM unnest($2::bigint[], $3::bigint[], $4::integer[], $5::text[]) AS u(seq, off, len, txt)
ON CONFLICT DO NOTHING`, id, seqs, offs, lens, texts); err != nil {
			return false, err
		}
	}
	if _, err := tx.Exec(ctx, `UPDATE rein_search_state SET indexed = $2 WHERE session_id = $1`, id, upto); err != nil {
		return false, err
	}
	return upto < next, tx.Commit(ctx)
}

// indexBacklog queues every session whose index is behind.
func (s *Store) indexBacklog(ctx context.Context) error {
	rows, err := s.pool.Query(ctx, `
SELECT s.id FROM rein_sessions s LEFT JOIN rein_search_state x ON x.session_id = s.id
WHERE s.next_seq > coalesce(x.indexed, 0)`)
	if err != nil {
		return err
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return err
	}
	s.indexer.add(ids...)
	return nil
}
