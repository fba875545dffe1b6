package mcp

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// The test binary doubles as a stdio MCP server built with the go-sdk, for
// fault injection: REIN_MCP_TEST_SERVER holds comma-separated behaviours.
//
//	exit        write to stderr and exit 2 before answering
//	garbage     write a line that is not JSON-RPC, then serve
//	hang-init   read stdin, never answer
//	slowstart=MS  sleep before serving
//	badschema   tools/list carries a tool whose schema is not an object
//	child=FILE  start a grandchild (sleep) in the group, write its pid to FILE
//	pidfile=FILE  write the server's own pid to FILE
//	cwdfile=FILE  write the server's working directory to FILE
//
// Its tools: echo (read-only), add (read-only, anyOf schema), big, image,
// resource, fail (isError), crash (exits while answering), hang (never
// answers), progress, addtool (adds tool "extra": tools/list_changed).
const serverEnv = "REIN_MCP_TEST_SERVER"

func TestMain(m *testing.M) {
	if modes, ok := os.LookupEnv(serverEnv); ok {
		os.Exit(testServer(modes))
	}
	os.Exit(m.Run())
}

func modeValue(modes, key string) (string, bool) {
	for _, m := range strings.Split(modes, ",") {
		if k, v, _ := strings.Cut(m, "="); k == key {
			return v, true
		}
	}
	return "", false
}

