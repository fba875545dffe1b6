// Package catalog resolves a model spec "provider:model" to a configured
// llm.Provider and the model's limits. Keys and base URLs come from an
// explicit Config, which overrides the environment (DEEPSEEK_API_KEY,
// DEEPSEEK_BASE_URL, OPENAI_API_KEY, OPENAI_BASE_URL, ANTHROPIC_API_KEY,
// ANTHROPIC_BASE_URL, OLLAMA_HOST; "openai-compatible:MODEL" reads
// OPENAI_BASE_URL, which it requires, and OPENAI_API_KEY, which it does
// not). A small built-in table gives context
// windows and output limits; Config.Models overrides or extends it, and a
// model missing from both still resolves with its provider's defaults.
//
// Resolve is a pure function of its arguments (the environment is passed in
// as getenv) and safe for concurrent use. The package may import llm and
// the adapters (llm/openai, llm/anthropic, llm/scripted); nothing below
// cmd/rein should import it except tests.
package catalog

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/reinhq/rein/llm"
	"github.com/reinhq/rein/llm/anthropic"
	"github.com/reinhq/rein/llm/openai"
	"github.com/reinhq/rein/llm/scripted"
)

// Sentinel errors of Resolve; match with errors.Is.
var (
	// ErrBadSpec: the spec is not "provider:model".
	ErrBadSpec = errors.New("catalog: model spec must be provider:model")
	// ErrUnknownProvider: the provider half names no known provider.
	ErrUnknownProvider = errors.New("catalog: unknown provider")
	// ErrMissingKey: the provider needs an API key and none was given.
	ErrMissingKey = errors.New("catalog: missing API key")
	// ErrMissingBaseURL: openai-compatible needs a base URL.
	ErrMissingBaseURL = errors.New("catalog: missing base URL")
)

// Model is a resolved model and its limits in tokens.
type Model struct {
	// Provider is the provider half of the spec, Name the model half.
	Provider string
	Name     string
	// ContextWindow is the most tokens of prompt plus output.
	ContextWindow int
	// MaxOutput is the most output tokens of one response.
	MaxOutput int
	// Price is the model's list price, zero when unknown.
	Price Price
	// Images says the model takes images, in prompts and in tool results:
	// the provider's models do (anthropic, openai) or the scripted model,
	// which takes anything. Models served by deepseek, ollama and
	// openai-compatible endpoints are not assumed to.
	Images bool
}

// Price is a model's list price in US dollars per million tokens: input
// tokens read from neither the prompt cache nor written to it, tokens read
// from the cache, tokens written to it (providers that bill writes:
// Anthropic, 5-minute cache), and output tokens.
type Price struct {
	Input, CacheRead, CacheWrite, Output float64
}

// Known reports whether p is a price at all.
func (p Price) Known() bool { return p != Price{} }

// Cost is the price of one response's usage. Usage counts every prompt
// token in Input, cached ones included; CacheRead and CacheWrite are parts
// of it. A cache price left at zero is the input price: a price that names
// no discount for cached tokens (a [prices] entry with input and output
// only) is not read as free caching.
func (p Price) Cost(u llm.Usage) float64 {
	plain := max(u.Input-u.CacheRead-u.CacheWrite, 0)
	read, write := p.CacheRead, p.CacheWrite
	if read == 0 {
		read = p.Input
	}
	if write == 0 {
		write = p.Input
	}
	return (float64(plain)*p.Input + float64(u.CacheRead)*read + float64(u.CacheWrite)*write + float64(u.Output)*p.Output) / 1e6
}

// Spec is "provider:model".
func (m Model) Spec() string { return m.Provider + ":" + m.Name }

// ProviderConfig overrides a provider's environment.
type ProviderConfig struct {
	APIKey  string
	BaseURL string
	// Headers are added to every request.
	Headers map[string]string
}

// Config is explicit configuration; set fields win over the environment.
type Config struct {
	// Providers is keyed by provider name ("deepseek", "openai",
	// "anthropic", "ollama", "openai-compatible").
	Providers map[string]ProviderConfig
	// Models overrides or extends the built-in limits, keyed by
	// "provider:model". A zero field keeps the built-in value.
	Models map[string]Model
	// HTTPClient is passed to the adapters.
	HTTPClient *http.Client
	// IdleTimeout is the adapters' idle-stream watchdog (default 90s).
	IdleTimeout time.Duration
	// RequestTimeout bounds each request from sending to its last byte
	// (0: no bound). A request it cuts fails with code timeout.
	RequestTimeout time.Duration
}

// provider describes one known provider.
type provider struct {
	keyEnv, urlEnv string
	defaultURL     string
	keyOptional    bool
	// defaults for models missing from the table.
	window, output int
	// images: the provider's models take images (Model.Images).
	images bool
}

