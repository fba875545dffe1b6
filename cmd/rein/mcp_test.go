package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	sdk "github.com/coder/acp-go-sdk"
	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// testMCPServer is the stdio MCP server the scripts start (as the command
// "rein-test-mcp"): echo (annotated read-only), note (writes note.txt in
// its working directory; not read-only), and instructions. With --hang it
// never answers.
func testMCPServer() {
	fmt.Fprintln(os.Stderr, "rein-test-mcp: up")
	if len(os.Args) > 1 && os.Args[1] == "--hang" {
		select {} // never answers initialize
	}
	s := mcpsdk.NewServer(&mcpsdk.Implementation{Name: "rein-test-mcp", Version: "0.1"}, &mcpsdk.ServerOptions{Instructions: "Notes go through the note tool."})
	schema := json.RawMessage(`{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}`)
	text := func(req *mcpsdk.CallToolRequest) string {
		var a struct{ Text string }
		_ = json.Unmarshal(req.Params.Arguments, &a)
		return a.Text
	}
	s.AddTool(&mcpsdk.Tool{Name: "echo", Description: "Echo text.", InputSchema: schema, Annotations: &mcpsdk.ToolAnnotations{ReadOnlyHint: true}},
		func(_ context.Context, req *mcpsdk.CallToolRequest) (*mcpsdk.CallToolResult, error) {
			return &mcpsdk.CallToolResult{Content: []mcpsdk.Content{&mcpsdk.TextContent{Text: "echo: " + text(req)}}}, nil
		})
	s.AddTool(&mcpsdk.Tool{Name: "note", Description: "Write a note.", InputSchema: schema},
		func(_ context.Context, req *mcpsdk.CallToolRequest) (*mcpsdk.CallToolResult, error) {
			if err := os.WriteFile("note.txt", []byte(text(req)), 0o644); err != nil {
				return &mcpsdk.CallToolResult{IsError: true, Content: []mcpsdk.Content{&mcpsdk.TextContent{Text: err.Error()}}}, nil
			}
			return &mcpsdk.CallToolResult{Content: []mcpsdk.Content{&mcpsdk.TextContent{Text: "noted"}}}, nil
		})
	if err := s.Run(context.Background(), &mcpsdk.StdioTransport{}); err != nil {
		fmt.Fprintln(os.Stderr, "rein-test-mcp:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// An editor's MCP servers (session/new mcpServers) start with the session:
// the model calls one's tool through the ordinary path, the approval of a
// tool not annotated read-only goes to the editor, and closing the session
// stops the server.
func TestACPSessionMCPServers(t *testing.T) {
	e := newACPEnv(t)
	e.write("script.json", `{"calls": [
  {"expect": {"tools": ["read", "write", "edit", "glob", "grep", "ls", "bash", "todo", "mcp__editor__echo", "mcp__editor__note"], "system": "Notes go through the note tool."},
   "reply": {"toolCalls": [{"name": "mcp__editor__echo", "arguments": {"text": "hi"}}, {"name": "mcp__editor__note", "arguments": {"text": "from the editor"}}]}},
  {"expect": {"contains": ["echo: hi", "noted"]}, "reply": {"text": ["done"]}}
]}`)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	rec := &rpcTranscript{}
	p := e.start(rec, sdk.ClientCapabilities{}, "--model", "scripted:script.json")
	ns, err := p.conn.NewSession(ctx, sdk.NewSessionRequest{Cwd: e.work, McpServers: []sdk.McpServer{
		{Stdio: &sdk.McpServerStdio{Name: "editor", Command: "rein-test-mcp", Args: []string{}, Env: []sdk.EnvVariable{}}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	p.client.answers = []string{"allow"} // note is not read-only: the editor is asked
	r, err := p.conn.Prompt(ctx, sdk.PromptRequest{SessionId: ns.SessionId, Prompt: []sdk.ContentBlock{sdk.TextBlock("use the editor's server")}})
	if err != nil {
		t.Fatalf("prompt: %v\nstderr:\n%s", err, p.stderr)
	}
	if r.StopReason != sdk.StopReasonEndTurn {
		t.Fatalf("stop reason %s\nstderr:\n%s", r.StopReason, p.stderr)
	}
	// The editor's servers are started like the user's own: in the home
	// directory, not in the workspace, whose files would choose their
	// code.
	if b, err := os.ReadFile(filepath.Join(e.root, "note.txt")); err != nil || string(b) != "from the editor" {
		t.Errorf("note.txt in home: %q %v", b, err)
	}
	if _, err := os.Stat(filepath.Join(e.work, "note.txt")); err == nil {
		t.Error("the editor's server ran in the workspace")
	}
	p.stop(t)
	log, _ := filepath.Glob(filepath.Join(e.home, "sessions", "*.mcp.log"))
	if len(log) != 1 {
		t.Fatalf("MCP logs %v", log)
	}
	if b, _ := os.ReadFile(log[0]); !strings.Contains(string(b), "[editor] rein-test-mcp: up") {
		t.Errorf("log:\n%s", b)
	}
	var asked bool
	for _, l := range rec.lines {
		asked = asked || strings.Contains(l, "session/request_permission") && strings.Contains(l, "mcp__editor__note")
	}
	if !asked {
		t.Error("the editor was not asked about mcp__editor__note")
	}
}
