package postgres

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/reinhq/rein/llm"
	"github.com/reinhq/rein/session"
	"github.com/reinhq/rein/store"
	"github.com/reinhq/rein/store/postgres/pgtest"
	"github.com/reinhq/rein/store/storetest"
)

var ctx = context.Background()

func TestMain(m *testing.M) {
	if os.Getenv(chaosWorkerEnv) != "" {
		os.Exit(chaosWorker())
	}
	pgtest.Main(m)
}

// newStore opens a store in a fresh schema of the test server.
func newStore(t testing.TB, opts Options) *Store {
	t.Helper()
	return openAt(t, pgtest.Fresh(t), opts)
}

// openAt opens another store on the same database: another process, as far
// as the database can tell.
func openAt(t testing.TB, dsn string, opts Options) *Store {
	t.Helper()
	s, err := Open(ctx, dsn, opts)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(s.Close)
	return s
}

func TestConformance(t *testing.T) {
	storetest.Run(t, storetest.Harness{
		New: func(t *testing.T) store.Store { return newStore(t, Options{}) },
		Tamper: func(t *testing.T, st store.Store, id string, how storetest.Tamper) {
			tamper(t, st.(*Store), id, how)
		},
		Crash: func(t *testing.T, w store.Writer) {
			if err := Crash(w); err != nil {
				t.Fatalf("Crash: %v", err)
			}
		},
		PutFile:     func(t *testing.T, st store.Store, id string, file []byte) { putFile(t, st.(*Store), id, file) },
		NoTornTails: true,
	})
}

// putFile stores a crafted session file as the store keeps one: the header
// line in the session's row, the event lines, as they are, in segments of
// three lines; the summary columns are whatever the header gives, as after
// an import that Open recomputes.
func putFile(t *testing.T, s *Store, id string, file []byte) {
	t.Helper()
	hl, body, _ := bytes.Cut(file, []byte("\n"))
	var h session.Header
	_ = h.UnmarshalJSON(hl)
	if h.CreatedAt.IsZero() {
		h.CreatedAt = time.Now()
	}
	var lines [][]byte
	if len(body) > 0 {
		lines = bytes.Split(bytes.TrimSuffix(body, []byte("\n")), []byte("\n"))
	}
	if _, err := s.pool.Exec(ctx, `DELETE FROM rein_sessions WHERE id = $1`, id); err != nil {
		t.Fatal(err)
	}
	if _, err := s.pool.Exec(ctx, `
INSERT INTO rein_sessions (id, header, cwd, parent, created_at, title, updated_at, next_seq, turns, size)
VALUES ($1, $2, $3, $4, $5, $6, $5, $7, 0, $8)`, id, hl, h.Cwd, h.Parent, h.CreatedAt, h.Title, len(lines), len(file)); err != nil {
		t.Fatal(err)
	}
	putLines(t, s, id, lines, 3)
}

// tamper damages a stored session the way storetest describes, in its
// lines, which it stores again in segments of three lines (so that the
// damage sits inside a segment, not alone in one).
func tamper(t *testing.T, s *Store, id string, how storetest.Tamper) {
	t.Helper()
	lines := storedLines(t, s, id)
	switch how {
	case storetest.TornTail:
		ev := session.Event{Seq: int64(len(lines)), Type: session.TypeSessionTitle, Time: time.Now().UTC(), Data: []byte(`{"title":"never finished"}`)}
		line := ev.AppendLine(nil)
		// Segments do not tear; the nearest they hold is a final line a
		// crash left half zeros (an imported file's lost page), which
		// loading drops as a file's torn tail.
		torn := line[:len(line)/2]
		copy(torn[len(torn)-8:], make([]byte, 8))
		lines = append(lines, torn)
	case storetest.CorruptMiddle:
		lines[1] = []byte(`{"seq":1,"type":"user/mes` + "\x00garbage")
	case storetest.BadVersion:
		if _, err := s.pool.Exec(ctx, `UPDATE rein_sessions SET header = convert_to(replace(convert_from(header, 'UTF8'), '"version":1', '"version":99'), 'UTF8') WHERE id = $1`, id); err != nil {
			t.Fatal(err)
		}
		return
	case storetest.SeqGap:
		lines = append(lines[:1], lines[2:]...)
	default:
		t.Fatalf("tamper %v: unknown", how)
	}
	putLines(t, s, id, lines, 3)
}

