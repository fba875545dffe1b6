package agent_test

import (
	"context"
	"fmt"
	"iter"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/reinhq/rein/agent"
	"github.com/reinhq/rein/bench"
	"github.com/reinhq/rein/llm"
	"github.com/reinhq/rein/redact"
	"github.com/reinhq/rein/session"
	"github.com/reinhq/rein/store"
	"github.com/reinhq/rein/store/jsonl"
	"github.com/reinhq/rein/store/memstore"
	"github.com/reinhq/rein/tool"
)

// seedSession writes a session of about n events (turns of a prompt, a
// tool step and an answer step, with chunks) into st and returns the JSONL
// size of its events.
func seedSession(tb testing.TB, st store.Store, id string, n int) (size int64, count int64) {
	tb.Helper()
	w, err := st.Create(context.Background(), session.Header{ID: id, CreatedAt: t0, Cwd: "/w"})
	if err != nil {
		tb.Fatal(err)
	}
	defer w.Close()
	l := session.NewLog(w.Header())
	add := func(p session.Payload) {
		if _, err := l.Append(t0, p); err != nil {
			tb.Fatal(err)
		}
	}
	text := strings.Repeat("lorem ipsum dolor sit amet ", 8)
	for turn := 1; l.Len() < int64(n); turn++ {
		add(&session.TurnStart{Turn: turn, Trigger: session.Trigger{Kind: "send", MessageID: fmt.Sprintf("u%d", turn)}})
		add(&session.UserMessage{ID: fmt.Sprintf("u%d", turn), Content: llm.Text("please look at " + text), Source: session.Source{Kind: "user"}})
		add(&session.StepStart{Turn: turn, Step: 1})
		if turn == 1 {
			add(&session.RequestHeader{Turn: 1, Step: 1, Reason: "initial", Model: "scripted:bench", System: "sys", Tools: []llm.ToolSpec{}})
		}
		call := llm.ToolCall{ID: fmt.Sprintf("c%d", turn), Name: "t", Arguments: `{"path":"a.go"}`}
		add(&session.AssistantChunk{Turn: turn, Step: 1, Delta: llm.Delta{ToolCall: &llm.ToolCallDelta{ID: call.ID, Name: "t", Arguments: call.Arguments}}})
		add(&session.AssistantMessage{Turn: turn, Step: 1, Content: []llm.Part{}, ToolCalls: []llm.ToolCall{call}, Finish: llm.FinishToolCalls, ChunkSeqs: []int64{l.Len() - 1}})
		add(&session.ToolCall{Turn: turn, Step: 1, CallID: call.ID, Name: "t", Arguments: call.Arguments})
		add(&session.ToolResult{Turn: turn, Step: 1, CallID: call.ID, Content: llm.Text(text + text)})
		add(&session.StepEnd{Turn: turn, Step: 1})
		add(&session.StepStart{Turn: turn, Step: 2})
		var seqs []int64
		for range 8 {
			add(&session.AssistantChunk{Turn: turn, Step: 2, Delta: llm.Delta{Text: "lorem ipsum "}})
			seqs = append(seqs, l.Len()-1)
		}
		add(&session.AssistantMessage{Turn: turn, Step: 2, Content: llm.Text(strings.Repeat("lorem ipsum ", 8)), ToolCalls: []llm.ToolCall{}, Finish: llm.FinishStop, ChunkSeqs: seqs})
		add(&session.StepEnd{Turn: turn, Step: 2})
		add(&session.TurnEnd{Turn: turn, Reason: session.Reason{Kind: "completed"}})
	}
	evs := l.Events(0)
	var buf []byte
	for _, ev := range evs {
		buf = ev.AppendLine(buf[:0])
		size += int64(len(buf))
	}
	for i := 0; i < len(evs); i += 4096 {
		if err := w.Append(context.Background(), evs[i:min(i+4096, len(evs))]); err != nil {
			tb.Fatal(err)
		}
	}
	return size, int64(len(evs))
}

// instantProvider answers at once: odd calls ask for the trivial tool,
// even calls answer with text.
type instantProvider struct{ n int }

func (m *instantProvider) Name() string { return "scripted" }
func (m *instantProvider) Stream(ctx context.Context, req *llm.Request) iter.Seq[llm.Event] {
	m.n++
	odd := m.n%2 == 1
	id := "k" + strconv.Itoa(m.n)
	return func(yield func(llm.Event) bool) {
		if odd {
			if !yield(llm.Event{Type: llm.EventDelta, Delta: llm.Delta{ToolCall: &llm.ToolCallDelta{ID: id, Name: "t", Arguments: "{}"}}}) {
				return
			}
			yield(llm.Event{Type: llm.EventDone, Finish: llm.FinishToolCalls})
			return
		}
		if !yield(llm.Event{Type: llm.EventDelta, Delta: llm.Delta{Text: "done"}}) {
			return
		}
		yield(llm.Event{Type: llm.EventDone, Finish: llm.FinishStop})
	}
}

