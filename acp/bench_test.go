package acp

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"syscall"
	"testing"
	"time"

	sdk "github.com/coder/acp-go-sdk"

	"github.com/reinhq/rein/bench"
	"github.com/reinhq/rein/store"
	"github.com/reinhq/rein/store/jsonl"
	"github.com/reinhq/rein/transcript"
)

// replayEvents is the size of the replay benchmark's session.
const replayEvents = 100_000

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

// replaySession is a session of a server on st writing to sink, before its
// replay (what session/load makes).
func replaySession(st store.Store, id string, sink io.Writer) *sess {
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	srv := &Server{cfg: Config{Store: st}, out: &lineWriter{w: sink}, log: quiet, sessions: map[string]*sess{}}
	srv.ctx, srv.cancel = context.WithCancel(context.Background())
	s := newSession(srv, "/home/ana/proj")
	s.id = id
	return s
}

// replayUpdates returns the updates a replay of session id sends, by
// loading the session and translating every event.
func replayUpdates(tb testing.TB, st store.Store, id string) []sdk.SessionUpdate {
	ld, err := st.Load(context.Background(), id, store.LoadOptions{})
	if err != nil {
		tb.Fatal(err)
	}
	var b transcript.Builder
	b.Cwd = "/home/ana/proj"
	var m mapper
	var out []sdk.SessionUpdate
	for _, ev := range ld.Log.Events(0) {
		es, err := b.Add(ev)
		if err != nil {
			tb.Fatal(err)
		}
		for i := range es {
			out = m.appendUpdates(out, &es[i])
		}
	}
	return out
}

// BenchmarkReplay: session/load's replay of a 100k-event session (the
// stored file streamed, every line validated, translated, encoded and
// written to a pipe) against two floors measured in the same run: the
// encoding floor, encoding and piping the same (precomputed) updates; and
// that plus the validated scan of the same file that any replay from the
// log must do (store.Stream validating, handing nothing on). Also: what
// session/load did before (load, then translate) and the SDK's own
// encoding. Memory: the peak heap while replaying against the session
// file's size. Targets: time <= 1.5x the encoding floor, memory <= 1.5x
// the file (docs/benchmarks.md).
func BenchmarkReplay(b *testing.B) {
	st, size := bigSession(b)
	ctx := context.Background()
	updates := replayUpdates(b, st, bench.BigID)

	encode := func() int64 {
		sink := newPipeSink(b)
		var buf []byte
		for i := range updates {
			buf = appendNotification(buf, bench.BigID, &updates[i])
			if len(buf) >= replayBatch {
				_, _ = sink.w.Write(buf)
				buf = buf[:0]
			}
		}
		_, _ = sink.w.Write(buf)
		return sink.close()
	}
	scan := func() {
		if _, err := store.Stream(ctx, st, bench.BigID, store.StreamOptions{}, nil); err != nil {
			b.Fatal(err)
		}
	}
	replay := func() int64 {
		sink := newPipeSink(b)
		if err := replaySession(st, bench.BigID, sink.w).replay(ctx); err != nil {
			b.Fatal(err)
		}
		return sink.close()
	}
	// What session/load did before it streamed: load the log (the agent
	// keeps it), then translate it.
	loadThenReplay := func() {
		sink := newPipeSink(b)
		loadAndTranslate(b, st, sink.w)
		sink.close()
	}

	for b.Loop() {
		var enc, sc, rep, lr side
		var eBytes, rBytes int64
		for range 5 { // alternate, keep the fastest of each
			enc.run(func() { eBytes = encode() })
			sc.run(scan)
			rep.run(func() { rBytes = replay() })
			lr.run(loadThenReplay)
		}
		if eBytes != rBytes {
			b.Fatalf("the replay wrote %d bytes, the floor %d", rBytes, eBytes)
		}
		peak := replayPeak(b, st, 100)
		live := replayPeak(b, st, 10)
		loadedLive := peakOf(b, 10, func() { loadAndTranslate(b, st, io.Discard) })
		b.ReportMetric(float64(len(updates)), "updates")
		b.ReportMetric(float64(rBytes)/(1<<20), "wire-MB")
		b.ReportMetric(float64(size)/(1<<20), "file-MB")
		b.ReportMetric(ms(enc.wall), "encode-ms")
		b.ReportMetric(ms(sc.wall), "scan-ms")
		b.ReportMetric(ms(rep.wall), "replay-ms")
		b.ReportMetric(float64(rep.wall)/float64(enc.wall), "replay/encode")
		b.ReportMetric(float64(rep.wall)/float64(enc.wall+sc.wall), "replay/(scan+encode)")
		b.ReportMetric(float64(rep.cpu)/float64(enc.cpu), "cpu:replay/encode")
		b.ReportMetric(float64(rep.cpu)/float64(enc.cpu+sc.cpu), "cpu:replay/(scan+encode)")
		b.ReportMetric(float64(peak)/float64(size), "peak/file")
		b.ReportMetric(float64(live)/float64(size), "live-peak/file")
		b.ReportMetric(float64(sdkFloor(b, updates))/float64(rep.wall), "sdk-encode/replay")
		b.ReportMetric(ms(lr.wall), "load+replay-ms")
		b.ReportMetric(float64(loadedLive)/float64(size), "load+replay-live-peak/file")
	}
}

