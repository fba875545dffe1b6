package bench

import (
	"context"
	"fmt"
	"iter"
	"runtime"
	"runtime/pprof"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/reinhq/rein/agent"
	"github.com/reinhq/rein/llm"
	"github.com/reinhq/rein/llm/anthropic"
	"github.com/reinhq/rein/llm/openai"
	"github.com/reinhq/rein/llm/sse"
	"github.com/reinhq/rein/llm/wire"
	"github.com/reinhq/rein/store"
	"github.com/reinhq/rein/store/jsonl"
	"github.com/reinhq/rein/tool"
)

// BenchmarkStepRealPath measures the CPU of one agent step through the
// real path: the agent, the real adapter (OpenAI-compatible as configured
// for DeepSeek, and Anthropic) over HTTP to a model server in another
// process that decodes every request, and the JSONL store with its fsyncs.
// A session resumed with 100,000 prior events (bench.Generate's realistic
// mix, ~16 MB) and a fresh one (100 prior events) run the same turns (a
// prompt, a tool step, an answer step of 20 deltas), interleaved in rounds
// so machine load hits both alike. CPU is the process's user+system time,
// which the model server's is not. Target: cpu-ratio <= 2.
//
// That session's whole history is 2 MB on the wire (about 500,000 tokens:
// only a 1M-token model takes it). A real session that long has been
// compacted to fit its model's window; the third side is the same 100,000
// events with a compaction that leaves a request of about 400 KB (about
// 100,000 tokens, inside DeepSeek's 128K): cpu-ratio-compacted.
//
// The request body grows with the history (2 MB at 100,000 events here),
// and sending it costs CPU in any client: the kernel's TCP send and the
// one streaming copy net/http makes. So each round also POSTs each side's
// current body, already encoded, through the same transport to the same
// server (transport-µs), and own-ratio is the ratio without it: what the
// harness itself adds per step as the session grows.
//
//	go test -run '^$' -bench StepRealPath -benchtime 10x ./bench/
func BenchmarkStepRealPath(b *testing.B) {
	url, stop := startModel(b)
	defer stop()
	for _, dialect := range []string{"openai", "anthropic"} {
		b.Run(dialect, func(b *testing.B) { stepRealPath(b, url, dialect) })
	}
}

// stepSide is one of the two sessions of the step benchmarks.
type stepSide struct {
	base   string
	events int64
	a      *agent.Agent
	forks  int
	turns  int // measured turns of the current agent
	// Per turn: CPU and wall time per step, CPU per transport-only
	// request.
	cpu, wall, post []float64
	// body is the encoded request of the current agent's history.
	body []byte
}

