package session

import (
	"fmt"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/reinhq/rein/llm"
	"pgregory.net/rapid"
)

// referenceProjection rebuilds the projection of evs from scratch, as
// plainly as possible: a list of surface entries in surface order, where
// a summary removes the entries it shadows and takes the place of the
// first of them.
func referenceProjection(t testing.TB, evs []Event) []llm.Message {
	t.Helper()
	var ps []Payload
	for _, ev := range evs {
		var p Payload
		if ev.Type.Known() {
			var err error
			if p, err = ev.Decode(); err != nil {
				t.Fatal(err)
			}
		}
		ps = append(ps, p)
	}
	return referenceFrom(ps)
}

// referenceFrom is referenceProjection over decoded payloads, ps[seq].
func referenceFrom(ps []Payload) []llm.Message {
	type entry struct {
		seq int64
		msg *llm.Message // nil: a surface event with no message
	}
	var list []entry
	for i, p := range ps {
		seq := int64(i)
		switch d := p.(type) {
		case *UserMessage:
			e := entry{seq, &llm.Message{Role: llm.RoleUser, Content: d.Content}}
			if d.Replaces == nil {
				list = append(list, e)
				continue
			}
			var out []entry
			at := -1
			for _, x := range list {
				if slices.Contains(d.Replaces.Seqs, x.seq) {
					if at < 0 {
						at = len(out)
					}
					continue
				}
				out = append(out, x)
			}
			if at < 0 {
				at = len(out)
			}
			list = slices.Insert(out, at, e)
		case *SteeringMessage:
			list = append(list, entry{seq, &llm.Message{Role: llm.RoleUser, Content: d.Content}})
		case *AssistantMessage:
			e := entry{seq: seq}
			if len(d.Content) > 0 || len(d.ToolCalls) > 0 {
				e.msg = &llm.Message{Role: llm.RoleAssistant, Content: d.Content, ToolCalls: d.ToolCalls}
			}
			list = append(list, e)
		case *ToolResult:
			list = append(list, entry{seq, &llm.Message{Role: llm.RoleTool, ToolCallID: d.CallID, Content: d.Content, IsError: d.IsError}})
		}
	}
	var msgs []llm.Message
	for _, e := range list {
		if e.msg != nil {
			msgs = append(msgs, *e.msg)
		}
	}
	return msgs
}

// gen builds a random valid log, checking the projection after every
// append.
type gen struct {
	t      *rapid.T
	l      *Log
	budget int // events left before the "crash"
	tm     time.Time
	n      int // message counter

	ps    []Payload // decoded payloads by seq
	live  []int64   // unshadowed surface seqs, ascending
	owner map[int64]int64
	res   map[int64][]int64

	snaps     [][]llm.Message // every Messages() result
	snapsCopy [][]llm.Message // deep copies taken at the time
}

func (g *gen) stopped() bool { return g.budget <= 0 }

// push appends p unless the budget is spent; it returns the seq or -1.
func (g *gen) push(p Payload) int64 {
	if g.stopped() {
		return -1
	}
	g.budget--
	// Mostly forward, sometimes backward (Append clamps).
	g.tm = g.tm.Add(time.Duration(rapid.IntRange(-3, 20).Draw(g.t, "dt")) * time.Millisecond)
	ev, err := g.l.Append(g.tm, p)
	if err != nil {
		g.t.Fatalf("append %s at %d: %v", p.EventType(), g.l.Len(), err)
	}
	g.record(ev)
	return ev.Seq
}

func (g *gen) record(ev Event) {
	p := ev.MustDecode()
	g.ps = append(g.ps, p)
	switch d := p.(type) {
	case *UserMessage:
		if d.Replaces != nil {
			g.live = slices.DeleteFunc(g.live, func(s int64) bool { return slices.Contains(d.Replaces.Seqs, s) })
		}
		g.live = append(g.live, ev.Seq)
	case *SteeringMessage, *AssistantMessage:
		g.live = append(g.live, ev.Seq)
	case *ToolResult:
		g.live = append(g.live, ev.Seq)
	}
	if ev.Seq != g.l.Len()-1 {
		return // Repair's events are recorded after the fact
	}
	got, want := g.l.Messages(), referenceFrom(g.ps)
	if !msgsEqual(got, want) {
		g.t.Fatalf("after seq %d (%s): projection\n%v\nreference\n%v", ev.Seq, ev.Type, got, want)
	}
	g.snaps = append(g.snaps, got)
	g.snapsCopy = append(g.snapsCopy, deepCopy(got))
}

