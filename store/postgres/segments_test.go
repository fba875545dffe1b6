package postgres

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/reinhq/rein/session"
	"github.com/reinhq/rein/store"
	"github.com/reinhq/rein/store/postgres/pgtest"
)

// segment is a row of rein_segments.
type segment struct {
	first, last, firstByte int64
	lines                  []byte
}

func segmentsOf(t testing.TB, s *Store, id string) []segment {
	t.Helper()
	rows, err := s.pool.Query(ctx, `SELECT first_seq, last_seq, first_byte, lines FROM rein_segments WHERE session_id = $1 ORDER BY first_seq`, id)
	if err != nil {
		t.Fatal(err)
	}
	segs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (segment, error) {
		var g segment
		err := r.Scan(&g.first, &g.last, &g.firstByte, &g.lines)
		return g, err
	})
	if err != nil {
		t.Fatal(err)
	}
	return segs
}

// checkSegments checks that session id's segments tile its lines: each
// holds last-first+1 lines, starting where the one before ended, at the
// byte offset the lines before it take. It returns their number.
func checkSegments(t testing.TB, s *Store, id string) int {
	t.Helper()
	segs := segmentsOf(t, s, id)
	next, off := int64(0), int64(0)
	for _, g := range segs {
		if n := int64(bytes.Count(g.lines, []byte("\n"))) + 1; g.first != next || g.last-g.first+1 != n || g.firstByte != off {
			t.Errorf("segment %d..%d at byte %d holds %d lines; want it at seq %d, byte %d", g.first, g.last, g.firstByte, n, next, off)
		}
		next, off = g.last+1, off+int64(len(g.lines))+1
	}
	return len(segs)
}

// linesOf returns the JSONL lines of evs, each with its newline.
func linesOf(evs []session.Event) []byte {
	var b []byte
	for _, ev := range evs {
		b = ev.AppendLine(b)
	}
	return b
}

func joined(lines [][]byte) []byte {
	var b []byte
	for _, l := range lines {
		b = append(append(b, l...), '\n')
	}
	return b
}

func waitPacked(t testing.TB, s *Store) {
	t.Helper()
	if err := s.packer.wait(ctx); err != nil {
		t.Fatal(err)
	}
}

