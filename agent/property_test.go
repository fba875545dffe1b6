package agent_test

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"math/rand/v2"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/reinhq/rein/agent"
	"github.com/reinhq/rein/llm"
	"github.com/reinhq/rein/llm/scripted"
	"github.com/reinhq/rein/session"
	"github.com/reinhq/rein/store"
	"github.com/reinhq/rein/store/memstore"
	"github.com/reinhq/rein/tool"
)

type opKind int

const (
	opSend opKind = iota
	opSteer
	opInject
	opCancel
	opCancelKeep
	opSleep
)

// TestPropertyInterleavings drives random interleavings of Send, Steer,
// Inject and Cancel from several goroutines against a scripted model with
// random tool batches, then checks: the invariant holds; every injected
// context appears exactly once; every Send/Steer ends as exactly one of a
// turn (or steering message), a block, or a discard; Close leaves no
// goroutine behind.
func TestPropertyInterleavings(t *testing.T) {
	base := runtime.NumGoroutine()
	rapid.Check(t, func(rt *rapid.T) {
		seed := rapid.Uint64().Draw(rt, "seed")
		workers := rapid.IntRange(1, 3).Draw(rt, "workers")
		plans := make([][]opKind, workers)
		for w := range plans {
			plans[w] = rapid.SliceOfN(rapid.SampledFrom([]opKind{opSend, opSteer, opInject, opInject, opCancel, opCancelKeep, opSleep}), 1, 8).Draw(rt, fmt.Sprintf("plan%d", w))
		}
		runInterleaving(rt, seed, plans)
	})
	// Every agent is closed; no goroutine may be left behind.
	deadline := time.Now().Add(2 * time.Second)
	for runtime.NumGoroutine() > base && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > base {
		buf := make([]byte, 1<<16)
		t.Errorf("%d goroutines left behind (base %d):\n%s", n-base, base, buf[:runtime.Stack(buf, true)])
	}
}

