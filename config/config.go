// Package config owns rein's user settings: the TOML files
// (~/.config/rein/config.toml, then the workspace's .rein/config.toml), the
// REIN_* environment variables and command-line flags, applied in that order
// (a later layer wins), and the record of where each effective value came
// from, which `rein config show` prints.
//
// Scalars are replaced by a later layer; the lists ([sandbox]
// writable_roots, [permissions] allow/ask/deny, [env] keep/drop) are added
// to, and each entry keeps its own origin.
//
// Unknown keys and values of the wrong type are errors naming the file and
// line; nothing is silently ignored.
//
// Each value remembers its layer (Layer). The workspace file is written by
// whoever wrote the repository, so its settings that could run code,
// redirect credentials or widen permissions are held back, not applied:
// provider base_url, api_key_env and headers, a permission_mode more
// permissive than the one below it, [permissions] allow rules, [sandbox]
// writable_roots and network_access = true, [env] keep, [mcp_servers],
// system_prompt and append_system_prompt, [prices], and limits looser than
// the ones below them (max_steps, max_output_tokens, thinking_budget,
// instructions_budget, context_window, request_timeout: a project may only
// tighten them). Held lists them (for
// the trust decision, see package trust); ApplyHeld applies them once the
// user trusts the workspace. A Config fresh from Load is therefore safe in
// an untrusted workspace. A workspace file's store (where sessions, with
// everything the model saw, are kept) is never applied, trusted or not:
// every command must find the user's sessions in the same place.
//
// Concurrency: a Config is a plain value; do not change it from several
// goroutines at once. This package imports only go-toml, levenshtein (for
// "did you mean" on an unknown key) and the standard library; it must not
// import any other rein package.
package config

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/agnivade/levenshtein"
	"github.com/pelletier/go-toml/v2"
)

// Errors of loading.
var (
	// ErrUnknownKey: a file holds a key rein does not know.
	ErrUnknownKey = errors.New("unknown key")
	// ErrInvalid: a value is malformed or out of range.
	ErrInvalid = errors.New("invalid value")
)

// kindError is an error whose message already says what kind it is: it
// matches its sentinel (errors.Is) without repeating its text.
type kindError struct {
	msg  string
	kind error
}

func (e *kindError) Error() string { return e.msg }
func (e *kindError) Unwrap() error { return e.kind }

// Permission modes.
const (
	ReadOnly       = "read-only"
	WorkspaceWrite = "workspace-write"
	FullAccess     = "full-access"
)

// Defaults.
const (
	DefaultModel              = "deepseek:deepseek-chat"
	DefaultPermissionMode     = WorkspaceWrite
	DefaultInstructionsBudget = 32 << 10
	// DefaultStreamIdleTimeout is the model adapters' idle-stream watchdog
	// (the same as llm/sse's default, which a test in cmd/rein checks).
	DefaultStreamIdleTimeout = 90 * time.Second
)

// Config is the effective configuration.
type Config struct {
	// Model is "provider:model" (scripted:FILE for the keyless scripted
	// model).
	Model string
	// PermissionMode is read-only, workspace-write or full-access.
	PermissionMode string
	// ContextWindow overrides the model's context window in tokens (0: the
	// catalog's value). Automatic compaction starts near it.
	ContextWindow int
	// InstructionsBudget caps the bytes of AGENTS.md / CLAUDE.md that enter
	// the system prompt.
	InstructionsBudget int
	// MaxSteps caps the steps of one turn (0: no limit); a turn that
	// reaches it ends with reason max-steps.
	MaxSteps int
	// MaxOutputTokens is the output limit sent with every request (0: the
	// model catalog's maximum output).
	MaxOutputTokens int
	// ReasoningEffort is sent to models that take one (OpenAI's
	// reasoning_effort): minimal, low, medium or high; "" sends none.
	ReasoningEffort string
	// ThinkingBudget turns on extended thinking of at most this many
	// tokens for providers with thinking budgets (Anthropic; at least
	// 1024); 0 leaves it off.
	ThinkingBudget int
	// SystemPrompt replaces rein's own system prompt section ("" keeps
	// it); the environment and project instructions still follow.
	SystemPrompt string
	// AppendSystemPrompt is added as the last system prompt section.
	AppendSystemPrompt string
	// StreamIdleTimeout abandons a response that sends nothing for this
	// long (DefaultStreamIdleTimeout unless set; setting "0" gives the
	// default back).
	StreamIdleTimeout time.Duration
	// RequestTimeout bounds one model request from sending to its last
	// byte (0: no bound); a request cut by it fails with code timeout and
	// is retried like one.
	RequestTimeout time.Duration
	// Providers holds per-provider settings by provider name.
	Providers map[string]Provider
	// Prices gives models' prices by "provider:model", for the cost rein
	// reports; they override the model catalog's.
	Prices map[string]Price
	// WritableRoots are further directories (absolute, or ~/...) that
	// bash, hooks and the file tools may write in, beyond the workspace
	// and the system temp directory, in workspace-write mode. Every layer
	// adds to the list.
	WritableRoots []string
	// NetworkAccess lets sandboxed bash and hooks use the network.
	NetworkAccess bool
	// Permissions are the permission rules; every layer adds to them.
	Permissions Permissions
	// Env is the policy for the environment of tools and hooks.
	Env EnvConfig
	// Store is where sessions are kept: "" for the JSONL store under
	// $REIN_HOME, a directory for a JSONL store there, or a postgres://
	// (postgresql://) URL for a PostgreSQL store.
	Store string
	// MCPServers are the [mcp_servers] tables, by name; a later layer's
	// server replaces an earlier one of the same name. A workspace file's
	// servers are held (see Held) until the workspace is trusted.
	MCPServers []MCPServer

	origins     map[string]string
	layers      map[string]Layer
	listOrigins []Setting
	held        []Held
	ignored     []Setting       // workspace settings never applied (store)
	heldMCP     []MCPServer     // the workspace file's [mcp_servers], until trusted
	keyEnvs     []string        // every api_key_env named by any file
	windowCap   bool            // ContextWindow is a workspace file's cap (ContextWindowFor)
	wsRules     []workspaceRule // [workspaces."ROOT".permissions] of the user's file
}

