package agent_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"iter"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/reinhq/rein/agent"
	"github.com/reinhq/rein/llm"
	"github.com/reinhq/rein/llm/scripted"
	"github.com/reinhq/rein/llm/scripted/scriptedtest"
	"github.com/reinhq/rein/session"
	"github.com/reinhq/rein/store"
	"github.com/reinhq/rein/store/memstore"
	"github.com/reinhq/rein/tool"
)

var update = flag.Bool("update", false, "rewrite golden files")

var t0 = time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)

// harness drives one agent with the scripted model and a store, records
// live events, and on cleanup checks the session invariant, that every
// request equalled the durable log's projection at dispatch, and that the
// script was played out.
type harness struct {
	t     *testing.T
	ctx   context.Context
	st    store.Store
	model *scripted.Model
	cfg   agent.Config
	a     *agent.Agent

	mu   sync.Mutex
	live []agent.Live
}

type option func(*harness)

func withHooks(h agent.Hooks) option { return func(x *harness) { x.cfg.Hooks = h } }
func withTools(ts ...tool.Tool) option {
	return func(x *harness) {
		r, err := tool.NewRegistry(ts...)
		if err != nil {
			x.t.Fatal(err)
		}
		x.cfg.Tools = r
	}
}
func withStore(st store.Store) option { return func(x *harness) { x.st = st } }

func newHarness(t *testing.T, calls []scripted.Call, opts ...option) *harness {
	t.Helper()
	h := &harness{t: t, ctx: context.Background(), st: memstore.New(memstore.Options{})}
	h.model = scriptedtest.New(t, calls...)
	h.cfg = agent.Config{
		Model:     "scripted:test",
		System:    []agent.Section{{Name: "base", Text: "You are a test agent."}},
		Cwd:       t.TempDir(),
		SessionID: "s1",
		Clock:     agent.StepClock(t0, time.Millisecond),
		NewID:     agent.SequentialIDs(),
	}
	for _, o := range opts {
		o(h)
	}
	h.cfg.Store = h.st
	h.cfg.Provider = &checkedProvider{h: h, inner: h.model}
	a, err := agent.New(h.ctx, h.cfg)
	if err != nil {
		t.Fatal(err)
	}
	h.attach(a)
	return h
}

// attach makes a the harness's agent and registers the checks.
func (h *harness) attach(a *agent.Agent) {
	h.a = a
	a.Subscribe(h.ctx, func(l agent.Live) {
		h.mu.Lock()
		h.live = append(h.live, l)
		h.mu.Unlock()
	})
	h.t.Cleanup(func() {
		_ = a.Close(context.Background())
		h.checkInvariant(a.ID())
	})
}

func (h *harness) checkInvariant(id string) {
	h.t.Helper()
	ld, err := h.st.Load(context.Background(), id, store.LoadOptions{})
	if errors.Is(err, store.ErrNotFound) && !h.a.Stored() {
		return // a new session that never got a durable event
	}
	if err != nil {
		h.t.Errorf("load %s: %v", id, err)
		return
	}
	if vs := session.Check(ld.Log.Events(0)); len(vs) > 0 {
		for _, v := range vs {
			h.t.Errorf("invariant: %v", v)
		}
	}
}

// checkedProvider checks, at dispatch, that the request equals the
// projection of the durable log (model-visible means logged).
type checkedProvider struct {
	h     *harness
	inner llm.Provider
	off   bool
}

// checkedPreparer is a checkedProvider over an adapter that encodes ahead
// (llm.Preparer), so that the agent takes that path.
type checkedPreparer struct{ *checkedProvider }

func (p checkedPreparer) Prepare(req *llm.Request) (llm.Shared, error) {
	return p.inner.(llm.Preparer).Prepare(req)
}

// checked wraps inner in the request check, keeping its Prepare.
func checked(h *harness, inner llm.Provider) llm.Provider {
	c := &checkedProvider{h: h, inner: inner}
	if _, ok := inner.(llm.Preparer); ok {
		return checkedPreparer{c}
	}
	return c
}

