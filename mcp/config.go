package mcp

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Transport is how rein talks to a server.
type Transport string

// Transports.
const (
	// Stdio runs the server as a child process and speaks JSON-RPC over
	// its stdin and stdout.
	Stdio Transport = "stdio"
	// HTTP is the Streamable HTTP transport.
	HTTP Transport = "http"
	// SSE is the older HTTP+SSE transport, for servers that still use it.
	SSE Transport = "sse"
)

// Defaults.
const (
	// DefaultStartupTimeout is how long the first model request waits for
	// a server that is still starting.
	DefaultStartupTimeout = 10 * time.Second
	// DefaultToolTimeout is how long a call may go without an answer (or
	// a progress notification).
	DefaultToolTimeout = 60 * time.Second
)

// Sentinel errors.
var (
	// ErrConfig: a server's configuration is incomplete or contradictory.
	ErrConfig = errors.New("mcp: bad server config")
	// ErrUnset: a ${VAR} reference names a variable that is not set (or
	// one rein does not hand out).
	ErrUnset = errors.New("mcp: environment variable not set")
)

// ServerConfig is one MCP server, as the user's config.toml
// ([mcp_servers.NAME]), a project's .mcp.json, or an ACP client describes
// it.
type ServerConfig struct {
	// Name is the server's name: the SERVER of its tools' names
	// mcp__SERVER__TOOL. Letters, digits, "_" and "-", no "__".
	Name string
	// Type is the transport; empty means stdio when Command is set and
	// Streamable HTTP when URL is.
	Type Transport

	// Command, Args, Env and Cwd start a stdio server. Env is added to
	// the filtered environment every stdio server gets (Options.Environ).
	// Cwd is its working directory, relative to Options.Dir (the
	// workspace) when not absolute; without one the server runs in
	// Options.ServerDir, not in the workspace: the directory a launcher
	// runs in chooses code (npx prefers ./node_modules, python -m imports
	// ./mod, node server.js reads ./server.js), so a Cwd inside a
	// workspace lets that workspace choose the server's code.
	Command string
	Args    []string
	Env     map[string]string
	Cwd     string

	// URL, Headers and BearerTokenEnv reach an HTTP or SSE server. The
	// bearer token is read from the environment variable BearerTokenEnv
	// when the server starts and sent as "Authorization: Bearer …".
	URL            string
	Headers        map[string]string
	BearerTokenEnv string

	// Disabled servers are listed but not started.
	Disabled bool
	// StartupTimeout bounds how long the first model request waits for
	// the server (default DefaultStartupTimeout). A server still starting
	// then keeps starting; its tools appear at a later step.
	StartupTimeout time.Duration
	// ToolTimeout bounds one call (default DefaultToolTimeout); a
	// progress notification from the server restarts it.
	ToolTimeout time.Duration

	// Origin says where the server was configured ("FILE:LINE", "FILE",
	// "acp"), for messages.
	Origin string
}

// Transport returns the server's transport: Type, or the one its fields
// imply.
func (c ServerConfig) Transport() Transport {
	switch {
	case c.Type != "":
		return c.Type
	case c.URL != "":
		return HTTP
	}
	return Stdio
}

// Target is what the server runs or reaches: its command line or URL.
func (c ServerConfig) Target() string {
	if c.Transport() == Stdio {
		return strings.Join(append([]string{c.Command}, c.Args...), " ")
	}
	return c.URL
}

// WorkDir returns the directory the server's Cwd names, relative to dir
// when not absolute; "" when it sets none. Call it on an expanded
// configuration (Expand).
func (c ServerConfig) WorkDir(dir string) string {
	if c.Cwd == "" || filepath.IsAbs(c.Cwd) || dir == "" {
		return c.Cwd
	}
	return filepath.Join(dir, c.Cwd)
}

func (c ServerConfig) startupTimeout() time.Duration {
	if c.StartupTimeout > 0 {
		return c.StartupTimeout
	}
	return DefaultStartupTimeout
}

func (c ServerConfig) toolTimeout() time.Duration {
	if c.ToolTimeout > 0 {
		return c.ToolTimeout
	}
	return DefaultToolTimeout
}

// ValidName reports whether name can name a server: one or more letters,
// digits, "_" or "-", not starting with "_" or "-" and without "__" (which
// separates the parts of a tool name).
func ValidName(name string) bool {
	if name == "" || len(name) > 48 || strings.Contains(name, "__") || name[0] == '_' || name[0] == '-' {
		return false
	}
	for _, r := range name {
		if !nameRune(r) {
			return false
		}
	}
	return true
}

