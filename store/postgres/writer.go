package postgres

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/reinhq/rein/llm"
	"github.com/reinhq/rein/session"
	"github.com/reinhq/rein/store"
	"github.com/reinhq/rein/store/internal/group"
)

// writer appends to one session while it holds the session's lease. Its
// commits follow the JSONL writer's group commit: the first Append to find
// no commit running becomes the committer and stores every queued batch in
// one statement; batches queued meanwhile go in the next.
type writer struct {
	s     *Store
	id    string
	hdr   session.Header
	token int64

	lost     chan struct{} // closed once the lease is lost
	quit     chan struct{} // closed by Close (or abandon): renewals stop
	renewing sync.WaitGroup
	stopOnce sync.Once

	mu       sync.Mutex
	closed   bool
	lostErr  error             // set (wrapping store.ErrLeaseLost) when lost is closed
	broken   error             // a commit's outcome could not be learnt
	q        group.Queue[*req] // group commit
	next     int64             // seq the next accepted batch must start at
	stored   int64             // events stored
	body     int64             // bytes of their lines, newlines included: where the next segment starts
	deadline time.Time         // the lease surely holds until then (our clock)
	// Segments stored since the last pack job (see pack.go), from seq
	// packFrom on.
	packFrom int64
	packRows int
}

type req struct {
	events []session.Event
	lines  []byte // the events' lines, each followed by '\n'
}

var _ store.Leased = (*writer)(nil)

// ignoreDeadline makes writers ignore their own lease deadline, so that
// only the server's fencing stops a writer after a pause (tests set it to
// exercise exactly that).
var ignoreDeadline = false

// newWriter returns the writer of a lease taken by a request sent at sent
// (the lease runs at least LeaseTTL from then) of a session holding stored
// events in body bytes, and starts its renewals.
func (s *Store) newWriter(h session.Header, token, stored, body int64, sent time.Time) *writer {
	w := &writer{s: s, id: h.ID, hdr: h, token: token, next: stored, stored: stored, body: body, packFrom: stored,
		lost: make(chan struct{}), quit: make(chan struct{}), deadline: sent.Add(s.opts.LeaseTTL)}
	w.renewing.Add(1)
	go w.renewLoop()
	return w
}

// Header implements store.Writer.
func (w *writer) Header() session.Header { return w.hdr }

// Lost implements store.Leased.
func (w *writer) Lost() <-chan struct{} { return w.lost }

// Token returns the lease's fencing token.
func (w *writer) Token() int64 { return w.token }

// loseLocked records that the lease is gone. w.mu held.
func (w *writer) loseLocked(why string) error {
	if w.lostErr == nil {
		w.lostErr = fmt.Errorf("%w: session %s: %s", store.ErrLeaseLost, w.id, why)
		close(w.lost)
	}
	return w.lostErr
}

func (w *writer) lose(why string) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.loseLocked(why)
}

// extend records a successful renewal or append sent at sent.
func (w *writer) extend(sent time.Time) {
	w.mu.Lock()
	if w.lostErr == nil {
		if d := sent.Add(w.s.opts.LeaseTTL); d.After(w.deadline) {
			w.deadline = d
		}
	}
	w.mu.Unlock()
}

// renewLoop renews the lease every RenewEvery, sooner after a failed try,
// until the writer closes or the lease is lost. A lease not renewed by its
// deadline (our clock, conservatively behind the server's expiry) is lost:
// after a pause longer than the lease the writer gives up before trying.
func (w *writer) renewLoop() {
	defer w.renewing.Done()
	every := w.s.opts.RenewEvery
	t := time.NewTimer(every)
	defer t.Stop()
	for {
		select {
		case <-w.quit:
			return
		case <-w.lost:
			return
		case <-t.C:
		}
		w.mu.Lock()
		deadline := w.deadline
		w.mu.Unlock()
		sent := time.Now()
		if ignoreDeadline {
			deadline = sent.Add(w.s.opts.LeaseTTL)
		}
		if !sent.Before(deadline) {
			w.lose("not renewed in time")
			return
		}
		ctx, cancel := context.WithDeadline(context.Background(), deadline)
		tag, err := w.s.pool.Exec(ctx, `
UPDATE rein_sessions SET lease_expires = now() + $3 * interval '1 millisecond'
WHERE id = $1 AND lease_token = $2 AND lease_expires > now()`, w.id, w.token, ms(w.s.opts.LeaseTTL))
		cancel()
		switch {
		case err == nil && tag.RowsAffected() == 1:
			w.extend(sent)
			t.Reset(every)
		case err == nil:
			w.lose("expired or taken over by another writer")
			return
		default:
			// The server did not answer: try again soon, until the
			// deadline says the lease may be gone.
			t.Reset(min(every, time.Until(deadline)/4+time.Millisecond))
		}
	}
}