func runInterleaving(rt *rapid.T, seed uint64, plans [][]opKind) {
	rng := rand.New(rand.NewPCG(seed, 1))
	var rngMu sync.Mutex
	intn := func(n int) int { rngMu.Lock(); defer rngMu.Unlock(); return rng.IntN(n) }

	// A model that answers with random tool batches or text.
	var calls []scripted.Call
	for range 400 {
		calls = append(calls, scripted.Call{Respond: func(req *llm.Request) scripted.Reply {
			if intn(3) == 0 {
				n := 1 + intn(3)
				var tcs []scripted.ToolCall
				for k := range n {
					name := []string{"par", "excl"}[intn(2)]
					tcs = append(tcs, scripted.ToolCall{Name: name, Arguments: fmt.Sprintf(`{"k":%d}`, k)})
				}
				return scripted.Reply{ToolCalls: tcs}
			}
			return scripted.Reply{Text: []string{"a", "b"}}
		}})
	}
	st := memstore.New(memstore.Options{})
	model := &checking{inner: scripted.New(calls...), check: func(req *llm.Request) { checkRequest(rt.Errorf, st, "p", req) }}
	body := func(ctx context.Context, c tool.Call) (tool.Result, error) {
		if intn(4) == 0 {
			c.Env.AddContext(llm.Text("tool-ctx " + c.ID))
		}
		select {
		case <-time.After(time.Duration(intn(3)) * time.Millisecond):
		case <-ctx.Done():
			return tool.Errorf(tool.CodeAborted, "aborted"), nil
		}
		return tool.TextResult("ok"), nil
	}
	reg, _ := tool.NewRegistry(probe("par", tool.Parallel, body), probe("excl", tool.Exclusive, body))
	block := func(ctx context.Context, p agent.Prompt, next func(context.Context, agent.Prompt) (agent.Admission, error)) (agent.Admission, error) {
		if strings.HasSuffix(llm.PlainText(p.Message.Content), "7") {
			return agent.Admission{Block: true, Reason: "sevens are blocked"}, nil
		}
		return next(ctx, p)
	}
	a, err := agent.New(context.Background(), agent.Config{
		Store: st, Provider: model, Model: "scripted:prop", Tools: reg, SessionID: "p",
		Hooks: agent.Hooks{PromptAdmission: []agent.Hook[agent.Prompt, agent.Admission]{block}},
	})
	if err != nil {
		rt.Fatal(err)
	}
	var (
		mu        sync.Mutex
		blocked   = map[string]int{}
		discarded = map[string]int{}
	)
	closed := make(chan struct{})
	a.Subscribe(context.Background(), func(l agent.Live) {
		mu.Lock()
		defer mu.Unlock()
		switch l.Type {
		case agent.LiveClosed:
			close(closed)
		case agent.LiveBlocked:
			blocked[l.Message.ID]++
		case agent.LiveDiscarded:
			for _, m := range l.Messages {
				discarded[m.ID]++
			}
		}
	})
	var (
		submitted []string
		injected  []string
		wg        sync.WaitGroup
	)
	for w, plan := range plans {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i, op := range plan {
				text := fmt.Sprintf("w%d-%d", w, i)
				switch op {
				case opSend, opSteer:
					m := agent.Message{Content: llm.Text(text)}
					var id string
					var err error
					if op == opSend {
						id, err = a.Send(m)
					} else {
						id, err = a.Steer(m)
					}
					if err != nil {
						rt.Errorf("submit: %v", err)
						continue
					}
					mu.Lock()
					submitted = append(submitted, id)
					mu.Unlock()
				case opInject:
					if err := a.Inject(agent.AdditionalContext{Content: llm.Text("inj " + text), Source: session.Source{Kind: "plugin", Name: "p"}}); err != nil {
						rt.Errorf("inject: %v", err)
						continue
					}
					mu.Lock()
					injected = append(injected, "inj "+text)
					mu.Unlock()
				case opCancel:
					a.Cancel(session.CauseUser, agent.CancelOptions{})
				case opCancelKeep:
					a.Cancel(session.CauseUser, agent.CancelOptions{KeepInbox: true})
				case opSleep:
					time.Sleep(time.Duration(intn(3)) * time.Millisecond)
				}
			}
		}()
	}
	wg.Wait()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := a.WhenIdle(ctx); err != nil {
		rt.Fatalf("WhenIdle: %v", err)
	}
	if err := a.Close(ctx); err != nil {
		rt.Fatalf("Close: %v", err)
	}
	select { // every live event is delivered before agent/closed
	case <-closed:
	case <-ctx.Done():
		rt.Fatalf("no agent/closed")
	}
	var evs []session.Event
	ld, err := st.Load(context.Background(), "p", store.LoadOptions{})
	switch {
	case errors.Is(err, store.ErrNotFound) && !a.Stored():
		// Nothing but blocked or discarded prompts: no session.
	case err != nil:
		rt.Fatal(err)
	default:
		evs = ld.Log.Events(0)
		if len(ld.Repair) > 0 {
			rt.Fatalf("a closed agent left an open turn: %v", types(ld.Repair))
		}
	}
	if vs := session.Check(evs); len(vs) > 0 {
		rt.Fatalf("invariant: %v", vs)
	}
	// Every injected context exactly once.
	seen := map[string]int{}
	inTurn := map[string]int{}
	open := false
	for _, ev := range evs {
		switch ev.Type {
		case session.TypeTurnStart:
			open = true
			inTurn[ev.MustDecode().(*session.TurnStart).Trigger.MessageID]++
		case session.TypeTurnEnd:
			open = false
		case session.TypeUserMessage:
			m := ev.MustDecode().(*session.UserMessage)
			seen[llm.PlainText(m.Content)]++
		case session.TypeSteeringMessage:
			if !open {
				rt.Fatalf("steering outside a turn")
			}
			inTurn[ev.MustDecode().(*session.SteeringMessage).ID]++
		}
	}
	for _, text := range injected {
		if seen[text] != 1 {
			rt.Errorf("injected %q appears %d times", text, seen[text])
		}
	}
	// Every submitted message ends exactly once.
	mu.Lock()
	defer mu.Unlock()
	for _, id := range submitted {
		if n := inTurn[id] + blocked[id] + discarded[id]; n != 1 {
			rt.Errorf("message %s: turn/steering %d, blocked %d, discarded %d; want exactly one", id, inTurn[id], blocked[id], discarded[id])
		}
	}
}

// checking checks every request against the durable log before the model
// sees it.
type checking struct {
	inner llm.Provider
	check func(*llm.Request)
}

func (c *checking) Name() string { return c.inner.Name() }
func (c *checking) Stream(ctx context.Context, req *llm.Request) iter.Seq[llm.Event] {
	c.check(req)
	return c.inner.Stream(ctx, req)
}
