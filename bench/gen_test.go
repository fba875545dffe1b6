package bench

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/reinhq/rein/session"
	"github.com/reinhq/rein/store"
	"github.com/reinhq/rein/store/jsonl"
)

// TestGenerateSmall checks that the generator writes a loadable session.
func TestGenerateSmall(t *testing.T) {
	root := t.TempDir()
	n, err := Generate(root, "small", 5000)
	if err != nil {
		t.Fatal(err)
	}
	st, _ := os.Stat(filepath.Join(root, "sessions", "small.jsonl"))
	t.Logf("%d events, %d bytes", n, st.Size())
}

func TestGenerateBig(t *testing.T) {
	if os.Getenv("REIN_BENCH_GEN") == "" {
		t.Skip("set REIN_BENCH_GEN=1")
	}
	t0 := time.Now()
	root, err := Cached(bigEvents)
	if err != nil {
		t.Fatal(err)
	}
	st, _ := os.Stat(filepath.Join(root, "sessions", BigID+".jsonl"))
	t.Logf("%s: %d bytes in %v", root, st.Size(), time.Since(t0))
}

// Checkpoints cuts where an agent's persister writes.
func TestCheckpoints(t *testing.T) {
	root := t.TempDir()
	if _, err := Generate(root, "small", 3000); err != nil {
		t.Fatal(err)
	}
	s, err := jsonl.Open(root)
	if err != nil {
		t.Fatal(err)
	}
	ld, err := s.Load(context.Background(), "small", store.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	evs := ld.Log.Events(0)
	batches := Checkpoints(evs)
	n := 0
	for _, bt := range batches {
		last, next := bt[len(bt)-1], session.Type("")
		if n += len(bt); n < len(evs) {
			next = evs[n].Type
		}
		switch {
		case last.Type == session.TypeToolCall, last.Type == session.TypeTurnEnd, n == len(evs):
		case next == session.TypeAssistantChunk && last.Type != session.TypeAssistantChunk:
		default:
			t.Fatalf("a batch ends with %s before %s: not a checkpoint", last.Type, next)
		}
	}
	if n != len(evs) || len(batches) < len(evs)/200 || len(batches) > len(evs)/10 {
		t.Errorf("%d events in %d batches", n, len(batches))
	}
}
