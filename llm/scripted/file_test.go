package scripted_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/reinhq/rein/llm"
	"github.com/reinhq/rein/llm/scripted"
)

func TestLoadDemo(t *testing.T) {
	m, err := scripted.Load("testdata/demo.json")
	if err != nil {
		t.Fatal(err)
	}
	if m.DisplayName() != "demo" || m.Remaining() != 4 {
		t.Fatalf("DisplayName %q, Remaining %d", m.DisplayName(), m.Remaining())
	}
	sys := "You are rein."
	req := &llm.Request{System: sys, Messages: []llm.Message{{Role: llm.RoleUser, Content: llm.Text("What is in README.md?")}}}
	start := time.Now()
	evs := collect(m, t.Context(), req)
	if took := time.Since(start); took < 7*5*time.Millisecond {
		t.Fatalf("7 chunks with chunkDelayMs 5 took %v", took)
	}
	var args strings.Builder
	frags := 0
	for _, ev := range evs {
		if tc := ev.Delta.ToolCall; tc != nil {
			frags++
			args.WriteString(tc.Arguments)
		}
	}
	if ev := terminal(t, evs); ev.Type != llm.EventDone || ev.Finish != llm.FinishToolCalls {
		t.Fatalf("call 1 ended %+v", ev)
	}
	if args.String() != `{"file_path":"README.md"}` || frags != 3 {
		t.Fatalf("arguments %q in %d fragments", args.String(), frags)
	}

	ev := terminal(t, collect(m, t.Context(), req))
	wantCode(t, ev, llm.CodeRateLimit)
	if ev.Err.RetryAfter != 10*time.Millisecond || ev.Err.Status != 429 || ev.Err.Message != "slow down" {
		t.Fatalf("call 2 error %+v", ev.Err)
	}

	req.Messages = append(req.Messages,
		llm.Message{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{{ID: "call_read_1", Name: "read", Arguments: `{"file_path":"README.md"}`}}},
		llm.Message{Role: llm.RoleTool, ToolCallID: "call_read_1", Content: llm.Text("# rein\n")})
	ev = terminal(t, collect(m, t.Context(), req))
	if ev.Type != llm.EventDone || ev.Usage != (llm.Usage{Input: 120, Output: 8}) {
		t.Fatalf("call 3 ended %+v", ev)
	}

	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
	defer cancel()
	evs = collect(m, ctx, userReq("Now wait."))
	if len(evs) != 2 || evs[0].Delta.Text != "Waiting" {
		t.Fatalf("call 4: %s", dump(evs))
	}
	if err := m.Verify(); err != nil {
		t.Fatal(err)
	}
}

// TestDocExample keeps docs/scripted-model.md honest: its JSON example is
// testdata/demo.json, and every other JSON block in it parses.
func TestDocExample(t *testing.T) {
	doc, err := os.ReadFile("../../docs/scripted-model.md")
	if err != nil {
		t.Fatal(err)
	}
	demo, err := os.ReadFile("testdata/demo.json")
	if err != nil {
		t.Fatal(err)
	}
	blocks := regexp.MustCompile("(?s)```json\n(.*?)```").FindAllSubmatch(doc, -1)
	if len(blocks) == 0 {
		t.Fatal("no ```json block in docs/scripted-model.md")
	}
	found := false
	for i, b := range blocks {
		if bytes.Equal(b[1], demo) {
			found = true
		}
		if _, err := scripted.Parse(b[1]); err != nil {
			t.Errorf("json block %d: %v", i, err)
		}
	}
	if !found {
		t.Error("docs/scripted-model.md does not hold testdata/demo.json verbatim")
	}
}

func TestArguments(t *testing.T) {
	cases := map[string]string{
		`"{\"a\": 1}"`:              `{"a": 1}`, // a string is verbatim
		`"not json"`:                `not json`,
		`{ "a" : [1, 2], "b": {} }`: `{"a":[1,2],"b":{}}`,
		`[ 1, "x" ]`:                `[1,"x"]`,
		`null`:                      ``,
		`42`:                        `42`,
	}
	for in, want := range cases {
		m, err := scripted.Parse([]byte(`{"calls":[{"reply":{"toolCalls":[{"name":"f","arguments":` + in + `}]}}]}`))
		if err != nil {
			t.Fatalf("%s: %v", in, err)
		}
		evs := collect(m, t.Context(), userReq("q"))
		if got := evs[0].Delta.ToolCall.Arguments; got != want {
			t.Errorf("arguments %s streamed as %q, want %q", in, got, want)
		}
	}
}

func TestParseFull(t *testing.T) {
	m, err := scripted.Parse([]byte(`{"calls":[
		{"expect":{"lastUser":"q","contains":["q"],"messages":1,"tools":[],"system":""},
		 "reply":{"reasoning":["r"],"signature":"s","text":["t"],"finish":"max-tokens","usage":{"input":1,"output":2,"cacheRead":3,"cacheWrite":4,"reasoning":5}},
		 "delayMs":1,"chunkDelayMs":1}]}`))
	if err != nil {
		t.Fatal(err)
	}
	evs := collect(m, t.Context(), userReq("q"))
	want := []llm.Event{
		delta(llm.Delta{Reasoning: "r"}), delta(llm.Delta{Signature: "s"}), delta(llm.Delta{Text: "t"}),
		{Type: llm.EventDone, Finish: llm.FinishMaxTokens, Usage: llm.Usage{Input: 1, Output: 2, CacheRead: 3, CacheWrite: 4, Reasoning: 5}},
	}
	if !reflect.DeepEqual(evs, want) {
		t.Fatalf("got %s", dump(evs))
	}
	if err := m.Verify(); err != nil {
		t.Fatal(err)
	}
	// "tools": [] means "no tools", not "unchecked".
	m, _ = scripted.Parse([]byte(`{"calls":[{"expect":{"tools":[]}}]}`))
	wantCode(t, terminal(t, collect(m, t.Context(), &llm.Request{Tools: []llm.ToolSpec{{Name: "x"}}})), llm.CodeInvalidRequest)
	// An empty script expects no calls.
	m, err = scripted.Parse([]byte(`{"calls":[]}`))
	if err != nil || m.Verify() != nil {
		t.Fatalf("empty script: %v", err)
	}
}