func (p *checkedProvider) Name() string { return p.inner.Name() }

func (p *checkedProvider) Stream(ctx context.Context, req *llm.Request) iter.Seq[llm.Event] {
	if !p.off && req.System != agent.CompactionSystemPrompt {
		p.h.checkRequest(req)
	}
	return p.inner.Stream(ctx, req)
}

func (h *harness) checkRequest(req *llm.Request) {
	h.t.Helper()
	id := h.cfg.SessionID
	if h.a != nil {
		id = h.a.ID()
	}
	checkRequest(h.t.Errorf, h.st, id, req)
}

// checkRequest reports (through errorf) a request that differs from the
// projection of the durable log of session id, or from its last
// request/header: model-visible means logged, and persisted before the
// model sees it.
func checkRequest(errorf func(string, ...any), st store.Store, id string, req *llm.Request) {
	ld, err := st.Load(context.Background(), id, store.LoadOptions{})
	if err != nil {
		errorf("request check: load: %v", err)
		return
	}
	evs := ld.Log.Events(0)
	evs = evs[:len(evs)-len(ld.Repair)]
	fresh := session.NewLog(ld.Log.Header())
	var hdr *session.RequestHeader
	for _, ev := range evs {
		if err := fresh.AppendEvent(ev); err != nil {
			errorf("request check: rebuild: %v", err)
			return
		}
		if ev.Type == session.TypeRequestHeader {
			hdr = ev.MustDecode().(*session.RequestHeader)
		}
	}
	want := fresh.Messages()
	if !reflect.DeepEqual(norm(req.Messages), norm(want)) {
		errorf("request messages differ from the durable log's projection:\nrequest: %s\nlog:     %s", js(req.Messages), js(want))
	}
	if hdr == nil {
		errorf("request dispatched with no request/header in the durable log")
		return
	}
	if req.System != hdr.System || !reflect.DeepEqual(norm(req.Tools), norm(hdr.Tools)) || !strings.HasSuffix(hdr.Model, req.Model) || !reflect.DeepEqual(req.Params, hdr.Params) {
		errorf("request header differs from the logged request/header")
	}
}

func norm[T any](v T) any {
	b, _ := json.Marshal(v)
	var x any
	_ = json.Unmarshal(b, &x)
	return x
}

func js(v any) string { b, _ := json.Marshal(v); return string(b) }

func (h *harness) idle() {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(h.ctx, 10*time.Second)
	defer cancel()
	if err := h.a.WhenIdle(ctx); err != nil {
		h.t.Fatalf("WhenIdle: %v", err)
	}
}

func (h *harness) send(text string) string {
	h.t.Helper()
	id, err := h.a.Send(agent.Message{Content: llm.Text(text)})
	if err != nil {
		h.t.Fatalf("Send: %v", err)
	}
	return id
}

func (h *harness) inject(src, text string) {
	h.t.Helper()
	if err := h.a.Inject(ctxOf(src, text)); err != nil {
		h.t.Fatalf("Inject: %v", err)
	}
}

func ctxOf(src, text string) agent.AdditionalContext {
	return agent.AdditionalContext{Content: llm.Text(text), Source: session.Source{Kind: session.SourcePlugin, Name: src}}
}

// events returns the durable log as stored (none for a new session not
// stored yet).
func (h *harness) events() []session.Event {
	h.t.Helper()
	ld, err := h.st.Load(context.Background(), h.a.ID(), store.LoadOptions{})
	if errors.Is(err, store.ErrNotFound) && !h.a.Stored() {
		return nil
	}
	if err != nil {
		h.t.Fatalf("load: %v", err)
	}
	return ld.Log.Events(0)
}

