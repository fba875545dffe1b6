package main

import (
	"context"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/reinhq/rein/config"
	"github.com/reinhq/rein/llm"
	"github.com/reinhq/rein/session"
	"github.com/reinhq/rein/store/jsonl"
)

// TestStatsCost: at catalog prices (DeepSeek: $0.56 per million uncached
// input tokens, $0.07 cached, $1.68 output), the session's cost and a
// compaction break's cost: the tokens of the previous prompt the cache no
// longer served, at the difference between the uncached and cached price.
func TestStatsCost(t *testing.T) {
	st, err := jsonl.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	h := session.Header{ID: "s", CreatedAt: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)}
	w, err := st.Create(context.Background(), h)
	if err != nil {
		t.Fatal(err)
	}
	l := session.NewLog(h)
	var evs []session.Event
	add := func(p session.Payload) {
		ev, err := l.Append(h.CreatedAt, p)
		if err != nil {
			t.Fatal(err)
		}
		evs = append(evs, ev)
	}
	turn := func(n int, prefix *session.Prefix, u llm.Usage) {
		add(&session.TurnStart{Turn: n, Trigger: session.Trigger{Kind: session.TriggerSend}})
		add(&session.UserMessage{ID: "u" + string(rune('0'+n)), Content: llm.Text("hi"), Source: session.Source{Kind: session.SourceUser}})
		add(&session.StepStart{Turn: n, Step: 1})
		if n == 1 || prefix != nil {
			add(&session.RequestHeader{Turn: n, Step: 1, Reason: session.HeaderChange, Model: "deepseek:deepseek-chat", Tools: []llm.ToolSpec{}, Prefix: prefix})
		}
		add(&session.AssistantMessage{Turn: n, Step: 1, Content: llm.Text("ok"), ToolCalls: []llm.ToolCall{}, Finish: llm.FinishStop, Usage: u, ChunkSeqs: []int64{}})
		add(&session.StepEnd{Turn: n, Step: 1})
		add(&session.TurnEnd{Turn: n, Reason: session.Reason{Kind: session.ReasonCompleted}})
	}
	turn(1, nil, llm.Usage{Input: 100_000, Output: 1_000})
	turn(2, nil, llm.Usage{Input: 200_000, CacheRead: 100_000, Output: 1_000})
	turn(3, &session.Prefix{Messages: 0, Break: session.BreakCompaction}, llm.Usage{Input: 50_000, CacheRead: 10_000, Output: 1_000})
	if err := w.Append(context.Background(), evs); err != nil {
		t.Fatal(err)
	}
	w.Close()

	s, err := collectStats(context.Background(), st, "s", (&app{cfg: &config.Config{}}).price)
	if err != nil {
		t.Fatal(err)
	}
	near := func(a, b float64) bool { return math.Abs(a-b) < 1e-9 }
	// uncached 240k × 0.56 + cached 110k × 0.07 + output 3k × 1.68, per M
	want := (240_000*0.56 + 110_000*0.07 + 3_000*1.68) / 1e6
	if s.Requests != 3 || s.Input != 350_000 || s.CacheRead != 110_000 || s.CostUSD == nil || !near(*s.CostUSD, want) {
		t.Fatalf("stats %+v (cost %v, want %v)", s, s.CostUSD, want)
	}
	if len(s.Breaks) != 1 {
		t.Fatalf("breaks %+v", s.Breaks)
	}
	b := s.Breaks[0]
	// min(50k, 200k) - 10k cached = 40k lost, at 0.56 - 0.07.
	if b.Cause != session.BreakCompaction || b.LostTokens == nil || *b.LostTokens != 40_000 || b.CostUSD == nil || !near(*b.CostUSD, 40_000*0.49/1e6) {
		t.Fatalf("break %+v", b)
	}
	// A [prices] entry in the configuration wins over the catalog's.
	own := &app{cfg: &config.Config{Prices: map[string]config.Price{"deepseek:deepseek-chat": {Input: 1, Output: 2}}}}
	o, err := collectStats(context.Background(), st, "s", own.price)
	if err != nil {
		t.Fatal(err)
	}
	if want := (350_000*1 + 3_000*2) / 1e6; o.CostUSD == nil || !near(*o.CostUSD, want) {
		t.Fatalf("configured price: cost %v, want %v", o.CostUSD, want)
	}
	var out strings.Builder
	if err := s.render(&out); err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{"requests       3", "cost           $0.15 at list prices", "#", "compaction  0 messages  40,000       $0.02"} {
		if !strings.Contains(out.String(), line) {
			t.Errorf("missing %q in:\n%s", line, out.String())
		}
	}
}