// Append implements store.Writer. The batch is encoded before it is
// queued; ctx is honoured only until then. A batch is stored whole or not at all, and only
// while the lease holds: store.ErrLeaseLost otherwise. When a commit fails,
// its batches and every batch queued behind them fail; the caller may retry
// from the first failed seq.
func (w *writer) Append(ctx context.Context, batch []session.Event) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if len(batch) == 0 {
		return w.Flush(ctx)
	}
	n := 0
	for i := range batch {
		n += 96 + len(batch[i].Data)
	}
	buf := make([]byte, 0, n)
	for i, ev := range batch {
		if i > 0 && ev.Seq != batch[i-1].Seq+1 {
			return fmt.Errorf("%w: batch seq %d follows %d", store.ErrSeq, ev.Seq, batch[i-1].Seq)
		}
		if err := store.CheckLine(ev); err != nil {
			return err
		}
		buf = ev.AppendLine(buf)
	}
	r := &req{events: batch, lines: buf}
	w.mu.Lock()
	switch {
	case w.closed:
		w.mu.Unlock()
		return fmt.Errorf("%w: session %s", store.ErrClosed, w.id)
	case w.lostErr != nil:
		err := w.lostErr
		w.mu.Unlock()
		return err
	case w.broken != nil:
		err := w.broken
		w.mu.Unlock()
		return err
	case batch[0].Seq != w.next:
		next := w.next
		w.mu.Unlock()
		return fmt.Errorf("%w: batch starts at seq %d, want %d", store.ErrSeq, batch[0].Seq, next)
	}
	w.next += int64(len(batch))
	return w.enqueue(r)
}

// maxText caps the message text indexed per event (a tsvector holds at
// most 1 MB; the start of a long tool result is what a search needs).
const maxText = 64 << 10

// messageText returns the text the search index holds for ev: the text of
// user, steering and assistant messages and tool results; nil for other
// events.
func messageText(ev session.Event) *string {
	switch ev.Type {
	case session.TypeUserMessage, session.TypeSteeringMessage, session.TypeAssistantMessage, session.TypeToolResult:
	default:
		return nil
	}
	p, err := ev.Decode()
	if err != nil {
		return nil
	}
	var parts []llm.Part
	switch m := p.(type) {
	case *session.UserMessage:
		parts = m.Content
	case *session.SteeringMessage:
		parts = m.Content
	case *session.AssistantMessage:
		parts = m.Content
	case *session.ToolResult:
		parts = m.Content
	}
	t := llm.PlainText(parts)
	if len(t) > maxText {
		cut := maxText
		for cut > 0 && !utf8.RuneStart(t[cut]) {
			cut--
		}
		t = t[:cut]
	}
	// PostgreSQL text holds no NUL.
	t = strings.ReplaceAll(strings.ToValidUTF8(t, "\uFFFD"), "\x00", " ")
	if strings.TrimSpace(t) == "" {
		return nil
	}
	return &t
}

// Flush implements store.Writer: it returns once every batch appended so
// far is stored (each Append already returns only then).
func (w *writer) Flush(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return fmt.Errorf("%w: session %s", store.ErrClosed, w.id)
	}
	if !w.q.Busy() {
		err := w.lostErr
		if err == nil {
			err = w.broken
		}
		w.mu.Unlock()
		return err
	}
	return w.enqueue(&req{})
}

// enqueue queues r (w.mu held; released on return) and waits for its
// group's commit.
func (w *writer) enqueue(r *req) error {
	return w.q.Do(&w.mu, r, w.commit,
		func(error) { w.next = w.stored }, // batches behind the failed group fail too
		func(err error) error { return fmt.Errorf("postgres: an earlier batch failed: %w", err) })
}