// storedLines returns session id's lines as stored, in order.
func storedLines(t testing.TB, s *Store, id string) [][]byte {
	t.Helper()
	rows, err := s.pool.Query(ctx, `SELECT first_seq, lines FROM rein_segments WHERE session_id = $1 ORDER BY first_seq`, id)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out [][]byte
	for rows.Next() {
		var first int64
		var lines []byte
		if err := rows.Scan(&first, &lines); err != nil {
			t.Fatal(err)
		}
		if first != int64(len(out)) {
			t.Fatalf("segment at %d follows %d lines", first, len(out))
		}
		for _, l := range segLines(first, lines) {
			out = append(out, l)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// putLines replaces session id's lines with lines, stored in segments of
// per lines each (its summary is left as it was).
func putLines(t testing.TB, s *Store, id string, lines [][]byte, per int) {
	t.Helper()
	batch := &pgx.Batch{}
	batch.Queue(`DELETE FROM rein_segments WHERE session_id = $1`, id)
	off := int64(0)
	for i := 0; i < len(lines); i += per {
		part := lines[i:min(i+per, len(lines))]
		seg := bytes.Join(part, []byte("\n"))
		batch.Queue(`INSERT INTO rein_segments (session_id, first_seq, last_seq, first_byte, lines) VALUES ($1, $2, $3, $4, $5)`,
			id, i, i+len(part)-1, off, seg)
		off += int64(len(seg)) + 1
	}
	if err := s.pool.SendBatch(ctx, batch).Close(); err != nil {
		t.Fatalf("put lines: %v", err)
	}
}

func hdr(id string) session.Header {
	return session.Header{ID: id, Cwd: "/w", CreatedAt: time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)}
}

// builder makes valid events through a session.Log.
type builder struct {
	t   testing.TB
	log *session.Log
	now time.Time
}

func newBuilder(t testing.TB, l *session.Log) *builder {
	now := l.LastTime()
	if now.IsZero() {
		now = l.Header().CreatedAt
	}
	return &builder{t: t, log: l, now: now}
}

func (b *builder) add(p session.Payload) session.Event {
	b.t.Helper()
	b.now = b.now.Add(time.Millisecond)
	ev, err := b.log.Append(b.now, p)
	if err != nil {
		b.t.Fatalf("append %s: %v", p.EventType(), err)
	}
	return ev
}

func (b *builder) user(text string) session.Event {
	return b.add(&session.UserMessage{ID: fmt.Sprintf("m%d", b.log.Len()), Content: llm.Text(text), Source: session.Source{Kind: session.SourceUser}})
}

// openTurn returns the events that open a turn and stream part of an
// answer; closeTurn those that finish it.
func (b *builder) openTurn(prompt, partial string) []session.Event {
	n, _ := b.log.Turn()
	n++
	id := fmt.Sprintf("m%d", b.log.Len())
	evs := []session.Event{
		b.add(&session.TurnStart{Turn: n, Trigger: session.Trigger{Kind: session.TriggerSend, MessageID: id}}),
		b.add(&session.UserMessage{ID: id, Content: llm.Text(prompt), Source: session.Source{Kind: session.SourceUser}}),
		b.add(&session.StepStart{Turn: n, Step: 1}),
		b.add(&session.RequestHeader{Turn: n, Step: 1, Reason: session.HeaderInitial, Model: "scripted:x", Tools: []llm.ToolSpec{}}),
	}
	if partial != "" {
		evs = append(evs, b.add(&session.AssistantChunk{Turn: n, Step: 1, Delta: llm.Delta{Text: partial}}))
	}
	return evs
}

func (b *builder) closeTurn(answer string) []session.Event {
	n, _ := b.log.Turn()
	var chunks []int64
	for s := b.log.Len() - 1; s >= 0 && b.log.Event(s).Type == session.TypeAssistantChunk; s-- {
		chunks = append([]int64{s}, chunks...)
	}
	return []session.Event{
		b.add(&session.AssistantMessage{Turn: n, Step: 1, Content: llm.Text(answer), ToolCalls: []llm.ToolCall{}, Finish: llm.FinishStop, ChunkSeqs: chunks}),
		b.add(&session.StepEnd{Turn: n, Step: 1}),
		b.add(&session.TurnEnd{Turn: n, Reason: session.Reason{Kind: session.ReasonCompleted}}),
	}
}

func mustAppend(t testing.TB, w store.Writer, evs []session.Event) {
	t.Helper()
	if err := w.Append(ctx, evs); err != nil {
		t.Fatalf("Append: %v", err)
	}
}

func checkLoad(t testing.TB, s store.Store, id string) *store.Loaded {
	t.Helper()
	ld, err := s.Load(ctx, id, store.LoadOptions{})
	if err != nil {
		t.Fatalf("Load(%s): %v", id, err)
	}
	if vs := session.Check(ld.Log.Events(0)); len(vs) > 0 {
		t.Fatalf("loaded log breaks the invariant: %v", vs)
	}
	return ld
}

// expire makes session id's lease run out now, as if its holder had been
// paused for longer than the lease, without telling the holder.
func expire(t testing.TB, s *Store, id string) {
	t.Helper()
	if _, err := s.pool.Exec(ctx, `UPDATE rein_sessions SET lease_expires = now() - interval '1 millisecond' WHERE id = $1`, id); err != nil {
		t.Fatal(err)
	}
}

// A writer whose lease ran out and was taken over can write nothing more:
// the new holder's token fences it at the server, its Lost channel closes,
// and its batch is not stored, not even in part.
func TestLeaseFencing(t *testing.T) {
	dsn := pgtest.Fresh(t)
	a := openAt(t, dsn, Options{Holder: "node-a"})
	b := openAt(t, dsn, Options{Holder: "node-b"})
	wa, err := a.Create(ctx, hdr("s"))
	if err != nil {
		t.Fatal(err)
	}
	defer wa.Close()
	ba := newBuilder(t, session.NewLog(hdr("s")))
	mustAppend(t, wa, ba.openTurn("hello", "hi"))

	if _, _, err := b.Open(ctx, "s"); !errors.Is(err, store.ErrLocked) {
		t.Fatalf("Open while node-a holds the lease: %v, want ErrLocked", err)
	} else if !strings.Contains(err.Error(), "node-a") {
		t.Errorf("ErrLocked does not name the holder: %v", err)
	}

	expire(t, a, "s") // node-a is paused past its lease
	wb, ld, err := b.Open(ctx, "s")
	if err != nil {
		t.Fatalf("takeover: %v", err)
	}
	defer wb.Close()
	if wa.(*writer).Token() >= wb.(*writer).Token() {
		t.Errorf("tokens do not grow: %d then %d", wa.(*writer).Token(), wb.(*writer).Token())
	}
	if len(ld.Repair) == 0 {
		t.Errorf("the takeover did not repair the interrupted turn")
	}
	// node-a wakes up and goes on with its turn.
	stale := ba.closeTurn("hi there")
	err = wa.Append(ctx, stale)
	if !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("stale writer's Append: %v, want ErrLeaseLost", err)
	}
	select {
	case <-wa.(store.Leased).Lost():
	default:
		t.Errorf("Lost not closed after ErrLeaseLost")
	}
	if err := wa.Flush(ctx); !errors.Is(err, store.ErrLeaseLost) {
		t.Errorf("Flush after the loss: %v, want ErrLeaseLost", err)
	}
	// node-b continues the repaired log.
	bb := newBuilder(t, ld.Log)
	mustAppend(t, wb, append(bb.openTurn("again", "ok"), bb.closeTurn("ok")...))
	if err := wb.Close(); err != nil {
		t.Fatal(err)
	}
	if err := wa.Close(); !errors.Is(err, store.ErrLeaseLost) {
		t.Errorf("Close of the stale writer: %v, want ErrLeaseLost", err)
	}
	got := checkLoad(t, b, "s")
	if got.Log.Len() != bb.log.Len() {
		t.Fatalf("stored %d events, want %d (the stale batch must not be there)", got.Log.Len(), bb.log.Len())
	}
	for _, ev := range got.Log.Events(0) {
		if bytes.Contains(ev.Data, []byte("hi there")) {
			t.Errorf("the stale writer's event is stored: seq %d %s", ev.Seq, ev.Data)
		}
	}
}

// The token alone fences: a stale writer whose next batch would continue
// the stored seqs exactly (the new holder has not written yet) is refused
// all the same.
func TestLeaseFencingSameSeq(t *testing.T) {
	dsn := pgtest.Fresh(t)
	a := openAt(t, dsn, Options{})
	b := openAt(t, dsn, Options{})
	wa, err := a.Create(ctx, hdr("s"))
	if err != nil {
		t.Fatal(err)
	}
	defer wa.Close()
	ba := newBuilder(t, session.NewLog(hdr("s")))
	mustAppend(t, wa, append(ba.openTurn("hello", "hi"), ba.closeTurn("hi")...))
	expire(t, a, "s")
	wb, ld, err := b.Open(ctx, "s")
	if err != nil {
		t.Fatal(err)
	}
	defer wb.Close()
	if len(ld.Repair) != 0 {
		t.Fatalf("repair of a closed turn: %v", ld.Repair)
	}
	if err := wa.Append(ctx, []session.Event{ba.user("stale")}); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("stale writer's Append at the next seq: %v, want ErrLeaseLost", err)
	}
	if got := checkLoad(t, b, "s"); got.Log.Len() != ld.Log.Len() {
		t.Errorf("stale batch stored: %d events, want %d", got.Log.Len(), ld.Log.Len())
	}
}

