package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/reinhq/rein/agent"
	"github.com/reinhq/rein/llm"
	"github.com/reinhq/rein/llm/scripted"
	"github.com/reinhq/rein/session"
	"github.com/reinhq/rein/store"
	"github.com/reinhq/rein/store/postgres"
	"github.com/reinhq/rein/store/postgres/pgtest"
	"github.com/reinhq/rein/tool"
	"github.com/reinhq/rein/transcript"
)

func openPG(t *testing.T, dsn string, opts postgres.Options) *postgres.Store {
	t.Helper()
	st, err := postgres.Open(context.Background(), dsn, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	return st
}

// 'sessions show --follow' prints what another process appends, as it is
// appended, until interrupted.
func TestShowFollow(t *testing.T) {
	dsn := pgtest.Fresh(t)
	writer, watcher := openPG(t, dsn, postgres.Options{}), openPG(t, dsn, postgres.Options{})
	ctx := context.Background()
	h := session.Header{ID: "s", Cwd: "/w", CreatedAt: time.Now()}
	w, err := writer.Create(ctx, h)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	l := session.NewLog(h)
	say := func(text string) {
		ev, err := l.Append(time.Now(), &session.UserMessage{ID: text, Content: llm.Text(text), Source: session.Source{Kind: session.SourceUser}})
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Append(ctx, []session.Event{ev}); err != nil {
			t.Fatal(err)
		}
	}
	say("first")

	pr, pw := io.Pipe()
	a := &app{stdout: pw, storeName: "test"}
	fctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- a.follow(fctx, watcher, "s", 0, false, transcript.Options{})
		pw.Close()
	}()
	lines := bufio.NewScanner(pr)
	expect := func(want string) {
		t.Helper()
		if !lines.Scan() {
			t.Fatalf("follow ended before %q", want)
		}
		if got := lines.Text(); got != want {
			t.Fatalf("follow printed %q, want %q", got, want)
		}
	}
	expect("user: first")
	say("second, from another process")
	expect("user: second, from another process")
	cancel()
	if err := <-done; err != nil {
		t.Errorf("follow after the interrupt: %v", err)
	}

	// A store that cannot follow is a usage error.
	if err := a.follow(ctx, fakeStore{}, "s", 0, true, transcript.Options{}); err == nil || !strings.Contains(err.Error(), "--follow needs") {
		t.Errorf("follow on a store without Follow: %v", err)
	}
}

type fakeStore struct{ store.Store }

// An agent on a node that loses its lease (here: it paused past its lease
// and another node took the session over) stops by itself, writes nothing
// more, and says why; the new holder repairs the turn and goes on.
func TestAgentStopsWhenItsLeaseIsTakenOver(t *testing.T) {
	dsn := pgtest.Fresh(t)
	ctx := context.Background()
	nodeA := openPG(t, dsn, postgres.Options{Holder: "node-a", LeaseTTL: 2 * time.Second, RenewEvery: 50 * time.Millisecond})
	nodeB := openPG(t, dsn, postgres.Options{Holder: "node-b"})
	started := make(chan struct{})
	cancelled := make(chan struct{})
	slow := &tool.Func{ToolSpec: llm.ToolSpec{Name: "slow", Description: "waits", Parameters: json.RawMessage(`{"type":"object"}`)},
		ToolMode: tool.Exclusive, Body: func(ctx context.Context, c tool.Call) (tool.Result, error) {
			close(started)
			<-ctx.Done()
			close(cancelled)
			return tool.TextResult("late"), nil
		}}
	reg, err := tool.NewRegistry(slow)
	if err != nil {
		t.Fatal(err)
	}
	ag, err := agent.New(ctx, agent.Config{
		Store: nodeA, Provider: scripted.New(scripted.UseTools(scripted.ToolCall{ID: "k1", Name: "slow"})),
		Model: "scripted:x", Tools: reg, Cwd: "/w", SessionID: "s",
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ag.Send(agent.Message{Content: llm.Text("go")}); err != nil {
		t.Fatal(err)
	}
	<-started
	// node-a is presumed dead: its lease is cut short, node-b takes over.
	if err := nodeB.BreakLease(ctx, "s"); err != nil {
		t.Fatal(err)
	}
	wb, ld, err := nodeB.Open(ctx, "s")
	if err != nil {
		t.Fatalf("takeover: %v", err)
	}
	if len(ld.Repair) == 0 {
		t.Errorf("the takeover did not repair node-a's open turn")
	}
	select {
	case <-cancelled:
	case <-time.After(20 * time.Second):
		t.Fatal("node-a's tool was not cancelled")
	}
	if err := ag.Close(ctx); !errors.Is(err, store.ErrLeaseLost) {
		t.Errorf("node-a's Close: %v, want ErrLeaseLost", err)
	}
	if err := wb.Close(); err != nil {
		t.Fatal(err)
	}
	after, err := nodeB.Load(ctx, "s", store.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if after.Log.Len() != ld.Log.Len() {
		t.Errorf("node-a wrote after losing the lease: %d events, the takeover left %d", after.Log.Len(), ld.Log.Len())
	}
	if vs := session.Check(after.Log.Events(0)); len(vs) > 0 {
		t.Errorf("invariant: %v", vs)
	}
}
