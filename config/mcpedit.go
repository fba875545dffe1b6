package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
)

// Errors of the MCP server edits.
var (
	// ErrExists: a server of that name is already in the file.
	ErrExists = errors.New("already configured")
	// ErrNoServer: no server of that name is in the file.
	ErrNoServer = errors.New("no such MCP server")
	// ErrNotEditable: the server is written in a form rein does not
	// rewrite (dotted keys, an inline table); the error names the line.
	ErrNotEditable = errors.New("not in a form rein can edit")
)

// AddMCPServer appends s as a [mcp_servers.NAME] table to the config file
// at path (created, mode 0600, when missing) and leaves every other byte of
// the file as it was. It refuses a name the file already has (ErrExists)
// and a result that would not load. The file is replaced atomically.
func AddMCPServer(path string, s MCPServer) error {
	data, mode, err := readConfig(path)
	if err != nil {
		return err
	}
	if _, _, found, err := mcpBlock(data, s.Name); err != nil {
		return fmt.Errorf("config: %s: %w", path, err)
	} else if found {
		return fmt.Errorf("config: %s: MCP server %q %w (rein mcp remove %s first)", path, s.Name, ErrExists, s.Name)
	}
	var b bytes.Buffer
	b.Write(data)
	if len(data) > 0 && !bytes.HasSuffix(data, []byte("\n")) {
		b.WriteByte('\n')
	}
	if len(data) > 0 {
		b.WriteByte('\n')
	}
	b.WriteString(renderMCP(s))
	return writeConfig(path, b.Bytes(), mode)
}

// RemoveMCPServer deletes the [mcp_servers.NAME] table (with its
// sub-tables) from the config file at path, leaving the rest as it was.
func RemoveMCPServer(path, name string) error {
	data, mode, err := readConfig(path)
	if err != nil {
		return err
	}
	start, end, found, err := mcpBlock(data, name)
	if err != nil {
		return fmt.Errorf("config: %s: %w", path, err)
	}
	if !found {
		return fmt.Errorf("config: %s: %w %q", path, ErrNoServer, name)
	}
	lines := splitLines(data)
	// Take the blank lines before the table with it, so removing what
	// AddMCPServer added restores the file.
	for start > 0 && strings.TrimSpace(lines[start-1]) == "" {
		start--
	}
	out := strings.Join(lines[:start], "") + strings.Join(lines[end:], "")
	return writeConfig(path, []byte(out), mode)
}

// splitLines splits data after each "\n", keeping it.
func splitLines(data []byte) []string {
	return strings.SplitAfter(string(data), "\n")
}

var tableHeader = regexp.MustCompile(`^\s*\[\s*([^\[\]]+?)\s*\]\s*(#.*)?$`)

// mcpBlock finds the lines [start, end) of server name's table and its
// sub-tables. A server defined otherwise (dotted keys, an inline table
// under [mcp_servers]) is ErrNotEditable.
func mcpBlock(data []byte, name string) (start, end int, found bool, err error) {
	lines := splitLines(data)
	table := ""
	start = -1
	for i, raw := range lines {
		line := strings.TrimSpace(raw)
		if m := tableHeader.FindStringSubmatch(line); m != nil && !strings.HasPrefix(line, "[[") {
			table = unquoteKey(m[1])
			inside := table == "mcp_servers."+name || strings.HasPrefix(table, "mcp_servers."+name+".")
			switch {
			case inside && start < 0:
				start = i
			case !inside && start >= 0:
				return start, i, true, nil
			}
			continue
		}
		eq := strings.IndexByte(line, '=')
		if line == "" || line[0] == '#' || eq <= 0 {
			continue
		}
		key := unquoteKey(line[:eq])
		if table != "" {
			key = table + "." + key
		}
		if start < 0 && (key == "mcp_servers."+name || strings.HasPrefix(key, "mcp_servers."+name+".")) {
			return 0, 0, false, fmt.Errorf("MCP server %q (line %d) is %w; edit it by hand", name, i+1, ErrNotEditable)
		}
	}
	if start >= 0 {
		return start, len(lines), true, nil
	}
	return 0, 0, false, nil
}

// renderMCP writes s as a TOML table.
func renderMCP(s MCPServer) string {
	var b strings.Builder
	fmt.Fprintf(&b, "[mcp_servers.%s]\n", tomlKey(s.Name))
	str := func(k, v string) {
		if v != "" {
			fmt.Fprintf(&b, "%s = %s\n", k, tomlString(v))
		}
	}
	str("type", s.Type)
	str("command", s.Command)
	if len(s.Args) > 0 {
		quoted := make([]string, len(s.Args))
		for i, a := range s.Args {
			quoted[i] = tomlString(a)
		}
		fmt.Fprintf(&b, "args = [%s]\n", strings.Join(quoted, ", "))
	}
	str("cwd", s.Cwd)
	str("url", s.URL)
	str("bearer_token_env", s.BearerTokenEnv)
	table := func(k string, m map[string]string) {
		if len(m) == 0 {
			return
		}
		var kv []string
		for _, name := range slices.Sorted(maps.Keys(m)) {
			kv = append(kv, tomlKey(name)+" = "+tomlString(m[name]))
		}
		fmt.Fprintf(&b, "%s = { %s }\n", k, strings.Join(kv, ", "))
	}
	table("env", s.Env)
	table("headers", s.Headers)
	if s.StartupTimeout > 0 {
		fmt.Fprintf(&b, "startup_timeout = %s\n", formatSeconds(s.StartupTimeout))
	}
	if s.ToolTimeout > 0 {
		fmt.Fprintf(&b, "tool_timeout = %s\n", formatSeconds(s.ToolTimeout))
	}
	if s.Disabled() {
		b.WriteString("enabled = false\n")
	}
	return b.String()
}

var bareKey = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

func tomlKey(k string) string {
	if bareKey.MatchString(k) {
		return k
	}
	return tomlString(k)
}

// tomlString quotes s as a TOML basic string (JSON's escapes are TOML's).
func tomlString(s string) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)
	return strings.TrimSuffix(b.String(), "\n")
}

func readConfig(path string) ([]byte, os.FileMode, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, 0o600, nil
	}
	if err != nil {
		return nil, 0, fmt.Errorf("config: %w", err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		return nil, 0, fmt.Errorf("config: %w", err)
	}
	return data, fi.Mode().Perm(), nil
}

// writeConfig checks that data loads as a config file, then replaces
// path with it atomically.
func writeConfig(path string, data []byte, mode os.FileMode) error {
	if err := Default().apply(path, data, LayerUser); err != nil {
		return fmt.Errorf("config: the edited file would not load, so it was left as it was: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("config: %w", err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".config-*.toml")
	if err != nil {
		return fmt.Errorf("config: %w", err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return fmt.Errorf("config: %w", err)
	}
	if err := tmp.Chmod(mode); err != nil {
		tmp.Close()
		return fmt.Errorf("config: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("config: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("config: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("config: %w", err)
	}
	return nil
}