var providers = map[string]provider{
	"deepseek":          {keyEnv: "DEEPSEEK_API_KEY", urlEnv: "DEEPSEEK_BASE_URL", defaultURL: "https://api.deepseek.com", window: 131072, output: 8192},
	"openai":            {keyEnv: "OPENAI_API_KEY", urlEnv: "OPENAI_BASE_URL", defaultURL: "https://api.openai.com/v1", window: 128000, output: 16384, images: true},
	"anthropic":         {keyEnv: "ANTHROPIC_API_KEY", urlEnv: "ANTHROPIC_BASE_URL", defaultURL: "https://api.anthropic.com", window: 200000, output: 8192, images: true},
	"ollama":            {urlEnv: "OLLAMA_HOST", defaultURL: "http://127.0.0.1:11434", keyOptional: true, window: 32768, output: 8192},
	"openai-compatible": {keyEnv: "OPENAI_API_KEY", urlEnv: "OPENAI_BASE_URL", keyOptional: true, window: 32768, output: 8192},
}

// KeyEnvs lists the environment variables the known providers read their
// API keys from, sorted: the keys rein uses, which no tool or hook may
// see.
func KeyEnvs() []string {
	var out []string
	for _, p := range providers {
		if p.keyEnv != "" && !slices.Contains(out, p.keyEnv) {
			out = append(out, p.keyEnv)
		}
	}
	slices.Sort(out)
	return out
}

// models is the built-in table of limits, from the providers' model pages.
// DeepSeek: 128K context; deepseek-chat outputs at most 8K, the reasoner
// (thinking mode) 64K. OpenAI gpt-4.1: 1,047,576 / 32,768. Anthropic
// Claude 4.x: 200K context, 64K output (Opus 4/4.1: 32K).
//
// Prices are the providers' list prices as their pricing pages gave them
// (DeepSeek: the price list in force from 2025-09-05; Anthropic: base
// input, 5-minute cache writes, cache hits, output; OpenAI: input, cached
// input, output). They change: Config.Models overrides them, and they are
// only ever used to estimate (rein sessions show --stats).
var models = map[string]Model{
	"deepseek:deepseek-chat":             {ContextWindow: 131072, MaxOutput: 8192, Price: deepseek},
	"deepseek:deepseek-reasoner":         {ContextWindow: 131072, MaxOutput: 65536, Price: deepseek},
	"openai:gpt-4.1":                     {ContextWindow: 1047576, MaxOutput: 32768, Price: Price{Input: 2, CacheRead: 0.5, Output: 8}},
	"openai:gpt-4.1-mini":                {ContextWindow: 1047576, MaxOutput: 32768, Price: Price{Input: 0.4, CacheRead: 0.1, Output: 1.6}},
	"openai:gpt-4o":                      {ContextWindow: 128000, MaxOutput: 16384, Price: Price{Input: 2.5, CacheRead: 1.25, Output: 10}},
	"openai:o3":                          {ContextWindow: 200000, MaxOutput: 100000, Price: Price{Input: 2, CacheRead: 0.5, Output: 8}},
	"openai:o4-mini":                     {ContextWindow: 200000, MaxOutput: 100000, Price: Price{Input: 1.1, CacheRead: 0.275, Output: 4.4}},
	"openai:gpt-5":                       {ContextWindow: 400000, MaxOutput: 128000, Price: Price{Input: 1.25, CacheRead: 0.125, Output: 10}},
	"anthropic:claude-sonnet-4-5":        {ContextWindow: 200000, MaxOutput: 64000, Price: sonnet},
	"anthropic:claude-haiku-4-5":         {ContextWindow: 200000, MaxOutput: 64000, Price: Price{Input: 1, CacheRead: 0.1, CacheWrite: 1.25, Output: 5}},
	"anthropic:claude-opus-4-1":          {ContextWindow: 200000, MaxOutput: 32000, Price: Price{Input: 15, CacheRead: 1.5, CacheWrite: 18.75, Output: 75}},
	"anthropic:claude-sonnet-4-0":        {ContextWindow: 200000, MaxOutput: 64000, Price: sonnet},
	"anthropic:claude-3-7-sonnet-latest": {ContextWindow: 200000, MaxOutput: 64000, Price: sonnet},
	"ollama:qwen3":                       {ContextWindow: 40960, MaxOutput: 8192},
}

// Known lists the provider:model specs of the built-in table, sorted.
func Known() []string {
	out := make([]string, 0, len(models))
	for spec := range models {
		out = append(out, spec)
	}
	slices.Sort(out)
	return out
}

var (
	deepseek = Price{Input: 0.56, CacheRead: 0.07, Output: 1.68}
	sonnet   = Price{Input: 3, CacheRead: 0.3, CacheWrite: 3.75, Output: 15}
)

