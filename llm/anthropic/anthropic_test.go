package anthropic

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
		n := min(11, len(fixture))
		w.Write(fixture[:n])
		w.(http.Flusher).Flush()
		fixture = fixture[n:]
	}
}

func newServer(t *testing.T, rp *replay) *Provider {
	t.Helper()
	srv := httptest.NewServer(rp)
	t.Cleanup(srv.Close)
	return New(Config{BaseURL: srv.URL + "/v1", APIKey: "sk-ant-test", HTTPClient: srv.Client(), IdleTimeout: 2 * time.Second})
}

func render(seq func(func(llm.Event) bool)) string {
	var b strings.Builder
	for ev := range seq {
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
	for _, name := range []string{"text", "thinking_tools", "error_event", "cut", "empty", "malformed", "max_tokens"} {
		t.Run(name, func(t *testing.T) {
			fx, err := os.ReadFile(filepath.Join("testdata", name+".sse"))
			if err != nil {
				t.Fatal(err)
			}
			rp := &replay{fixture: fx}
			p := newServer(t, rp)
			out := render(p.Stream(context.Background(), &llm.Request{Model: "claude-sonnet-4-5", Messages: []llm.Message{{Role: llm.RoleUser, Content: llm.Text("hi")}}}))
			checkTerminal(t, out)
			golden(t, name+".events", out)
			if rp.path != "/v1/messages" || rp.reqHdr.Get("X-Api-Key") != "sk-ant-test" || rp.reqHdr.Get("Anthropic-Version") != Version {
				t.Errorf("request went to %q with headers %v", rp.path, rp.reqHdr)
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
		{401, nil, `{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"},"request_id":"req_1"}`, llm.CodeAuth, 0},
		{403, nil, `{"type":"error","error":{"type":"permission_error","message":"no access"}}`, llm.CodeAuth, 0},
		{429, http.Header{"Retry-After": {"7"}}, `{"type":"error","error":{"type":"rate_limit_error","message":"Number of request tokens has exceeded your per-minute rate limit"}}`, llm.CodeRateLimit, 7 * time.Second},
		{400, nil, `{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 208310 tokens > 200000 maximum"}}`, llm.CodeContextOverflow, 0},
		{400, nil, `{"type":"error","error":{"type":"invalid_request_error","message":"messages.1.content.0.tool_result: unexpected tool_use_id"}}`, llm.CodeInvalidRequest, 0},
		{413, nil, `{"type":"error","error":{"type":"request_too_large","message":"Request exceeds the maximum allowed number of bytes."}}`, llm.CodeContextOverflow, 0},
		{500, nil, `{"type":"error","error":{"type":"api_error","message":"Internal server error"}}`, llm.CodeServer, 0},
		{529, nil, `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`, llm.CodeOverloaded, 0},
	}
	for _, c := range cases {
		rp := &replay{status: c.status, header: c.header, fixture: []byte(c.body)}
		p := newServer(t, rp)
		var evs []llm.Event
		for ev := range p.Stream(context.Background(), &llm.Request{Model: "m", Messages: []llm.Message{{Role: llm.RoleUser, Content: llm.Text("hi")}}}) {
			evs = append(evs, ev)
		}
		if len(evs) != 1 || evs[0].Type != llm.EventError || evs[0].Err.Code != c.want || evs[0].Err.Status != c.status || evs[0].Err.RetryAfter != c.retry {
			t.Errorf("status %d: got %+v, want one %s error", c.status, evs, c.want)
		}
	}
}

func TestCancelAndWatchdog(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":1}}}\n\n"+
			"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n"+
			"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"a\"}}\n\n")
		w.(http.Flusher).Flush()
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	defer srv.Close()
	defer close(release)
	req := &llm.Request{Model: "m", Messages: []llm.Message{{Role: llm.RoleUser, Content: llm.Text("hi")}}}

	p := New(Config{BaseURL: srv.URL, HTTPClient: srv.Client(), IdleTimeout: 5 * time.Second})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var got []string
	for ev := range p.Stream(ctx, req) {
		if ev.Type == llm.EventDelta {
			got = append(got, ev.Delta.Text)
			cancel()
			continue
		}
		got = append(got, string(ev.Err.Code))
	}
	if strings.Join(got, ",") != "a,canceled" {
		t.Fatalf("cancel: got %v", got)
	}

	p = New(Config{BaseURL: srv.URL, HTTPClient: srv.Client(), IdleTimeout: 100 * time.Millisecond})
	out := render(p.Stream(context.Background(), req))
	if out != "delta {\"text\":\"a\"}\nerror timeout status=0 retry=0s: no data from the provider for 100ms\n" {
		t.Fatalf("watchdog: %s", out)
	}
}

func f64(v float64) *float64 { return &v }

// history has consecutive user messages, signed and unsigned reasoning,
// parallel tool calls and results (one an error with an image), a steer
// after the results, and a final user message.
func history() *llm.Request {
	return &llm.Request{
		Model:  "claude-sonnet-4-5",
		System: "You are rein.",
		Tools: []llm.ToolSpec{
			{Name: "read", Description: "Read a file.", Parameters: json.RawMessage(`{"type":"object","properties":{"file_path":{"type":"string"}},"required":["file_path"]}`)},
			{Name: "now", Description: "The time.", Parameters: json.RawMessage(`{"type":"object"}`)},
		},
		Messages: []llm.Message{
			{Role: llm.RoleUser, Content: llm.Text("Why does <CI> fail?")},
			{Role: llm.RoleUser, Content: llm.Text("<runtime>cwd=/w</runtime>")},
			{Role: llm.RoleAssistant, Content: []llm.Part{{Type: llm.PartReasoning, Text: "Read the log.", Signature: "sig-1"}, {Type: llm.PartText, Text: "Reading."}}, ToolCalls: []llm.ToolCall{
				{ID: "toolu_1", Name: "read", Arguments: `{"file_path": "ci.log"}`},
				{ID: "toolu_2", Name: "now", Arguments: ``},
			}},
			{Role: llm.RoleTool, ToolCallID: "toolu_1", Content: llm.Text("FAIL TestX")},
			{Role: llm.RoleTool, ToolCallID: "toolu_2", Content: []llm.Part{{Type: llm.PartText, Text: "clock broken"}, {Type: llm.PartImage, MediaType: "image/png", Data: "iVBORw0KGgo="}}, IsError: true},
			{Role: llm.RoleUser, Content: llm.Text("(steer) look at TestX only")},
			{Role: llm.RoleAssistant, Content: []llm.Part{{Type: llm.PartReasoning, Text: "from deepseek, unsigned"}, {Type: llm.PartText, Text: "TestX fails because…"}}},
			{Role: llm.RoleUser, Content: llm.Text("Thanks. Fix it.")},
			{Role: llm.RoleUser, Content: []llm.Part{}},
		},
		Params: llm.Params{MaxTokens: 2048, Temperature: f64(1), ThinkingBudget: 4000},
	}
}

func TestRequestBody(t *testing.T) {
	req := history()
	before, _ := json.Marshal(req)
	rp := &replay{fixture: mustRead(t, "text.sse")}
	p := newServer(t, rp)
	render(p.Stream(context.Background(), req))
	var pretty bytes.Buffer
	if err := json.Indent(&pretty, rp.body, "", "  "); err != nil {
		t.Fatal(err)
	}
	golden(t, "request.golden.json", pretty.String()+"\n")
	if after, _ := json.Marshal(req); !bytes.Equal(before, after) {
		t.Fatal("the adapter modified the request")
	}
	if n := bytes.Count(rp.body, []byte(`"cache_control"`)); n != 4 {
		t.Fatalf("%d cache breakpoints, want 4", n)
	}
	nc := New(Config{NoCache: true})
	b, err := nc.Body(req)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(b, []byte("cache_control")) {
		t.Fatal("NoCache still sent breakpoints")
	}
	if _, err := nc.Body(&llm.Request{}); err == nil {
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
