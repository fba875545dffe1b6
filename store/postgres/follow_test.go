package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/reinhq/rein/llm"
	"github.com/reinhq/rein/session"
	"github.com/reinhq/rein/store"
	"github.com/reinhq/rein/store/postgres/pgtest"
)

type followed struct {
	ev  session.Event
	err error
}

func follow(ctx context.Context, s *Store, id string, from int64) <-chan followed {
	ch := make(chan followed, 4096)
	go func() {
		defer close(ch)
		for ev, err := range s.Follow(ctx, id, from) {
			ch <- followed{ev, err}
			if err != nil {
				return
			}
		}
	}()
	return ch
}

func next(t *testing.T, ch <-chan followed) followed {
	t.Helper()
	select {
	case f, ok := <-ch:
		if !ok {
			t.Fatal("Follow ended")
		}
		return f
	case <-time.After(30 * time.Second):
		t.Fatal("Follow yielded nothing for 30 s")
	}
	return followed{}
}

// A follower in another process (another Store, its own connections) sees
// every committed event in order, as it is committed, from where it asked.
func TestFollow(t *testing.T) {
	dsn := pgtest.Fresh(t)
	writerNode, watcherNode := openAt(t, dsn, Options{}), openAt(t, dsn, Options{})
	w, err := writerNode.Create(ctx, hdr("s"))
	if err != nil {
		t.Fatal(err)
	}
	b := newBuilder(t, session.NewLog(hdr("s")))
	mustAppend(t, w, []session.Event{b.user("before the follower")})

	fctx, cancel := context.WithCancel(ctx)
	defer cancel()
	all := follow(fctx, watcherNode, "s", 0)
	late := follow(fctx, watcherNode, "s", 3)
	if f := next(t, all); f.err != nil || f.ev.Seq != 0 {
		t.Fatalf("first followed = %+v", f)
	}
	for i := range 5 {
		batch := append(b.openTurn(fmt.Sprintf("turn %d", i), "streaming"), b.closeTurn("done")...)
		mustAppend(t, w, batch)
		for _, want := range batch {
			f := next(t, all)
			if f.err != nil {
				t.Fatal(f.err)
			}
			if string(f.ev.AppendLine(nil)) != string(want.AppendLine(nil)) {
				t.Fatalf("followed %s, want %s", f.ev.AppendLine(nil), want.AppendLine(nil))
			}
		}
	}
	if f := next(t, late); f.err != nil || f.ev.Seq != 3 {
		t.Errorf("follower from 3 first got %+v", f)
	}
	cancel()
	for f := range all {
		if f.err != nil && !errors.Is(f.err, context.Canceled) {
			t.Errorf("after cancel: %v", f.err)
		}
	}

	// Deleting the session ends a follower with ErrNotFound.
	dctx, dcancel := context.WithCancel(ctx)
	defer dcancel()
	ch := follow(dctx, watcherNode, "s", b.log.Len())
	w.Close()
	if err := writerNode.Delete(ctx, "s"); err != nil {
		t.Fatal(err)
	}
	if f := next(t, ch); !errors.Is(f.err, store.ErrNotFound) {
		t.Errorf("follower of a deleted session: %+v, want ErrNotFound", f)
	}
	for f := range follow(ctx, watcherNode, "missing", 0) {
		if !errors.Is(f.err, store.ErrNotFound) {
			t.Errorf("Follow of a missing session: %+v", f)
		}
	}
}

// Notifications sent while the listener's connection is down are lost;
// the follower must still see those events once it reconnects.
func TestFollowSurvivesListenerLoss(t *testing.T) {
	dsn := pgtest.Fresh(t)
	writerNode, watcherNode := openAt(t, dsn, Options{}), openAt(t, dsn, Options{})
	w, err := writerNode.Create(ctx, hdr("s"))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	b := newBuilder(t, session.NewLog(hdr("s")))
	fctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ch := follow(fctx, watcherNode, "s", 0)
	mustAppend(t, w, []session.Event{b.user("one")})
	if f := next(t, ch); f.err != nil || f.ev.Seq != 0 {
		t.Fatalf("followed %+v", f)
	}
	// Kill the watcher's LISTEN connection from the server side.
	var killed int
	if err := writerNode.pool.QueryRow(ctx, `
SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
WHERE query LIKE 'LISTEN %' AND pid <> pg_backend_pid()`).Scan(&killed); err != nil || killed == 0 {
		t.Fatalf("terminate the listener: %d, %v", killed, err)
	}
	mustAppend(t, w, []session.Event{b.user("two")})
	if f := next(t, ch); f.err != nil || f.ev.Seq != 1 {
		t.Fatalf("after the listener's connection died: %+v", f)
	}
}