// A lease that nobody took over is still lost once it expires: the holder
// cannot tell that nobody did.
func TestLeaseExpiredUntaken(t *testing.T) {
	s := newStore(t, Options{})
	w, err := s.Create(ctx, hdr("s"))
	if err != nil {
		t.Fatal(err)
	}
	b := newBuilder(t, session.NewLog(hdr("s")))
	expire(t, s, "s")
	if err := w.Append(ctx, []session.Event{b.user("x")}); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("Append after expiry: %v, want ErrLeaseLost", err)
	}
	if ld := checkLoad(t, s, "s"); ld.Log.Len() != 0 {
		t.Errorf("%d events stored", ld.Log.Len())
	}
	// The session is free for the next writer.
	w2, _, err := s.Open(ctx, "s")
	if err != nil {
		t.Fatal(err)
	}
	w2.Close()
}

// The background renewal keeps an idle writer's lease: another writer is
// kept out for many lease lifetimes, and gets in as soon as it is closed.
func TestLeaseRenewal(t *testing.T) {
	dsn := pgtest.Fresh(t)
	opts := Options{LeaseTTL: 300 * time.Millisecond, RenewEvery: 50 * time.Millisecond}
	a, b := openAt(t, dsn, opts), openAt(t, dsn, opts)
	w, err := a.Create(ctx, hdr("s"))
	if err != nil {
		t.Fatal(err)
	}
	for end := time.Now().Add(1200 * time.Millisecond); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		if _, _, err := b.Open(ctx, "s"); !errors.Is(err, store.ErrLocked) {
			select {
			case <-w.(store.Leased).Lost():
				t.Skipf("the machine is too loaded to renew a 300 ms lease in time")
			default:
			}
			t.Fatalf("Open of a renewed session: %v, want ErrLocked", err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	w2, _, err := b.Open(ctx, "s")
	if err != nil {
		t.Fatalf("Open after Close: %v", err)
	}
	w2.Close()
}

// A writer that cannot renew by its own deadline gives up the lease before
// the server's expiry: after a pause it never writes on a lease it merely
// hopes is still there.
func TestLeaseLocalDeadline(t *testing.T) {
	s := newStore(t, Options{LeaseTTL: time.Hour})
	w, err := s.Create(ctx, hdr("s"))
	if err != nil {
		t.Fatal(err)
	}
	pw := w.(*writer)
	pw.mu.Lock()
	pw.deadline = time.Now() // as after a pause of an hour
	pw.mu.Unlock()
	b := newBuilder(t, session.NewLog(hdr("s")))
	if err := w.Append(ctx, []session.Event{b.user("x")}); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("Append past the deadline: %v, want ErrLeaseLost", err)
	}
	if ld := checkLoad(t, s, "s"); ld.Log.Len() != 0 {
		t.Errorf("%d events stored", ld.Log.Len())
	}
}

// OpenWait takes a session over as soon as its holder releases it, and
// after a dead holder's lease expires.
func TestOpenWait(t *testing.T) {
	dsn := pgtest.Fresh(t)
	a := openAt(t, dsn, Options{LeaseTTL: time.Hour})
	b := openAt(t, dsn, Options{})
	w, err := a.Create(ctx, hdr("s"))
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		time.Sleep(100 * time.Millisecond)
		w.Close()
	}()
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	w2, _, err := b.OpenWait(wctx, "s")
	if err != nil {
		t.Fatalf("OpenWait for a released session: %v", err)
	}
	// Dies holding it (short lease).
	c := openAt(t, dsn, Options{LeaseTTL: 200 * time.Millisecond, RenewEvery: 50 * time.Millisecond})
	w2.Close()
	w3, _, err := c.Open(ctx, "s")
	if err != nil {
		t.Fatal(err)
	}
	w3.(*writer).abandon()
	w4, _, err := b.OpenWait(wctx, "s")
	if err != nil {
		t.Fatalf("OpenWait for an expired session: %v", err)
	}
	w4.Close()
	if _, _, err := b.OpenWait(wctx, "nope"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("OpenWait of a missing session: %v, want ErrNotFound", err)
	}
}