// Permissions are rules in Claude Code's syntax (Bash(git status:*),
// Edit(src/**), Read(~/.ssh/**), ...); package guard parses them.
type Permissions struct {
	Allow []string `toml:"allow"`
	Ask   []string `toml:"ask"`
	Deny  []string `toml:"deny"`
}

// sandboxFile is the [sandbox] table.
type sandboxFile struct {
	WritableRoots []string `toml:"writable_roots"`
	NetworkAccess *bool    `toml:"network_access"`
}

// Layer is where a value came from, lowest first; a value from a higher
// layer wins.
type Layer int

// Layers.
const (
	LayerDefault Layer = iota
	LayerUser
	LayerProject
	LayerEnv
	LayerFlag
)

// EnvConfig is the [env] table: glob patterns (path.Match, case-insensitive) of
// variable names in the environment of tools and hooks. rein's own keys are
// removed whatever these say.
type EnvConfig struct {
	// Keep keeps variables the default credential patterns would remove
	// from the bash tool's environment (e.g. GITHUB_TOKEN). A workspace
	// file's keep patterns are held until the workspace is trusted.
	Keep []string `toml:"keep"`
	// Drop removes further variables from tools and hooks alike.
	Drop []string `toml:"drop"`
}

// Held is a workspace-file setting held back until the workspace is
// trusted.
type Held struct {
	// Key is the setting: "providers.NAME.base_url",
	// "providers.NAME.api_key_env", "providers.NAME.headers.HEADER",
	// "permission_mode", "permissions.allow", "sandbox.writable_roots",
	// "sandbox.network_access", "env.keep" or "mcp_servers.NAME" (Value
	// is then MCPServer.Canonical: the whole server).
	Key    string
	Value  string
	Origin string

	provider, field string // for providers.NAME.FIELD
	price           *Price // for prices.MODEL
}

// Price is a model's price in US dollars per million tokens: input not
// served from the prompt cache, output, cache reads and cache writes.
type Price struct {
	Input      float64 `toml:"input"`
	Output     float64 `toml:"output"`
	CacheRead  float64 `toml:"cache_read"`
	CacheWrite float64 `toml:"cache_write"`
}

// String shows the price as 'config show' and the trust question do.
func (p Price) String() string {
	return fmt.Sprintf("input %g, output %g, cache read %g, cache write %g (USD per million tokens)", p.Input, p.Output, p.CacheRead, p.CacheWrite)
}

// Provider holds one provider's settings.
type Provider struct {
	// BaseURL overrides the provider's API endpoint.
	BaseURL string `toml:"base_url"`
	// APIKeyEnv names the environment variable holding the API key.
	APIKeyEnv string `toml:"api_key_env"`
	// Headers are sent with every request to the provider.
	Headers map[string]string `toml:"headers"`
}

// file is the TOML shape; pointers tell "absent" from "zero".
type file struct {
	Model              *string              `toml:"model"`
	PermissionMode     *string              `toml:"permission_mode"`
	ContextWindow      *int                 `toml:"context_window"`
	InstructionsBudget *int                 `toml:"instructions_budget"`
	MaxSteps           *int                 `toml:"max_steps"`
	MaxOutputTokens    *int                 `toml:"max_output_tokens"`
	ReasoningEffort    *string              `toml:"reasoning_effort"`
	ThinkingBudget     *int                 `toml:"thinking_budget"`
	SystemPrompt       *string              `toml:"system_prompt"`
	AppendSystemPrompt *string              `toml:"append_system_prompt"`
	StreamIdleTimeout  *string              `toml:"stream_idle_timeout"`
	RequestTimeout     *string              `toml:"request_timeout"`
	Providers          map[string]Provider  `toml:"providers"`
	Prices             map[string]Price     `toml:"prices"`
	Sandbox            *sandboxFile         `toml:"sandbox"`
	Permissions        *Permissions         `toml:"permissions"`
	Env                *EnvConfig           `toml:"env"`
	Store              *string              `toml:"store"`
	MCPServers         map[string]MCPServer `toml:"mcp_servers"`
	// Workspaces holds settings of one workspace each, in the user's
	// file only: [workspaces."ROOT".permissions] (see PermissionsFor).
	Workspaces map[string]workspaceFile `toml:"workspaces"`
}

