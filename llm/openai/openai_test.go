package openai

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/reinhq/rein/llm"
)

var update = flag.Bool("update", false, "rewrite golden files")

// replay serves the fixture in small writes with flushes so the client
// sees events split across reads, and records the last request.
type replay struct {
	mu      sync.Mutex
	fixture []byte
	status  int
	header  http.Header
	body    []byte
	reqHdr  http.Header
	path    string
}

func (rp *replay) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	rp.mu.Lock()
	rp.body, rp.reqHdr, rp.path = b, r.Header.Clone(), r.URL.Path
	fixture, status := rp.fixture, rp.status
	for k, v := range rp.header {
		w.Header()[k] = v
	}
	rp.mu.Unlock()
	if status != 0 {
		w.WriteHeader(status)
		w.Write(fixture)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	for len(fixture) > 0 {
		n := min(7, len(fixture))
		w.Write(fixture[:n])
		w.(http.Flusher).Flush()
		fixture = fixture[n:]
	}
}

func newServer(t *testing.T, rp *replay) (*Provider, *httptest.Server) {
	t.Helper()
	srv := httptest.NewServer(rp)
	t.Cleanup(srv.Close)
	p := New(Config{Name: "deepseek", BaseURL: srv.URL + "/v1/", APIKey: "sk-test", HTTPClient: srv.Client(), IdleTimeout: 2 * time.Second, ReasoningContent: true})
	return p, srv
}

// render prints a stream one event per line.
func render(seq func(func(llm.Event) bool)) string {
	var b strings.Builder
	n := 0
	for ev := range seq {
		n++
		switch ev.Type {
		case llm.EventDelta:
			d, _ := json.Marshal(ev.Delta)
			fmt.Fprintf(&b, "delta %s\n", d)
		case llm.EventDone:
			u, _ := json.Marshal(ev.Usage)
			fmt.Fprintf(&b, "done %s %s\n", ev.Finish, u)
		case llm.EventError:
			fmt.Fprintf(&b, "error %s status=%d retry=%s: %s\n", ev.Err.Code, ev.Err.Status, ev.Err.RetryAfter, ev.Err.Message)
		default:
			fmt.Fprintf(&b, "bad event type %d\n", ev.Type)
		}
	}
	return b.String()
}

func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update)", err)
	}
	if got != string(want) {
		t.Errorf("%s mismatch\n--- got\n%s--- want\n%s", name, got, want)
	}
}

// checkTerminal asserts the stream contract: deltas, then exactly one
// terminal event, last.
func checkTerminal(t *testing.T, out string) {
	t.Helper()
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	for i, l := range lines {
		term := strings.HasPrefix(l, "done ") || strings.HasPrefix(l, "error ")
		if term != (i == len(lines)-1) {
			t.Fatalf("terminal event misplaced at line %d:\n%s", i, out)
		}
	}
}

func TestFixtures(t *testing.T) {
	for _, name := range []string{"text", "reasoning", "tools_split", "parallel", "ollama_tools", "length", "malformed", "cut", "empty", "nothing", "stream_error", "filtered"} {
		t.Run(name, func(t *testing.T) {
			fx, err := os.ReadFile(filepath.Join("testdata", name+".sse"))
			if err != nil {
				t.Fatal(err)
			}
			rp := &replay{fixture: fx}
			p, _ := newServer(t, rp)
			out := render(p.Stream(context.Background(), &llm.Request{Model: "deepseek-chat", Messages: []llm.Message{{Role: llm.RoleUser, Content: llm.Text("hi")}}}))
			checkTerminal(t, out)
			golden(t, name+".events", out)
			if rp.path != "/v1/chat/completions" || rp.reqHdr.Get("Authorization") != "Bearer sk-test" {
				t.Errorf("request went to %q with auth %q", rp.path, rp.reqHdr.Get("Authorization"))
			}
		})
	}
}

func TestHTTPErrors(t *testing.T) {
	cases := []struct {
		status int
		header http.Header
		body   string
		want   llm.Code
		retry  time.Duration
	}{
		{401, nil, `{"error":{"message":"Authentication Fails (no such user)","type":"authentication_error","param":null,"code":"invalid_request_error"}}`, llm.CodeAuth, 0},
		{429, http.Header{"Retry-After": {"2"}}, `{"error":{"message":"Rate limit reached for requests","type":"requests","param":null,"code":"rate_limit_exceeded"}}`, llm.CodeRateLimit, 2 * time.Second},
		{400, nil, `{"error":{"message":"This model's maximum context length is 131072 tokens. However, you requested 131500 tokens (131500 in the messages, 0 in the completion). Please reduce the length of the messages or completion.","type":"invalid_request_error","param":null,"code":"invalid_request_error"}}`, llm.CodeContextOverflow, 0},
		{400, nil, `{"error":{"message":"Invalid schema for function 'read'","type":"invalid_request_error","param":"tools[0].function.parameters","code":"invalid_function_parameters"}}`, llm.CodeInvalidRequest, 0},
		{500, nil, `{"error":{"message":"internal","type":"server_error"}}`, llm.CodeServer, 0},
		{503, http.Header{"Retry-After": {"1"}}, `{"error":{"message":"Server overloaded, please retry shortly."}}`, llm.CodeOverloaded, time.Second},
	}
	for _, c := range cases {
		rp := &replay{status: c.status, header: c.header, fixture: []byte(c.body)}
		p, _ := newServer(t, rp)
		var evs []llm.Event
		for ev := range p.Stream(context.Background(), &llm.Request{Model: "m", Messages: []llm.Message{{Role: llm.RoleUser, Content: llm.Text("hi")}}}) {
			evs = append(evs, ev)
		}
		if len(evs) != 1 || evs[0].Type != llm.EventError || evs[0].Err.Code != c.want || evs[0].Err.Status != c.status || evs[0].Err.RetryAfter != c.retry {
			t.Errorf("status %d: got %+v, want one %s error", c.status, evs, c.want)
			if len(evs) == 1 && evs[0].Err != nil {
				t.Logf("err: %+v", *evs[0].Err)
			}
		}
	}
}