func nameRune(r rune) bool {
	return r == '_' || r == '-' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9'
}

// SanitizeName turns a name from a file rein does not own (.mcp.json, an
// ACP client) into a valid one: other characters become "_", runs of "_"
// collapse, and it is cut to 48 bytes. It returns "" when nothing is left.
func SanitizeName(name string) string {
	var b strings.Builder
	for _, r := range name {
		if !nameRune(r) {
			r = '_'
		}
		if r == '_' && strings.HasSuffix(b.String(), "_") {
			continue
		}
		b.WriteRune(r)
	}
	s := strings.TrimLeft(b.String(), "_-")
	if len(s) > 48 {
		s = s[:48]
	}
	return s
}

// Validate reports what is wrong with the configuration, wrapping
// ErrConfig; nil when the server can be started.
func (c ServerConfig) Validate() error {
	bad := func(format string, args ...any) error {
		where := ""
		if c.Origin != "" {
			where = " (" + c.Origin + ")"
		}
		return fmt.Errorf("%w: server %q%s: %s", ErrConfig, c.Name, where, fmt.Sprintf(format, args...))
	}
	if !ValidName(c.Name) {
		return bad("the name must be letters, digits, _ or - (no __, at most 48)")
	}
	switch c.Transport() {
	case Stdio:
		if c.Command == "" {
			return bad("a stdio server needs a command")
		}
		if c.URL != "" || len(c.Headers) > 0 || c.BearerTokenEnv != "" {
			return bad("url, headers and bearer_token_env are for http and sse servers, not a command")
		}
	case HTTP, SSE:
		if c.URL == "" {
			return bad("an %s server needs a url", c.Transport())
		}
		if c.Command != "" || len(c.Args) > 0 || len(c.Env) > 0 || c.Cwd != "" {
			return bad("command, args, env and cwd are for stdio servers, not a url")
		}
		u, err := url.Parse(c.URL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return bad("url %q: want an http:// or https:// URL", c.URL)
		}
	default:
		return bad("type %q: want stdio, http or sse", c.Type)
	}
	if c.StartupTimeout < 0 || c.ToolTimeout < 0 {
		return bad("timeouts must not be negative")
	}
	return nil
}

// Expand replaces ${VAR} and ${VAR:-default} in the command, args, env
// values, cwd, url and header values with lookup(VAR), as Claude Code
// does in .mcp.json. A variable lookup does not find and that has no
// default is an error wrapping ErrUnset. "$$" is a literal "$".
func (c ServerConfig) Expand(lookup func(string) (string, bool)) (ServerConfig, error) {
	var err error
	ex := func(s string) string {
		if err != nil || !strings.Contains(s, "$") {
			return s
		}
		var out string
		out, err = expand(s, lookup)
		return out
	}
	c.Command = ex(c.Command)
	c.Args = slices.Clone(c.Args)
	for i := range c.Args {
		c.Args[i] = ex(c.Args[i])
	}
	c.Env = maps.Clone(c.Env)
	for _, k := range slices.Sorted(maps.Keys(c.Env)) {
		c.Env[k] = ex(c.Env[k])
	}
	c.Cwd = ex(c.Cwd)
	c.URL = ex(c.URL)
	c.Headers = maps.Clone(c.Headers)
	for _, k := range slices.Sorted(maps.Keys(c.Headers)) {
		c.Headers[k] = ex(c.Headers[k])
	}
	if err != nil {
		return c, fmt.Errorf("server %q: %w", c.Name, err)
	}
	return c, nil
}

func expand(s string, lookup func(string) (string, bool)) (string, error) {
	var b strings.Builder
	for {
		i := strings.IndexByte(s, '$')
		if i < 0 || i == len(s)-1 {
			b.WriteString(s)
			return b.String(), nil
		}
		b.WriteString(s[:i])
		switch s[i+1] {
		case '$':
			b.WriteByte('$')
			s = s[i+2:]
			continue
		case '{':
		default:
			b.WriteByte('$')
			s = s[i+1:]
			continue
		}
		end := strings.IndexByte(s[i:], '}')
		if end < 0 {
			return "", fmt.Errorf("unclosed ${ in %q", s)
		}
		ref := s[i+2 : i+end]
		name, def, hasDef := strings.Cut(ref, ":-")
		v, ok := lookup(name)
		switch {
		case ok && v != "":
			b.WriteString(v)
		case hasDef:
			b.WriteString(def)
		case ok:
		default:
			return "", fmt.Errorf("%w: ${%s}", ErrUnset, name)
		}
		s = s[i+end+1:]
	}
}