// knobs returns the file's settings of knobKeys, as text for Set.
func (f *file) knobs() map[string]string {
	out := map[string]string{}
	for k, v := range map[string]*int{"max_steps": f.MaxSteps, "max_output_tokens": f.MaxOutputTokens, "thinking_budget": f.ThinkingBudget} {
		if v != nil {
			out[k] = strconv.Itoa(*v)
		}
	}
	for k, v := range map[string]*string{"reasoning_effort": f.ReasoningEffort, "system_prompt": f.SystemPrompt,
		"append_system_prompt": f.AppendSystemPrompt, "stream_idle_timeout": f.StreamIdleTimeout, "request_timeout": f.RequestTimeout} {
		if v != nil {
			out[k] = *v
		}
	}
	return out
}

// Setting is one effective value and where it came from: "default",
// "FILE:LINE", "env NAME" or "flag --NAME". A held value (see Held) is
// listed with Ignored set.
type Setting struct {
	Key     string `json:"key"`
	Value   string `json:"value"`
	Origin  string `json:"origin"`
	Ignored bool   `json:"ignored,omitempty"`
}

// Env names the environment variable of each key.
var Env = map[string]string{
	"model":                  "REIN_MODEL",
	"permission_mode":        "REIN_PERMISSION_MODE",
	"context_window":         "REIN_CONTEXT_WINDOW",
	"instructions_budget":    "REIN_INSTRUCTIONS_BUDGET",
	"sandbox.network_access": "REIN_NETWORK_ACCESS",
	"store":                  "REIN_STORE",
	"max_steps":              "REIN_MAX_STEPS",
	"max_output_tokens":      "REIN_MAX_OUTPUT_TOKENS",
	"reasoning_effort":       "REIN_REASONING_EFFORT",
	"thinking_budget":        "REIN_THINKING_BUDGET",
	"system_prompt":          "REIN_SYSTEM_PROMPT",
	"append_system_prompt":   "REIN_APPEND_SYSTEM_PROMPT",
	"stream_idle_timeout":    "REIN_STREAM_IDLE_TIMEOUT",
	"request_timeout":        "REIN_REQUEST_TIMEOUT",
}

// showDuration writes d as a person would in config.toml: whole hours as
// "2h", whole minutes as "10m", other whole seconds as "90s", else as
// time.Duration does.
func showDuration(d time.Duration) string {
	switch {
	case d != 0 && d%time.Hour == 0:
		return strconv.FormatInt(int64(d/time.Hour), 10) + "h"
	case d != 0 && d%time.Minute == 0:
		return strconv.FormatInt(int64(d/time.Minute), 10) + "m"
	case d%time.Second == 0:
		return strconv.FormatInt(int64(d/time.Second), 10) + "s"
	}
	return d.String()
}

// Default returns the built-in configuration.
func Default() *Config {
	c := &Config{
		Model:              DefaultModel,
		PermissionMode:     DefaultPermissionMode,
		InstructionsBudget: DefaultInstructionsBudget,
		StreamIdleTimeout:  DefaultStreamIdleTimeout,
		Providers:          map[string]Provider{},
		Prices:             map[string]Price{},
		origins:            map[string]string{},
		layers:             map[string]Layer{},
	}
	for _, k := range keys {
		c.origins[k] = "default"
	}
	return c
}

var keys = append([]string{"model", "permission_mode", "context_window", "instructions_budget", "sandbox.network_access", "store"}, knobKeys...)

// knobKeys are the keys of rein run's knobs, which are also its flags.
var knobKeys = []string{"max_steps", "max_output_tokens", "reasoning_effort", "thinking_budget",
	"system_prompt", "append_system_prompt", "stream_idle_timeout", "request_timeout"}

// tableKeys are the keys a file may hold, by table ("" for the top level),
// for suggestions on an unknown key.
var tableKeys = map[string][]string{
	"":            append(slices.DeleteFunc(slices.Clone(keys), func(k string) bool { return strings.Contains(k, ".") }), "providers", "prices", "sandbox", "permissions", "env", "mcp_servers"),
	"providers":   {"base_url", "api_key_env", "headers"},
	"prices":      {"input", "output", "cache_read", "cache_write"},
	"sandbox":     {"writable_roots", "network_access"},
	"permissions": {"allow", "ask", "deny"},
	"env":         {"keep", "drop"},
}

// UserDir returns rein's user config directory: $XDG_CONFIG_HOME/rein,
// else ~/.config/rein ("" when neither can be named). It holds config.toml,
// settings.json (hooks) and trusted.json (trusted workspaces).
func UserDir(getenv func(string) string) string {
	if d := getenv("XDG_CONFIG_HOME"); d != "" {
		return filepath.Join(d, "rein")
	}
	if h := getenv("HOME"); h != "" {
		return filepath.Join(h, ".config", "rein")
	}
	return ""
}

// UserFile returns the user's config file: $XDG_CONFIG_HOME/rein/config.toml,
// else ~/.config/rein/config.toml ("" when neither can be named).
func UserFile(getenv func(string) string) string {
	if d := UserDir(getenv); d != "" {
		return filepath.Join(d, "config.toml")
	}
	return ""
}

// ProjectFile returns the workspace's config file, <dir>/.rein/config.toml.
func ProjectFile(dir string) string { return filepath.Join(dir, ".rein", "config.toml") }