func TestListPage(t *testing.T) {
	s := newStore(t, Options{})
	var want []string
	for i := range 7 {
		id := fmt.Sprintf("s%d", i)
		h := hdr(id)
		if i%2 == 1 {
			h.Cwd = "/other"
		}
		w, err := s.Create(ctx, h)
		if err != nil {
			t.Fatal(err)
		}
		b := newBuilder(t, session.NewLog(h))
		b.now = b.now.Add(time.Duration(i%4) * time.Hour) // ties on updated_at across pages
		mustAppend(t, w, []session.Event{b.user("x")})
		w.Close()
	}
	infos, err := s.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range infos {
		want = append(want, in.ID)
	}
	var got []string
	cursor, pages := "", 0
	for {
		page, next, err := s.ListPage(ctx, store.PageOptions{Limit: 2, Cursor: cursor})
		if err != nil {
			t.Fatal(err)
		}
		pages++
		for _, in := range page {
			got = append(got, in.ID)
		}
		if next == "" {
			break
		}
		cursor = next
	}
	if strings.Join(got, ",") != strings.Join(want, ",") || pages != 4 {
		t.Errorf("pages (%d) = %v, want List's order %v", pages, got, want)
	}
	other, next, err := s.ListPage(ctx, store.PageOptions{Cwd: "/other"})
	if err != nil || next != "" || len(other) != 3 {
		t.Errorf("Cwd /other: %d sessions, next %q, %v", len(other), next, err)
	}
	if _, _, err := s.ListPage(ctx, store.PageOptions{Cursor: "bogus!"}); err == nil {
		t.Errorf("a bogus cursor was accepted")
	}
}

func TestSearch(t *testing.T) {
	dsn := pgtest.Fresh(t)
	s := openAt(t, dsn, Options{})
	mk := func(id, cwd string, texts ...string) {
		h := hdr(id)
		h.Cwd = cwd
		w, err := s.Create(ctx, h)
		if err != nil {
			t.Fatal(err)
		}
		defer w.Close()
		b := newBuilder(t, session.NewLog(h))
		for _, tx := range texts {
			mustAppend(t, w, []session.Event{b.user(tx)})
		}
	}
	mk("a", "/w", "The build panics: assignment to entry in nil map", "unrelated words")
	mk("b", "/w", "Fixed the NIL MAP by making it first")
	mk("c", "/elsewhere", "a nil map again, in another project")
	mk("z", "/z", "a NUL \x00 inside")
	w, err := s.Create(ctx, hdr("d"))
	if err != nil {
		t.Fatal(err)
	}
	b := newBuilder(t, session.NewLog(hdr("d")))
	evs := b.openTurn("look at the fox", "")
	n, _ := b.log.Turn()
	call := llm.ToolCall{ID: "k1", Name: "read", Arguments: `{}`}
	evs = append(evs,
		b.add(&session.AssistantMessage{Turn: n, Step: 1, Content: llm.Text("reading"), ToolCalls: []llm.ToolCall{call}, Finish: llm.FinishToolCalls, ChunkSeqs: []int64{}}),
		b.add(&session.ToolResult{Turn: n, Step: 1, CallID: "k1", Content: llm.Text("the quick brown fox jumps")}),
	)
	mustAppend(t, w, evs)
	w.Close()

	hits, next, err := s.Search(ctx, "nil map", store.PageOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sessions := map[string]bool{}
	for _, h := range hits {
		sessions[h.Session] = true
		if h.Type != session.TypeUserMessage || !strings.Contains(strings.ToLower(h.Text), "nil map") {
			t.Errorf("hit %+v", h)
		}
	}
	if len(hits) != 3 || next != "" || !sessions["a"] || !sessions["b"] || !sessions["c"] {
		t.Errorf("search nil map: %+v next %q", hits, next)
	}
	hits, _, _ = s.Search(ctx, "nil map", store.PageOptions{Cwd: "/w"})
	if len(hits) != 2 {
		t.Errorf("search within /w: %+v", hits)
	}
	hits, _, _ = s.Search(ctx, `"brown fox"`, store.PageOptions{})
	if len(hits) != 1 || hits[0].Type != session.TypeToolResult || hits[0].Session != "d" {
		t.Errorf("phrase in a tool result: %+v", hits)
	}
	hits, _, _ = s.Search(ctx, "fox -brown", store.PageOptions{})
	if len(hits) != 1 || hits[0].Type != session.TypeUserMessage {
		t.Errorf("fox -brown: %+v", hits)
	}
	// Pages of one.
	var all []store.Hit
	cursor := ""
	for {
		page, next, err := s.Search(ctx, "nil map", store.PageOptions{Limit: 1, Cursor: cursor})
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, page...)
		if next == "" {
			break
		}
		cursor = next
	}
	if len(all) != 3 {
		t.Errorf("paged search found %d hits, want 3", len(all))
	}
	if hits, _, _ := s.Search(ctx, "inside", store.PageOptions{}); len(hits) != 1 || hits[0].Session != "z" {
		t.Errorf("text with a NUL: %+v", hits)
	}
	// A fork's copy is searchable too.
	if _, err := s.Fork(ctx, "a", 1, session.Header{ID: "a2"}); err != nil {
		t.Fatal(err)
	}
	if hits, _, _ := s.Search(ctx, "panics", store.PageOptions{}); len(hits) != 2 {
		t.Errorf("after a fork, panics: %+v", hits)
	}
	// What a dead process left unindexed is indexed by the next store
	// opened on the database.
	if _, err := s.pool.Exec(ctx, `DELETE FROM rein_search WHERE session_id = 'b'; DELETE FROM rein_search_state WHERE session_id = 'b'`); err != nil {
		t.Fatal(err)
	}
	if hits, _, _ := s.Search(ctx, "fixed", store.PageOptions{}); len(hits) != 0 {
		t.Fatalf("the index was not emptied: %+v", hits)
	}
	s2 := openAt(t, dsn, Options{})
	if hits, _, _ := s2.Search(ctx, "fixed", store.PageOptions{}); len(hits) != 1 || hits[0].Session != "b" {
		t.Errorf("after the backlog was indexed: %+v", hits)
	}
}
