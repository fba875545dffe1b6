package config

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"
)

// MCPServer is one [mcp_servers.NAME] table, in the shape Codex uses:
//
//	[mcp_servers.github]
//	command = "npx"
//	args = ["-y", "@modelcontextprotocol/server-github"]
//	env = { GITHUB_PERSONAL_ACCESS_TOKEN = "${GITHUB_TOKEN}" }
//	startup_timeout = "20s"      # or startup_timeout_sec = 20
//	tool_timeout = 120           # seconds, or tool_timeout_sec
//
//	[mcp_servers.docs]
//	url = "https://docs.example.com/mcp"
//	headers = { "X-Team" = "infra" }
//	bearer_token_env = "DOCS_TOKEN"
//	enabled = false
//
// Package mcp validates and runs them; this package only reads them.
type MCPServer struct {
	// Name is the table's name; Origin the file and line of its table;
	// Project says it comes from the workspace's file (applied only in a
	// trusted workspace).
	Name    string `toml:"-"`
	Origin  string `toml:"-"`
	Project bool   `toml:"-"`

	Type           string            `toml:"type"`
	Command        string            `toml:"command"`
	Args           []string          `toml:"args"`
	Env            map[string]string `toml:"env"`
	Cwd            string            `toml:"cwd"`
	URL            string            `toml:"url"`
	Headers        map[string]string `toml:"headers"`
	BearerTokenEnv string            `toml:"bearer_token_env"`
	Enabled        *bool             `toml:"enabled"`

	// StartupTimeout and ToolTimeout are 0 when not set (package mcp's
	// defaults apply).
	StartupTimeout time.Duration `toml:"-"`
	ToolTimeout    time.Duration `toml:"-"`

	RawStartup    any      `toml:"startup_timeout"`
	RawStartupSec *float64 `toml:"startup_timeout_sec"`
	RawTool       any      `toml:"tool_timeout"`
	RawToolSec    *float64 `toml:"tool_timeout_sec"`
}

// Disabled reports whether enabled = false.
func (s MCPServer) Disabled() bool { return s.Enabled != nil && !*s.Enabled }

// Target is the server's command line or URL, for listings.
func (s MCPServer) Target() string {
	if s.URL != "" {
		return s.URL
	}
	return strings.Join(append([]string{s.Command}, s.Args...), " ")
}

// Canonical is the whole of what the server would run or reach, as one
// line of JSON with sorted keys: its transport (the one its fields imply
// when type is not set), command, args, env, cwd, url, headers and
// bearer_token_env. It is a workspace server's trust value, so a change to
// any of them (an LD_PRELOAD in env, another cwd, a header that carries a
// token) needs trust again; timeouts and enabled do not.
func (s MCPServer) Canonical() string {
	typ := s.Type
	switch {
	case typ != "":
	case s.URL != "":
		typ = "http"
	default:
		typ = "stdio"
	}
	m := map[string]any{"type": typ}
	for k, v := range map[string]string{"command": s.Command, "cwd": s.Cwd, "url": s.URL, "bearer_token_env": s.BearerTokenEnv} {
		if v != "" {
			m[k] = v
		}
	}
	if len(s.Args) > 0 {
		m["args"] = s.Args
	}
	if len(s.Env) > 0 {
		m["env"] = s.Env
	}
	if len(s.Headers) > 0 {
		m["headers"] = s.Headers
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(m) // strings, string lists and string maps always encode
	return strings.TrimSuffix(b.String(), "\n")
}

// applyMCP records the [mcp_servers] tables of one file: each replaces a
// server of the same name from an earlier layer. A workspace file's
// servers are programs the repository names: they are held until the
// workspace is trusted.
func (c *Config) applyMCP(servers map[string]MCPServer, at func(string) string, project bool) error {
	for _, name := range slices.Sorted(maps.Keys(servers)) {
		s := servers[name]
		key := "mcp_servers." + name
		s.Name, s.Origin, s.Project = name, at(key), project
		var err error
		if s.StartupTimeout, err = seconds(s.RawStartup, s.RawStartupSec); err != nil {
			return fmt.Errorf("config: %s: %w: %s.startup_timeout: %v", s.Origin, ErrInvalid, key, err)
		}
		if s.ToolTimeout, err = seconds(s.RawTool, s.RawToolSec); err != nil {
			return fmt.Errorf("config: %s: %w: %s.tool_timeout: %v", s.Origin, ErrInvalid, key, err)
		}
		s.RawStartup, s.RawStartupSec, s.RawTool, s.RawToolSec = nil, nil, nil, nil
		if project {
			c.heldMCP = append(c.heldMCP, s)
			c.held = append(c.held, Held{Key: key, Value: s.Canonical(), Origin: s.Origin})
			continue
		}
		c.setMCP(s)
	}
	return nil
}

// setMCP adds s, replacing a server of the same name; the list stays
// sorted by name.
func (c *Config) setMCP(s MCPServer) {
	c.MCPServers = slices.DeleteFunc(c.MCPServers, func(o MCPServer) bool { return o.Name == s.Name })
	c.MCPServers = append(c.MCPServers, s)
	slices.SortStableFunc(c.MCPServers, func(a, b MCPServer) int { return strings.Compare(a.Name, b.Name) })
}

// HeldMCPServers returns the workspace file's [mcp_servers] held until the
// workspace is trusted (none after ApplyHeld).
func (c *Config) HeldMCPServers() []MCPServer {
	var out []MCPServer
	for _, h := range c.held {
		if name, ok := strings.CutPrefix(h.Key, "mcp_servers."); ok {
			for _, s := range c.heldMCP {
				if s.Name == name {
					out = append(out, s)
				}
			}
		}
	}
	return out
}

// applyHeldMCP applies the held workspace server name.
func (c *Config) applyHeldMCP(name string) {
	for _, s := range c.heldMCP {
		if s.Name == name {
			c.setMCP(s)
		}
	}
}

// seconds reads a timeout given as a duration string ("30s", "2m"), a
// number of seconds, or (Codex's spelling) a *_sec number.
func seconds(v any, sec *float64) (time.Duration, error) {
	if sec != nil {
		if v != nil {
			return 0, fmt.Errorf("set it once, as a duration or in seconds")
		}
		v = *sec
	}
	var d time.Duration
	switch x := v.(type) {
	case nil:
		return 0, nil
	case string:
		var err error
		if d, err = time.ParseDuration(x); err != nil {
			return 0, fmt.Errorf("%q: want a duration like \"30s\" or a number of seconds", x)
		}
	case int64:
		d = time.Duration(x) * time.Second
	case float64:
		d = time.Duration(x * float64(time.Second))
	default:
		return 0, fmt.Errorf("%v: want a duration like \"30s\" or a number of seconds", v)
	}
	if d <= 0 {
		return 0, fmt.Errorf("%s: want more than zero", d)
	}
	return d, nil
}

// mcpSettings lists the MCP servers for Settings: one line each, the
// target as value.
func (c *Config) mcpSettings() []Setting {
	var out []Setting
	for _, s := range c.MCPServers {
		v := s.Target()
		if s.Disabled() {
			v += " (disabled)"
		}
		out = append(out, Setting{Key: "mcp_servers." + s.Name, Value: v, Origin: s.Origin})
	}
	return out
}

// formatSeconds writes d for a config file: whole seconds as a number,
// else a duration string.
func formatSeconds(d time.Duration) string {
	if d%time.Second == 0 {
		return strconv.FormatInt(int64(d/time.Second), 10)
	}
	return strconv.Quote(d.String())
}