// projectFile is Claude Code's .mcp.json.
type projectFile struct {
	MCPServers map[string]json.RawMessage `json:"mcpServers"`
}

type projectServer struct {
	Type    string            `json:"type"`
	Command string            `json:"command"`
	Args    []string          `json:"args"`
	Env     map[string]string `json:"env"`
	Cwd     string            `json:"cwd"`
	URL     string            `json:"url"`
	Headers map[string]string `json:"headers"`
}

// projectKeys are the keys of a .mcp.json server rein uses, and what
// each takes.
var projectKeys = map[string]string{"type": "a string", "command": "a string", "args": "a list of strings",
	"env": "an object of strings", "cwd": "a string", "url": "a string", "headers": "an object of strings"}

// LoadProjectFile reads a project's .mcp.json (Claude Code's format: an
// "mcpServers" object of servers with type, command, args, env, url and
// headers). A missing file is no servers and no error. Names that are
// not valid are sanitized (SanitizeName); keys rein does not use are
// skipped. Both are reported as warnings. A file that does not parse is
// an error naming it.
func LoadProjectFile(path string) ([]ServerConfig, []string, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("mcp: %w", err)
	}
	var f projectFile
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, nil, fmt.Errorf("mcp: %s: %w", path, err)
	}
	var out []ServerConfig
	var warnings []string
	seen := map[string]bool{}
	for _, name := range slices.Sorted(maps.Keys(f.MCPServers)) {
		raw := f.MCPServers[name]
		var ps projectServer
		dec := json.NewDecoder(bytes.NewReader(raw))
		if err := dec.Decode(&ps); err != nil {
			var te *json.UnmarshalTypeError
			if errors.As(err, &te) && projectKeys[te.Field] != "" {
				got := "a " + te.Value
				if te.Value == "object" || te.Value == "array" {
					got = "an " + te.Value
				}
				return nil, nil, fmt.Errorf("mcp: %s: %s: want %s, not %s", path, serverKey(name, te.Field), projectKeys[te.Field], got)
			}
			return nil, nil, fmt.Errorf("mcp: %s: %s: %w", path, serverKey(name), err)
		}
		var keys map[string]json.RawMessage
		_ = json.Unmarshal(raw, &keys)
		for _, k := range slices.Sorted(maps.Keys(keys)) {
			if projectKeys[k] == "" {
				warnings = append(warnings, fmt.Sprintf("%s: %s is not used by rein", path, serverKey(name, k)))
			}
		}
		n := name
		if !ValidName(n) {
			n = SanitizeName(name)
			warnings = append(warnings, fmt.Sprintf("%s: server %q is called %q in rein (tool names allow only letters, digits, _ and -)", path, name, n))
		}
		if n == "" || seen[n] {
			warnings = append(warnings, fmt.Sprintf("%s: server %q skipped: its name is empty or taken once sanitized", path, name))
			continue
		}
		seen[n] = true
		typ := Transport(ps.Type)
		if typ == "streamable-http" || typ == "streamableHttp" {
			typ = HTTP
		}
		out = append(out, ServerConfig{Name: n, Type: typ, Command: ps.Command, Args: ps.Args, Env: ps.Env, Cwd: ps.Cwd,
			URL: ps.URL, Headers: ps.Headers, Origin: path})
	}
	return out, warnings, nil
}

// serverKey is the path of a .mcp.json server, "mcpServers.NAME", and
// of its key k when given ("mcpServers.NAME.k"). A name or key that is
// not plain is quoted, mcpServers["proj.srv"]: a dot in it would read as
// nesting, and a control character would reach the terminal.
func serverKey(name string, k ...string) string {
	path := "mcpServers"
	for _, s := range append([]string{name}, k...) {
		if s != "" && !strings.ContainsFunc(s, func(r rune) bool { return !nameRune(r) }) {
			path += "." + s
		} else {
			path += "[" + strconv.Quote(s) + "]"
		}
	}
	return path
}