// appendSQL stores a group in one statement: the summary row is updated
// only while the token holds an unexpired lease and the group continues
// the stored seqs, and the group's lines are inserted as one segment only
// if it was. It returns one row when the group was stored, none when it
// was refused. (Followers are told, the search index updated and small
// segments packed after the commit: see background.go and pack.go.)
const appendSQL = `
WITH s AS (
	UPDATE rein_sessions SET
		next_seq = next_seq + $4,
		turns = turns + $6,
		title = coalesce($7, title),
		updated_at = $8,
		size = size + $9,
		lease_expires = now() + $10 * interval '1 millisecond'
	WHERE id = $1 AND lease_token = $2 AND lease_expires > now() AND next_seq = $3
	RETURNING id),
i AS (
	INSERT INTO rein_segments (session_id, first_seq, last_seq, first_byte, lines)
	SELECT id, $3, $3 + $4 - 1, $11, $5 FROM s)
SELECT 1 FROM s`

// commit stores group. Only the committer calls it.
func (w *writer) commit(group []*req) error {
	var n int64
	var lines []byte
	turns, ends := 0, false
	var title *string
	var last time.Time
	for _, g := range group {
		if len(g.events) == 0 {
			continue
		}
		if lines == nil {
			lines = g.lines // the usual group of one batch is not copied
		} else {
			lines = append(lines[:len(lines):len(lines)], g.lines...)
		}
		n += int64(len(g.events))
		last = g.events[len(g.events)-1].Time
		for _, ev := range g.events {
			switch ev.Type {
			case session.TypeTurnStart:
				turns++
			case session.TypeTurnEnd:
				ends = true
			case session.TypeSessionTitle:
				if t, ok := titleOf(ev); ok {
					title = &t
				}
			}
		}
	}
	w.mu.Lock()
	lostErr, deadline, first, body := w.lostErr, w.deadline, w.stored, w.body
	w.mu.Unlock()
	if n == 0 || lostErr != nil {
		return lostErr
	}
	sent := time.Now()
	if ignoreDeadline {
		deadline = sent.Add(w.s.opts.LeaseTTL)
	}
	if !sent.Before(deadline) {
		return w.lose("not renewed in time")
	}
	seg := lines[:len(lines)-1] // without the final newline
	// The statement may run as long as the lease surely holds; after that
	// its outcome no longer matters to anyone but us (see resolve).
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	var one int
	err := w.s.pool.QueryRow(ctx, appendSQL, w.id, w.token, first, n, seg,
		turns, title, last, len(lines), ms(w.s.opts.LeaseTTL), body).Scan(&one)
	cancel()
	stored := err == nil
	switch {
	case err == nil:
		w.extend(sent)
	case errors.Is(err, pgx.ErrNoRows):
		return w.refused(first)
	default:
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) || pgconn.SafeToRetry(err) {
			// The server refused the statement, or it was never sent:
			// nothing was stored.
			if !time.Now().Before(deadline) {
				return w.lose("not renewed in time")
			}
			return fmt.Errorf("postgres: append to %s: %w", w.id, err)
		}
		// The connection failed mid-statement: the group may or may not
		// be stored. Find out before answering.
		var rerr error
		if stored, rerr = w.resolve(first, n, lastLine(seg)); rerr != nil {
			return rerr
		}
	}
	if !stored {
		return fmt.Errorf("postgres: append to %s: %w", w.id, err)
	}
	w.mu.Lock()
	w.stored, w.body = first+n, body+int64(len(lines))
	w.packRows++
	var job *packJob
	if (ends && w.packRows > 1) || w.packRows >= packEvery {
		job = &packJob{token: w.token, from: w.packFrom, upto: w.stored}
		w.packFrom, w.packRows = w.stored, 0
	}
	w.mu.Unlock()
	w.s.notifier.add(w.id)
	w.s.indexer.add(w.id)
	if job != nil {
		w.s.queuePack(w.id, *job)
	}
	return nil
}

// lastLine returns the last of lines joined by '\n'.
func lastLine(lines []byte) []byte { return lines[bytes.LastIndexByte(lines, '\n')+1:] }

