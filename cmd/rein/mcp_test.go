package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
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
	s := sdk.NewServer(&sdk.Implementation{Name: "rein-test-mcp", Version: "0.1"}, &sdk.ServerOptions{Instructions: "Notes go through the note tool."})
	schema := json.RawMessage(`{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}`)
	text := func(req *sdk.CallToolRequest) string {
		var a struct{ Text string }
		_ = json.Unmarshal(req.Params.Arguments, &a)
		return a.Text
	}
	s.AddTool(&sdk.Tool{Name: "echo", Description: "Echo text.", InputSchema: schema, Annotations: &sdk.ToolAnnotations{ReadOnlyHint: true}},
		func(_ context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "echo: " + text(req)}}}, nil
		})
	s.AddTool(&sdk.Tool{Name: "note", Description: "Write a note.", InputSchema: schema},
		func(_ context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			if err := os.WriteFile("note.txt", []byte(text(req)), 0o644); err != nil {
				return &sdk.CallToolResult{IsError: true, Content: []sdk.Content{&sdk.TextContent{Text: err.Error()}}}, nil
			}
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "noted"}}}, nil
		})
	if err := s.Run(context.Background(), &sdk.StdioTransport{}); err != nil {
		fmt.Fprintln(os.Stderr, "rein-test-mcp:", err)
		os.Exit(1)
	}
	os.Exit(0)
}