// The stored line is the JSONL line byte for byte, so sessions export to
// exactly what the JSONL store would hold.
func TestLinesByteIdentical(t *testing.T) {
	s := newStore(t, Options{})
	w, err := s.Create(ctx, hdr("s"))
	if err != nil {
		t.Fatal(err)
	}
	b := newBuilder(t, session.NewLog(hdr("s")))
	evs := append(b.openTurn("quotes \" and \\ and é \U0001F600 and \u2028", "part"), b.closeTurn("done")...)
	evs = append(evs, session.Event{Seq: b.log.Len(), Type: "future/x", Time: b.now, Ignorable: true, Data: []byte(`{"a":[1,2]}`)})
	mustAppend(t, w, evs)
	w.Close()
	var stored []byte
	for _, line := range storedLines(t, s, "s") {
		stored = append(append(stored, line...), '\n')
	}
	var want []byte
	for _, ev := range evs {
		want = ev.AppendLine(want)
	}
	if !bytes.Equal(stored, want) {
		t.Errorf("stored lines differ:\n got %s\nwant %s", stored, want)
	}
	var again []byte
	for _, ev := range checkLoad(t, s, "s").Log.Events(0) {
		again = ev.AppendLine(again)
	}
	if !bytes.Equal(again, want) {
		t.Errorf("loaded events re-encode differently:\n got %s\nwant %s", again, want)
	}
}

