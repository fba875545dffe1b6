package main

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	sdk "github.com/coder/acp-go-sdk"

	"github.com/reinhq/rein/store/jsonl"
	"github.com/reinhq/rein/store/memstore"
	"github.com/reinhq/rein/tui"
)

// The last request/header of a session file names its model, however far
// back it is, past lines that only quote one and a torn last line.
func TestLastRequestModel(t *testing.T) {
	st, err := jsonl.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	path := st.Path("s1")
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	header := `{"v":1,"id":"s1","cwd":"/w","createdAt":"2026-12-01T00:00:00.000Z"}` + "\n"
	line := func(seq int, typ, data string) string {
		return `{"seq":` + strconv.Itoa(seq) + `,"type":"` + typ + `","time":"2026-12-01T00:00:00.000Z","data":` + data + "}\n"
	}
	req := func(seq int, model string) string {
		return line(seq, "request/header", `{"turn":1,"step":1,"reason":"initial","model":"`+model+`","system":"","tools":[],"params":{}}`)
	}
	var b strings.Builder
	b.WriteString(header)
	b.WriteString(req(0, "scripted:first.json"))
	b.WriteString(req(1, "scripted:second.json"))
	// A megabyte of later lines, the last quoting a header: read past.
	pad := strings.Repeat("x", 1000)
	for i := range 1100 {
		b.WriteString(line(2+i, "user/message", `{"content":"`+pad+`","source":{"kind":"user"}}`))
	}
	b.WriteString(line(1102, "user/message", `{"content":"{\"seq\":9,\"type\":\"request/header\",\"model\":\"fake\"}","source":{"kind":"user"}}`))
	b.WriteString(`{"seq":1103,"type":"request/header","time":"2026-12-01T00:00:00.000Z","data":{"turn":1,"model":"torn`) // no newline
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	if got := lastRequestModel(st, "s1"); got != "scripted:second.json" {
		t.Errorf("last model %q, want scripted:second.json", got)
	}
	if got := lastRequestModel(st, "missing"); got != "" {
		t.Errorf("missing session: %q", got)
	}
	if got := lastRequestModel(memstore.New(memstore.Options{}), "s1"); got != "" {
		t.Errorf("another store: %q", got)
	}
	// Only the header line: no request yet.
	if err := os.WriteFile(path, []byte(header), 0o600); err != nil {
		t.Fatal(err)
	}
	if got := lastRequestModel(st, "s1"); got != "" {
		t.Errorf("no request: %q", got)
	}
}

// The terminal UI resumes a session on the model of its last request, as
// 'rein run --session' does, unless --model chose one for the run; a
// model that cannot be used now leaves the configured one, with a notice.
func TestTUIResumeKeepsSessionModel(t *testing.T) {
	repo := secureEnv(t)
	t.Chdir(repo)
	dir := t.TempDir()
	first, second := filepath.Join(dir, "first.json"), filepath.Join(dir, "second.json")
	writeFile(t, first, `{"calls": [{"reply": {"text": ["one"]}}]}`)
	writeFile(t, second, `{"calls": []}`)
	var stdout, stderr bytes.Buffer
	if code := Main([]string{"run", "--model", "scripted:" + first, "--output", "json", "hi"}, strings.NewReader(""), &stdout, &stderr); code != 0 {
		t.Fatalf("run: exit %d: %s", code, stderr.String())
	}
	id := strings.Split(strings.SplitN(stdout.String(), `"session":"`, 2)[1], `"`)[0]

	// open opens the session in a UI started with args, and closes it
	// again: what it ran on, and the notice it showed.
	open := func(args ...string) (model, notice string) {
		t.Helper()
		a := setupApp(t, repo, io.Discard, args...)
		st, err := a.openStore()
		if err != nil {
			t.Fatal(err)
		}
		o := &tuiOpener{a: a, st: st, rules: &alwaysRules{a: a, face: "the terminal UI"}, ws: newWorkspaces(a)}
		s, err := o.open(context.Background(), tui.OpenRequest{SessionID: id})
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Agent.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		s.Close()
		return s.Model, s.Notice
	}
	t.Setenv("REIN_MODEL", "scripted:"+second)
	if m, n := open(); m != "scripted:"+first || n != "" {
		t.Errorf("resumed on %q (notice %q), want the session's scripted:%s", m, n, first)
	}
	if m, _ := open("--model", "scripted:"+second); m != "scripted:"+second {
		t.Errorf("with --model: resumed on %q, want scripted:%s", m, second)
	}
	if err := os.Remove(first); err != nil {
		t.Fatal(err)
	}
	if m, n := open(); m != "scripted:"+second || !strings.Contains(n, "cannot be used now") {
		t.Errorf("session's model gone: resumed on %q, notice %q", m, n)
	}
}

// rein acp loads a session on the model of its last request too: the
// second process has another model configured, whose empty script would
// fail the prompt.
func TestACPLoadKeepsSessionModel(t *testing.T) {
	e := newACPEnv(t)
	e.write("a.json", `{"calls": [{"reply": {"text": ["from a"]}}]}`)
	e.write("b.json", `{"calls": []}`)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	p := e.start(&rpcTranscript{}, sdk.ClientCapabilities{}, "--model", "scripted:a.json")
	ns, err := p.conn.NewSession(ctx, sdk.NewSessionRequest{Cwd: e.work, McpServers: []sdk.McpServer{}})
	if err != nil {
		t.Fatal(err)
	}
	acpPrompt(t, ctx, p, ns.SessionId, "first")
	p.stop(t)

	e.env = append(e.env, "REIN_MODEL=scripted:b.json")
	p = e.start(&rpcTranscript{}, sdk.ClientCapabilities{})
	if _, err := p.conn.LoadSession(ctx, sdk.LoadSessionRequest{SessionId: ns.SessionId, Cwd: e.work, McpServers: []sdk.McpServer{}}); err != nil {
		t.Fatal(err)
	}
	acpPrompt(t, ctx, p, ns.SessionId, "second")
	p.stop(t)
	b, err := os.ReadFile(filepath.Join(e.home, "sessions", string(ns.SessionId)+".jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	if n := bytes.Count(b, []byte(`"model":"scripted:a.json"`)); n != 2 {
		t.Errorf("%d requests on scripted:a.json, want both:\n%s", n, b)
	}
}

// initialize offers images in prompts when the configured model takes
// them, as the catalog says, and not otherwise.
func TestACPImagesFollowTheModel(t *testing.T) {
	e := newACPEnv(t)
	e.write("a.json", `{"calls": []}`)
	for model, want := range map[string]bool{"scripted:a.json": true, "anthropic:claude-sonnet-4-5": true, "deepseek:deepseek-chat": false} {
		p := e.start(&rpcTranscript{}, sdk.ClientCapabilities{}, "--model", model)
		if got := p.init.AgentCapabilities.PromptCapabilities.Image; got != want {
			t.Errorf("%s: initialize offers images: %v, want %v", model, got, want)
		}
		p.stop(t)
	}
}