// A session written event by event, as a writer without checkpoints
// would, is packed turn by turn in the background, and its reopening packs
// what is left into segments of up to PackSize. Readers see the same lines
// throughout: load, follow from inside a segment, and search, whose hits
// are cut out of the merged segments.
func TestPack(t *testing.T) {
	s := newStore(t, Options{})
	w, err := s.Create(ctx, hdr("s"))
	if err != nil {
		t.Fatal(err)
	}
	b := newBuilder(t, session.NewLog(hdr("s")))
	const turns = 6
	for i := range turns {
		evs := append(b.openTurn(fmt.Sprintf("prompt %d about giraffe%d", i, i), "thinking"), b.closeTurn(fmt.Sprintf("answer %d", i))...)
		for _, ev := range evs {
			mustAppend(t, w, []session.Event{ev})
		}
	}
	mustAppend(t, w, []session.Event{b.user("an out-of-turn note, unpacked")})
	waitPacked(t, s)
	want := linesOf(b.log.Events(0))
	// Packs end at turn ends (a pass may take the requests of several
	// turns at once); the note after the last turn is not packed yet.
	if n := checkSegments(t, s, "s"); n < 2 || n > turns+1 {
		t.Errorf("%d segments after %d turns written event by event, want at most one per turn and the note", n, turns)
	}
	segs := segmentsOf(t, s, "s")
	for _, g := range segs[:len(segs)-1] {
		if !bytes.Contains(g.lines[bytes.LastIndexByte(g.lines, '\n')+1:], []byte(`"type":"turn/end"`)) {
			t.Errorf("segment %d..%d does not end with a turn", g.first, g.last)
		}
	}
	if g := segs[len(segs)-1]; g.first != g.last {
		t.Errorf("the note's segment is %d..%d", g.first, g.last)
	}
	check := func(when string) {
		t.Helper()
		if got := joined(storedLines(t, s, "s")); !bytes.Equal(got, want) {
			t.Errorf("%s: stored lines differ", when)
		}
		if got := linesOf(checkLoad(t, s, "s").Log.Events(0)); !bytes.Equal(got, want) {
			t.Errorf("%s: loaded events differ", when)
		}
		fctx, cancel := context.WithCancel(ctx)
		defer cancel()
		var followed []session.Event
		for ev, err := range s.Follow(fctx, "s", 9) {
			if err != nil {
				t.Fatalf("%s: follow: %v", when, err)
			}
			followed = append(followed, ev)
			if ev.Seq == b.log.Len()-1 {
				break
			}
		}
		if !bytes.Equal(linesOf(followed), linesOf(b.log.Events(9))) {
			t.Errorf("%s: followed from seq 9:\n%s", when, linesOf(followed))
		}
		hits, _, err := s.Search(ctx, "giraffe4", store.PageOptions{})
		if err != nil || len(hits) != 1 || hits[0].Text != "prompt 4 about giraffe4" || hits[0].Type != session.TypeUserMessage {
			t.Errorf("%s: search: %+v, %v", when, hits, err)
		} else if ev := b.log.Event(hits[0].Seq); !bytes.Contains(ev.Data, []byte("giraffe4")) {
			t.Errorf("%s: hit at seq %d, which is %s", when, hits[0].Seq, ev.Data)
		}
	}
	check("packed by turn")
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	w, _, err = s.Open(ctx, "s")
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	waitPacked(t, s)
	if n := checkSegments(t, s, "s"); n != 1 {
		t.Errorf("%d segments after Open packed the session, want 1", n)
	}
	check("packed whole")
}

// packGroups merges runs of consecutive small segments, each run up to the
// size limit, and leaves large segments and gaps alone.
func TestPackGroups(t *testing.T) {
	segs := []segInfo{
		{first: 0, last: 0, size: 10}, {first: 1, last: 4, size: 20}, {first: 5, last: 5, size: 69}, // 10+1+20+1+69 = 101 > 100
		{first: 6, last: 6, size: 100},                             // too large: alone
		{first: 7, last: 7, size: 5}, {first: 8, last: 9, size: 5}, // a run of two
		{first: 11, last: 11, size: 5}, {first: 12, last: 12, size: 5}, {first: 13, last: 13, size: 5}, // after a gap
		{first: 14, last: 20, size: 50}, {first: 21, last: 21, size: 5}, {first: 22, last: 22, size: 30}, // 74+1+30 > 100
	}
	got := fmt.Sprint(packGroups(segs, 100))
	want := fmt.Sprint([]segInfo{
		{first: 0, last: 4, size: 31, n: 2}, {first: 7, last: 9, size: 11, n: 2},
		{first: 11, last: 21, size: 74, n: 5},
	})
	if got != want {
		t.Errorf("packGroups = %s, want %s", got, want)
	}
}