// A batch that would not read back is refused before anything is stored.
func TestAppendRefusesWhatWouldNotLoad(t *testing.T) {
	s := newStore(t, Options{})
	w, err := s.Create(ctx, hdr("s"))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	bad := session.Event{Seq: 0, Type: session.TypeSessionTitle, Time: time.Now().UTC(), Data: []byte("{\"title\":\n\"x\"}")}
	if err := w.Append(ctx, []session.Event{bad}); !errors.Is(err, session.ErrCorrupt) {
		t.Errorf("data with a newline: %v, want ErrCorrupt", err)
	}
	// A NUL in message text reaches the index cleaned (PostgreSQL text
	// cannot hold one); the line keeps it escaped.
	b := newBuilder(t, session.NewLog(hdr("s")))
	mustAppend(t, w, []session.Event{b.user("nul \x00 here")})
	ld := checkLoad(t, s, "s")
	if ld.Log.Len() != 1 {
		t.Errorf("len %d", ld.Log.Len())
	}
}

func TestMigrate(t *testing.T) {
	dsn := pgtest.Fresh(t)
	if _, err := Open(ctx, dsn, Options{NoMigrate: true}); !errors.Is(err, ErrSchema) {
		t.Errorf("NoMigrate on an empty schema: %v, want ErrSchema", err)
	}
	from, to, err := Migrate(ctx, dsn)
	if err != nil || from != 0 || to != SchemaVersion {
		t.Fatalf("Migrate = %d, %d, %v; want 0, %d", from, to, err, SchemaVersion)
	}
	if from, to, err := Migrate(ctx, dsn); err != nil || from != SchemaVersion || to != SchemaVersion {
		t.Errorf("second Migrate = %d, %d, %v", from, to, err)
	}
	s := openAt(t, dsn, Options{NoMigrate: true})
	if _, err := s.pool.Exec(ctx, `INSERT INTO rein_migrations (version) VALUES (99)`); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(ctx, dsn, Options{}); !errors.Is(err, ErrSchema) || !strings.Contains(err.Error(), "99") {
		t.Errorf("Open of a newer schema: %v, want ErrSchema naming 99", err)
	}
	// Concurrent first opens of one schema migrate it once.
	dsn2 := pgtest.Fresh(t)
	errs := make(chan error, 4)
	for range 4 {
		go func() {
			s, err := Open(ctx, dsn2, Options{})
			if err == nil {
				s.Close()
			}
			errs <- err
		}()
	}
	for range 4 {
		if err := <-errs; err != nil {
			t.Errorf("concurrent Open: %v", err)
		}
	}
}

