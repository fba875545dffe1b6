// Package config owns rein's user settings: the TOML files
// (~/.config/rein/config.toml, then the workspace's .rein/config.toml), the
// REIN_* environment variables and command-line flags, applied in that order
// (a later layer wins), and the record of where each effective value came
// from, which `rein config show` prints.
//
// Scalars are replaced by a later layer; the lists ([sandbox]
// writable_roots, [permissions] allow/ask/deny) are added to, and each
// entry keeps its own origin.
//
// Unknown keys and values of the wrong type are errors naming the file and
// line; nothing is silently ignored.
//
// Concurrency: a Config is a plain value; do not change it from several
// goroutines at once. This package imports only go-toml and the standard
// library; it must not import any other rein package.
package config

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/pelletier/go-toml/v2"
)

// Errors of loading.
var (
	// ErrUnknownKey: a file holds a key rein does not know.
	ErrUnknownKey = errors.New("unknown key")
	// ErrInvalid: a value is malformed or out of range.
	ErrInvalid = errors.New("invalid value")
)

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
	// Providers holds per-provider settings by provider name.
	Providers map[string]Provider
	// WritableRoots are further directories (absolute, or ~/...) that
	// bash, hooks and the file tools may write in, beyond the workspace
	// and the system temp directory, in workspace-write mode. Every layer
	// adds to the list.
	WritableRoots []string
	// NetworkAccess lets sandboxed bash and hooks use the network.
	NetworkAccess bool
	// Permissions are the permission rules; every layer adds to them.
	Permissions Permissions

	origins     map[string]string
	listOrigins []Setting
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

// Provider holds one provider's settings.
type Provider struct {
	// BaseURL overrides the provider's API endpoint.
	BaseURL string `toml:"base_url"`
	// APIKeyEnv names the environment variable holding the API key.
	APIKeyEnv string `toml:"api_key_env"`
}

// file is the TOML shape; pointers tell "absent" from "zero".
type file struct {
	Model              *string             `toml:"model"`
	PermissionMode     *string             `toml:"permission_mode"`
	ContextWindow      *int                `toml:"context_window"`
	InstructionsBudget *int                `toml:"instructions_budget"`
	Providers          map[string]Provider `toml:"providers"`
	Sandbox            *sandboxFile        `toml:"sandbox"`
	Permissions        *Permissions        `toml:"permissions"`
}

// Setting is one effective value and where it came from: "default",
// "FILE:LINE", "env NAME" or "flag --NAME".
type Setting struct {
	Key    string `json:"key"`
	Value  string `json:"value"`
	Origin string `json:"origin"`
}

// Env names the environment variable of each key.
var Env = map[string]string{
	"model":                  "REIN_MODEL",
	"permission_mode":        "REIN_PERMISSION_MODE",
	"context_window":         "REIN_CONTEXT_WINDOW",
	"instructions_budget":    "REIN_INSTRUCTIONS_BUDGET",
	"sandbox.network_access": "REIN_NETWORK_ACCESS",
}

// Default returns the built-in configuration.
func Default() *Config {
	c := &Config{
		Model:              DefaultModel,
		PermissionMode:     DefaultPermissionMode,
		InstructionsBudget: DefaultInstructionsBudget,
		Providers:          map[string]Provider{},
		origins:            map[string]string{},
	}
	for _, k := range keys {
		c.origins[k] = "default"
	}
	return c
}

var keys = []string{"model", "permission_mode", "context_window", "instructions_budget", "sandbox.network_access"}

// UserFile returns the user's config file: $XDG_CONFIG_HOME/rein/config.toml,
// else ~/.config/rein/config.toml ("" when neither can be named).
func UserFile(getenv func(string) string) string {
	if d := getenv("XDG_CONFIG_HOME"); d != "" {
		return filepath.Join(d, "rein", "config.toml")
	}
	if h := getenv("HOME"); h != "" {
		return filepath.Join(h, ".config", "rein", "config.toml")
	}
	return ""
}

// ProjectFile returns the workspace's config file, <dir>/.rein/config.toml.
func ProjectFile(dir string) string { return filepath.Join(dir, ".rein", "config.toml") }

// Load builds the effective configuration: defaults, then each file that
// exists (in order), then the environment. Flags are applied afterwards with
// Set. A missing file is skipped; an unreadable or invalid one is an error
// naming it.
func Load(files []string, getenv func(string) string) (*Config, error) {
	c := Default()
	for _, f := range files {
		if f == "" {
			continue
		}
		data, err := os.ReadFile(f)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("config: %w", err)
		}
		if err := c.apply(f, data); err != nil {
			return nil, err
		}
	}
	for _, k := range keys {
		name := Env[k]
		if v := getenv(name); v != "" {
			if err := c.Set(k, v, "env "+name); err != nil {
				return nil, err
			}
		}
	}
	return c, nil
}

