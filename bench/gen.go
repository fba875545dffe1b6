// Package bench holds rein's performance benchmarks (go test -bench) and
// the generator of their realistic session: about 1,000,000 events and
// 150 MB, mostly assistant chunks, with user, assistant and tool messages
// of realistic sizes. Every benchmark reports a ratio against a limit
// measured in the same run; docs/benchmarks.md records the figures.
//
// This package is only imported by its own tests.
package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/reinhq/rein/llm"
	"github.com/reinhq/rein/session"
	"github.com/reinhq/rein/store/jsonl"
)

// GenVersion keys the cached session; bump it when the generator changes.
const GenVersion = 1

// BigID is the id of the generated session in the cached store.
const BigID = "big"

var words = strings.Fields(`the a to of and in is it that for on with as this be are
function return value error file test config session event turn step model tool
result message user assistant string int nil err if else func package import
type struct map slice range go defer chan select case default the of to and
because however therefore so we need check whether it's "quoted" path/to/file.go
line:42 TODO fix ok done é ü 你好 → ✓ {x} [y] (z) x:=y; a+b==c`)

type gen struct {
	r *rand.Rand
	b strings.Builder
}

func (g *gen) text(n int) string {
	g.b.Reset()
	for g.b.Len() < n {
		w := words[g.r.IntN(len(words))]
		g.b.WriteString(w)
		switch x := g.r.IntN(20); {
		case x == 0:
			g.b.WriteString("\n")
		case x == 1:
			g.b.WriteString(".\n\n")
		case x == 2:
			g.b.WriteString("\t")
		default:
			g.b.WriteByte(' ')
		}
	}
	return g.b.String()
}

// code is tool output: lines of code-like text.
func (g *gen) code(n int) string {
	g.b.Reset()
	for g.b.Len() < n {
		fmt.Fprintf(&g.b, "%4d\t", g.b.Len()/40)
		for range 3 + g.r.IntN(8) {
			g.b.WriteString(words[g.r.IntN(len(words))])
			g.b.WriteByte(' ')
		}
		g.b.WriteString("\n")
	}
	return g.b.String()
}

var tools = func() []llm.ToolSpec {
	var ts []llm.ToolSpec
	for _, n := range []string{"read", "write", "edit", "bash", "grep", "glob", "ls", "fetch"} {
		ts = append(ts, llm.ToolSpec{Name: n, Description: strings.Repeat("Does "+n+" things carefully. ", 6),
			Parameters: []byte(`{"type":"object","properties":{"path":{"type":"string","description":"the file"},"content":{"type":"string"},"limit":{"type":"integer"}},"required":["path"]}`)})
	}
	return ts
}()