func TestUnreachable(t *testing.T) {
	_, err := Open(ctx, "postgres://nobody@/x?host=/nonexistent-rein-dir&connect_timeout=2", Options{})
	if !errors.Is(err, store.ErrUnreadable) {
		t.Errorf("Open of an unreachable server: %v, want ErrUnreadable", err)
	}
}

// The binary COPY parser streams rows of COPYs that follow one another,
// however the stream is split across messages; it keeps the header's row
// apart, and a read up to a position cuts the segment that holds it.
func TestCopyReaderSplit(t *testing.T) {
	segs := []struct {
		first int64
		lines string
	}{{0, "a\nb"}, {2, ""}, {3, strings.Repeat("long ", 100) + "\nc\nd"}, {6, "e"}}
	// The stream of load's COPY of the header (a row of -1 - the size
	// of the lines, here unknown) and then COPY (SELECT first_seq, lines …
	// WHERE first_seq < to).
	copyOf := func(to int64) []byte {
		var stream []byte
		stream = append(stream, copySignature...)
		stream = append(stream, 0, 0, 0, 0, 0, 0, 0, 0) // flags, no header extension
		stream = append(stream, 0, 2, 0, 0, 0, 8)
		stream = binary.BigEndian.AppendUint64(stream, ^uint64(0)) // -1
		stream = binary.BigEndian.AppendUint32(stream, 8)
		stream = append(stream, `{"id":1}`...)
		stream = append(stream, 0xff, 0xff)
		stream = append(stream, copySignature...)
		stream = append(stream, 0, 0, 0, 0, 0, 0, 0, 2, 'x', 'y') // flags, 2 bytes of header extension
		for _, g := range segs {
			if to >= 0 && g.first >= to {
				break
			}
			stream = append(stream, 0, 2, 0, 0, 0, 8)
			stream = binary.BigEndian.AppendUint64(stream, uint64(g.first))
			stream = binary.BigEndian.AppendUint32(stream, uint32(len(g.lines)))
			stream = append(stream, g.lines...)
		}
		return append(stream, 0xff, 0xff)
	}
	all := "a\nb\n\n" + strings.Repeat("long ", 100) + "\nc\nd\ne\n"
	for _, tc := range []struct {
		to     int64
		want   string
		cutSeq int64
		cutLen int
	}{
		{-1, all, -1, 0},
		{5, "a\nb\n\n" + strings.Repeat("long ", 100) + "\nc\n", 3, 502},
		{6, "a\nb\n\n" + strings.Repeat("long ", 100) + "\nc\nd\n", -1, 0},
	} {
		stream := copyOf(tc.to)
		for _, step := range []int{1, 3, 7, 18, len(stream)} {
			out := make(chan []byte, 100)
			rv := &receiver{to: tc.to, cutSeq: -1, size: 8, out: out, stop: make(chan struct{})}
			c := &copyReader{row: rv}
			for i := 0; i < len(stream); i += step {
				if _, err := c.Write(stream[i:min(i+step, len(stream))]); err != nil {
					t.Fatalf("step %d: %v", step, err)
				}
			}
			if err := c.end(); err != nil {
				t.Fatalf("step %d: %v", step, err)
			}
			if len(rv.buf) > 0 {
				rv.send()
			}
			close(out)
			var got []byte
			for b := range out {
				if len(b) == 0 || b[len(b)-1] != '\n' {
					t.Errorf("step %d: a buffer does not end a line: %q", step, b)
				}
				got = append(got, b...)
			}
			if string(rv.header) != `{"id":1}` || rv.hint != 0 {
				t.Errorf("step %d: header %q, hint %d", step, rv.header, rv.hint)
			}
			if string(got) != tc.want || rv.cutSeq != tc.cutSeq || rv.cutLen != tc.cutLen {
				t.Errorf("to %d, step %d: %q cut %d/%d; want %q cut %d/%d", tc.to, step, got, rv.cutSeq, rv.cutLen, tc.want, tc.cutSeq, tc.cutLen)
			}
		}
	}
	c := &copyReader{row: &receiver{to: -1, size: 8, out: make(chan []byte, 100), stop: make(chan struct{})}}
	stream := copyOf(-1)
	c.Write(stream[:len(stream)-2])
	if c.end() == nil {
		t.Errorf("a stream without its trailer ended cleanly")
	}
}
