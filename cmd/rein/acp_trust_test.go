package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	sdk "github.com/coder/acp-go-sdk"
)

// acpPrompt runs one prompt in session sid and fails the test unless the
// turn ended normally.
func acpPrompt(t *testing.T, ctx context.Context, p *acpProc, sid sdk.SessionId, text string) {
	t.Helper()
	r, err := p.conn.Prompt(ctx, sdk.PromptRequest{SessionId: sid, Prompt: []sdk.ContentBlock{sdk.TextBlock(text)}})
	if err != nil {
		t.Fatalf("prompt %q: %v\nstderr:\n%s", text, err, p.stderr)
	}
	if r.StopReason != sdk.StopReasonEndTurn {
		t.Fatalf("prompt %q: stop reason %s\nstderr:\n%s", text, r.StopReason, p.stderr)
	}
}

// An editor's session masks rein's keys like 'rein run' does: a key in the
// prompt, in a file the model reads and in the model's answer never reaches
// the session file.
func TestACPSessionMasksKeys(t *testing.T) {
	e := newACPEnv(t)
	e.env = append(e.env, "DEEPSEEK_API_KEY="+userKey)
	e.write(".env", "DEEPSEEK_API_KEY="+userKey+"\n")
	e.write("script.json", `{"calls": [
  {"reply": {"toolCalls": [{"name": "read", "arguments": {"file_path": ".env"}}]}},
  {"expect": {"contains": ["sk-…cdef"]}, "reply": {"text": ["the key is `+userKey+`"]}}
]}`)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	p := e.start(&rpcTranscript{}, sdk.ClientCapabilities{}, "--model", "scripted:script.json")
	ns, err := p.conn.NewSession(ctx, sdk.NewSessionRequest{Cwd: e.work, McpServers: []sdk.McpServer{}})
	if err != nil {
		t.Fatal(err)
	}
	acpPrompt(t, ctx, p, ns.SessionId, "my key is "+userKey+", check .env")
	p.stop(t)
	b, err := os.ReadFile(filepath.Join(e.home, "sessions", string(ns.SessionId)+".jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(b, []byte(userKey)) || bytes.Contains(b, []byte(userKey[:12])) {
		t.Errorf("the session file holds the key:\n%s", b)
	}
	if n := bytes.Count(b, []byte("sk-…cdef")); n < 3 {
		t.Errorf("the key is masked %d times, want the prompt, the read and the answer:\n%s", n, b)
	}
}