func (c *Config) apply(path string, data []byte) error {
	var f file
	dec := toml.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		var sm *toml.StrictMissingError
		if errors.As(err, &sm) && len(sm.Errors) > 0 {
			var msgs []string
			for _, e := range sm.Errors {
				row, _ := e.Position()
				msgs = append(msgs, fmt.Sprintf("%s:%d: %s %q", path, row, ErrUnknownKey, strings.Join(e.Key(), ".")))
			}
			return fmt.Errorf("config: %s: %w", strings.Join(msgs, "; "), ErrUnknownKey)
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
	if f.Model != nil {
		if err := c.Set("model", *f.Model, at("model")); err != nil {
			return err
		}
	}
	if f.PermissionMode != nil {
		if err := c.Set("permission_mode", *f.PermissionMode, at("permission_mode")); err != nil {
			return err
		}
	}
	if f.ContextWindow != nil {
		if err := c.Set("context_window", strconv.Itoa(*f.ContextWindow), at("context_window")); err != nil {
			return err
		}
	}
	if f.InstructionsBudget != nil {
		if err := c.Set("instructions_budget", strconv.Itoa(*f.InstructionsBudget), at("instructions_budget")); err != nil {
			return err
		}
	}
	if f.Sandbox != nil {
		if f.Sandbox.NetworkAccess != nil {
			if err := c.Set("sandbox.network_access", strconv.FormatBool(*f.Sandbox.NetworkAccess), at("sandbox.network_access")); err != nil {
				return err
			}
		}
		for _, r := range f.Sandbox.WritableRoots {
			if err := c.Add("sandbox.writable_roots", r, at("sandbox.writable_roots")); err != nil {
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
				if err := c.Add(l.key, r, at(l.key)); err != nil {
					return err
				}
			}
		}
	}
	for name, p := range f.Providers {
		cur := c.Providers[name]
		if p.BaseURL != "" {
			cur.BaseURL = p.BaseURL
			c.origins["providers."+name+".base_url"] = at("providers." + name + ".base_url")
		}
		if p.APIKeyEnv != "" {
			cur.APIKeyEnv = p.APIKeyEnv
			c.origins["providers."+name+".api_key_env"] = at("providers." + name + ".api_key_env")
		}
		c.Providers[name] = cur
	}
	return nil
}

// Set sets key to value (given as text) and records origin. It validates the
// value; an error names the origin.
func (c *Config) Set(key, value, origin string) error {
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
		switch value {
		case ReadOnly, WorkspaceWrite, FullAccess:
		default:
			return bad("want read-only, workspace-write or full-access")
		}
		c.PermissionMode = value
	case "sandbox.network_access":
		b, err := strconv.ParseBool(value)
		if err != nil {
			return bad("want true or false")
		}
		c.NetworkAccess = b
	case "context_window", "instructions_budget":
		n, err := strconv.Atoi(value)
		if err != nil || n < 0 {
			return bad("want a whole number ≥ 0")
		}
		if key == "context_window" {
			c.ContextWindow = n
		} else {
			c.InstructionsBudget = n
		}
	default:
		return fmt.Errorf("config: %s: %w %q", origin, ErrUnknownKey, key)
	}
	c.origins[key] = origin
	return nil
}

// Add appends value to the list key (sandbox.writable_roots,
// permissions.allow, permissions.ask, permissions.deny) and records
// origin. A writable root must be absolute or start with ~/.
func (c *Config) Add(key, value, origin string) error {
	bad := func(why string) error {
		return fmt.Errorf("config: %s: %w: %s = %q: %s", origin, ErrInvalid, key, value, why)
	}
	switch key {
	case "sandbox.writable_roots":
		if !filepath.IsAbs(value) && !strings.HasPrefix(value, "~/") {
			return bad("want an absolute path or one starting with ~/")
		}
		c.WritableRoots = append(c.WritableRoots, value)
	case "permissions.allow":
		c.Permissions.Allow = append(c.Permissions.Allow, value)
	case "permissions.ask":
		c.Permissions.Ask = append(c.Permissions.Ask, value)
	case "permissions.deny":
		c.Permissions.Deny = append(c.Permissions.Deny, value)
	default:
		return fmt.Errorf("config: %s: %w %q", origin, ErrUnknownKey, key)
	}
	if c.origins[key] != "" && !strings.Contains(c.origins[key], origin) {
		c.origins[key] += ", " + origin
	} else {
		c.origins[key] = origin
	}
	c.listOrigins = append(c.listOrigins, Setting{key, value, origin})
	return nil
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

// Origin returns where key's value came from.
func (c *Config) Origin(key string) string { return c.origins[key] }

// Settings lists every effective value with its origin, in a stable order.
func (c *Config) Settings() []Setting {
	out := []Setting{
		{"model", c.Model, c.origins["model"]},
		{"permission_mode", c.PermissionMode, c.origins["permission_mode"]},
		{"context_window", strconv.Itoa(c.ContextWindow), c.origins["context_window"]},
		{"instructions_budget", strconv.Itoa(c.InstructionsBudget), c.origins["instructions_budget"]},
		{"sandbox.network_access", strconv.FormatBool(c.NetworkAccess), c.origins["sandbox.network_access"]},
	}
	// One line per list entry, so each shows where it came from.
	out = append(out, c.listOrigins...)
	names := make([]string, 0, len(c.Providers))
	for n := range c.Providers {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		p := c.Providers[n]
		if p.BaseURL != "" {
			k := "providers." + n + ".base_url"
			out = append(out, Setting{k, p.BaseURL, c.origins[k]})
		}
		if p.APIKeyEnv != "" {
			k := "providers." + n + ".api_key_env"
			out = append(out, Setting{k, p.APIKeyEnv, c.origins[k]})
		}
	}
	return out
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
