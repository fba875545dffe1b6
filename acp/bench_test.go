package acp

import (
	"context"
	"encoding/json"
	"io"
	"iter"
	"log/slog"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"testing"
	"time"

	sdk "github.com/coder/acp-go-sdk"

	"github.com/reinhq/rein/agent"
	"github.com/reinhq/rein/bench"
	"github.com/reinhq/rein/llm"
	"github.com/reinhq/rein/store/jsonl"
	"github.com/reinhq/rein/transcript"
)

// replayEvents is the size of the replay benchmark's session.
const replayEvents = 100_000

type noModel struct{}

func (noModel) Name() string { return "none" }
func (noModel) Stream(context.Context, *llm.Request) iter.Seq[llm.Event] {
	return llm.Fail(&llm.Error{Code: llm.CodeInvalidRequest, Message: "benchmark"})
}

// pipeSink is a real pipe whose far end is drained, as a client's stdin
// would be.
type pipeSink struct {
	w    *os.File
	done chan int64
}

func newPipeSink(tb testing.TB) *pipeSink {
	r, w, err := os.Pipe()
	if err != nil {
		tb.Fatal(err)
	}
	p := &pipeSink{w: w, done: make(chan int64, 1)}
	go func() {
		n, _ := io.Copy(io.Discard, r)
		r.Close()
		p.done <- n
	}()
	return p
}

func (p *pipeSink) close() int64 { p.w.Close(); return <-p.done }

// benchSession opens the generated session's agent (its log loaded) and a
// session of a server writing to sink.
func benchSession(b testing.TB, st *jsonl.Store, sink io.Writer) (*sess, func()) {
	b.Helper()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	ag, err := agent.Resume(context.Background(), st, bench.BigID, agent.Config{Provider: noModel{}, Logger: quiet})
	if err != nil {
		b.Fatal(err)
	}
	srv := &Server{out: &lineWriter{w: sink}, log: quiet, sessions: map[string]*sess{}}
	srv.ctx, srv.cancel = context.WithCancel(context.Background())
	s := newSession(srv, "/home/ana/proj")
	s.id = ag.ID()
	s.opened(&Opened{Agent: ag})
	return s, func() { _ = ag.Close(context.Background()); srv.cancel() }
}