// Load builds the effective configuration: defaults, then the user file,
// then the workspace file (its trust-relevant settings held, see Held),
// then the environment. Flags are applied afterwards with Set. An empty or
// missing file is skipped; an unreadable or invalid one is an error naming
// it.
func Load(userFile, projectFile string, getenv func(string) string) (*Config, error) {
	c := Default()
	for _, f := range []struct {
		path  string
		layer Layer
	}{{userFile, LayerUser}, {projectFile, LayerProject}} {
		if f.path == "" {
			continue
		}
		data, err := os.ReadFile(f.path)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("config: %w", err)
		}
		if err := c.apply(f.path, data, f.layer); err != nil {
			return nil, err
		}
	}
	for _, k := range keys {
		name := Env[k]
		if v := getenv(name); v != "" {
			if err := c.set(k, v, "env "+name, LayerEnv); err != nil {
				return nil, err
			}
		}
	}
	return c, nil
}

// modeRank orders the permission modes from least to most permissive.
var modeRank = map[string]int{ReadOnly: 0, WorkspaceWrite: 1, FullAccess: 2}

func (c *Config) apply(path string, data []byte, layer Layer) error {
	var f file
	dec := toml.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		var sm *toml.StrictMissingError
		if errors.As(err, &sm) && len(sm.Errors) > 0 {
			var msgs []string
			for _, e := range sm.Errors {
				row, _ := e.Position()
				k := e.Key()
				msg := fmt.Sprintf("%s:%d: %s %q", path, row, ErrUnknownKey, strings.Join(k, "."))
				// [providers.NAME] and [prices."P:M"] have a name level.
				table := ""
				if len(k) > 1 {
					table = k[0]
				}
				if s := suggest(k[len(k)-1], tableKeys[table]); s != "" {
					msg += fmt.Sprintf(" (did you mean %q?)", s)
				}
				msgs = append(msgs, msg)
			}
			return &kindError{"config: " + strings.Join(msgs, "; "), ErrUnknownKey}
		}
		var de *toml.DecodeError
		if errors.As(err, &de) {
			row, _ := de.Position()
			return fmt.Errorf("config: %s:%d: %w: %s", path, row, ErrInvalid, de.Error())
		}
		return fmt.Errorf("config: %s: %w: %w", path, ErrInvalid, err)
	}
	lines := keyLines(data)
	at := func(key string) string {
		if n, ok := lines[key]; ok {
			return fmt.Sprintf("%s:%d", path, n)
		}
		return path
	}
	project := layer == LayerProject
	if f.Model != nil {
		if err := c.set("model", *f.Model, at("model"), layer); err != nil {
			return err
		}
	}
	if f.PermissionMode != nil {
		v := *f.PermissionMode
		if err := validMode(v, at("permission_mode")); err != nil {
			return err
		}
		// A project may make the mode stricter, never looser, until
		// trusted.
		if project && modeRank[v] > modeRank[c.PermissionMode] {
			c.hold("permission_mode", v, at("permission_mode"))
		} else if err := c.set("permission_mode", v, at("permission_mode"), layer); err != nil {
			return err
		}
	}
	if f.ContextWindow != nil {
		if err := c.setLimit("context_window", strconv.Itoa(*f.ContextWindow), at("context_window"), layer); err != nil {
			return err
		}
	}
	if f.InstructionsBudget != nil {
		if err := c.setLimit("instructions_budget", strconv.Itoa(*f.InstructionsBudget), at("instructions_budget"), layer); err != nil {
			return err
		}
	}
	if f.Store != nil {
		// Where sessions are kept: never from a workspace.
		if err := validStore(*f.Store, at("store")); err != nil {
			return err
		}
		if project {
			c.ignored = append(c.ignored, Setting{"store", RedactURL(*f.Store), at("store"), true})
		} else if err := c.set("store", *f.Store, at("store"), layer); err != nil {
			return err
		}
	}
	if f.Sandbox != nil {
		// A project may close the network, never open it, until trusted.
		if v := f.Sandbox.NetworkAccess; v != nil {
			if project && *v && !c.NetworkAccess {
				c.hold("sandbox.network_access", "true", at("sandbox.network_access"))
			} else if err := c.set("sandbox.network_access", strconv.FormatBool(*v), at("sandbox.network_access"), layer); err != nil {
				return err
			}
		}
		for _, r := range f.Sandbox.WritableRoots {
			if err := c.addList("sandbox.writable_roots", r, at("sandbox.writable_roots"), layer); err != nil {
				return err
			}
		}
	}
	if pm := f.Permissions; pm != nil {
		for _, l := range []struct {
			key   string
			rules []string
		}{{"permissions.allow", pm.Allow}, {"permissions.ask", pm.Ask}, {"permissions.deny", pm.Deny}} {
			for _, r := range l.rules {
				if err := c.addList(l.key, r, at(l.key), layer); err != nil {
					return err
				}
			}
		}
	}
	knobs := f.knobs()
	for _, k := range knobKeys {
		v, ok := knobs[k]
		switch {
		case !ok:
		case project && slices.Contains(promptKeys, k):
			// rein's own prompt says to treat other sources as
			// information; a repository does not replace it untrusted.
			if err := c.validate(k, v, at(k)); err != nil {
				return err
			}
			c.hold(k, v, at(k))
		default:
			if err := c.setLimit(k, v, at(k), layer); err != nil {
				return err
			}
		}
	}
	for model, p := range f.Prices {
		if !strings.Contains(model, ":") {
			return fmt.Errorf("config: %s: %w: [prices.%q]: want provider:model", at("prices"), ErrInvalid, model)
		}
		if p.Input < 0 || p.Output < 0 || p.CacheRead < 0 || p.CacheWrite < 0 {
			return fmt.Errorf("config: %s: %w: [prices.%q]: a price cannot be negative", at("prices"), ErrInvalid, model)
		}
		origin := path
		for _, f := range []string{"input", "output", "cache_read", "cache_write"} {
			if _, ok := lines["prices."+model+"."+f]; ok {
				origin = at("prices." + model + "." + f)
				break
			}
		}
		if project {
			// The cost rein reports is the user's cost guard: a
			// repository does not set it to $0 untrusted.
			c.held = append(c.held, Held{Key: "prices." + model, Value: p.String(), Origin: origin, price: &p})
			continue
		}
		c.setPrice(model, p, origin)
	}
	for _, name := range slices.Sorted(maps.Keys(f.Providers)) {
		p := f.Providers[name]
		pre := "providers." + name + "."
		var fields [][2]string
		if p.BaseURL != "" {
			fields = append(fields, [2]string{"base_url", p.BaseURL})
		}
		if p.APIKeyEnv != "" {
			if !ValidEnvName(p.APIKeyEnv) {
				return fmt.Errorf("config: %s: %w: %sapi_key_env = %q: want an environment variable name (letters, digits and _, not starting with a digit)",
					at(pre+"api_key_env"), ErrInvalid, pre, p.APIKeyEnv)
			}
			fields = append(fields, [2]string{"api_key_env", p.APIKeyEnv})
			if !slices.Contains(c.keyEnvs, p.APIKeyEnv) {
				c.keyEnvs = append(c.keyEnvs, p.APIKeyEnv)
			}
		}
		for _, h := range slices.Sorted(maps.Keys(p.Headers)) {
			fields = append(fields, [2]string{"headers." + h, p.Headers[h]})
		}
		for _, kv := range fields {
			origin := at(pre + kv[0])
			if _, ok := lines[pre+kv[0]]; !ok && strings.HasPrefix(kv[0], "headers.") {
				origin = at(pre + "headers") // an inline table
			}
			// Where requests and the key go: held for a project.
			if project {
				c.held = append(c.held, Held{Key: pre + kv[0], Value: kv[1], Origin: origin, provider: name, field: kv[0]})
			} else {
				c.setProvider(name, kv[0], kv[1], origin, layer)
			}
		}
	}
	if err := c.applyMCP(f.MCPServers, at, layer == LayerProject); err != nil {
		return err
	}
	if err := c.applyWorkspaces(path, f.Workspaces, at, layer); err != nil {
		return err
	}
	if f.Env != nil {
		for _, l := range []struct {
			key string
			pat []string
		}{{"env.keep", f.Env.Keep}, {"env.drop", f.Env.Drop}} {
			for _, p := range l.pat {
				if err := c.addList(l.key, p, at(l.key), layer); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

func (c *Config) setPrice(model string, p Price, origin string) {
	c.Prices[model] = p
	c.origins["prices."+model] = origin
}

// promptKeys replace or extend rein's own system prompt: a workspace
// file's are held until it is trusted.
var promptKeys = []string{"system_prompt", "append_system_prompt"}

// limitKeys are the limits a workspace file may only tighten until it is
// trusted: a looser value (more steps, tokens, budget or time than the
// layer below) is held, like a more permissive permission_mode.
var limitKeys = []string{"max_steps", "max_output_tokens", "thinking_budget", "instructions_budget", "context_window", "request_timeout"}

// setLimit is set for a value from layer, except that a workspace file's
// looser limit (see limitKeys) is validated and held.
func (c *Config) setLimit(key, value, origin string, layer Layer) error {
	if layer != LayerProject || !slices.Contains(limitKeys, key) {
		return c.set(key, value, origin, layer)
	}
	if err := c.validate(key, value, origin); err != nil {
		return err
	}
	was, wasOrigin, wasLayer := c.limit(key), c.origins[key], c.layers[key]
	if err := c.set(key, value, origin, layer); err != nil {
		return err
	}
	now := c.limit(key)
	var tighter bool
	switch key {
	case "thinking_budget", "instructions_budget": // 0: none at all
		tighter = now <= was
	default: // 0: no limit (the model's, the catalog's)
		tighter = now > 0 && (was == 0 || now <= was)
	}
	if key == "context_window" && tighter && was == 0 {
		// Tighter than the model's own window only if it is below it,
		// which only the catalog knows: it is a cap (ContextWindowFor).
		c.windowCap = true
	}
	if !tighter {
		c.restoreLimit(key, was)
		c.origins[key], c.layers[key] = wasOrigin, wasLayer
		c.hold(key, value, origin)
	}
	return nil
}

// limitField returns the field of a limit key: an int or a duration.
func (c *Config) limitField(key string) (*int, *time.Duration) {
	switch key {
	case "max_steps":
		return &c.MaxSteps, nil
	case "max_output_tokens":
		return &c.MaxOutputTokens, nil
	case "thinking_budget":
		return &c.ThinkingBudget, nil
	case "instructions_budget":
		return &c.InstructionsBudget, nil
	case "context_window":
		return &c.ContextWindow, nil
	}
	return nil, &c.RequestTimeout
}

// limit returns a limit key's value as a number (durations in
// nanoseconds).
func (c *Config) limit(key string) int64 {
	n, d := c.limitField(key)
	if n != nil {
		return int64(*n)
	}
	return int64(*d)
}

// restoreLimit undoes set for a held limit.
func (c *Config) restoreLimit(key string, v int64) {
	if n, d := c.limitField(key); n != nil {
		*n = int(v)
	} else {
		*d = time.Duration(v)
	}
}

// validate reports whether value is valid for key, without setting it.
func (c *Config) validate(key, value, origin string) error {
	probe := Default()
	return probe.set(key, value, origin, LayerProject)
}

// ContextWindowFor returns the context window to use for a model whose
// own window is model (0: unknown): the configured one, except that a
// workspace file's window, applied untrusted because the user set none,
// is only a cap below the model's own.
func (c *Config) ContextWindowFor(model int) int {
	switch {
	case c.ContextWindow == 0:
		return model
	case c.windowCap && model > 0:
		return min(c.ContextWindow, model)
	}
	return c.ContextWindow
}

// widens lists the list keys whose entries from a workspace file are held
// until it is trusted: each grants something (a rule that allows, a
// directory to write, a variable to keep). The other lists only narrow.
var widens = []string{"permissions.allow", "sandbox.writable_roots", "env.keep"}

// ValidEnvName reports whether s can name an environment variable as rein
// accepts one in a configuration: a letter or "_", then letters, digits
// and "_". Names reach shell scripts (the ACP terminal's scrub), so
// nothing else is let through.
func ValidEnvName(s string) bool {
	for i, r := range s {
		if !(r == '_' || r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z' || i > 0 && r >= '0' && r <= '9') {
			return false
		}
	}
	return s != ""
}

// validPattern reports whether p is a pattern tool.EnvPolicy can use: a
// valid path.Match pattern over variable names, made only of the
// characters of names and of glob patterns (* ? [ ] ! ^ -).
func validPattern(p string) bool {
	if p == "" || strings.IndexFunc(p, func(r rune) bool { return !ValidEnvName("_"+string(r)) && !strings.ContainsRune("*?[]!^-", r) }) >= 0 {
		return false
	}
	_, err := path.Match(p, "")
	return err == nil
}

func (c *Config) hold(key, value, origin string) {
	c.held = append(c.held, Held{Key: key, Value: value, Origin: origin})
}

func (c *Config) setProvider(name, field, value, origin string, layer Layer) {
	cur := c.Providers[name]
	switch {
	case field == "base_url":
		cur.BaseURL = value
	case field == "api_key_env":
		cur.APIKeyEnv = value
	default:
		h, _ := strings.CutPrefix(field, "headers.")
		m := make(map[string]string, len(cur.Headers)+1)
		maps.Copy(m, cur.Headers)
		m[h] = value
		cur.Headers = m
	}
	c.Providers[name] = cur
	key := "providers." + name + "." + field
	c.origins[key] = origin
	c.layers[key] = layer
}

// Add appends value to the list key (sandbox.writable_roots,
// permissions.allow, permissions.ask, permissions.deny, env.keep, env.drop)
// as a flag does, and records origin. A writable root must be absolute or
// start with ~/; an env pattern is a name or glob.
func (c *Config) Add(key, value, origin string) error {
	return c.addList(key, value, origin, LayerFlag)
}

// addList is Add at a layer: a workspace file's entries that widen (see
// widens) are validated, then held.
func (c *Config) addList(key, value, origin string, layer Layer) error {
	list, err := c.list(key, value, origin)
	if err != nil {
		return err
	}
	if layer == LayerProject && slices.Contains(widens, key) {
		c.hold(key, value, origin)
		return nil
	}
	c.appendList(list, key, value, origin)
	return nil
}

// list validates value for the list key and returns the list.
func (c *Config) list(key, value, origin string) (*[]string, error) {
	bad := func(why string) error {
		return fmt.Errorf("config: %s: %w: %s = %q: %s", origin, ErrInvalid, key, value, why)
	}
	switch key {
	case "sandbox.writable_roots":
		if !filepath.IsAbs(value) && !strings.HasPrefix(value, "~/") {
			return nil, bad("want an absolute path or one starting with ~/")
		}
		return &c.WritableRoots, nil
	case "permissions.allow":
		return &c.Permissions.Allow, nil
	case "permissions.ask":
		return &c.Permissions.Ask, nil
	case "permissions.deny":
		return &c.Permissions.Deny, nil
	case "env.keep", "env.drop":
		if !validPattern(value) {
			return nil, bad("want a variable name or glob pattern (e.g. GITHUB_TOKEN, AWS_*)")
		}
		if key == "env.keep" {
			return &c.Env.Keep, nil
		}
		return &c.Env.Drop, nil
	}
	return nil, fmt.Errorf("config: %s: %w %q", origin, ErrUnknownKey, key)
}

func (c *Config) appendList(list *[]string, key, value, origin string) {
	*list = append(*list, value)
	if c.origins[key] != "" && !strings.Contains(c.origins[key], origin) {
		c.origins[key] += ", " + origin
	} else {
		c.origins[key] = origin
	}
	c.listOrigins = append(c.listOrigins, Setting{Key: key, Value: value, Origin: origin})
}

// ListOrigin returns where each entry of the list key came from, in order.
func (c *Config) ListOrigin(key string) []Setting {
	var out []Setting
	for _, s := range c.listOrigins {
		if s.Key == key {
			out = append(out, s)
		}
	}
	return out
}

// Held lists the workspace-file settings held back until the workspace is
// trusted, in file order (see the package doc). It is empty after
// ApplyHeld.
func (c *Config) Held() []Held { return slices.Clone(c.held) }

// ApplyHeld applies the held settings: the user trusts the workspace. A
// held value does not override one set by a higher layer (REIN_*
// variables, flags).
func (c *Config) ApplyHeld() {
	held := c.held
	c.held = nil
	for _, h := range held {
		switch {
		case h.provider != "":
			c.setProvider(h.provider, h.field, h.Value, h.Origin, LayerProject)
		case strings.HasPrefix(h.Key, "mcp_servers."):
			c.applyHeldMCP(strings.TrimPrefix(h.Key, "mcp_servers."))
		case h.price != nil:
			c.setPrice(strings.TrimPrefix(h.Key, "prices."), *h.price, h.Origin)
		case slices.Contains(widens, h.Key):
			list, _ := c.list(h.Key, h.Value, h.Origin) // validated when held
			c.appendList(list, h.Key, h.Value, h.Origin)
		case c.layers[h.Key] <= LayerProject: // a scalar: not over env or flags
			_ = c.set(h.Key, h.Value, h.Origin, LayerProject) // validated when held
		}
	}
}

// KeyEnvs lists, sorted, every api_key_env any file names, whether applied,
// held or overridden by a later layer: rein's keys may live in any of them,
// so tools and hooks never see them.
func (c *Config) KeyEnvs() []string {
	out := slices.Clone(c.keyEnvs)
	slices.Sort(out)
	return out
}

// Layer returns the layer key's value came from.
func (c *Config) Layer(key string) Layer { return c.layers[key] }

// Set sets key to value (given as text) as a flag would: above every other
// layer. It records origin and validates the value; an error names the
// origin.
func (c *Config) Set(key, value, origin string) error { return c.set(key, value, origin, LayerFlag) }

func validMode(value, origin string) error {
	switch value {
	case ReadOnly, WorkspaceWrite, FullAccess:
		return nil
	}
	return fmt.Errorf("config: %s: %w: permission_mode = %q: want read-only, workspace-write or full-access", origin, ErrInvalid, value)
}

func (c *Config) set(key, value, origin string, layer Layer) error {
	bad := func(why string) error {
		return fmt.Errorf("config: %s: %w: %s = %q: %s", origin, ErrInvalid, key, value, why)
	}
	switch key {
	case "model":
		if !strings.Contains(value, ":") {
			return bad("want provider:model, e.g. deepseek:deepseek-chat or scripted:FILE")
		}
		c.Model = value
	case "permission_mode":
		if err := validMode(value, origin); err != nil {
			return err
		}
		c.PermissionMode = value
	case "sandbox.network_access":
		b, err := strconv.ParseBool(value)
		if err != nil {
			return bad("want true or false")
		}
		c.NetworkAccess = b
	case "store":
		if err := validStore(value, origin); err != nil {
			return err
		}
		c.Store = value
	case "context_window", "instructions_budget":
		n, err := strconv.Atoi(value)
		if err != nil || n < 0 {
			return bad("want a whole number ≥ 0")
		}
		if key == "context_window" {
			c.ContextWindow = n
			c.windowCap = false // a cap only when setLimit says so
		} else {
			c.InstructionsBudget = n
		}
	case "max_steps", "max_output_tokens", "thinking_budget":
		n, err := strconv.Atoi(value)
		if err != nil || n < 0 {
			return bad("want a whole number ≥ 0 (0: no limit)")
		}
		switch key {
		case "max_steps":
			c.MaxSteps = n
		case "max_output_tokens":
			c.MaxOutputTokens = n
		default:
			if n > 0 && n < 1024 {
				return bad("a thinking budget is at least 1024 tokens (0 turns thinking off)")
			}
			c.ThinkingBudget = n
		}
	case "reasoning_effort":
		switch value {
		case "", "minimal", "low", "medium", "high":
		default:
			return bad("want minimal, low, medium or high")
		}
		c.ReasoningEffort = value
	case "system_prompt":
		c.SystemPrompt = value
	case "append_system_prompt":
		c.AppendSystemPrompt = value
	case "stream_idle_timeout", "request_timeout":
		d, err := time.ParseDuration(value)
		if value == "0" {
			d, err = 0, nil
		}
		if err != nil || d < 0 {
			return bad(`want a duration such as "90s" or "10m" ("0": the default)`)
		}
		if key == "stream_idle_timeout" {
			if d == 0 {
				d = DefaultStreamIdleTimeout
			}
			c.StreamIdleTimeout = d
		} else {
			c.RequestTimeout = d
		}
	default:
		msg := fmt.Sprintf("config: %s: %s %q", origin, ErrUnknownKey, key)
		if s := suggest(key, keys); s != "" {
			msg += fmt.Sprintf(" (did you mean %q?)", s)
		}
		return &kindError{msg, ErrUnknownKey}
	}
	c.origins[key] = origin
	c.layers[key] = layer
	return nil
}

// Origin returns where key's value came from.
func (c *Config) Origin(key string) string { return c.origins[key] }

// Settings lists every effective value with its origin, in a stable order.
func (c *Config) Settings() []Setting {
	out := []Setting{
		{"model", c.Model, c.origins["model"], false},
		{"permission_mode", c.PermissionMode, c.origins["permission_mode"], false},
		{"context_window", strconv.Itoa(c.ContextWindow), c.origins["context_window"], false},
		{"instructions_budget", strconv.Itoa(c.InstructionsBudget), c.origins["instructions_budget"], false},
		{"sandbox.network_access", strconv.FormatBool(c.NetworkAccess), c.origins["sandbox.network_access"], false},
		{"store", RedactURL(c.Store), c.origins["store"], false},
		{"max_steps", strconv.Itoa(c.MaxSteps), c.origins["max_steps"], false},
		{"max_output_tokens", strconv.Itoa(c.MaxOutputTokens), c.origins["max_output_tokens"], false},
		{"reasoning_effort", c.ReasoningEffort, c.origins["reasoning_effort"], false},
		{"thinking_budget", strconv.Itoa(c.ThinkingBudget), c.origins["thinking_budget"], false},
		{"system_prompt", c.SystemPrompt, c.origins["system_prompt"], false},
		{"append_system_prompt", c.AppendSystemPrompt, c.origins["append_system_prompt"], false},
		{"stream_idle_timeout", showDuration(c.StreamIdleTimeout), c.origins["stream_idle_timeout"], false},
		{"request_timeout", showDuration(c.RequestTimeout), c.origins["request_timeout"], false},
	}
	// One line per list entry, so each shows where it came from.
	out = append(out, c.listOrigins...)
	out = append(out, c.mcpSettings()...)
	for _, n := range slices.Sorted(maps.Keys(c.Providers)) {
		p := c.Providers[n]
		if p.BaseURL != "" {
			k := "providers." + n + ".base_url"
			out = append(out, Setting{k, p.BaseURL, c.origins[k], false})
		}
		if p.APIKeyEnv != "" {
			k := "providers." + n + ".api_key_env"
			out = append(out, Setting{k, p.APIKeyEnv, c.origins[k], false})
		}
		for _, h := range slices.Sorted(maps.Keys(p.Headers)) {
			k := "providers." + n + ".headers." + h
			out = append(out, Setting{k, p.Headers[h], c.origins[k], false})
		}
	}
	for _, r := range c.wsRules {
		out = append(out, Setting{"workspaces." + tomlString(r.root) + ".permissions." + r.key, r.value, r.origin, false})
	}
	for _, m := range slices.Sorted(maps.Keys(c.Prices)) {
		p := c.Prices[m]
		k := "prices." + m
		out = append(out, Setting{k, p.String(), c.origins[k], false})
	}
	for _, h := range c.held {
		out = append(out, Setting{h.Key, h.Value, h.Origin, true})
	}
	return append(out, c.ignored...)
}

func validStore(value, origin string) error {
	if IsPostgresURL(value) {
		if _, err := url.Parse(value); err != nil {
			return fmt.Errorf("config: %s: %w: store: not a URL: %v", origin, ErrInvalid, err)
		}
	}
	return nil
}

// IsPostgresURL reports whether a store setting names a PostgreSQL server.
func IsPostgresURL(s string) bool {
	return strings.HasPrefix(s, "postgres://") || strings.HasPrefix(s, "postgresql://")
}

// RedactURL hides the password of a URL, for display; other text is
// returned as it is.
func RedactURL(s string) string {
	if !strings.Contains(s, "://") {
		return s
	}
	u, err := url.Parse(s)
	if err != nil {
		return "(unparsable URL)"
	}
	q := u.Query()
	if q.Has("password") {
		q.Set("password", "xxxxx")
		u.RawQuery = q.Encode()
	}
	return u.Redacted()
}

// keyLines maps each dotted key of a TOML document to its 1-based line. It
// understands [table] headers and key = value lines, which is all rein's
// files use; other shapes simply get no line.
func keyLines(data []byte) map[string]int {
	out := map[string]int{}
	table := ""
	sc := bufio.NewScanner(bytes.NewReader(data))
	n := 0
	for sc.Scan() {
		n++
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		if strings.HasPrefix(line, "[") && !strings.HasPrefix(line, "[[") {
			if end := strings.IndexByte(line, ']'); end > 0 {
				table = unquoteKey(line[1:end])
				if _, ok := out[table]; !ok {
					out[table] = n
				}
			}
			continue
		}
		eq := strings.IndexByte(line, '=')
		if eq <= 0 {
			continue
		}
		k := unquoteKey(line[:eq])
		if table != "" {
			k = table + "." + k
		}
		if _, ok := out[k]; !ok {
			out[k] = n
		}
	}
	return out
}

func unquoteKey(s string) string {
	parts := strings.Split(s, ".")
	for i, p := range parts {
		parts[i] = strings.Trim(strings.TrimSpace(p), `"'`)
	}
	return strings.Join(parts, ".")
}

// suggest returns the known key closest to key (Levenshtein distance)
// when it is close enough to be a typo: at most 2 edits, or a third of the
// key's length for longer keys; else "".
func suggest(key string, known []string) string {
	best, bestD := "", max(2, len([]rune(key))/3)+1
	for _, k := range known {
		if d := levenshtein.ComputeDistance(key, k); d < bestD {
			best, bestD = k, d
		}
	}
	return best
}