// A pack is fenced like an append: under a lease that is no longer held it
// merges nothing, and it merges nothing when the segments are not the ones
// it was asked to merge; it never loses a line.
func TestPackFenced(t *testing.T) {
	dsn := pgtest.Fresh(t)
	a := openAt(t, dsn, Options{PackSize: -1})
	b := openAt(t, dsn, Options{PackSize: -1})
	packer := openAt(t, dsn, Options{})
	wa, err := a.Create(ctx, hdr("s"))
	if err != nil {
		t.Fatal(err)
	}
	defer wa.Close()
	bl := newBuilder(t, session.NewLog(hdr("s")))
	for _, ev := range append(bl.openTurn("one", "x"), bl.closeTurn("two")...) {
		mustAppend(t, wa, []session.Event{ev})
	}
	want := linesOf(bl.log.Events(0))
	n := int64(checkSegments(t, a, "s"))
	expire(t, a, "s")
	wb, _, err := b.Open(ctx, "s")
	if err != nil {
		t.Fatal(err)
	}
	defer wb.Close()

	stale := packJob{token: wa.(*writer).Token(), from: 0, upto: n}
	if err := packer.pack(ctx, "s", stale); !errors.Is(err, pgx.ErrNoRows) {
		t.Errorf("pack under a lost lease: %v, want no rows", err)
	}
	if got := checkSegments(t, a, "s"); got != int(n) {
		t.Errorf("a pack under a lost lease merged: %d segments, want %d", got, n)
	}
	current := wb.(*writer).Token()
	var one int
	if err := packer.pool.QueryRow(ctx, packSQL, "s", current, 0, n-1, n+1).Scan(&one); !errors.Is(err, pgx.ErrNoRows) {
		t.Errorf("pack of segments that are not the ones asked for: %v, want no rows", err)
	}
	if got := checkSegments(t, a, "s"); got != int(n) || !bytes.Equal(joined(storedLines(t, a, "s")), want) {
		t.Errorf("a refused pack changed the segments: %d", got)
	}
	if err := packer.pack(ctx, "s", packJob{token: current, from: 0, upto: n}); err != nil {
		t.Fatal(err)
	}
	if got := checkSegments(t, a, "s"); got != 1 || !bytes.Equal(joined(storedLines(t, a, "s")), want) {
		t.Errorf("pack under the lease: %d segments", got)
	}
}

// A fork inside a segment copies the segment cut after the fork point; the
// child loads, is searchable and goes on.
func TestForkInsideSegment(t *testing.T) {
	s := newStore(t, Options{})
	w, err := s.Create(ctx, hdr("p"))
	if err != nil {
		t.Fatal(err)
	}
	b := newBuilder(t, session.NewLog(hdr("p")))
	evs := append(b.openTurn("the okapi question", "hm"), b.closeTurn("the okapi answer")...)
	at := int64(len(evs))
	evs = append(evs, b.user("an out-of-turn zebra"))
	evs = append(evs, append(b.openTurn("later", "x"), b.closeTurn("done")...)...)
	mustAppend(t, w, evs) // one segment
	w.Close()
	if n := checkSegments(t, s, "p"); n != 1 {
		t.Fatalf("%d segments, want 1", n)
	}
	if _, err := s.Fork(ctx, "p", at, session.Header{ID: "c"}); err != nil {
		t.Fatal(err)
	}
	if n := checkSegments(t, s, "c"); n != 1 {
		t.Errorf("child has %d segments, want the cut one", n)
	}
	want := linesOf(b.log.Events(0)[:at+1])
	if got := joined(storedLines(t, s, "c")); !bytes.Equal(got, want) {
		t.Errorf("child's lines:\n%s\nwant\n%s", got, want)
	}
	cw, ld, err := s.Open(ctx, "c")
	if err != nil {
		t.Fatal(err)
	}
	if len(ld.Repair) != 0 || ld.Log.Len() != at+1 {
		t.Fatalf("child: %d events, repair %v", ld.Log.Len(), ld.Repair)
	}
	cb := newBuilder(t, ld.Log)
	mustAppend(t, cw, append(cb.openTurn("a quagga in the child", "q"), cb.closeTurn("ok")...))
	cw.Close()
	// Hits in parent and child: zebra (the fork point) and okapi (twice)
	// in both, quagga in the child.
	for q, want := range map[string]int{"zebra": 2, "quagga": 1, "okapi": 4} {
		hits, _, err := s.Search(ctx, q, store.PageOptions{})
		if err != nil || len(hits) != want {
			t.Errorf("search %s: %+v, %v; want %d hits", q, hits, err, want)
		}
		for _, h := range hits {
			if !strings.Contains(h.Text, q) {
				t.Errorf("search %s: hit %+v", q, h)
			}
		}
	}
	if n := checkSegments(t, s, "c"); n < 2 {
		t.Errorf("child has %d segments after its own turn", n)
	}
}