// BenchmarkReplay: session/load's replay of a 100k-event session (every
// event read from the loaded log, translated, encoded and written to a
// pipe) against the floor of encoding and piping the same updates, with
// the peak heap while replaying against the session file's size.
// Targets: time <= 1.5x the floor, memory <= 1.5x the file.
func BenchmarkReplay(b *testing.B) {
	root, err := bench.Cached(replayEvents)
	if err != nil {
		b.Fatal(err)
	}
	st, err := jsonl.Open(root)
	if err != nil {
		b.Fatal(err)
	}
	fi, err := os.Stat(st.Path(bench.BigID))
	if err != nil {
		b.Fatal(err)
	}

	// The updates the replay sends, computed once, for the floor.
	var updates []sdk.SessionUpdate
	{
		s, done := benchSession(b, st, io.Discard)
		var tb transcript.Builder
		tb.Cwd = s.cwd
		for ev, err := range s.ag.Events(context.Background(), 0) {
			if err != nil {
				b.Fatal(err)
			}
			es, err := tb.Add(ev)
			if err != nil {
				b.Fatal(err)
			}
			for i := range es {
				updates = append(updates, s.m.updates(&es[i])...)
			}
			if ev.Seq+1 >= s.ag.Len() {
				break
			}
		}
		done()
	}
	floor := func() int64 {
		sink := newPipeSink(b)
		var buf []byte
		for i := range updates {
			buf = appendNotification(buf, "big", &updates[i])
			if len(buf) >= replayBatch {
				_, _ = sink.w.Write(buf)
				buf = buf[:0]
			}
		}
		_, _ = sink.w.Write(buf)
		return sink.close()
	}
	replay := func() (int64, time.Duration) {
		sink := newPipeSink(b)
		s, done := benchSession(b, st, sink.w)
		defer done()
		runtime.GC()
		t0 := time.Now()
		if _, err := s.replay(context.Background()); err != nil {
			b.Fatal(err)
		}
		n := sink.close()
		return n, time.Since(t0)
	}

	for b.Loop() {
		var fBest, rBest time.Duration
		var fBytes, rBytes int64
		for i := 0; i < 5; i++ { // alternate, keep the fastest of each
			runtime.GC()
			t0 := time.Now()
			fBytes = floor()
			if d := time.Since(t0); i == 0 || d < fBest {
				fBest = d
			}
			var d time.Duration
			rBytes, d = replay()
			if i == 0 || d < rBest {
				rBest = d
			}
		}
		if fBytes != rBytes {
			b.Fatalf("the replay wrote %d bytes, the floor %d", rBytes, fBytes)
		}
		peak, held := replayPeak(b, st, 100)
		live, _ := replayPeak(b, st, 10)
		b.ReportMetric(float64(len(updates)), "updates")
		b.ReportMetric(float64(rBytes)/(1<<20), "wire-MB")
		b.ReportMetric(float64(fBest.Microseconds())/1000, "floor-ms")
		b.ReportMetric(float64(rBest.Microseconds())/1000, "replay-ms")
		b.ReportMetric(float64(rBest)/float64(fBest), "replay/floor")
		b.ReportMetric(float64(fi.Size())/(1<<20), "file-MB")
		b.ReportMetric(float64(held)/float64(fi.Size()), "log/file")
		b.ReportMetric(float64(peak)/float64(fi.Size()), "peak/file")
		b.ReportMetric(float64(live)/float64(fi.Size()), "live-peak/file")
		b.ReportMetric(float64(sdkFloor(b, updates))/float64(rBest), "sdk-floor/replay")
	}
}

// sdkFloor encodes and pipes the same updates the way the SDK's connection
// would (json.Marshal of each notification, wrapped in its JSON-RPC
// envelope), for comparison: the fastest of three runs.
func sdkFloor(b *testing.B, updates []sdk.SessionUpdate) time.Duration {
	var best time.Duration
	for i := 0; i < 3; i++ {
		runtime.GC()
		t0 := time.Now()
		sink := newPipeSink(b)
		for j := range updates {
			params, err := json.Marshal(sdk.SessionNotification{SessionId: "big", Update: updates[j]})
			if err != nil {
				b.Fatal(err)
			}
			line, _ := json.Marshal(struct {
				JSONRPC string          `json:"jsonrpc"`
				Method  string          `json:"method"`
				Params  json.RawMessage `json:"params"`
			}{"2.0", "session/update", params})
			_, _ = sink.w.Write(append(line, '\n'))
		}
		sink.close()
		if d := time.Since(t0); i == 0 || d < best {
			best = d
		}
	}
	return best
}

// replayPeak returns the peak heap while a replay runs (the loaded log
// included) and the heap the loaded log holds, both above the heap before
// the session was opened, with the collector at gcPercent: at Go's default
// 100 the heap may grow to twice the live data before a collection, at 10
// the peak is close to the live data.
func replayPeak(b *testing.B, st *jsonl.Store, gcPercent int) (peak, held int64) {
	defer debug.SetGCPercent(debug.SetGCPercent(gcPercent))
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	read := func() int64 {
		metrics.Read(sample)
		return int64(sample[0].Value.Uint64())
	}
	runtime.GC()
	base := read()
	sink := newPipeSink(b)
	s, done := benchSession(b, st, sink.w)
	defer done()
	runtime.GC()
	held = read() - base
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(200 * time.Microsecond)
		defer t.Stop()
		for {
			if v := read() - base; v > peak {
				peak = v
			}
			select {
			case <-stop:
				return
			case <-t.C:
			}
		}
	}()
	if _, err := s.replay(context.Background()); err != nil {
		b.Fatal(err)
	}
	close(stop)
	wg.Wait()
	sink.close()
	return peak, held
}