func msgsEqual(a, b []llm.Message) bool {
	return len(a) == len(b) && (len(a) == 0 || reflect.DeepEqual(a, b))
}

func deepCopy(ms []llm.Message) []llm.Message {
	out := make([]llm.Message, len(ms))
	for i, m := range ms {
		m.Content = slices.Clone(m.Content)
		m.ToolCalls = slices.Clone(m.ToolCalls)
		out[i] = m
	}
	return out
}

func (g *gen) text(kind string) []llm.Part {
	g.n++
	return llm.Text(fmt.Sprintf("%s%d", kind, g.n))
}

func (g *gen) userMessage() {
	src := rapid.SampledFrom([]string{SourceUser, SourcePlugin, SourceHook, SourceUserContext}).Draw(g.t, "source")
	g.push(&UserMessage{ID: fmt.Sprint("m", g.n), Content: g.text("u"), Source: Source{Kind: src}})
}

func (g *gen) run() {
	turn := 0
	for i, n := 0, rapid.IntRange(0, 20).Draw(g.t, "actions"); i < n && !g.stopped(); i++ {
		switch rapid.IntRange(0, 7).Draw(g.t, "action") {
		case 0, 1:
			g.userMessage()
		case 2:
			if rapid.Bool().Draw(g.t, "title") {
				g.push(&SessionTitle{Title: fmt.Sprint("t", i)})
			} else {
				g.push(&HookResult{Point: "SessionStart", Hook: "h", Decision: "allow"})
			}
		case 3, 4:
			g.compaction(nil)
		default:
			turn++
			g.turn(turn)
		}
	}
}

func (g *gen) turn(turn int) {
	g.push(&TurnStart{Turn: turn, Trigger: Trigger{Kind: TriggerSend}})
	g.userMessage()
	for range rapid.IntRange(0, 2).Draw(g.t, "contexts") {
		g.userMessage()
	}
	steps := rapid.IntRange(0, 4).Draw(g.t, "steps")
	for step := 1; step <= steps; step++ {
		g.step(turn, step)
		switch rapid.IntRange(0, 4).Draw(g.t, "between-steps") {
		case 0:
			g.compaction(&turn)
		case 1:
			g.push(&SteeringMessage{Turn: turn, ID: "s", Content: g.text("s"), Source: Source{Kind: SourceUser}})
		case 2:
			g.userMessage()
		}
	}
	if rapid.Bool().Draw(g.t, "steer-at-end") {
		g.push(&SteeringMessage{Turn: turn, ID: "s", Content: g.text("s"), Source: Source{Kind: SourceUser}})
	}
	reason := rapid.SampledFrom([]string{ReasonCompleted, ReasonMaxTokens, ReasonAborted, ReasonError}).Draw(g.t, "reason")
	g.push(&TurnEnd{Turn: turn, Reason: Reason{Kind: reason}})
}

func (g *gen) step(turn, step int) {
	g.push(&StepStart{Turn: turn, Step: step})
	if rapid.Bool().Draw(g.t, "header") {
		g.push(hdr(turn, step))
	}
	var chunks []int64
	for range rapid.IntRange(0, 3).Draw(g.t, "chunks") {
		if s := g.push(chunk(turn, step, "x")); s >= 0 {
			chunks = append(chunks, s)
		}
	}
	m := &AssistantMessage{Turn: turn, Step: step, Content: []llm.Part{}, ToolCalls: []llm.ToolCall{}, Finish: llm.FinishStop, ChunkSeqs: chunks}
	if rapid.IntRange(0, 3).Draw(g.t, "empty") > 0 {
		m.Content = g.text("a")
	}
	if rapid.IntRange(0, 5).Draw(g.t, "max-tokens") == 0 {
		m.Finish = llm.FinishMaxTokens
	} else {
		for k := range rapid.IntRange(0, 3).Draw(g.t, "calls") {
			m.ToolCalls = append(m.ToolCalls, llm.ToolCall{ID: fmt.Sprintf("k%d_%d_%d", turn, step, k), Name: "read", Arguments: "{}"})
		}
		if len(m.ToolCalls) > 0 {
			m.Finish = llm.FinishToolCalls
		}
	}
	a := g.push(m)
	order := rapid.Permutation(m.ToolCalls).Draw(g.t, "order")
	for _, tc := range order {
		if rapid.Bool().Draw(g.t, "approval") {
			g.push(tappr(turn, step, tc.ID))
		}
		if rapid.IntRange(0, 3).Draw(g.t, "started") > 0 {
			g.push(tcall(turn, step, tc.ID))
		}
		r := g.push(&ToolResult{Turn: turn, Step: step, CallID: tc.ID, Content: g.text("r"), IsError: rapid.Bool().Draw(g.t, "isError")})
		if r >= 0 {
			g.owner[r] = a
			g.res[a] = append(g.res[a], r)
		}
	}
	if rapid.Bool().Draw(g.t, "drain") {
		g.userMessage()
	}
	g.push(&StepEnd{Turn: turn, Step: step})
}

