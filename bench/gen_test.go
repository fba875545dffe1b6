package bench

import (
	"os"
	"path/filepath"
	"testing"
	"time"
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