// BenchmarkStep measures the loop's overhead per step (an instant model,
// one trivial tool, the in-memory store, the test-only request check off)
// on sessions with 100, 10,000 and 100,000 prior events. Each b.N step is
// half a turn: one tool step or one answer step. The agent is re-resumed
// every 500 steps so the session stays near its nominal size.
func BenchmarkStep(b *testing.B) {
	for _, n := range []int{100, 10_000, 100_000} {
		b.Run(fmt.Sprintf("prior=%d", n), func(b *testing.B) {
			st := memstore.New(memstore.Options{})
			_, count := seedSession(b, st, "base", n)
			reg, _ := tool.NewRegistry(probe("t", tool.Parallel, func(ctx context.Context, c tool.Call) (tool.Result, error) {
				return tool.TextResult("ok"), nil
			}))
			cfg := agent.Config{Provider: &instantProvider{}, Model: "scripted:bench", Tools: reg, System: []agent.Section{{Text: "sys"}}}
			fork := 0
			turn := func(a *agent.Agent) {
				if _, err := a.Send(agent.Message{Content: llm.Text("go")}); err != nil {
					b.Fatal(err)
				}
				if err := a.WhenIdle(context.Background()); err != nil {
					b.Fatal(err)
				}
			}
			open := func() *agent.Agent {
				fork++
				a, err := agent.Fork(context.Background(), st, "base", count-1, withID(cfg, fmt.Sprintf("f%d", fork)))
				if err != nil {
					b.Fatal(err)
				}
				// Warm up: the first appends after a load grow the
				// store's and the log's index once (amortised over the
				// session's life, but not over a 500-step window).
				for range 10 {
					turn(a)
				}
				return a
			}
			a := open()
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i += 2 {
				if i > 0 && i%500 == 0 {
					b.StopTimer()
					_ = a.Close(context.Background())
					_ = st.Delete(context.Background(), a.ID())
					a = open()
					b.StartTimer()
				}
				turn(a)
			}
			b.StopTimer()
			_ = a.Close(context.Background())
		})
	}
}

func withID(cfg agent.Config, id string) agent.Config { cfg.SessionID = id; return cfg }

// BenchmarkIdleMemory reports the heap held by one idle agent resumed from
// a 10,000-event session in the JSONL store, as a ratio of the session
// file's size (target <= 1.5): "realistic" is bench.Generate's mix (mostly
// streamed chunks, like the store benchmarks' session), "message-heavy" a
// worst case of few chunks per message. It also reports 1,000 idle agents
// on small sessions, in bytes per agent (target <= 64 KiB).
func BenchmarkIdleMemory(b *testing.B) {
	held := func(b *testing.B, root, id string) {
		st, err := jsonl.Open(root)
		if err != nil {
			b.Fatal(err)
		}
		fi, err := os.Stat(st.Path(id))
		if err != nil {
			b.Fatal(err)
		}
		before := heap()
		a, err := agent.Resume(context.Background(), st, id, agent.Config{Provider: &instantProvider{}})
		if err != nil {
			b.Fatal(err)
		}
		h := heap() - before
		b.ReportMetric(float64(h)/float64(fi.Size()), "held/file")
		b.ReportMetric(float64(fi.Size()), "file-bytes")
		runtime.KeepAlive(a)
		_ = a.Close(context.Background())
	}
	b.Run("realistic-10k", func(b *testing.B) {
		for range b.N {
			root := b.TempDir()
			if _, err := bench.Generate(root, "big", 10_000); err != nil {
				b.Fatal(err)
			}
			held(b, root, "big")
		}
	})
	b.Run("message-heavy-10k", func(b *testing.B) {
		for range b.N {
			root := b.TempDir()
			st, err := jsonl.Open(root)
			if err != nil {
				b.Fatal(err)
			}
			seedSession(b, st, "big", 10_000)
			held(b, root, "big")
		}
	})
	b.Run("1000-small-sessions", func(b *testing.B) {
		for range b.N {
			st, err := jsonl.Open(b.TempDir())
			if err != nil {
				b.Fatal(err)
			}
			for i := range 1000 {
				seedSession(b, st, fmt.Sprintf("s%d", i), 20)
			}
			before := heap()
			var agents []*agent.Agent
			for i := range 1000 {
				a, err := agent.Resume(context.Background(), st, fmt.Sprintf("s%d", i), agent.Config{Provider: &instantProvider{}})
				if err != nil {
					b.Fatal(err)
				}
				agents = append(agents, a)
			}
			time.Sleep(10 * time.Millisecond)
			held := heap() - before
			b.ReportMetric(float64(held)/1000, "bytes/agent")
			for _, a := range agents {
				_ = a.Close(context.Background())
			}
		}
	})
}