func TestParseErrors(t *testing.T) {
	cases := []struct{ name, in, want string }{
		{"empty", ``, "empty"},
		{"not an object", `[]`, "cannot be a"},
		{"unknown top field", `{"calls":[],"modle":"x"}`, `unknown field "modle"`},
		{"missing calls", `{"model":"x"}`, "calls: required"},
		{"calls not a list", `{"calls":{}}`, "calls: a JSON object cannot be a"},
		{"unknown call field", `{"calls":[{},{"replay":{}}]}`, `calls[1]: unknown field "replay"`},
		{"unknown reply field", `{"calls":[{"reply":{"txt":["a"]}}]}`, `calls[0]: unknown field "txt"`},
		{"unknown tool call field", `{"calls":[{"reply":{"toolCalls":[{"name":"a","args":"{}"}]}}]}`, `calls[0]: unknown field "args"`},
		{"unknown usage field", `{"calls":[{"reply":{"usage":{"in":1}}}]}`, `calls[0]: unknown field "in"`},
		{"unknown expect field", `{"calls":[{"expect":{"last":"x"}}]}`, `calls[0]: unknown field "last"`},
		{"syntax", "{\"calls\": [\n  {\"reply\": }\n]}", "line 2, column 13"},
		{"truncated", `{"calls": [`, "unexpected end of JSON"},
		{"trailing", `{"calls": []} {}`, "trailing data"},
		{"wrong type", `{"calls":[{"reply":{"text":"hello"}}]}`, "calls[0]: reply.text: a JSON string cannot be a []string"},
		{"wrong delay type", `{"calls":[{"delayMs":"5"}]}`, "calls[0]: delayMs: a JSON string"},
		{"tool name", `{"calls":[{},{"reply":{"toolCalls":[{"id":"x"},{}]}}]}`, "calls[1].reply.toolCalls[0].name: required"},
		{"negative split", `{"calls":[{"reply":{"toolCalls":[{"name":"a","split":-1}]}}]}`, "calls[0].reply.toolCalls[0].split: must not be negative"},
		{"finish", `{"calls":[{"reply":{"finish":"done"}}]}`, `calls[0].reply.finish: unknown finish reason "done"`},
		{"error code missing", `{"calls":[{"error":{"message":"x"}}]}`, "calls[0].error.code: required"},
		{"error code unknown", `{"calls":[{"error":{"code":"ratelimit"}}]}`, `calls[0].error.code: unknown code "ratelimit"`},
		{"negative retry", `{"calls":[{"error":{"code":"rate-limit","retryAfterMs":-1}}]}`, "calls[0].error.retryAfterMs: must not be negative"},
		{"negative delay", `{"calls":[{"delayMs":-1}]}`, "calls[0].delayMs: must not be negative"},
		{"negative chunk delay", `{"calls":[{"chunkDelayMs":-1}]}`, "calls[0].chunkDelayMs: must not be negative"},
		{"negative messages", `{"calls":[{"expect":{"messages":-1}}]}`, "calls[0].expect.messages: must not be negative"},
		{"hang and error", `{"calls":[{"hang":true,"error":{"code":"server"}}]}`, "calls[0].error: a hanging call never fails"},
		{"hang and finish", `{"calls":[{"hang":true,"reply":{"finish":"stop"}}]}`, "calls[0].reply.finish: a hanging call never finishes"},
		{"bad arguments", `{"calls":[{"reply":{"toolCalls":[{"name":"a","arguments":{"x":}}]}}]}`, "line 1, column"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := scripted.Parse([]byte(tc.in))
			if err == nil {
				t.Fatalf("Parse(%s) succeeded", tc.in)
			}
			if !errors.Is(err, scripted.ErrInvalidScript) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Parse(%s) = %v, want ErrInvalidScript with %q", tc.in, err, tc.want)
			}
		})
	}
}

func TestLoadErrors(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.json")
	if err := os.WriteFile(bad, []byte(`{"calls":[{"reply":{"toolCalls":[{}]}}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := scripted.Load(bad)
	if !errors.Is(err, scripted.ErrInvalidScript) || !strings.HasPrefix(err.Error(), bad+": ") || !strings.Contains(err.Error(), "calls[0].reply.toolCalls[0].name") {
		t.Fatalf("Load = %v", err)
	}
	missing := filepath.Join(dir, "missing.json")
	if _, err := scripted.Load(missing); !errors.Is(err, os.ErrNotExist) || !strings.Contains(err.Error(), missing) {
		t.Fatalf("Load(missing) = %v", err)
	}
}