// Open cuts a torn final line out of the segment that holds it, and the
// next appends continue where the good lines end (their search hits, cut
// out by byte offset, are theirs).
func TestOpenCutsTornLine(t *testing.T) {
	s := newStore(t, Options{PackSize: -1})
	w, err := s.Create(ctx, hdr("s"))
	if err != nil {
		t.Fatal(err)
	}
	b := newBuilder(t, session.NewLog(hdr("s")))
	mustAppend(t, w, append(b.openTurn("first", "x"), b.closeTurn("one")...))
	w.Close()
	lines := storedLines(t, s, "s")
	torn := []byte("{\"seq\":7,\"type\":\"user/message\",\"time\":\"2026-12-01T09:00:00.009Z\",\"data\":{\"id\":\"m7\",\x00\x00\x00\x00")
	putLines(t, s, "s", append(lines, torn), 100) // one segment, torn line last
	if ld := checkLoad(t, s, "s"); ld.TornBytes != len(torn) {
		t.Fatalf("TornBytes %d, want %d", ld.TornBytes, len(torn))
	}
	w, ld, err := s.Open(ctx, "s")
	if err != nil {
		t.Fatal(err)
	}
	if got := joined(storedLines(t, s, "s")); !bytes.Equal(got, joined(lines)) {
		t.Errorf("after Open:\n%s\nwant\n%s", got, joined(lines))
	}
	b = newBuilder(t, ld.Log)
	mustAppend(t, w, []session.Event{b.user("the wombat line")})
	w.Close()
	checkSegments(t, s, "s")
	if hits, _, _ := s.Search(ctx, "wombat", store.PageOptions{}); len(hits) != 1 || hits[0].Text != "the wombat line" {
		t.Errorf("search after the cut: %+v", hits)
	}
}