// Generate writes the benchmark session (header + about n events) into the
// store at root as session id, deterministically.
func Generate(root, id string, n int64) (int64, error) {
	s, err := jsonl.Open(root)
	if err != nil {
		return 0, err
	}
	h := session.Header{ID: id, Cwd: "/home/ana/proj", CreatedAt: time.Date(2026, 11, 1, 9, 0, 0, 0, time.UTC), Title: "benchmark session"}
	w, err := s.Create(context.Background(), h)
	if err != nil {
		return 0, err
	}
	defer w.Close()
	l := session.NewLog(h)
	g := &gen{r: rand.New(rand.NewPCG(1, 2))}
	now := h.CreatedAt
	var batch []session.Event
	add := func(p session.Payload) session.Event {
		now = now.Add(time.Duration(5+g.r.IntN(40)) * time.Millisecond)
		ev, err := l.Append(now, p)
		if err != nil {
			panic(err)
		}
		batch = append(batch, ev)
		return ev
	}
	flush := func() error {
		err := w.Append(context.Background(), batch)
		batch = batch[:0]
		return err
	}
	system := g.text(3000)
	for turn := 1; l.Len() < n; turn++ {
		if g.r.IntN(10) == 0 {
			add(&session.UserMessage{ID: fmt.Sprintf("c%d", l.Len()), Content: llm.Text(g.text(200 + g.r.IntN(800))), Source: session.Source{Kind: session.SourcePlugin, Name: "ci-watch"}})
		}
		mid := fmt.Sprintf("m%d", l.Len())
		add(&session.TurnStart{Turn: turn, Trigger: session.Trigger{Kind: session.TriggerSend, MessageID: mid}})
		add(&session.UserMessage{ID: mid, Content: llm.Text(g.text(50 + g.r.IntN(1500))), Source: session.Source{Kind: session.SourceUser}})
		steps := 1 + g.r.IntN(8)
		for step := 1; step <= steps; step++ {
			add(&session.StepStart{Turn: turn, Step: step})
			if step == 1 {
				add(&session.RequestHeader{Turn: turn, Step: step, Reason: session.HeaderInitial, Model: "deepseek:deepseek-chat", System: system, Tools: tools})
			}
			var seqs []int64
			var text, reasoning strings.Builder
			for range 10 + g.r.IntN(40) {
				d := g.text(1 + g.r.IntN(3))
				reasoning.WriteString(d)
				seqs = append(seqs, add(&session.AssistantChunk{Turn: turn, Step: step, Delta: llm.Delta{Reasoning: d}}).Seq)
			}
			for range 40 + g.r.IntN(120) {
				d := g.text(1 + g.r.IntN(3))
				text.WriteString(d)
				seqs = append(seqs, add(&session.AssistantChunk{Turn: turn, Step: step, Delta: llm.Delta{Text: d}}).Seq)
			}
			var calls []llm.ToolCall
			if step < steps {
				args := fmt.Sprintf(`{"path":"src/%s.go","limit":%d}`, words[g.r.IntN(len(words))], g.r.IntN(500))
				c := llm.ToolCall{ID: fmt.Sprintf("call_%d", l.Len()), Name: tools[g.r.IntN(len(tools))].Name, Arguments: args}
				calls = append(calls, c)
				seqs = append(seqs, add(&session.AssistantChunk{Turn: turn, Step: step, Delta: llm.Delta{ToolCall: &llm.ToolCallDelta{Index: 0, ID: c.ID, Name: c.Name, Arguments: args}}}).Seq)
			}
			finish := llm.FinishStop
			if len(calls) > 0 {
				finish = llm.FinishToolCalls
			} else {
				calls = []llm.ToolCall{}
			}
			add(&session.AssistantMessage{Turn: turn, Step: step,
				Content:   []llm.Part{{Type: llm.PartReasoning, Text: reasoning.String()}, {Type: llm.PartText, Text: text.String()}},
				ToolCalls: calls, Finish: finish, Usage: llm.Usage{Input: 20000 + g.r.IntN(50000), Output: 300, CacheRead: 18000}, ChunkSeqs: seqs})
			for _, c := range calls {
				add(&session.ToolCall{Turn: turn, Step: step, CallID: c.ID, Name: c.Name, Arguments: c.Arguments})
				add(&session.ToolResult{Turn: turn, Step: step, CallID: c.ID, Content: llm.Text(g.code(300 + g.r.IntN(3000)))})
			}
			add(&session.StepEnd{Turn: turn, Step: step})
		}
		add(&session.TurnEnd{Turn: turn, Reason: session.Reason{Kind: session.ReasonCompleted}})
		if len(batch) > 20000 {
			if err := flush(); err != nil {
				return 0, err
			}
		}
	}
	if err := flush(); err != nil {
		return 0, err
	}
	return l.Len(), w.Close()
}

// Cached returns the root of a store holding the generated session, making
// it on first use under os.TempDir (keyed by GenVersion).
func Cached(n int64) (root string, err error) {
	root = filepath.Join(os.TempDir(), fmt.Sprintf("rein-bench-v%d-%d", GenVersion, n))
	if _, err := os.Stat(filepath.Join(root, "ready")); err == nil {
		return root, nil
	}
	os.RemoveAll(root)
	if _, err := Generate(root, BigID, n); err != nil {
		return "", err
	}
	return root, os.WriteFile(filepath.Join(root, "ready"), nil, 0o600)
}

// Checkpoints cuts evs into the batches an agent appends: its persister
// writes everything accepted so far at each checkpoint, which are before a
// model request (the first chunk of a step's answer follows), before a
// tool body runs (after its tool/call) and at a turn's end. What follows
// the last checkpoint is the final batch.
func Checkpoints(evs []session.Event) [][]session.Event {
	var out [][]session.Event
	start := 0
	for i, ev := range evs {
		cut := ev.Type == session.TypeToolCall || ev.Type == session.TypeTurnEnd || i == len(evs)-1
		if i+1 < len(evs) && evs[i+1].Type == session.TypeAssistantChunk && ev.Type != session.TypeAssistantChunk {
			cut = true
		}
		if cut {
			out = append(out, evs[start:i+1])
			start = i + 1
		}
	}
	return out
}
