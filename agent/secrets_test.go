package agent_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"strings"
	"testing"

	"github.com/reinhq/rein/agent"
	"github.com/reinhq/rein/llm"
	"github.com/reinhq/rein/llm/scripted"
	"github.com/reinhq/rein/redact"
	"github.com/reinhq/rein/session"
	"github.com/reinhq/rein/store"
	"github.com/reinhq/rein/store/jsonl"
	"github.com/reinhq/rein/store/memstore"
	"github.com/reinhq/rein/tool"
)

func withConfig(f func(*agent.Config)) option { return func(x *harness) { f(&x.cfg) } }

// titleAfterAdmission titles the session from the first admitted prompt,
// from the outside of the admission chain, as rein run does.
func titleAfterAdmission(ctx context.Context, p agent.Prompt, next func(context.Context, agent.Prompt) (agent.Admission, error)) (agent.Admission, error) {
	adm, err := next(ctx, p)
	if err == nil && !adm.Block {
		_ = p.Agent.SetTitle("title: " + llm.PlainText(p.Message.Content))
	}
	return adm, err
}

// recordAndBlock records a hook/result (as a command hook does) and blocks
// prompts holding "secret".
func recordAndBlock(ctx context.Context, p agent.Prompt, next func(context.Context, agent.Prompt) (agent.Admission, error)) (agent.Admission, error) {
	block := strings.Contains(llm.PlainText(p.Message.Content), "secret")
	dec := "pass"
	if block {
		dec = "block"
	}
	_ = p.Agent.RecordHookResult(session.HookResult{Point: "PromptAdmission", Hook: "test#1", Decision: dec, Stderr: "checked"})
	if block {
		return agent.Admission{Block: true, Reason: "looks like a secret"}, nil
	}
	return next(ctx, p)
}

// A prompt blocked in a new session leaves nothing in the store: no
// session, no title, not even the hook's record.
func TestBlockedPromptLeavesNoSession(t *testing.T) {
	st := memstore.New(memstore.Options{})
	h := newHarness(t, nil, withStore(st), withHooks(agent.Hooks{PromptAdmission: []agent.Hook[agent.Prompt, agent.Admission]{titleAfterAdmission, recordAndBlock}}))
	h.send("my secret is hunter2")
	h.idle()
	if err := h.a.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if h.a.Stored() {
		t.Fatal("Stored after a blocked prompt")
	}
	if infos, err := st.List(context.Background()); err != nil || len(infos) != 0 {
		t.Fatalf("sessions after a blocked prompt: %+v %v", infos, err)
	}
	if _, err := st.Load(context.Background(), h.a.ID(), store.LoadOptions{}); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Load: %v", err)
	}
	if b := h.lives(agent.LiveBlocked); len(b) != 1 {
		t.Fatalf("blocked events %+v", b)
	}
}

// Records held before the first durable event are written ahead of it, in
// order; the title lands only once admission allowed the prompt.
func TestRecordsHeldUntilFirstEvent(t *testing.T) {
	h := newHarness(t, []scripted.Call{scripted.Answer("ok")},
		withHooks(agent.Hooks{PromptAdmission: []agent.Hook[agent.Prompt, agent.Admission]{titleAfterAdmission, recordAndBlock}}))
	h.send("a secret")
	h.idle()
	if h.a.Stored() || len(h.events()) != 0 {
		t.Fatal("stored after a blocked prompt")
	}
	h.send("hello")
	h.idle()
	if !h.a.Stored() {
		t.Fatal("not stored after a turn")
	}
	expectTypes(t, h.events()[:3], "hook/result", "hook/result", "turn/start")
	ld, err := h.st.Load(context.Background(), h.a.ID(), store.LoadOptions{})
	if err != nil || ld.Log.Header().Title != "title: hello" {
		t.Fatalf("title %q, %v", ld.Log.Header().Title, err)
	}
	// Once stored, a title is an event.
	if err := h.a.SetTitle("renamed"); err != nil {
		t.Fatal(err)
	}
	h.idle()
	if evs := h.events(); evs[len(evs)-1].Type != session.TypeSessionTitle {
		t.Fatalf("last event %s", evs[len(evs)-1].Type)
	}
}

func TestNewRefusesATakenID(t *testing.T) {
	st := memstore.New(memstore.Options{})
	h := newHarness(t, nil, withStore(st))
	h.inject("ci", "A")
	h.idle()
	_, err := agent.New(context.Background(), agent.Config{Store: st, Provider: scripted.New(), SessionID: h.a.ID()})
	if !errors.Is(err, store.ErrExists) {
		t.Fatalf("New with a taken id: %v", err)
	}
}

const testKey = "sk-test-0123456789abcdefWXYZ"

// A key that reaches the agent (a pasted prompt, a tool's output, a
// provider error echoing it) is masked in every event before it is stored,
// in live events and hook inputs, and in the agent's log lines.
func TestSecretsMaskedBeforeTheLog(t *testing.T) {
	st, err := jsonl.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	var hookSaw string
	echo := probe("env", tool.Parallel, func(ctx context.Context, c tool.Call) (tool.Result, error) {
		return tool.TextResult("DEEPSEEK_API_KEY=" + testKey), nil
	})
	h := newHarness(t, []scripted.Call{
		scripted.UseTools(scripted.ToolCall{ID: "c1", Name: "env", Arguments: `{}`}),
		scripted.Failure(llm.CodeAuth, "Incorrect API key provided: "+testKey),
	}, withStore(st), withTools(echo), withConfig(func(c *agent.Config) {
		c.Redactor = redact.New(testKey)
		c.Logger = slog.New(slog.NewTextHandler(&logs, nil))
		c.Hooks.RequestError = []agent.Hook[agent.RequestErrorInfo, agent.Retry]{
			func(ctx context.Context, in agent.RequestErrorInfo, next func(context.Context, agent.RequestErrorInfo) (agent.Retry, error)) (agent.Retry, error) {
				hookSaw = in.Err.Message
				return agent.Retry{}, errors.New("giving up on " + in.Err.Message)
			},
		}
	}))
	h.send("use this key: " + testKey)
	h.idle()
	if err := h.a.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	file, err := os.ReadFile(st.Path(h.a.ID()))
	if err != nil {
		t.Fatal(err)
	}
	for what, text := range map[string]string{"session file": string(file), "log lines": logs.String(), "RequestError hook": hookSaw} {
		if strings.Contains(text, testKey) || strings.Contains(text, "0123456789") {
			t.Errorf("%s hold the key:\n%s", what, text)
		}
	}
	if strings.Count(string(file), redact.Mask(testKey)) != 3 {
		t.Errorf("want the mask in the prompt, the tool result and the turn's error:\n%s", file)
	}
	if !strings.Contains(logs.String(), "giving up on Incorrect API key provided: "+redact.Mask(testKey)) {
		t.Errorf("log lines: %s", logs.String())
	}
	errs := h.lives(agent.LiveError)
	if len(errs) != 1 || strings.Contains(errs[0].Err.Error(), testKey) || !strings.Contains(errs[0].Err.Error(), redact.Mask(testKey)) {
		t.Fatalf("agent/error: %+v", errs)
	}
}
