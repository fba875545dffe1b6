package catalog

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/reinhq/rein/llm"
	"github.com/reinhq/rein/llm/mock"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestResolveErrors(t *testing.T) {
	cases := []struct {
		spec string
		env  map[string]string
		want error
		says string
	}{
		{"deepseek-chat", nil, ErrBadSpec, "provider:model"},
		{"deepseek:", nil, ErrBadSpec, ""},
		{"gemini:pro", nil, ErrUnknownProvider, "gemini"},
		{"deepseek:deepseek-chat", nil, ErrMissingKey, "DEEPSEEK_API_KEY"},
		{"openai:gpt-4.1", map[string]string{"DEEPSEEK_API_KEY": "x"}, ErrMissingKey, "OPENAI_API_KEY"},
		{"anthropic:claude-sonnet-4-5", nil, ErrMissingKey, "ANTHROPIC_API_KEY"},
		{"openai-compatible:llama", nil, ErrMissingBaseURL, "OPENAI_BASE_URL"},
	}
	for _, c := range cases {
		_, _, err := Resolve(c.spec, Config{}, env(c.env))
		if !errors.Is(err, c.want) || !strings.Contains(err.Error(), c.says) {
			t.Errorf("Resolve(%q) = %v, want %v naming %q", c.spec, err, c.want, c.says)
		}
	}
	// Config overrides a missing environment.
	if _, _, err := Resolve("anthropic:claude-sonnet-4-5", Config{Providers: map[string]ProviderConfig{"anthropic": {APIKey: "k"}}}, nil); err != nil {
		t.Fatal(err)
	}
	// Ollama needs no key.
	if p, _, err := Resolve("ollama:qwen3", Config{}, nil); err != nil || p.Name() != "ollama" {
		t.Fatal(p, err)
	}
}

func TestLimits(t *testing.T) {
	_, m, err := Resolve("deepseek:deepseek-reasoner", Config{}, env(map[string]string{"DEEPSEEK_API_KEY": "k"}))
	if err != nil || m != (Model{Provider: "deepseek", Name: "deepseek-reasoner", ContextWindow: 131072, MaxOutput: 65536, Price: deepseek}) {
		t.Fatalf("%+v %v", m, err)
	}
	cfg := Config{Models: map[string]Model{"deepseek:deepseek-reasoner": {ContextWindow: 1000000}, "openai:my-finetune": {ContextWindow: 5000, MaxOutput: 100}}}
	if m := Lookup("deepseek", "deepseek-reasoner", cfg); m.ContextWindow != 1000000 || m.MaxOutput != 65536 {
		t.Fatalf("override: %+v", m)
	}
	if m := Lookup("openai", "my-finetune", cfg); m.ContextWindow != 5000 || m.MaxOutput != 100 {
		t.Fatalf("extension: %+v", m)
	}
	if m := Lookup("openai", "unlisted", Config{}); m.ContextWindow != 128000 || m.MaxOutput != 16384 || m.Spec() != "openai:unlisted" {
		t.Fatalf("default: %+v", m)
	}
}

// Which models take images: the providers' that do, listed or not, and the
// scripted model; not those of providers that may serve text-only models.
func TestImages(t *testing.T) {
	for spec, want := range map[string]bool{
		"anthropic:claude-sonnet-4-5": true,
		"anthropic:unlisted":          true,
		"openai:gpt-4.1":              true,
		"scripted:any.json":           true,
		"deepseek:deepseek-chat":      false,
		"ollama:llama3":               false,
		"openai-compatible:m":         false,
		"nobody:m":                    false,
	} {
		name, model, _ := strings.Cut(spec, ":")
		if got := Lookup(name, model, Config{}).Images; got != want {
			t.Errorf("%s takes images: %v, want %v", spec, got, want)
		}
	}
}