// compaction writes a pair; turn is nil between turns.
func (g *gen) compaction(turn *int) {
	cs := g.push(&CompactionStart{Turn: turn, ID: "c", Reason: CompactManual})
	if cs < 0 {
		return
	}
	if rapid.Bool().Draw(g.t, "inject-during") {
		g.userMessage()
	}
	var cand []int64
	for _, s := range g.live {
		if s < cs {
			cand = append(cand, s)
		}
	}
	if len(cand) > 0 && rapid.IntRange(0, 3).Draw(g.t, "summarise") > 0 {
		i := rapid.IntRange(0, len(cand)-1).Draw(g.t, "from")
		j := rapid.IntRange(i, len(cand)-1).Draw(g.t, "to")
		// Widen until no tool pair is split.
		for changed := true; changed; {
			changed = false
			for _, s := range cand[i : j+1] {
				if o, ok := g.owner[s]; ok && o < cand[i] {
					i, changed = slices.Index(cand, o), true
				}
				for _, r := range g.res[s] {
					if r > cand[j] {
						j, changed = slices.Index(cand, r), true
					}
				}
			}
		}
		seqs := slices.Clone(cand[i : j+1])
		m := &UserMessage{ID: "sum", Content: g.text("S"), Source: Source{Kind: SourceSystem, Name: "compaction"},
			Replaces: &Replaces{Start: seqs[0], End: seqs[len(seqs)-1], Seqs: seqs}}
		g.push(m)
	}
	end := &CompactionEnd{Turn: turn, ID: "c", Reason: CompactManual}
	if rapid.IntRange(0, 4).Draw(g.t, "fails") == 0 {
		end.Error = "model failed"
	}
	g.push(end)
}

func TestPropertyRandomLogs(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		g := &gen{t: rt, l: NewLog(Header{ID: "s"}), budget: rapid.IntRange(1, 250).Draw(rt, "budget"), tm: t0,
			owner: map[int64]int64{}, res: map[int64][]int64{}}
		g.run()
		// (a) the whole log passes Check.
		if vs := Check(g.l.Events(0)); len(vs) != 0 {
			rt.Fatalf("violations: %v", vs)
		}
		// A crash mid-turn is repaired into a valid log with a matching
		// projection.
		added, err := Repair(g.l)
		if err != nil {
			rt.Fatal(err)
		}
		for _, ev := range added {
			g.record(ev)
		}
		if vs := Check(g.l.Events(0)); len(vs) != 0 {
			rt.Fatalf("violations after repair: %v", vs)
		}
		if _, open := g.l.Turn(); open {
			rt.Fatal("turn open after repair")
		}
		// A fork is allowed exactly at the stable points, and
		// StablePoint finds the last one at or before any seq.
		last := int64(-1)
		for at := int64(-1); at < g.l.Len(); at++ {
			if err := ForkPoint(g.l, at); (err == nil) != g.stableAt(at) {
				rt.Fatalf("ForkPoint(%d) = %v", at, err)
			}
			if g.stableAt(at) {
				last = at
			}
			if got := StablePoint(g.l, at); got != last {
				rt.Fatalf("StablePoint(%d) = %d, want %d", at, got, last)
			}
		}
		// (c) slices handed out earlier never changed.
		for i := range g.snaps {
			if !msgsEqual(g.snaps[i], g.snapsCopy[i]) {
				rt.Fatalf("Messages() result %d changed by a later append", i)
			}
		}
	})
}

// stableAt is ForkPoint's rule, computed by a linear scan.
func (g *gen) stableAt(at int64) bool {
	depth := 0
	for s := int64(0); s <= at; s++ {
		switch g.ps[s].(type) {
		case *TurnStart, *CompactionStart:
			depth++
		case *TurnEnd, *CompactionEnd:
			depth--
		}
	}
	return depth == 0
}