// refused explains an append the statement refused: the lease is gone, or
// the stored seqs moved.
func (w *writer) refused(first int64) error {
	var token, next int64
	var valid bool
	err := w.s.pool.QueryRow(context.Background(), `
SELECT lease_token, coalesce(lease_expires > now(), false), next_seq FROM rein_sessions WHERE id = $1`, w.id).
		Scan(&token, &valid, &next)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return w.lose("the session was deleted")
	case err != nil:
		return fmt.Errorf("postgres: append to %s refused, and then: %w", w.id, unreadable(err))
	case token != w.token:
		return w.lose(fmt.Sprintf("taken over by another writer (token %d, ours %d)", token, w.token))
	case !valid:
		return w.lose("expired")
	}
	return fmt.Errorf("%w: batch starts at seq %d, the session holds %d events", store.ErrSeq, first, next)
}

// resolve learns whether a group whose statement failed in flight was
// stored: the session then holds first+n events and its last line is
// ours. It asks until the lease deadline; when that passes without an
// answer the lease is lost and the writer with it.
func (w *writer) resolve(first, n int64, last []byte) (bool, error) {
	for delay := 10 * time.Millisecond; ; delay = min(2*delay, time.Second) {
		w.mu.Lock()
		deadline := w.deadline
		w.mu.Unlock()
		ctx, cancel := context.WithDeadline(context.Background(), deadline)
		var next int64
		var segFirst *int64
		var lines []byte
		err := w.s.pool.QueryRow(ctx, `
SELECT s.next_seq, g.first_seq, g.lines FROM rein_sessions s
LEFT JOIN LATERAL (SELECT first_seq, lines FROM rein_segments
	WHERE session_id = s.id AND first_seq <= $2 ORDER BY first_seq DESC LIMIT 1) g ON true
WHERE s.id = $1`, w.id, first+n-1).Scan(&next, &segFirst, &lines)
		cancel()
		if err == nil {
			if next < first+n || segFirst == nil {
				return false, nil
			}
			line, _ := lineAt(lines, first+n-1-*segFirst)
			return bytes.Equal(line, last), nil
		}
		if !time.Now().Before(deadline) {
			err := w.lose("the database did not answer")
			w.mu.Lock()
			w.broken = err
			w.mu.Unlock()
			return false, err
		}
		time.Sleep(delay)
	}
}

// Close implements store.Writer: it waits for queued batches, stops the
// renewals and releases the lease. Appends racing with Close either commit
// before it returns or fail with store.ErrClosed. After the lease was lost
// it returns store.ErrLeaseLost.
func (w *writer) Close() error {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return fmt.Errorf("%w: session %s", store.ErrClosed, w.id)
	}
	w.closed = true
	var err error
	if w.q.Busy() {
		err = w.enqueue(&req{})
		w.mu.Lock()
	}
	lost := w.lostErr
	w.mu.Unlock()
	w.stopRenewing()
	if lost != nil {
		return lost
	}
	ctx, cancel := context.WithTimeout(context.Background(), w.s.opts.LeaseTTL)
	defer cancel()
	if rerr := w.s.release(ctx, w.id, w.token); rerr != nil && err == nil {
		// The lease will expire by itself.
		err = fmt.Errorf("postgres: release %s: %w", w.id, rerr)
	}
	return err
}

func (w *writer) stopRenewing() {
	w.stopOnce.Do(func() { close(w.quit) })
	w.renewing.Wait()
}

// abandon stops the writer without releasing its lease: what a crash does.
func (w *writer) abandon() {
	w.mu.Lock()
	w.closed = true
	w.mu.Unlock()
	w.stopRenewing()
}

// Crash drops w as a dying process would: renewals stop, nothing is
// released, and the lease is made to expire now (as it would after
// LeaseTTL), so that another writer may take the session over at once. For
// conformance tests and chaos drills.
func Crash(sw store.Writer) error {
	w := sw.(*writer)
	w.abandon()
	_, err := w.s.pool.Exec(context.Background(), `
UPDATE rein_sessions SET lease_expires = now() - interval '1 millisecond' WHERE id = $1 AND lease_token = $2`, w.id, w.token)
	return err
}
