package bench

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/reinhq/rein/session"
	"github.com/reinhq/rein/store"
	"github.com/reinhq/rein/store/jsonl"
	"github.com/reinhq/rein/store/postgres"
	"github.com/reinhq/rein/store/postgres/pgtest"
)

// The PostgreSQL store's figures, each against a limit measured in the same
// run (docs/benchmarks.md):
//
//	go test -run '^$' -bench Postgres -benchtime=1x ./bench/

// pgEvents is the size of the session the PostgreSQL benchmarks use.
const pgEvents = 100_000

// holderEnv makes the test binary a lease holder that renews until killed
// (BenchmarkPostgresTakeover).
const (
	holderEnv = "REIN_BENCH_PG_HOLDER"
	holderDSN = "REIN_BENCH_PG_DSN"
)

// pgSession returns the generated 100,000-event session in the JSONL store
// and the same session imported into a fresh PostgreSQL store.
func pgSession(b *testing.B) (*jsonl.Store, *postgres.Store, string) {
	b.Helper()
	root, err := Cached(pgEvents)
	if err != nil {
		b.Fatal(err)
	}
	js, err := jsonl.Open(root)
	if err != nil {
		b.Fatal(err)
	}
	dsn := pgtest.Fresh(b)
	ps, err := postgres.Open(bg, dsn, postgres.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(ps.Close)
	ld, err := js.Load(bg, BigID, store.LoadOptions{})
	if err != nil {
		b.Fatal(err)
	}
	w, err := ps.Create(bg, ld.Log.Header())
	if err != nil {
		b.Fatal(err)
	}
	for from := int64(0); from < ld.Log.Len(); from += 2000 {
		if err := w.Append(bg, ld.Log.EventRange(from, from+2000)); err != nil {
			b.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		b.Fatal(err)
	}
	return js, ps, dsn
}

// BenchmarkPostgresLoad: Load of the 100,000-event session from PostgreSQL
// vs the JSONL store's Load of the same session (both to ready-to-send:
// parsed, checked, projection built). Target: ratio <= 2.
func BenchmarkPostgresLoad(b *testing.B) {
	js, ps, _ := pgSession(b)
	want := loadReady(js).Log.Len()
	load := func(s store.Store) func() {
		return func() {
			ld, err := s.Load(bg, BigID, store.LoadOptions{})
			if err != nil || ld.Log.Len() != want || len(ld.Log.Messages()) == 0 {
				b.Fatalf("load: %d events, %v", ld.Log.Len(), err)
			}
		}
	}
	for b.Loop() {
		jt, pt, jc, pc := pair(7, load(js), load(ps))
		b.ReportMetric(ms(jt), "jsonl-ms")
		b.ReportMetric(ms(pt), "postgres-ms")
		b.ReportMetric(float64(pt)/float64(jt), "postgres/jsonl")
		b.ReportMetric(float64(pc)/float64(jc), "postgres/jsonl-cpu")
	}
}

// BenchmarkPostgresAppend: appends through a Writer (one Append per batch
// of 64 events, each its own transaction, returning once committed) vs raw
// INSERTs of the same lines in the same batches, one multi-row statement
// (its own transaction) each, into a table with the same key. Target:
// throughput ratio >= 0.8.
func BenchmarkPostgresAppend(b *testing.B) {
	js, ps, dsn := pgSession(b)
	ld, err := js.Load(bg, BigID, store.LoadOptions{})
	if err != nil {
		b.Fatal(err)
	}
	const n, size, rounds = 32000, 64, 4
	var batches [][]session.Event
	var rawSeqs [][]int64
	var rawLines [][][]byte
	for i := int64(0); i < n; i += size {
		bt := ld.Log.EventRange(i, i+size)
		batches = append(batches, bt)
		var seqs []int64
		var lines [][]byte
		for _, ev := range bt {
			l := ev.AppendLine(nil)
			seqs, lines = append(seqs, ev.Seq), append(lines, l[:len(l)-1])
		}
		rawSeqs, rawLines = append(rawSeqs, seqs), append(rawLines, lines)
	}
	pool, err := pgxpool.New(bg, dsn)
	if err != nil {
		b.Fatal(err)
	}
	defer pool.Close()
	if _, err := pool.Exec(bg, `CREATE TABLE raw_events (session_id text, seq bigint, line bytea, PRIMARY KEY (session_id, seq))`); err != nil {
		b.Fatal(err)
	}
	round := 0
	for b.Loop() {
		// Batch by batch, alternating which side goes first, so that both
		// meet the same load on a shared machine.
		var rawD, storeD time.Duration
		for r := 0; r < rounds; r, round = r+1, round+1 {
			h := ld.Log.Header()
			h.ID = fmt.Sprintf("app%d", round)
			w, err := ps.Create(bg, h)
			if err != nil {
				b.Fatal(err)
			}
			rawID := fmt.Sprintf("raw%d", round)
			for i, bt := range batches {
				raw := func() {
					t0 := time.Now()
					if _, err := pool.Exec(bg, `INSERT INTO raw_events (session_id, seq, line)
SELECT $1, u.seq, u.line FROM unnest($2::bigint[], $3::bytea[]) AS u(seq, line)`, rawID, rawSeqs[i], rawLines[i]); err != nil {
						b.Fatal(err)
					}
					rawD += time.Since(t0)
				}
				app := func() {
					t0 := time.Now()
					if err := w.Append(bg, bt); err != nil {
						b.Fatal(err)
					}
					storeD += time.Since(t0)
				}
				if i%2 == 0 {
					raw()
					app()
				} else {
					app()
					raw()
				}
			}
			w.Close()
		}
		b.ReportMetric(float64(len(batches)), "batches")
		b.ReportMetric(float64(rawD.Microseconds())/1000/float64(rounds*len(batches)), "raw-ms/batch")
		b.ReportMetric(float64(storeD.Microseconds())/1000/float64(rounds*len(batches)), "store-ms/batch")
		b.ReportMetric(float64(rawD)/float64(storeD), "store/raw-throughput")
	}
}

// Lease timing of BenchmarkPostgresTakeover.
const (
	takeoverTTL   = time.Second
	takeoverRenew = 250 * time.Millisecond
)

// BenchmarkPostgresTakeover: a holder process is SIGKILLed at a random
// moment of its renewal cycle; another store waits (OpenWait) and takes the
// session over. Reported: the worst and mean time from the kill to the
// takeover, against the limit lease expiry + one renewal interval. Target:
// worst/limit <= 1.
func BenchmarkPostgresTakeover(b *testing.B) {
	dsn := pgtest.Fresh(b)
	ps, err := postgres.Open(bg, dsn, postgres.Options{LeaseTTL: takeoverTTL, RenewEvery: takeoverRenew})
	if err != nil {
		b.Fatal(err)
	}
	defer ps.Close()
	w, err := ps.Create(bg, session.Header{ID: "t", Cwd: "/w"})
	if err != nil {
		b.Fatal(err)
	}
	w.Close()
	const trials = 6
	limit := takeoverTTL + takeoverRenew
	for b.Loop() {
		var worst, total time.Duration
		for range trials {
			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), holderEnv+"=t", holderDSN+"="+dsn)
			out, _ := cmd.StdoutPipe()
			if err := cmd.Start(); err != nil {
				b.Fatal(err)
			}
			line, err := bufio.NewReader(out).ReadString('\n')
			if err != nil || line != "held\n" {
				cmd.Process.Kill()
				cmd.Wait()
				b.Fatalf("holder: %q %v", line, err)
			}
			time.Sleep(time.Duration(rand.Int64N(int64(takeoverTTL))))
			cmd.Process.Signal(syscall.SIGKILL)
			t0 := time.Now()
			ctx, cancel := context.WithTimeout(bg, 30*time.Second)
			w, _, err := ps.OpenWait(ctx, "t")
			d := time.Since(t0)
			cancel()
			cmd.Wait()
			if err != nil {
				b.Fatal(err)
			}
			w.Close()
			worst, total = max(worst, d), total+d
		}
		b.ReportMetric(ms(worst), "worst-ms")
		b.ReportMetric(ms(total/trials), "mean-ms")
		b.ReportMetric(ms(limit), "limit-ms")
		b.ReportMetric(float64(worst)/float64(limit), "worst/limit")
	}
}

// holdLease is the holder process: take the session, say so, renew until
// killed.
func holdLease(id string) {
	s, err := postgres.Open(bg, os.Getenv(holderDSN), postgres.Options{LeaseTTL: takeoverTTL, RenewEvery: takeoverRenew})
	if err != nil {
		fmt.Println("err", err)
		os.Exit(1)
	}
	if _, _, err := s.OpenWait(bg, id); err != nil {
		fmt.Println("err", err)
		os.Exit(1)
	}
	fmt.Println("held")
	for {
		time.Sleep(time.Hour)
	}
}