func stepRealPath(b *testing.B, url, dialect string) {
	root := b.TempDir()
	large, err := Generate(root, "large", 100_000)
	if err != nil {
		b.Fatal(err)
	}
	small, err := Generate(root, "small", 100)
	if err != nil {
		b.Fatal(err)
	}
	st, err := jsonl.Open(root)
	if err != nil {
		b.Fatal(err)
	}
	ld, err := st.Load(bg, "large", store.LoadOptions{})
	if err != nil {
		b.Fatal(err)
	}
	result := strings.Repeat("  42\tfunc (s *Server) handle(w http.ResponseWriter, r *http.Request) {\n", 24)
	var ts []tool.Tool
	for _, spec := range tools {
		ts = append(ts, &tool.Func{ToolSpec: spec, ToolMode: tool.Parallel, Body: func(context.Context, tool.Call) (tool.Result, error) {
			return tool.TextResult(result), nil
		}})
	}
	reg, err := tool.NewRegistry(ts...)
	if err != nil {
		b.Fatal(err)
	}
	cfg := agent.Config{Tools: reg, System: []agent.Section{{Text: ld.Log.RequestHeader().System}}, Cwd: root}
	var endpoint string
	headers := map[string]string{}
	switch dialect {
	case "openai":
		cfg.Model = "deepseek:deepseek-chat"
		cfg.Provider = openai.New(openai.Config{Name: "deepseek", BaseURL: url + "/v1", APIKey: "k", ReasoningContent: true})
		endpoint, headers["Authorization"] = url+"/v1/chat/completions", "Bearer k"
	default:
		cfg.Model = "anthropic:claude-sonnet-4-5"
		cfg.Provider = anthropic.New(anthropic.Config{BaseURL: url, APIKey: "k"})
		endpoint, headers["X-Api-Key"], headers["Anthropic-Version"] = url+"/v1/messages", "k", anthropic.Version
	}
	bodyOf := cfg.Provider.(interface {
		Body(*llm.Request) ([]byte, error)
	}).Body
	compacted := compactedCopy(b, st, ld, "large", "compacted", 400<<10)
	ld = nil

	turn := func(a *agent.Agent) {
		if _, err := a.Send(agent.Message{Content: llm.Text("go on")}); err != nil {
			b.Fatal(err)
		}
		if err := a.WhenIdle(context.Background()); err != nil {
			b.Fatal(err)
		}
	}
	reopen := func(s *stepSide) {
		if s.a != nil {
			_ = s.a.Close(context.Background())
			_ = st.Delete(context.Background(), s.a.ID())
		}
		s.forks++
		c := cfg
		c.SessionID = fmt.Sprintf("%s-%d", s.base, s.forks)
		a, err := agent.Fork(context.Background(), st, s.base, s.events-1, c)
		if err != nil {
			b.Fatal(err)
		}
		// The first request after a resume encodes the whole history;
		// later ones only what is new.
		for range 2 {
			turn(a)
		}
		s.a, s.turns = a, 0
		ld, err := st.Load(bg, a.ID(), store.LoadOptions{})
		if err != nil {
			b.Fatal(err)
		}
		s.body, err = bodyOf(&llm.Request{Model: modelName(cfg.Model), System: cfg.System[0].Text, Tools: tools, Messages: ld.Log.Messages()})
		if err != nil {
			b.Fatal(err)
		}
		// Collect the garbage of loading now, not during the measured
		// steps.
		runtime.GC()
	}
	// post sends s.body as the adapter would, and reads the answer.
	post := func(s *stepSide) {
		str, e := sse.Post(context.Background(), nil, endpoint, wire.Body{s.body}, headers, 0)
		if e != nil {
			b.Fatal(e)
		}
		for {
			if _, err := str.Next(); err != nil {
				break
			}
		}
		str.Close()
	}
	sides := []*stepSide{{base: "small", events: small}, {base: "large", events: large}, {base: "compacted", events: compacted}}
	// Each b.N is a round of 10 turns (20 steps) per side, the sides
	// taking turns one turn at a time, so that a burst of other work on
	// the machine hits all of them; every turn is a sample.
	const round = 10
	b.ResetTimer()
	for range b.N {
		for _, s := range sides {
			// The fresh session stays fresh; the others grow by at most
			// 50 turns (0.5 %) before they are forked again.
			if s.a == nil || s.base == "small" || s.turns >= 5*round {
				b.StopTimer()
				reopen(s)
				b.StartTimer()
			}
		}
		for range round {
			for _, s := range sides {
				pprof.Do(context.Background(), pprof.Labels("session", s.base), func(context.Context) {
					c0, t0 := cpuTime(), time.Now()
					turn(s.a)
					s.cpu = append(s.cpu, µs(cpuTime()-c0)/2)
					s.wall = append(s.wall, µs(time.Since(t0))/2)
					c0 = cpuTime()
					post(s)
					post(s)
					s.post = append(s.post, µs(cpuTime()-c0)/2)
					s.turns++
				})
			}
		}
	}
	b.StopTimer()
	for _, s := range sides {
		_ = s.a.Close(context.Background())
	}
	fresh, big, comp := sides[0], sides[1], sides[2]
	b.ReportMetric(median(fresh.cpu), "cpu-µs/step@fresh")
	b.ReportMetric(median(big.cpu), "cpu-µs/step@100k")
	b.ReportMetric(median(big.cpu)/median(fresh.cpu), "cpu-ratio")
	b.ReportMetric(median(fresh.wall), "wall-µs/step@fresh")
	b.ReportMetric(median(big.wall), "wall-µs/step@100k")
	b.ReportMetric(float64(len(big.body)), "body-bytes@100k")
	b.ReportMetric(median(fresh.post), "transport-µs@fresh")
	b.ReportMetric(median(big.post), "transport-µs@100k")
	b.ReportMetric((median(big.cpu)-median(big.post))/(median(fresh.cpu)-median(fresh.post)), "own-ratio")
	b.ReportMetric(median(comp.cpu), "cpu-µs/step@100k-compacted")
	b.ReportMetric(median(comp.cpu)/median(fresh.cpu), "cpu-ratio-compacted")
	b.ReportMetric(float64(len(comp.body)), "body-bytes@100k-compacted")
}

// modelName strips the "provider:" prefix, as the agent does.
func modelName(spec string) string {
	_, m, _ := strings.Cut(spec, ":")
	return m
}

func µs(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 }

// median returns the median of xs (rounds hit by a burst of other work on
// the machine do not move it).
func median(xs []float64) float64 {
	s := slices.Sorted(slices.Values(xs))
	if len(s) == 0 {
		return 0
	}
	return s[len(s)/2]
}

// compactedCopy forks session id (loaded as ld) into child and compacts the
// child through the agent, with a model that answers every request with a
// short summary, keeping the most recent messages verbatim up to about
// keepBytes of text. It returns the child's event count.
func compactedCopy(b *testing.B, st store.Store, ld *store.Loaded, id, child string, keepBytes int) int64 {
	msgs := ld.Log.Messages()
	keep, size := 0, 0
	for i := len(msgs) - 1; i >= 0 && size < keepBytes; i-- {
		for _, p := range msgs[i].Content {
			size += len(p.Text)
		}
		keep++
	}
	a, err := agent.Fork(context.Background(), st, id, ld.Log.Len()-1, agent.Config{SessionID: child, Provider: summarizer{}, Model: "deepseek:deepseek-chat"})
	if err != nil {
		b.Fatal(err)
	}
	defer a.Close(context.Background())
	if err := a.Compact(context.Background(), agent.CompactOptions{Keep: keep}); err != nil {
		b.Fatal(err)
	}
	if err := a.Close(context.Background()); err != nil {
		b.Fatal(err)
	}
	cl, err := st.Load(bg, child, store.LoadOptions{})
	if err != nil {
		b.Fatal(err)
	}
	return cl.Log.Len()
}

// summarizer answers every request with a 2 KB summary.
type summarizer struct{}

func (summarizer) Name() string { return "deepseek" }
func (summarizer) Stream(context.Context, *llm.Request) iter.Seq[llm.Event] {
	return func(yield func(llm.Event) bool) {
		if yield(llm.Event{Type: llm.EventDelta, Delta: llm.Delta{Text: strings.Repeat("The work so far. ", 120)}}) {
			yield(llm.Event{Type: llm.EventDone, Finish: llm.FinishStop, Usage: llm.Usage{Input: 500000, Output: 500}})
		}
	}
}