func (h *harness) lives(typ agent.LiveType) []agent.Live {
	// Live events are delivered asynchronously: wait until the count of
	// this type has been stable for a few polls (or a deadline passes).
	deadline := time.Now().Add(500 * time.Millisecond)
	last, stable := -1, 0
	for {
		h.mu.Lock()
		var out []agent.Live
		for _, l := range h.live {
			if l.Type == typ {
				out = append(out, l)
			}
		}
		h.mu.Unlock()
		if len(out) == last {
			stable++
		} else {
			last, stable = len(out), 0
		}
		if (len(out) > 0 && stable >= 3) || time.Now().After(deadline) {
			return out
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// golden prints the stored log one event per line and compares it with
// testdata/<name>.golden.
func (h *harness) golden(name string) {
	h.t.Helper()
	goldenEvents(h.t, name, h.events())
}

func goldenEvents(t *testing.T, name string, evs []session.Event) {
	t.Helper()
	var b bytes.Buffer
	for _, ev := range evs {
		fmt.Fprintf(&b, "%d %s %s\n", ev.Seq, ev.Type, ev.Data)
	}
	path := filepath.Join("testdata", name+".golden")
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if !bytes.Equal(want, b.Bytes()) {
		t.Errorf("log differs from %s:\n--- want\n%s--- got\n%s", path, want, b.String())
	}
}

// types lists the event types of evs, with user messages shown as u:TEXT
// (source user), c:TEXT (other sources) and steering as s:TEXT.
func types(evs []session.Event) []string {
	var out []string
	for _, ev := range evs {
		switch ev.Type {
		case session.TypeUserMessage:
			m := ev.MustDecode().(*session.UserMessage)
			p := "c:"
			if m.Source.IsUser() {
				p = "u:"
			}
			out = append(out, p+llm.PlainText(m.Content))
		case session.TypeSteeringMessage:
			out = append(out, "s:"+llm.PlainText(ev.MustDecode().(*session.SteeringMessage).Content))
		case session.TypeToolCall:
			out = append(out, "tool/call "+ev.MustDecode().(*session.ToolCall).CallID)
		case session.TypeToolResult:
			r := ev.MustDecode().(*session.ToolResult)
			s := "tool/result " + r.CallID
			if r.Code != "" {
				s += "{" + r.Code + "}"
			}
			out = append(out, s)
		case session.TypeTurnEnd:
			out = append(out, "turn/end{"+ev.MustDecode().(*session.TurnEnd).Reason.String()+"}")
		case session.TypeAssistantMessage:
			m := ev.MustDecode().(*session.AssistantMessage)
			s := "assistant/message"
			if m.Interrupted {
				s += "{interrupted}"
			}
			out = append(out, s)
		default:
			out = append(out, string(ev.Type))
		}
	}
	return out
}

func expectTypes(t *testing.T, evs []session.Event, want ...string) {
	t.Helper()
	got := types(evs)
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("events:\n got: %q\nwant: %q", got, want)
	}
}

// texts renders request messages as role:text for comparisons.
func texts(msgs []llm.Message) []string {
	var out []string
	for _, m := range msgs {
		s := string(m.Role) + ":" + llm.PlainText(m.Content)
		if m.Role == llm.RoleTool {
			s = "tool:" + m.ToolCallID
		}
		if len(m.ToolCalls) > 0 {
			var ids []string
			for _, c := range m.ToolCalls {
				ids = append(ids, c.ID)
			}
			s += "[" + strings.Join(ids, ",") + "]"
		}
		out = append(out, s)
	}
	return out
}

// probe is a test tool: its body is a function of the call.
func probe(name string, mode tool.Mode, body func(ctx context.Context, c tool.Call) (tool.Result, error)) tool.Tool {
	if body == nil {
		body = func(ctx context.Context, c tool.Call) (tool.Result, error) {
			return tool.TextResult("ok " + c.ID), nil
		}
	}
	return &tool.Func{ToolSpec: llm.ToolSpec{Name: name, Description: "test tool", Parameters: json.RawMessage(`{"type":"object"}`)}, ToolMode: mode, Body: body}
}

func errorsf(format string, args ...any) error { return fmt.Errorf(format, args...) }