// TestWiring resolves each provider against the mock server and checks what
// the adapter sends: path, credentials and provider-specific fields.
func TestWiring(t *testing.T) {
	s, err := mock.Start(mock.Script{Replies: []mock.Reply{{Text: "ok"}}, Loop: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	host := strings.TrimPrefix(s.URL, "http://")
	e := env(map[string]string{
		"DEEPSEEK_API_KEY": "ds-key", "DEEPSEEK_BASE_URL": s.URL + "/v1",
		"OPENAI_API_KEY": "oa-key", "OPENAI_BASE_URL": s.URL + "/v1",
		"ANTHROPIC_API_KEY": "an-key", "ANTHROPIC_BASE_URL": s.URL,
		"OLLAMA_HOST": host,
	})
	req := &llm.Request{Messages: []llm.Message{
		{Role: llm.RoleUser, Content: llm.Text("hi")},
		{Role: llm.RoleAssistant, Content: []llm.Part{{Type: llm.PartReasoning, Text: "think"}}, ToolCalls: []llm.ToolCall{{ID: "c", Name: "t", Arguments: "{}"}}},
		{Role: llm.RoleTool, ToolCallID: "c", Content: llm.Text("r")},
	}, Params: llm.Params{MaxTokens: 100}}
	cases := []struct {
		spec, path, authHeader, auth string
		has, lacks                   string
	}{
		{"deepseek:deepseek-chat", "/v1/chat/completions", "Authorization", "Bearer ds-key", `"reasoning_content":"think"`, "max_completion_tokens"},
		{"openai:gpt-4.1", "/v1/chat/completions", "Authorization", "Bearer oa-key", `"max_completion_tokens":100`, "reasoning_content"},
		{"openai-compatible:llama", "/v1/chat/completions", "Authorization", "Bearer oa-key", `"max_tokens":100`, "reasoning_content"},
		{"ollama:qwen3", "/v1/chat/completions", "Authorization", "", `"model":"qwen3"`, "reasoning_content"},
		{"anthropic:claude-sonnet-4-5", "/v1/messages", "X-Api-Key", "an-key", `"max_tokens":100`, "reasoning_content"},
	}
	for i, c := range cases {
		p, m, err := Resolve(c.spec, Config{}, e)
		if err != nil {
			t.Fatal(err)
		}
		r := *req
		r.Model = m.Name
		var last llm.Event
		for ev := range p.Stream(context.Background(), &r) {
			last = ev
		}
		if last.Type != llm.EventDone {
			t.Fatalf("%s: %+v", c.spec, last.Err)
		}
		got := s.Requests()[i]
		if got.Path != c.path || got.Header.Get(c.authHeader) != c.auth || !strings.Contains(string(got.Body), c.has) || strings.Contains(string(got.Body), c.lacks) {
			t.Errorf("%s: %s %s=%q body %s", c.spec, got.Path, c.authHeader, got.Header.Get(c.authHeader), got.Body)
		}
		if p.Name() != strings.Split(c.spec, ":")[0] {
			t.Errorf("%s: Name() = %q", c.spec, p.Name())
		}
	}
}

func TestOllamaURL(t *testing.T) {
	for in, want := range map[string]string{
		"0.0.0.0":                   "http://127.0.0.1:11434/v1",
		"127.0.0.1:9999":            "http://127.0.0.1:9999/v1",
		"http://gpu-box:11434":      "http://gpu-box:11434/v1",
		"https://ollama.example/v1": "https://ollama.example/v1",
		"[::]:11434":                "http://[::1]:11434/v1",
	} {
		if got := ollamaURL(in); got != want {
			t.Errorf("ollamaURL(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestScripted(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.json")
	script := map[string]any{"calls": []any{map[string]any{"reply": map[string]any{"text": []string{"hi"}}}}}
	b, _ := json.Marshal(script)
	os.WriteFile(path, b, 0o644)
	p, m, err := Resolve("scripted:"+path, Config{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if p.Name() != "scripted" || m.Provider != "scripted" || m.Name != path {
		t.Fatalf("%v %+v", p.Name(), m)
	}
	if _, _, err := Resolve("scripted:"+path+".missing", Config{}, nil); err == nil {
		t.Fatal("missing script file accepted")
	}
}

func TestHeadersAndKeyEnvs(t *testing.T) {
	s, err := mock.Start(mock.Script{Replies: []mock.Reply{{Text: "ok"}}, Loop: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for i, spec := range []string{"deepseek:deepseek-chat", "anthropic:claude-sonnet-4-5"} {
		name := strings.Split(spec, ":")[0]
		base := s.URL
		if name == "deepseek" {
			base += "/v1"
		}
		p, m, err := Resolve(spec, Config{Providers: map[string]ProviderConfig{name: {APIKey: "k", BaseURL: base, Headers: map[string]string{"X-Team": "core"}}}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		for range p.Stream(context.Background(), &llm.Request{Model: m.Name, Messages: []llm.Message{{Role: llm.RoleUser, Content: llm.Text("hi")}}}) {
		}
		if got := s.Requests()[i].Header.Get("X-Team"); got != "core" {
			t.Errorf("%s: X-Team = %q", spec, got)
		}
	}
	if got := strings.Join(KeyEnvs(), ","); got != "ANTHROPIC_API_KEY,DEEPSEEK_API_KEY,OPENAI_API_KEY" {
		t.Fatalf("KeyEnvs = %s", got)
	}
}

// TestPrice: the table's prices, a configured override, and the cost of a
// response's usage: uncached input at the input price, cache reads and
// writes at theirs (writes at the input price where a provider does not
// bill them apart), output at the output price.
func TestPrice(t *testing.T) {
	m := Lookup("anthropic", "claude-sonnet-4-5", Config{})
	u := llm.Usage{Input: 1_000_000, CacheRead: 600_000, CacheWrite: 100_000, Output: 10_000}
	// 300k plain × $3 + 600k × $0.30 + 100k × $3.75 + 10k × $15 (per M)
	if got, want := m.Price.Cost(u), 0.9+0.18+0.375+0.15; math.Abs(got-want) > 1e-9 {
		t.Errorf("sonnet cost %v, want %v", got, want)
	}
	d := Lookup("deepseek", "deepseek-chat", Config{})
	// DeepSeek bills no writes: they are plain input.
	if got, want := d.Price.Cost(u), (400_000*0.56+600_000*0.07+10_000*1.68)/1e6; math.Abs(got-want) > 1e-9 {
		t.Errorf("deepseek cost %v, want %v", got, want)
	}
	if p := Lookup("ollama", "qwen3", Config{}).Price; p.Known() {
		t.Errorf("a local model has a price: %+v", p)
	}
	o := Lookup("deepseek", "deepseek-chat", Config{Models: map[string]Model{"deepseek:deepseek-chat": {Price: Price{Input: 1}}}})
	if o.Price != (Price{Input: 1}) || o.ContextWindow != 131072 {
		t.Errorf("override: %+v", o)
	}
}