// heap returns the live heap plus goroutine stacks after a GC.
func heap() int64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc + m.StackInuse)
}

// benchSide is one agent of an interleaved benchmark: its store (seeded
// with prior events), configuration and totals.
type benchSide struct {
	st    store.Store
	count int64
	red   *redact.Redactor
	a     *agent.Agent
	fork  int
	ns    time.Duration
	mall  uint64
	steps int
}

// interleave runs the same turns on each side, in rounds of 50 turns (100
// steps), alternating which side goes first, so that machine load hits all
// alike; each agent is a fork of its
// seed, warmed up with 10 turns and replaced every 500 steps.
func interleave(b *testing.B, sides ...*benchSide) {
	reg, _ := tool.NewRegistry(probe("t", tool.Parallel, func(ctx context.Context, c tool.Call) (tool.Result, error) {
		return tool.TextResult("ok"), nil
	}))
	turn := func(a *agent.Agent) {
		if _, err := a.Send(agent.Message{Content: llm.Text("go")}); err != nil {
			b.Fatal(err)
		}
		if err := a.WhenIdle(context.Background()); err != nil {
			b.Fatal(err)
		}
	}
	reopen := func(s *benchSide) {
		if s.a != nil {
			_ = s.a.Close(context.Background())
			_ = s.st.Delete(context.Background(), s.a.ID()) // keep the heap at one session
		}
		s.fork++
		cfg := agent.Config{Provider: &instantProvider{}, Model: "scripted:bench", Tools: reg, System: []agent.Section{{Text: "sys"}}, SessionID: fmt.Sprintf("f%d", s.fork), Redactor: s.red}
		a, err := agent.Fork(context.Background(), s.st, "base", s.count-1, cfg)
		if err != nil {
			b.Fatal(err)
		}
		for range 10 {
			turn(a)
		}
		s.a = a
	}
	const round = 50
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		order := slices.Clone(sides)
		if i%2 == 1 { // neither side always runs first
			slices.Reverse(order)
		}
		for _, s := range order {
			if s.steps%500 == 0 {
				b.StopTimer()
				reopen(s)
				b.StartTimer()
			}
			var m0, m1 runtime.MemStats
			runtime.ReadMemStats(&m0)
			t := time.Now()
			for range round {
				turn(s.a)
			}
			s.ns += time.Since(t)
			runtime.ReadMemStats(&m1)
			s.mall += m1.Mallocs - m0.Mallocs
			s.steps += 2 * round
		}
	}
	b.StopTimer()
	for _, s := range sides {
		_ = s.a.Close(context.Background())
	}
}

func newSide(b *testing.B, prior int, red *redact.Redactor) *benchSide {
	s := &benchSide{st: memstore.New(memstore.Options{}), red: red}
	_, s.count = seedSession(b, s.st, "base", prior)
	return s
}

func (s *benchSide) perStep() float64 { return float64(s.ns.Nanoseconds()) / float64(s.steps) }
func (s *benchSide) allocs() float64  { return float64(s.mall) / float64(s.steps) }

// BenchmarkStepFlatness runs the same steps on a session of 100 prior
// events and one of 100,000, interleaved, and reports the per-step time and
// allocations of each and their ratio (target: time ratio <= 1.3,
// allocations equal).
func BenchmarkStepFlatness(b *testing.B) {
	small, large := newSide(b, 100, nil), newSide(b, 100_000, nil)
	interleave(b, small, large)
	b.ReportMetric(small.perStep(), "ns/step@100")
	b.ReportMetric(large.perStep(), "ns/step@100k")
	b.ReportMetric(large.perStep()/small.perStep(), "time-ratio")
	b.ReportMetric(small.allocs(), "allocs/step@100")
	b.ReportMetric(large.allocs(), "allocs/step@100k")
	b.ReportMetric(1e9/small.perStep(), "steps/s@100")
	b.ReportMetric(1e9/large.perStep(), "steps/s@100k")
}

// BenchmarkStepRedacted measures what masking secrets costs a step: the
// same steps with and without a Redactor that knows three keys (none of
// which occurs, the common case: every event is encoded once more and
// searched), interleaved. Target: time ratio <= 1.25.
func BenchmarkStepRedacted(b *testing.B) {
	plain := newSide(b, 100, nil)
	red := newSide(b, 100, redact.New("sk-bench-0123456789abcdef0123", "sk-ant-bench-0123456789abcdef", "ds-bench-0123456789abcdef0123"))
	interleave(b, plain, red)
	b.ReportMetric(plain.perStep(), "ns/step")
	b.ReportMetric(red.perStep(), "ns/step-redacted")
	b.ReportMetric(red.perStep()/plain.perStep(), "time-ratio")
	b.ReportMetric(plain.allocs(), "allocs/step")
	b.ReportMetric(red.allocs(), "allocs/step-redacted")
}
