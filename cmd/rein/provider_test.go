package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/reinhq/rein/config"
	"github.com/reinhq/rein/llm/mock"
	"github.com/reinhq/rein/llm/sse"
)

// TestKnobsReachARealAdapter runs rein run against the mock model server
// through the OpenAI-compatible adapter: the output limit (the catalog's
// by default, the flag's when given), the reasoning effort and the headers
// go out on the wire, and --stream-idle-timeout abandons a stalled stream,
// which is retried and reported on stderr.
func TestKnobsReachARealAdapter(t *testing.T) {
	srv, err := mock.Start(mock.Script{Replies: []mock.Reply{
		{Text: "first answer"},
		{Fault: mock.FaultStall, Text: "this stalls half way", After: 2},
		{Text: "second answer"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	dir := t.TempDir()
	t.Setenv("REIN_HOME", filepath.Join(dir, "home"))
	t.Setenv("XDG_CONFIG_HOME", filepath.Join(dir, "config"))
	t.Setenv("HOME", dir)
	t.Setenv("OPENAI_API_KEY", "sk-mock-0123456789abcdef")
	t.Setenv("OPENAI_BASE_URL", srv.URL+"/v1")
	t.Chdir(dir)
	if err := os.MkdirAll(filepath.Join(dir, "config", "rein"), 0o755); err != nil {
		t.Fatal(err)
	}
	// The user's own config: its headers apply without any trust.
	cfg := "[providers.openai-compatible]\nheaders = { X-Team = \"core\" }\n"
	if err := os.WriteFile(filepath.Join(dir, "config", "rein", "config.toml"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}

	run := func(args ...string) (string, string, int) {
		var stdout, stderr bytes.Buffer
		code := Main(append([]string{"run", "--model", "openai-compatible:m1"}, args...), strings.NewReader(""), &stdout, &stderr)
		return stdout.String(), stderr.String(), code
	}
	out, errOut, code := run("hello")
	if code != 0 || out != "first answer\n" {
		t.Fatalf("exit %d, stdout %q, stderr %s", code, out, errOut)
	}
	out, errOut, code = run("--stream-idle-timeout", "300ms", "--max-output-tokens", "1234", "--reasoning-effort", "low", "again")
	if code != 0 || out != "second answer\n" {
		t.Fatalf("exit %d, stdout %q (want only the final attempt), stderr %s", code, out, errOut)
	}
	if !regexp.MustCompile(`(?m)^rein: the request timed out: no data from the provider for 300ms; retry 1/5 in \d\.\d s$`).MatchString(errOut) {
		t.Errorf("stderr does not report the stalled stream's retry:\n%s", errOut)
	}

	reqs := srv.Requests()
	if len(reqs) != 3 {
		t.Fatalf("%d requests, want 3", len(reqs))
	}
	var first, second struct {
		MaxTokens       int    `json:"max_tokens"`
		ReasoningEffort string `json:"reasoning_effort"`
	}
	if err := json.Unmarshal(reqs[0].Body, &first); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(reqs[2].Body, &second); err != nil {
		t.Fatal(err)
	}
	// openai-compatible models the catalog does not know: the provider's
	// default output limit, 8192.
	if first.MaxTokens != 8192 || first.ReasoningEffort != "" {
		t.Errorf("first request: max_tokens %d, reasoning_effort %q; want the catalog's limit and no effort", first.MaxTokens, first.ReasoningEffort)
	}
	if second.MaxTokens != 1234 || second.ReasoningEffort != "low" {
		t.Errorf("second request: max_tokens %d, reasoning_effort %q; want the flags'", second.MaxTokens, second.ReasoningEffort)
	}
	if got := reqs[0].Header.Get("X-Team"); got != "core" {
		t.Errorf("X-Team header %q, want core", got)
	}
}

// TestStreamIdleDefault: the idle timeout config show reports as the
// default is the one the adapters' transport applies.
func TestStreamIdleDefault(t *testing.T) {
	if config.DefaultStreamIdleTimeout != sse.DefaultIdleTimeout {
		t.Errorf("config.DefaultStreamIdleTimeout = %v, llm/sse applies %v", config.DefaultStreamIdleTimeout, sse.DefaultIdleTimeout)
	}
}