// side is the fastest of a side's runs, by the wall clock and by CPU
// time (the process's user+system time, every core's work counted: on a
// loaded machine it moves less than the wall clock).
type side struct{ wall, cpu time.Duration }

func (s *side) run(f func()) {
	runtime.GC()
	c0, t0 := cpuTime(), time.Now()
	f()
	w, c := time.Since(t0), cpuTime()-c0
	if s.wall == 0 || w < s.wall {
		s.wall = w
	}
	if s.cpu == 0 || c < s.cpu {
		s.cpu = c
	}
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

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

// replayPeak returns the peak heap while a replay of the big session
// runs, above the heap before it (see peakOf).
func replayPeak(tb testing.TB, st store.Store, gcPercent int) int64 {
	sink := newPipeSink(tb)
	defer sink.close()
	s := replaySession(st, bench.BigID, sink.w)
	return peakOf(tb, gcPercent, func() {
		if err := s.replay(context.Background()); err != nil {
			tb.Fatal(err)
		}
	})
}

// peakOf returns the peak heap while f runs, above the heap before it,
// sampled every 200 µs, with the collector at gcPercent: at Go's default
// 100 the heap may grow to twice the live data before a collection, at 10
// the peak is close to the live data.
func peakOf(tb testing.TB, gcPercent int, f func()) int64 {
	defer debug.SetGCPercent(debug.SetGCPercent(gcPercent))
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	read := func() int64 {
		metrics.Read(sample)
		return int64(sample[0].Value.Uint64())
	}
	runtime.GC()
	base := read()
	var peak int64
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
	f()
	close(stop)
	wg.Wait()
	return peak
}

// loadAndTranslate is what session/load did before it streamed: the
// session loaded whole (as the agent loads it), then every event of the
// loaded log translated and written to w.
func loadAndTranslate(tb testing.TB, st store.Store, w io.Writer) {
	ld, err := st.Load(context.Background(), bench.BigID, store.LoadOptions{})
	if err != nil {
		tb.Fatal(err)
	}
	s := replaySession(st, bench.BigID, w)
	var buf []byte
	for from := int64(0); from < ld.Log.Len(); from += 1024 {
		for _, ev := range ld.Log.EventRange(from, from+1024) {
			buf = s.emit(buf, ev)
			if len(buf) >= replayBatch {
				s.write(buf)
				buf = buf[:0]
			}
		}
	}
	s.write(buf)
	runtime.KeepAlive(ld)
}

// TestReplayMemoryBounded: replaying a large session (the benchmark's
// 100k events, 16 MB) holds a small part of its file. The live heap while
// replaying (the collector at GOGC=10, so the heap follows the live data)
// stays under half the file: the replay holds a piece of the file, the
// validator's records of a few blocks and one event's translation, where
// loading the log first held 1.35 times the file.
func TestReplayMemoryBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("replays a 16 MB session")
	}
	st, size := bigSession(t)
	peak := replayPeak(t, st, 10)
	t.Logf("live heap peak while replaying: %.2f of the file (%d bytes)", float64(peak)/float64(size), peak)
	if peak > size/2 {
		t.Fatalf("the live heap grew by %d bytes while replaying a file of %d", peak, size)
	}
}

// bigSession is the generated session of replayEvents events (cached
// between runs) and its file's size.
func bigSession(tb testing.TB) (*jsonl.Store, int64) {
	root, err := bench.Cached(replayEvents)
	if err != nil {
		tb.Fatal(err)
	}
	st, err := jsonl.Open(root)
	if err != nil {
		tb.Fatal(err)
	}
	fi, err := os.Stat(st.Path(bench.BigID))
	if err != nil {
		tb.Fatal(err)
	}
	return st, fi.Size()
}