// Lookup returns the limits and price of provider:name from cfg.Models,
// the built-in table, or the provider's defaults (limits only), field by
// field in that order (the price as a whole).
func Lookup(providerName, name string, cfg Config) Model {
	m := Model{Provider: providerName, Name: name}
	key := providerName + ":" + name
	if b, ok := models[key]; ok {
		m.ContextWindow, m.MaxOutput, m.Price = b.ContextWindow, b.MaxOutput, b.Price
	}
	if o, ok := cfg.Models[key]; ok {
		if o.ContextWindow > 0 {
			m.ContextWindow = o.ContextWindow
		}
		if o.MaxOutput > 0 {
			m.MaxOutput = o.MaxOutput
		}
		if o.Price.Known() {
			m.Price = o.Price
		}
	}
	m.Images = providerName == "scripted"
	if pv, ok := providers[providerName]; ok {
		m.Images = pv.images
		if m.ContextWindow == 0 {
			m.ContextWindow = pv.window
		}
		if m.MaxOutput == 0 {
			m.MaxOutput = pv.output
		}
	}
	return m
}

// Resolve parses spec and returns its provider and model, its streams
// bounded by cfg.RequestTimeout (see llm.WithTimeout). getenv reads the
// environment (os.Getenv in production; nil reads nothing). "scripted:FILE"
// loads the scripted model at FILE (llm/scripted), with the limits and
// price cfg.Models gives it (none are built in).
//
// Errors wrap ErrBadSpec, ErrUnknownProvider, ErrMissingKey (naming the
// environment variable to set) or ErrMissingBaseURL, or are the scripted
// loader's.
func Resolve(spec string, cfg Config, getenv func(string) string) (llm.Provider, Model, error) {
	p, m, err := resolve(spec, cfg, getenv)
	if err != nil {
		return nil, m, err
	}
	return llm.WithTimeout(p, cfg.RequestTimeout), m, nil
}

func resolve(spec string, cfg Config, getenv func(string) string) (llm.Provider, Model, error) {
	if getenv == nil {
		getenv = func(string) string { return "" }
	}
	name, model, ok := strings.Cut(spec, ":")
	if !ok || name == "" || model == "" {
		return nil, Model{}, fmt.Errorf("%w: %q", ErrBadSpec, spec)
	}
	if name == "scripted" {
		m, err := scripted.Load(model)
		if err != nil {
			return nil, Model{}, err
		}
		return m, Lookup(name, model, cfg), nil
	}
	pv, ok := providers[name]
	if !ok {
		return nil, Model{}, fmt.Errorf("%w %q in %q (known: anthropic, deepseek, ollama, openai, openai-compatible, scripted)", ErrUnknownProvider, name, spec)
	}
	pc := cfg.Providers[name]
	key := pc.APIKey
	if key == "" && pv.keyEnv != "" {
		key = getenv(pv.keyEnv)
	}
	base := pc.BaseURL
	if base == "" && pv.urlEnv != "" {
		base = getenv(pv.urlEnv)
	}
	if base == "" {
		base = pv.defaultURL
	}
	if key == "" && !pv.keyOptional {
		return nil, Model{}, fmt.Errorf("%w: set %s for %s (or give %s an API key in the config)", ErrMissingKey, pv.keyEnv, spec, name)
	}
	if base == "" {
		return nil, Model{}, fmt.Errorf("%w: set %s or give %s a base URL in the config", ErrMissingBaseURL, pv.urlEnv, name)
	}
	m := Lookup(name, model, cfg)
	switch name {
	case "anthropic":
		return anthropic.New(anthropic.Config{Name: name, BaseURL: base, APIKey: key, Headers: pc.Headers, HTTPClient: cfg.HTTPClient, IdleTimeout: cfg.IdleTimeout, MaxTokens: m.MaxOutput}), m, nil
	case "ollama":
		base = ollamaURL(base)
	}
	oc := openai.Config{Name: name, BaseURL: base, APIKey: key, Headers: pc.Headers, HTTPClient: cfg.HTTPClient, IdleTimeout: cfg.IdleTimeout}
	switch name {
	case "deepseek":
		oc.ReasoningContent = true
	case "openai":
		oc.MaxTokensField = "max_completion_tokens"
	}
	return openai.New(oc), m, nil
}

// ollamaURL turns an OLLAMA_HOST value ("0.0.0.0", "host:port",
// "http://host:port") into the OpenAI-compatible API root.
func ollamaURL(host string) string {
	bare := !strings.Contains(host, "://")
	if bare {
		host = "http://" + host
	}
	u, err := url.Parse(host)
	if err != nil {
		return host
	}
	h, port := u.Hostname(), u.Port()
	switch h {
	case "", "0.0.0.0":
		h = "127.0.0.1"
	case "::":
		h = "::1"
	}
	switch {
	case port != "":
		u.Host = net.JoinHostPort(h, port)
	case bare:
		u.Host = net.JoinHostPort(h, "11434")
	case strings.Contains(h, ":"):
		u.Host = "[" + h + "]"
	default:
		u.Host = h
	}
	u.Path = strings.TrimSuffix(strings.TrimSuffix(u.Path, "/"), "/v1") + "/v1"
	return u.String()
}
