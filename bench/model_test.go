package bench

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

// The benchmarks' model server runs in a child process (this test binary
// again, with modelEnv set), so that its CPU, decoding every request, is
// not counted as rein's.
const modelEnv = "REIN_BENCH_MODEL"

// startModel starts the model server and returns its root URL and a stop
// function.
func startModel(tb testing.TB) (string, func()) {
	tb.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), modelEnv+"=1")
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		tb.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		tb.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	addr, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		cmd.Process.Kill()
		tb.Fatalf("model server: %v", err)
	}
	return "http://" + strings.TrimSpace(addr), func() {
		stdin.Close() // the server exits when its stdin closes
		cmd.Wait()
	}
}

// serveModel is the child: an OpenAI-compatible and Anthropic model that
// decodes every request in full and answers a request whose last message
// is a tool result with text, any other with one tool call, streamed in
// small deltas like a real model.
func serveModel() {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println(ln.Addr())
	go func() {
		io.Copy(io.Discard, os.Stdin)
		os.Exit(0)
	}()
	var n int
	http.Serve(ln, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Model    string `json:"model"`
			Messages []struct {
				Role    string          `json:"role"`
				Content json.RawMessage `json:"content"`
			} `json:"messages"`
			Tools []json.RawMessage `json:"tools"`
		}
		body, err := io.ReadAll(r.Body)
		if err == nil {
			err = json.Unmarshal(body, &req)
		}
		if err != nil || req.Model == "" || len(req.Messages) == 0 {
			http.Error(w, fmt.Sprintf(`{"error":{"type":"invalid_request_error","message":"bad request: %v"}}`, err), http.StatusBadRequest)
			return
		}
		last := req.Messages[len(req.Messages)-1]
		answer := last.Role == "tool" || strings.Contains(string(last.Content), `"type":"tool_result"`)
		anthropic := strings.HasSuffix(r.URL.Path, "/messages")
		n++
		w.Header().Set("Content-Type", "text/event-stream")
		bw := bufio.NewWriter(w)
		for _, f := range modelFrames(anthropic, answer, n, len(body)/4) {
			bw.WriteString(f)
		}
		bw.Flush()
	}))
}

// modelFrames is one response: 20 text deltas, or one tool call.
func modelFrames(anthropic, answer bool, n, tokens int) []string {
	var out []string
	data := func(event, s string) {
		if event != "" {
			out = append(out, "event: "+event+"\n")
		}
		out = append(out, "data: "+s+"\n\n")
	}
	args := strconv.Quote(`{"path":"src/main.go","limit":200}`)
	if anthropic {
		data("message_start", fmt.Sprintf(`{"type":"message_start","message":{"usage":{"input_tokens":%d,"cache_read_input_tokens":%d,"output_tokens":1}}}`, tokens/10, tokens-tokens/10))
		if answer {
			data("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`)
			for range 20 {
				data("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"the answer "}}`)
			}
		} else {
			data("content_block_start", fmt.Sprintf(`{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"toolu_%d","name":"read","input":{}}}`, n))
			data("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":`+args+`}}`)
		}
		data("content_block_stop", `{"type":"content_block_stop","index":0}`)
		stop := "tool_use"
		if answer {
			stop = "end_turn"
		}
		data("message_delta", `{"type":"message_delta","delta":{"stop_reason":"`+stop+`"},"usage":{"output_tokens":40}}`)
		data("message_stop", `{"type":"message_stop"}`)
		return out
	}
	if answer {
		for range 20 {
			data("", `{"choices":[{"index":0,"delta":{"content":"the answer "}}]}`)
		}
		data("", `{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`)
	} else {
		data("", fmt.Sprintf(`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_%d","type":"function","function":{"name":"read","arguments":%s}}]}}]}`, n, args))
		data("", `{"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}`)
	}
	data("", fmt.Sprintf(`{"choices":[],"usage":{"prompt_tokens":%d,"completion_tokens":40,"prompt_tokens_details":{"cached_tokens":%d}}}`, tokens, tokens-tokens/10))
	data("", "[DONE]")
	return out
}
