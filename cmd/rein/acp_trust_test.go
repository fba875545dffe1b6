package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
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

// rein acp decides each session's configuration from the session's own
// workspace, not from the directory rein acp started in: a session in an
// untrusted workspace gets neither the trusted start workspace's writable
// roots nor anything else of it, and its own workspace's deny rules apply.
func TestACPConfigurationPerWorkspace(t *testing.T) {
	e := newACPEnv(t)
	outside := filepath.Join(e.root, "outside")
	other := filepath.Join(e.root, "other")
	for _, d := range []string{outside, filepath.Join(other, ".git")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	e.write(".git/HEAD", "ref: refs/heads/main\n")
	e.write(".rein/config.toml", "[sandbox]\nwritable_roots = [\""+outside+"\"]\n")
	writeFile(t, filepath.Join(other, ".rein", "config.toml"), "[permissions]\ndeny = [\"write(denied.txt)\"]\n")
	trustCmd := exec.Command("rein", "trust")
	trustCmd.Dir, trustCmd.Env = e.work, e.env
	if out, err := trustCmd.CombinedOutput(); err != nil {
		t.Fatalf("rein trust: %v\n%s", err, out)
	}
	writes := func(files ...string) string {
		var calls []string
		for _, f := range files {
			calls = append(calls, `{"name": "write", "arguments": {"file_path": "`+f+`", "content": "x"}}`)
		}
		return `{"reply": {"toolCalls": [` + strings.Join(calls, ", ") + `]}}, {"reply": {"text": ["done"]}}`
	}
	e.write("script.json", `{"calls": [`+
		writes(filepath.Join(outside, "from-other"), "denied.txt", "ok.txt")+`, `+
		writes(filepath.Join(outside, "from-trusted"))+`]}`)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	p := e.start(&rpcTranscript{}, sdk.ClientCapabilities{}, "--model", "scripted:script.json")

	ns, err := p.conn.NewSession(ctx, sdk.NewSessionRequest{Cwd: other, McpServers: []sdk.McpServer{}})
	if err != nil {
		t.Fatal(err)
	}
	acpPrompt(t, ctx, p, ns.SessionId, "write in the other workspace")
	ns2, err := p.conn.NewSession(ctx, sdk.NewSessionRequest{Cwd: e.work, McpServers: []sdk.McpServer{}})
	if err != nil {
		t.Fatal(err)
	}
	acpPrompt(t, ctx, p, ns2.SessionId, "write in the trusted workspace")
	p.stop(t)

	if _, err := os.Stat(filepath.Join(outside, "from-other")); err == nil {
		t.Error("a session in the untrusted workspace wrote to the start workspace's writable root")
	}
	if _, err := os.Stat(filepath.Join(other, "denied.txt")); err == nil {
		t.Error("the session's own workspace's deny rule did not apply")
	}
	if _, err := os.Stat(filepath.Join(other, "ok.txt")); err != nil {
		t.Errorf("the session could not write in its own workspace: %v", err)
	}
	if _, err := os.Stat(filepath.Join(outside, "from-trusted")); err != nil {
		t.Errorf("the trusted workspace's writable root does not apply to its own session: %v", err)
	}
}

// session/set_mode changes what the tools may do, not only what the policy
// says: a session started in full-access mode and switched to read-only
// runs bash in rein's sandbox, not in the editor's terminal, and a switch
// to full-access hands bash to the terminal again.
func TestACPSetModeChangesConfinement(t *testing.T) {
	e := newACPEnv(t)
	e.write(".git/HEAD", "ref: refs/heads/main\n")
	e.write("script.json", `{"calls": [
  {"reply": {"toolCalls": [{"id": "c_ro", "name": "bash", "arguments": {"command": "echo in read-only"}}]}},
  {"reply": {"text": ["done"]}},
  {"reply": {"toolCalls": [{"id": "c_full", "name": "bash", "arguments": {"command": "echo in full-access"}}]}},
  {"reply": {"text": ["done"]}}
]}`)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	rec := &rpcTranscript{}
	p := e.start(rec, sdk.ClientCapabilities{Terminal: true}, "--model", "scripted:script.json", "--permission-mode", "full-access")
	ns, err := p.conn.NewSession(ctx, sdk.NewSessionRequest{Cwd: e.work, McpServers: []sdk.McpServer{}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.conn.SetSessionMode(ctx, sdk.SetSessionModeRequest{SessionId: ns.SessionId, ModeId: "read-only"}); err != nil {
		t.Fatal(err)
	}
	p.client.answers = []string{"allow"}
	acpPrompt(t, ctx, p, ns.SessionId, "in read-only")
	terminals := func() int {
		n := 0
		for _, l := range rec.lines {
			if strings.Contains(l, `"method":"terminal/create"`) {
				n++
			}
		}
		return n
	}
	if n := terminals(); n != 0 {
		t.Fatalf("read-only bash ran in the editor's terminal (%d terminals)", n)
	}
	if _, err := p.conn.SetSessionMode(ctx, sdk.SetSessionModeRequest{SessionId: ns.SessionId, ModeId: "full-access"}); err != nil {
		t.Fatal(err)
	}
	acpPrompt(t, ctx, p, ns.SessionId, "in full-access")
	if n := terminals(); n != 1 {
		t.Errorf("full-access bash: %d terminals, want 1", n)
	}
	p.stop(t)
	b, err := os.ReadFile(filepath.Join(e.home, "sessions", string(ns.SessionId)+".jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	var ro string
	for _, l := range strings.Split(string(b), "\n") {
		if strings.Contains(l, `"tool/result"`) && strings.Contains(l, `"c_ro"`) {
			ro = l
		}
	}
	if !strings.Contains(ro, `"sandboxed"`) {
		t.Errorf("the read-only call's result does not come from rein's bash tool:\n%s", ro)
	}
}