// Migration 2 moves version 1's rows (one per event) into segments: every
// session exports the same bytes, damaged lines included, loads as before
// (the same events, the same errors), and search hits keep their text.
func TestMigrateRowsToSegments(t *testing.T) {
	dsn := pgtest.Fresh(t)
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, _, err := migrateTo(ctx, conn, false, 1); err != nil {
		t.Fatal(err)
	}
	// put stores a session as version 1 did: a row per line (type NULL
	// for a line that does not parse), searchable text for messages.
	put := func(id string, lines [][]byte, next int64, indexed bool) []byte {
		h := hdr(id)
		hl, _ := headerLine(h)
		if _, err := conn.Exec(ctx, `INSERT INTO rein_sessions (id, header, cwd, created_at, title, updated_at, next_seq, size)
VALUES ($1, $2, '/w', $3, '', $3, $4, 0)`, id, hl, h.CreatedAt, next); err != nil {
			t.Fatal(err)
		}
		for i, l := range lines {
			var typ *string
			if ev, err := session.ParseLine(l); err == nil {
				s := string(ev.Type)
				typ = &s
				if txt := messageText(ev); txt != nil && indexed {
					if _, err := conn.Exec(ctx, `INSERT INTO rein_search (session_id, seq, tsv) VALUES ($1, $2, to_tsvector('simple', $3))`, id, i, *txt); err != nil {
						t.Fatal(err)
					}
				}
			}
			seq := int64(i)
			if id == "gap" && i >= 1 {
				seq++ // line 1 went missing
			}
			if _, err := conn.Exec(ctx, `INSERT INTO rein_events (session_id, seq, type, line) VALUES ($1, $2, $3, $4)`, id, seq, typ, l); err != nil {
				t.Fatal(err)
			}
		}
		if indexed {
			if _, err := conn.Exec(ctx, `INSERT INTO rein_search_state (session_id, indexed) VALUES ($1, $2)`, id, next); err != nil {
				t.Fatal(err)
			}
		}
		return append(append(hl, '\n'), joined(lines)...)
	}
	split := func(b []byte) [][]byte { return bytes.Split(bytes.TrimSuffix(b, []byte("\n")), []byte("\n")) }

	bs := newBuilder(t, session.NewLog(hdr("sound")))
	evs := append(bs.openTurn("an aardvark", "x"), bs.closeTurn("fine")...)
	big := strings.Repeat("lorem ipsum ", 2000) // 24 KB a message: 600 KB in all
	for i := range 25 {
		evs = append(evs, bs.user(fmt.Sprintf("note %d %s", i, big)))
	}
	files := map[string][]byte{}
	files["sound"] = put("sound", split(linesOf(evs)), int64(len(evs)), true)

	bt := newBuilder(t, session.NewLog(hdr("torn")))
	tl := split(linesOf(append(bt.openTurn("a bat", "x"), bt.closeTurn("ok")...)))
	tl = append(tl, []byte("{\"seq\":8,\"type\":\"user/mess\x00\x00\x00\x00"))
	files["torn"] = put("torn", tl, int64(len(tl)-1), true)

	bd := newBuilder(t, session.NewLog(hdr("damaged")))
	dl := split(linesOf(append(bd.openTurn("a cat", "x"), bd.closeTurn("ok")...)))
	dl[2] = []byte("{\"seq\":2,\"type\":\"step/st\x00\xff garbage")
	files["damaged"] = put("damaged", dl, int64(len(dl)), false)

	bg := newBuilder(t, session.NewLog(hdr("gap")))
	gl := split(linesOf(append(bg.openTurn("a gnu", "x"), bg.closeTurn("ok")...)))
	files["gap"] = put("gap", append(gl[:1:1], gl[2:]...), int64(len(gl)), false)

	type loadResult struct {
		events  []byte
		torn    int
		err     string
		dropped int
	}
	loadAll := func(s *Store) map[string]loadResult {
		out := map[string]loadResult{}
		for id := range files {
			var r loadResult
			ld, err := s.Load(ctx, id, store.LoadOptions{})
			if err != nil {
				r.err = err.Error()
				if ld, err = s.Load(ctx, id, store.LoadOptions{Salvage: true}); err != nil {
					t.Fatalf("salvage %s: %v", id, err)
				}
				r.dropped = len(ld.Dropped)
			}
			r.events, r.torn = linesOf(ld.Log.Events(0)), ld.TornBytes
			out[id] = r
		}
		return out
	}

	if _, _, err := migrateTo(ctx, conn, false, 2); err != nil {
		t.Fatalf("migration 2: %v", err)
	}
	s := openAt(t, dsn, Options{PackSize: -1})
	for id, file := range files {
		var hl []byte
		if err := s.pool.QueryRow(ctx, `SELECT header FROM rein_sessions WHERE id = $1`, id).Scan(&hl); err != nil {
			t.Fatal(err)
		}
		if id == "gap" {
			// Segments do not span the missing seq; positions are kept.
			if g := segmentsOf(t, s, id); len(g) != 2 || g[0].last != 0 || g[1].first != 2 {
				t.Errorf("gap: segments %+v", g)
			}
			continue
		}
		if got := append(append(hl, '\n'), joined(storedLines(t, s, id))...); !bytes.Equal(got, file) {
			t.Errorf("%s: the migrated session differs:\n%q\nwant\n%q", id, got, file)
		}
		checkSegments(t, s, id)
	}
	if n := len(segmentsOf(t, s, "sound")); n < 25 {
		t.Errorf("25 notes of 24 KB in %d segments: not cut at 16 KB", n)
	}
	after := loadAll(s)
	if r := after["sound"]; r.err != "" || !bytes.Equal(r.events, linesOf(evs)) {
		t.Errorf("sound: %+v", r.err)
	}
	if r := after["torn"]; r.err != "" || r.torn != len(tl[len(tl)-1]) {
		t.Errorf("torn: %+v", r)
	}
	if r := after["damaged"]; !strings.Contains(r.err, "postgres:damaged:4:") || r.dropped == 0 {
		t.Errorf("damaged: %+v", r)
	}
	if r := after["gap"]; !strings.Contains(r.err, store.ErrSeq.Error()) {
		t.Errorf("gap: %+v", r)
	}
	for q, want := range map[string]string{"aardvark": "an aardvark", "note 24": "note 24 " + big, "bat": "a bat"} {
		hits, _, err := s.Search(ctx, q, store.PageOptions{})
		if err != nil || len(hits) != 1 || hits[0].Text != want {
			t.Errorf("search %q after migration: %d hits, %v", q, len(hits), err)
		}
	}
	// The torn line goes with the next Open, as before.
	w, _, err := s.Open(ctx, "torn")
	if err != nil {
		t.Fatal(err)
	}
	w.Close()
	if got := storedLines(t, s, "torn"); len(got) != len(tl)-1 {
		t.Errorf("torn after Open: %d lines:\n%s", len(got), joined(got))
	}
	var v int
	if err := s.pool.QueryRow(ctx, `SELECT max(version) FROM rein_migrations`).Scan(&v); err != nil || v != SchemaVersion {
		t.Errorf("version %d, %v", v, err)
	}
	if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM pg_tables WHERE tablename = 'rein_events' AND schemaname = current_schema()`).Scan(&v); err != nil || v != 0 {
		t.Errorf("rein_events left: %d, %v", v, err)
	}
}

// Packing rewrites rows under readers: a follower sees every event once and
// in order while a writer appends event by event and its turns are packed,
// and loads taken meanwhile are prefixes of the log.
func TestPackWhileReading(t *testing.T) {
	dsn := pgtest.Fresh(t)
	writerNode, readerNode := openAt(t, dsn, Options{PackSize: 4 << 10}), openAt(t, dsn, Options{})
	w, err := writerNode.Create(ctx, hdr("s"))
	if err != nil {
		t.Fatal(err)
	}
	b := newBuilder(t, session.NewLog(hdr("s")))
	for i := range 40 {
		b.openTurn(fmt.Sprintf("turn %d", i), "some text")
		b.closeTurn("an answer")
	}
	want := b.log.Events(0)
	fctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ch := follow(fctx, readerNode, "s", 0)
	done := make(chan error, 1)
	go func() {
		for _, ev := range want {
			if err := w.Append(ctx, []session.Event{ev}); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	loads := 0
	for writing := true; writing; {
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
			writing = false
		default:
			ld := checkLoad(t, readerNode, "s")
			loads++
			for i, ev := range ld.Log.Events(0)[:ld.Log.Len()-int64(len(ld.Repair))] {
				if !bytes.Equal(ev.AppendLine(nil), want[i].AppendLine(nil)) {
					t.Fatalf("load %d: seq %d differs", loads, i)
				}
			}
		}
	}
	for _, ev := range want {
		f := next(t, ch)
		if f.err != nil {
			t.Fatal(f.err)
		}
		if !bytes.Equal(f.ev.AppendLine(nil), ev.AppendLine(nil)) {
			t.Fatalf("followed seq %d:\n%s\nwant\n%s", f.ev.Seq, f.ev.AppendLine(nil), ev.AppendLine(nil))
		}
	}
	w.Close()
	waitPacked(t, writerNode)
	n := checkSegments(t, readerNode, "s")
	if !bytes.Equal(joined(storedLines(t, readerNode, "s")), linesOf(want)) {
		t.Errorf("stored lines differ after packing")
	}
	t.Logf("%d events in %d segments; %d loads while writing", len(want), n, loads)
	if n >= len(want)/4 {
		t.Errorf("%d segments for %d events written one by one: not packed", n, len(want))
	}
}