func TestCancelAndStopEarly(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, `data: {"choices":[{"index":0,"delta":{"content":"a"}}]}`+"\n\n")
		w.(http.Flusher).Flush()
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	defer srv.Close()
	defer close(release)
	p := New(Config{BaseURL: srv.URL, HTTPClient: srv.Client(), IdleTimeout: 5 * time.Second})
	req := &llm.Request{Model: "m", Messages: []llm.Message{{Role: llm.RoleUser, Content: llm.Text("hi")}}}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var got []string
	start := time.Now()
	for ev := range p.Stream(ctx, req) {
		if ev.Type == llm.EventDelta {
			got = append(got, ev.Delta.Text)
			cancel()
			continue
		}
		got = append(got, string(ev.Err.Code))
	}
	if strings.Join(got, ",") != "a,canceled" || time.Since(start) > 2*time.Second {
		t.Fatalf("cancel: got %v after %v", got, time.Since(start))
	}

	// Breaking out of the loop closes the response without hanging.
	for range p.Stream(context.Background(), req) {
		break
	}

	// The idle watchdog.
	p = New(Config{BaseURL: srv.URL, HTTPClient: srv.Client(), IdleTimeout: 100 * time.Millisecond})
	out := render(p.Stream(context.Background(), req))
	if !strings.HasSuffix(out, "error timeout status=0 retry=0s: no data from the provider for 100ms\n") {
		t.Fatalf("watchdog: %s", out)
	}
}

func f64(v float64) *float64 { return &v }

// history is a request with consecutive user messages, reasoning, parallel
// tool calls and their results, an image, tools and params.
func history() *llm.Request {
	return &llm.Request{
		Model:  "deepseek-reasoner",
		System: "You are rein.",
		Tools: []llm.ToolSpec{
			{Name: "read", Description: "Read a file.", Parameters: json.RawMessage(`{"type":"object","properties":{"file_path":{"type":"string"}},"required":["file_path"]}`)},
			{Name: "now", Description: "The time.", Parameters: json.RawMessage(`{"type":"object"}`)},
		},
		Messages: []llm.Message{
			{Role: llm.RoleUser, Content: llm.Text("Why does CI fail?")},
			{Role: llm.RoleUser, Content: llm.Text("<runtime>cwd=/w</runtime>")},
			{Role: llm.RoleAssistant, Content: []llm.Part{{Type: llm.PartReasoning, Text: "Read the log."}}, ToolCalls: []llm.ToolCall{
				{ID: "c1", Name: "read", Arguments: `{"file_path":"ci.log"}`},
				{ID: "c3", Name: "read", Arguments: `{"file_path":"shot.png"}`},
				{ID: "c2", Name: "now", Arguments: ``},
			}},
			{Role: llm.RoleTool, ToolCallID: "c1", Content: llm.Text("FAIL TestX")},
			{Role: llm.RoleTool, ToolCallID: "c3", Content: []llm.Part{{Type: llm.PartImage, MediaType: "image/png", Data: "AAAA"}}},
			{Role: llm.RoleTool, ToolCallID: "c2", Content: []llm.Part{{Type: llm.PartText, Text: "noon"}, {Type: llm.PartImage, MediaType: "image/png", Data: "iVBORw0KGgo="}}, IsError: true},
			{Role: llm.RoleUser, Content: llm.Text("(steer) look at TestX only")},
			{Role: llm.RoleAssistant, Content: []llm.Part{{Type: llm.PartReasoning, Text: "Done."}, {Type: llm.PartText, Text: "TestX fails because…"}}},
			{Role: llm.RoleUser, Content: []llm.Part{{Type: llm.PartText, Text: "And this?"}, {Type: llm.PartImage, MediaType: "image/jpeg", Data: "/9j/"}}},
		},
		Params: llm.Params{MaxTokens: 4096, Temperature: f64(0.2), ReasoningEffort: "high"},
	}
}

func TestRequestBody(t *testing.T) {
	req := history()
	before, _ := json.Marshal(req)
	rp := &replay{fixture: mustRead(t, "text.sse")}
	p, _ := newServer(t, rp)
	render(p.Stream(context.Background(), req))
	var pretty bytes.Buffer
	if err := json.Indent(&pretty, rp.body, "", "  "); err != nil {
		t.Fatal(err)
	}
	golden(t, "request.golden.json", pretty.String()+"\n")
	if after, _ := json.Marshal(req); !bytes.Equal(before, after) {
		t.Fatal("the adapter modified the request")
	}

	// OpenAI proper: max_completion_tokens, no reasoning_content.
	o := New(Config{MaxTokensField: "max_completion_tokens"})
	b, err := o.Body(req)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(b, []byte(`"max_completion_tokens":4096`)) || bytes.Contains(b, []byte("reasoning_content")) {
		t.Fatalf("openai body: %s", b)
	}
	if _, err := o.Body(&llm.Request{}); err == nil {
		t.Fatal("a request without a model was accepted")
	}
}

func mustRead(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}
