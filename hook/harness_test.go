package hook_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/reinhq/rein/agent"
	"github.com/reinhq/rein/hook"
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

// testdata is the absolute path of the scripts.
func testdata(t *testing.T) string {
	t.Helper()
	p, err := filepath.Abs("testdata")
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// script returns a command running testdata/name with args (through sh, so
// the scripts need no exec bit).
func script(t *testing.T, name string, args ...string) string {
	t.Helper()
	cmd := "sh " + shq(filepath.Join(testdata(t), name))
	for _, a := range args {
		cmd += " " + shq(a)
	}
	return cmd
}

func shq(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// hk is one command hook in a test config.
type hk struct {
	event, matcher, command string
	timeout                 float64
}

// config builds and parses a settings document holding hooks.
func config(t *testing.T, hooks ...hk) *hook.Config {
	t.Helper()
	type handler struct {
		Type    string   `json:"type"`
		Command string   `json:"command"`
		Timeout *float64 `json:"timeout,omitempty"`
	}
	type group struct {
		Matcher string    `json:"matcher,omitempty"`
		Hooks   []handler `json:"hooks"`
	}
	m := map[string][]group{}
	for _, h := range hooks {
		hd := handler{Type: "command", Command: h.command}
		if h.timeout > 0 {
			hd.Timeout = &h.timeout
		}
		m[h.event] = append(m[h.event], group{Matcher: h.matcher, Hooks: []handler{hd}})
	}
	b, err := json.Marshal(map[string]any{"hooks": m})
	if err != nil {
		t.Fatal(err)
	}
	c, err := hook.Parse("test-settings.json", b)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// env is one agent run with command hooks, the scripted model and a
// memory store. On cleanup it closes the agent and checks the session
// invariant on the stored log.
type env struct {
	t     *testing.T
	st    store.Store
	model *scripted.Model
	a     *agent.Agent
	rt    hook.Runtime
	cfg   *hook.Config

	extra func(*agent.Hooks)

	mu      sync.Mutex
	notes   []string
	blocked []agent.Live
}

type envOpt func(*env, *agent.Config)

func withRuntime(f func(*hook.Runtime)) envOpt {
	return func(e *env, _ *agent.Config) { f(&e.rt) }
}

// withExtraHooks adds to the agent's chains after the bridge's functions.
func withExtraHooks(f func(*agent.Hooks)) envOpt {
	return func(e *env, _ *agent.Config) { e.extra = f }
}

func withAgentConfig(f func(*agent.Config)) envOpt {
	return func(_ *env, c *agent.Config) { f(c) }
}

// writeTool is a test tool named like rein's write: it records nothing and
// answers "wrote <file_path>".
func writeTool() tool.Tool {
	return &tool.Func{
		ToolSpec: llm.ToolSpec{Name: "write", Description: "test write", Parameters: json.RawMessage(`{"type":"object"}`)},
		ToolMode: tool.Exclusive,
		Body: func(_ context.Context, c tool.Call) (tool.Result, error) {
			var in struct {
				FilePath string `json:"file_path"`
			}
			_ = json.Unmarshal(c.Arguments, &in)
			return tool.TextResult("wrote " + in.FilePath), nil
		},
	}
}

// failTool always fails.
func failTool() tool.Tool {
	return &tool.Func{
		ToolSpec: llm.ToolSpec{Name: "fail", Description: "test fail", Parameters: json.RawMessage(`{"type":"object"}`)},
		Body: func(context.Context, tool.Call) (tool.Result, error) {
			return tool.Errorf(tool.CodeFailed, "it failed"), nil
		},
	}
}

func newEnv(t *testing.T, cfg *hook.Config, calls []scripted.Call, opts ...envOpt) *env {
	t.Helper()
	e := &env{t: t, st: memstore.New(memstore.Options{}), cfg: cfg}
	e.model = scriptedtest.New(t, calls...)
	reg, err := tool.NewRegistry(writeTool(), failTool())
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	e.rt = hook.Runtime{
		Cwd:            dir,
		Env:            []string{"PATH=" + os.Getenv("PATH")},
		TranscriptPath: func(id string) string { return "/transcripts/" + id + ".jsonl" },
		Notify: func(msg string) {
			e.mu.Lock()
			e.notes = append(e.notes, msg)
			e.mu.Unlock()
		},
	}
	ac := agent.Config{
		Store:     e.st,
		Provider:  e.model,
		Model:     "scripted:test",
		Tools:     reg,
		Cwd:       dir,
		SessionID: "s1",
		Clock:     agent.StepClock(t0, time.Millisecond),
		NewID:     agent.SequentialIDs(),
	}
	for _, o := range opts {
		o(e, &ac)
	}
	ac.Hooks = cfg.Hooks(e.rt)
	if e.extra != nil {
		e.extra(&ac.Hooks)
	}
	a, err := agent.New(context.Background(), ac)
	if err != nil {
		t.Fatal(err)
	}
	e.a = a
	a.Subscribe(context.Background(), func(l agent.Live) {
		if l.Type == agent.LiveBlocked {
			e.mu.Lock()
			e.blocked = append(e.blocked, l)
			e.mu.Unlock()
		}
	})
	t.Cleanup(func() {
		_ = a.Close(context.Background()) // may be closed already
		for _, v := range session.Check(e.events()) {
			t.Errorf("session invariant: %v", v)
		}
	})
	e.idle()
	return e
}

func (e *env) idle() {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := e.a.WhenIdle(ctx); err != nil {
		e.t.Fatalf("WhenIdle: %v", err)
	}
}

func (e *env) send(text string) {
	e.t.Helper()
	if _, err := e.a.Send(agent.Message{Content: llm.Text(text)}); err != nil {
		e.t.Fatal(err)
	}
	e.idle()
}

// close closes the agent, so that everything it recorded is durable.
func (e *env) close() {
	e.t.Helper()
	if err := e.a.Close(context.Background()); err != nil {
		e.t.Fatalf("Close: %v", err)
	}
}

// events returns the session's events: as stored or, for a new session the
// agent has not stored (nothing but hook/result records so far, which the
// agent holds until a durable event), as the agent holds them.
func (e *env) events() []session.Event {
	e.t.Helper()
	ld, err := e.st.Load(context.Background(), e.a.ID(), store.LoadOptions{})
	if errors.Is(err, store.ErrNotFound) && !e.a.Stored() {
		ctx, cancel := context.WithCancel(context.Background())
		cancel() // read what the log holds now, then stop
		var evs []session.Event
		for ev, err := range e.a.Events(ctx, 0) {
			if err != nil {
				break
			}
			evs = append(evs, ev)
		}
		return evs
	}
	if err != nil {
		e.t.Fatal(err)
	}
	return ld.Log.Events(0)
}

func (e *env) notesText() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return strings.Join(e.notes, "\n")
}

// hookResults returns the hook/result events.
func (e *env) hookResults() []*session.HookResult {
	var out []*session.HookResult
	for _, ev := range e.events() {
		if ev.Type == session.TypeHookResult {
			out = append(out, ev.MustDecode().(*session.HookResult))
		}
	}
	return out
}

// only returns the single hook/result, failing otherwise.
func (e *env) only() *session.HookResult {
	e.t.Helper()
	rs := e.hookResults()
	if len(rs) != 1 {
		e.t.Fatalf("want 1 hook/result, got %d: %s", len(rs), js(rs))
	}
	return rs[0]
}

func js(v any) string { b, _ := json.Marshal(v); return string(b) }

var durationRe = regexp.MustCompile(`"durationMs":\d+`)

// golden prints the stored log one event per line (seq type data, with
// durationMs zeroed) and compares it with testdata/<name>.golden.
func (e *env) golden(name string) {
	e.t.Helper()
	var b bytes.Buffer
	for _, ev := range e.events() {
		fmt.Fprintf(&b, "%d %s %s\n", ev.Seq, ev.Type, durationRe.ReplaceAll(ev.Data, []byte(`"durationMs":0`)))
	}
	path := filepath.Join("testdata", name+".golden")
	if *update {
		if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
			e.t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		e.t.Fatalf("%v (run with -update to create it)", err)
	}
	if !bytes.Equal(want, b.Bytes()) {
		e.t.Errorf("log differs from %s:\n--- want\n%s--- got\n%s", path, want, b.String())
	}
}

// kinds lists event types, user messages as u:TEXT (human) or
// c:SOURCE:TEXT, steering as s:SOURCE:TEXT, tool results with their code.
func kinds(evs []session.Event) []string {
	var out []string
	for _, ev := range evs {
		switch ev.Type {
		case session.TypeUserMessage:
			m := ev.MustDecode().(*session.UserMessage)
			if m.Source.IsUser() {
				out = append(out, "u:"+llm.PlainText(m.Content))
			} else {
				out = append(out, "c:"+m.Source.String()+":"+llm.PlainText(m.Content))
			}
		case session.TypeSteeringMessage:
			m := ev.MustDecode().(*session.SteeringMessage)
			out = append(out, "s:"+m.Source.String()+":"+llm.PlainText(m.Content))
		case session.TypeToolResult:
			r := ev.MustDecode().(*session.ToolResult)
			out = append(out, fmt.Sprintf("tool/result{%s}:%s", r.Code, llm.PlainText(r.Content)))
		case session.TypeHookResult:
			r := ev.MustDecode().(*session.HookResult)
			out = append(out, "hook/result "+r.Hook+" "+r.Decision)
		case session.TypeTurnEnd:
			out = append(out, "turn/end{"+ev.MustDecode().(*session.TurnEnd).Reason.String()+"}")
		case session.TypeAssistantChunk, session.TypeRequestHeader:
		default:
			out = append(out, string(ev.Type))
		}
	}
	return out
}

func expectKinds(t *testing.T, evs []session.Event, want ...string) {
	t.Helper()
	got := kinds(evs)
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("events:\n got: %q\nwant: %q", got, want)
	}
}

// model call helpers.
func say(text string) scripted.Call {
	return scripted.Call{Reply: scripted.Reply{Text: []string{text}}}
}

func callWrite(path string) scripted.Call {
	return scripted.Call{Reply: scripted.Reply{ToolCalls: []scripted.ToolCall{
		{ID: "c1", Name: "write", Arguments: `{"file_path":"` + path + `","content":"x"}`},
	}}}
}

// lastUser returns a Match that checks the request's last user-role text.
func lastUser(want string) func(*llm.Request) error {
	return func(r *llm.Request) error {
		for i := len(r.Messages) - 1; i >= 0; i-- {
			if r.Messages[i].Role == llm.RoleUser {
				if got := llm.PlainText(r.Messages[i].Content); got != want {
					return fmt.Errorf("last user message %q, want %q", got, want)
				}
				return nil
			}
		}
		return fmt.Errorf("no user message")
	}
}