func testServer(modes string) int {
	has := func(k string) bool { _, ok := modeValue(modes, k); return ok }
	if f, ok := modeValue(modes, "pidfile"); ok {
		_ = os.WriteFile(f, []byte(strconv.Itoa(os.Getpid())), 0o644)
	}
	if f, ok := modeValue(modes, "cwdfile"); ok {
		wd, _ := os.Getwd()
		_ = os.WriteFile(f, []byte(wd), 0o644)
	}
	if f, ok := modeValue(modes, "child"); ok {
		c := exec.Command("sleep", "1000")
		if err := c.Start(); err == nil {
			_ = os.WriteFile(f, []byte(strconv.Itoa(c.Process.Pid)), 0o644)
		}
	}
	if has("exit") {
		fmt.Fprintln(os.Stderr, "fatal: GITHUB_TOKEN is not set")
		return 2
	}
	if has("hang-init") {
		select {}
	}
	if ms, ok := modeValue(modes, "slowstart"); ok {
		n, _ := strconv.Atoi(ms)
		time.Sleep(time.Duration(n) * time.Millisecond)
	}
	if has("garbage") {
		fmt.Println("Server starting... (this line is not JSON-RPC)")
	}
	fmt.Fprintln(os.Stderr, "test server up, env TEST_SECRET_TOKEN="+os.Getenv("TEST_SECRET_TOKEN"))
	s := sdk.NewServer(&sdk.Implementation{Name: "rein-test-server", Version: "1.0"}, &sdk.ServerOptions{Instructions: "Call echo before anything else."})
	ro := &sdk.ToolAnnotations{ReadOnlyHint: true}
	obj := func(props string, required ...string) json.RawMessage {
		req, _ := json.Marshal(required)
		return json.RawMessage(`{"type":"object","properties":{` + props + `},"required":` + string(req) + `}`)
	}
	text := func(s string) *sdk.CallToolResult {
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: s}}}
	}
	args := func(req *sdk.CallToolRequest) map[string]any {
		var m map[string]any
		_ = json.Unmarshal(req.Params.Arguments, &m)
		return m
	}
	s.AddTool(&sdk.Tool{Name: "echo", Description: "Echo the message.", Annotations: ro, InputSchema: obj(`"message":{"type":"string"}`, "message")},
		func(_ context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			return text("echo: " + fmt.Sprint(args(req)["message"])), nil
		})
	s.AddTool(&sdk.Tool{Name: "add", Description: "Add a and b.", Annotations: ro,
		InputSchema: json.RawMessage(`{"$schema":"http://json-schema.org/draft-07/schema#","type":"object","anyOf":[{"properties":{"a":{"type":"number"},"b":{"type":"number"}},"required":["a","b"]},{"properties":{"a":{"type":"number"},"c":{"type":"number"}},"required":["a"]}]}`)},
		func(_ context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			a := args(req)
			x, _ := a["a"].(float64)
			y, _ := a["b"].(float64)
			return text(strconv.FormatFloat(x+y, 'f', -1, 64)), nil
		})
	s.AddTool(&sdk.Tool{Name: "big", Description: "A large result.", InputSchema: obj(`"n":{"type":"integer"}`)},
		func(_ context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			n, _ := args(req)["n"].(float64)
			var b strings.Builder
			for i := 0; b.Len() < int(n); i++ {
				fmt.Fprintf(&b, "line %d\n", i)
			}
			return text(b.String()), nil
		})
	s.AddTool(&sdk.Tool{Name: "image", Description: "An image and an audio clip.", Annotations: ro, InputSchema: obj(``)},
		func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "here"}, &sdk.ImageContent{MIMEType: "image/png", Data: []byte("\x89PNG fake")},
				&sdk.AudioContent{MIMEType: "audio/wav", Data: []byte("RIFF")}}}, nil
		})
	s.AddTool(&sdk.Tool{Name: "resource", Description: "Embedded resources.", Annotations: ro, InputSchema: obj(``)},
		func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			return &sdk.CallToolResult{Content: []sdk.Content{
				&sdk.EmbeddedResource{Resource: &sdk.ResourceContents{URI: "file:///notes.txt", MIMEType: "text/plain", Text: "the notes"}},
				&sdk.EmbeddedResource{Resource: &sdk.ResourceContents{URI: "file:///x.bin", MIMEType: "application/octet-stream", Blob: []byte{1, 2, 3}}},
				&sdk.ResourceLink{URI: "file:///big.log", Name: "big.log", Description: "the log"},
			}}, nil
		})
	s.AddTool(&sdk.Tool{Name: "fail", Description: "Always fails.", InputSchema: obj(``)},
		func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			return &sdk.CallToolResult{IsError: true, Content: []sdk.Content{&sdk.TextContent{Text: "no such issue: 42"}}}, nil
		})
	s.AddTool(&sdk.Tool{Name: "crash", Description: "Exits.", InputSchema: obj(``)},
		func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			fmt.Fprintln(os.Stderr, "panic: crash requested")
			os.Exit(3)
			return nil, nil
		})
	s.AddTool(&sdk.Tool{Name: "hang", Description: "Never answers.", InputSchema: obj(``)},
		func(ctx context.Context, _ *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			<-ctx.Done()
			return nil, ctx.Err()
		})
	s.AddTool(&sdk.Tool{Name: "progress", Description: "Reports progress every 50 ms, n times.", Annotations: ro, InputSchema: obj(`"n":{"type":"integer"}`)},
		func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			n, _ := args(req)["n"].(float64)
			for i := range int(n) {
				time.Sleep(50 * time.Millisecond)
				_ = req.Session.NotifyProgress(ctx, &sdk.ProgressNotificationParams{ProgressToken: req.Params.GetProgressToken(), Progress: float64(i + 1), Total: n, Message: fmt.Sprintf("step %d", i+1)})
			}
			return text("finished"), nil
		})
	var added atomic.Bool
	s.AddTool(&sdk.Tool{Name: "addtool", Description: "Adds tool extra.", InputSchema: obj(``)},
		func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			if added.CompareAndSwap(false, true) {
				s.AddTool(&sdk.Tool{Name: "extra", Description: "Added later.", InputSchema: obj(``)},
					func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
						return text("extra ran"), nil
					})
			}
			return text("added"), nil
		})
	if has("badschema") {
		s.AddReceivingMiddleware(func(next sdk.MethodHandler) sdk.MethodHandler {
			return func(ctx context.Context, method string, req sdk.Request) (sdk.Result, error) {
				res, err := next(ctx, method, req)
				if lr, ok := res.(*sdk.ListToolsResult); ok && err == nil {
					lr.Tools = append(lr.Tools, &sdk.Tool{Name: "strange", Description: "bad", InputSchema: map[string]any{"type": "string"}},
						&sdk.Tool{Name: "dotted.name", Description: "ok", InputSchema: map[string]any{"type": "object"}})
				}
				return res, err
			}
		})
	}
	if err := s.Run(context.Background(), &sdk.StdioTransport{}); err != nil {
		fmt.Fprintln(os.Stderr, "server:", err)
		return 1
	}
	return 0
}

// testServerConfig returns a stdio server that runs this test binary as
// the test server with the given behaviours.
func testServerConfig(t testing.TB, name string, modes ...string) ServerConfig {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return ServerConfig{Name: name, Command: exe, Env: map[string]string{serverEnv: strings.Join(modes, ",")}}
}
