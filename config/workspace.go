package config

import (
	"bytes"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
)

// workspaceFile is one [workspaces."ROOT"] table of the user's file:
// settings that apply only in the workspace whose root is ROOT.
type workspaceFile struct {
	Permissions *Permissions `toml:"permissions"`
}

// workspaceRule is a permission rule of one workspace, from the user's
// file.
type workspaceRule struct {
	root, key, value, origin string
}

// applyWorkspaces records the [workspaces."ROOT".permissions] rules of the
// user's file. A workspace file cannot hold them: it would name what other
// workspaces allow.
func (c *Config) applyWorkspaces(path string, ws map[string]workspaceFile, at func(string) string, layer Layer) error {
	if len(ws) == 0 {
		return nil
	}
	if layer != LayerUser {
		return fmt.Errorf("config: %s: %w: [workspaces] tables belong in the user's config file", path, ErrInvalid)
	}
	roots := make([]string, 0, len(ws))
	for r := range ws {
		roots = append(roots, r)
	}
	slices.Sort(roots)
	for _, root := range roots {
		if !filepath.IsAbs(root) {
			return fmt.Errorf("config: %s: %w: workspaces.%q: want the workspace root's absolute path", at("workspaces."+root), ErrInvalid, root)
		}
		pm := ws[root].Permissions
		if pm == nil {
			continue
		}
		for _, l := range []struct {
			key   string
			rules []string
		}{{"allow", pm.Allow}, {"ask", pm.Ask}, {"deny", pm.Deny}} {
			for _, r := range l.rules {
				c.wsRules = append(c.wsRules, workspaceRule{root: root, key: l.key, value: r,
					origin: at("workspaces." + root + ".permissions." + l.key)})
			}
		}
	}
	return nil
}

// PermissionsFor returns the permission rules in force in the workspace
// whose root is root: every layer's [permissions] and the user file's
// [workspaces."root".permissions] (where "allow always" answers are
// written, see AddWorkspaceRule). root is compared as given; callers pass
// the root's real path (trust.Key).
func (c *Config) PermissionsFor(root string) Permissions {
	p := Permissions{Allow: slices.Clone(c.Permissions.Allow), Ask: slices.Clone(c.Permissions.Ask), Deny: slices.Clone(c.Permissions.Deny)}
	for _, r := range c.wsRules {
		if r.root != root {
			continue
		}
		switch r.key {
		case "allow":
			p.Allow = append(p.Allow, r.value)
		case "ask":
			p.Ask = append(p.Ask, r.value)
		case "deny":
			p.Deny = append(p.Deny, r.value)
		}
	}
	return p
}

// AddFor adds value to the list key (allow, ask or deny) of the workspace
// whose root is root, in memory, as AddWorkspaceRule adds it to a file:
// PermissionsFor(root) includes it from now on.
func (c *Config) AddFor(root, key, value, origin string) error {
	switch key {
	case "allow", "ask", "deny":
	default:
		return fmt.Errorf("config: %s: %w %q: want allow, ask or deny", origin, ErrUnknownKey, key)
	}
	c.wsRules = append(c.wsRules, workspaceRule{root: root, key: key, value: value, origin: origin})
	return nil
}

// AddWorkspaceRule adds rule to the list key (allow, ask or deny) of
// [workspaces."root".permissions] in the config file at path (created,
// mode 0600, when missing), leaving every other byte of the file as it
// was. A rule already there is not added twice. The result must load and
// hold exactly the old list plus rule, or nothing is written
// (ErrNotEditable when the table is written in a form rein does not
// rewrite). The file is replaced atomically.
func AddWorkspaceRule(path, root, key, rule string) error {
	switch key {
	case "allow", "ask", "deny":
	default:
		return fmt.Errorf("config: %w %q: want allow, ask or deny", ErrUnknownKey, key)
	}
	if !filepath.IsAbs(root) {
		return fmt.Errorf("config: %w: workspace root %q is not absolute", ErrInvalid, root)
	}
	data, mode, err := readConfig(path)
	if err != nil {
		return err
	}
	before, err := workspaceList(path, data, root, key)
	if err != nil {
		return err
	}
	if slices.Contains(before, rule) {
		return nil
	}
	out, err := insertRule(data, root, key, rule, len(before) > 0)
	if err != nil {
		return fmt.Errorf("config: %s: %w", path, err)
	}
	after, err := workspaceList(path, out, root, key)
	if err != nil || !slices.Equal(after, append(slices.Clone(before), rule)) {
		return fmt.Errorf("config: %s: workspaces.%q.permissions.%s is %w; add %s by hand", path, root, key, ErrNotEditable, tomlString(rule))
	}
	return writeConfig(path, out, mode)
}

// workspaceList returns root's rules of list key as the file data holds
// them.
func workspaceList(path string, data []byte, root, key string) ([]string, error) {
	c := Default()
	if err := c.apply(path, data, LayerUser); err != nil {
		return nil, err
	}
	var out []string
	for _, r := range c.wsRules {
		if r.root == root && r.key == key {
			out = append(out, r.value)
		}
	}
	return out, nil
}

// insertRule returns data with rule added to root's list key: into the
// array when the table has one (before its closing bracket), as a new key
// of the table when it has none, as a new table at the end when the file
// has none. exists says the file holds rules of that list already (then
// the table must be found).
func insertRule(data []byte, root, key, rule string, exists bool) ([]byte, error) {
	lines := splitLines(data)
	want := []string{"workspaces", root, "permissions"}
	start, end := -1, len(lines)
	for i, raw := range lines {
		m := tableHeader.FindStringSubmatch(strings.TrimSpace(raw))
		if m == nil || strings.HasPrefix(strings.TrimSpace(raw), "[[") {
			continue
		}
		if start >= 0 {
			end = i
			break
		}
		if slices.Equal(splitKey(m[1]), want) {
			start = i
		}
	}
	if start < 0 {
		if exists {
			return nil, ErrNotEditable
		}
		var b bytes.Buffer
		b.Write(data)
		if len(data) > 0 && !bytes.HasSuffix(data, []byte("\n")) {
			b.WriteByte('\n')
		}
		if len(data) > 0 {
			b.WriteByte('\n')
		}
		fmt.Fprintf(&b, "[workspaces.%s.permissions]\n%s = [%s]\n", tomlString(root), key, tomlString(rule))
		return b.Bytes(), nil
	}
	// The key's line inside the table.
	for i := start + 1; i < end; i++ {
		line := strings.TrimSpace(lines[i])
		eq := strings.IndexByte(line, '=')
		if line == "" || line[0] == '#' || eq <= 0 {
			continue
		}
		if k := splitKey(line[:eq]); len(k) != 1 || k[0] != key {
			continue
		}
		// Find the array's closing bracket, from the '=' on.
		off := 0
		for _, l := range lines[:i] {
			off += len(l)
		}
		off += strings.IndexByte(lines[i], '=') + 1
		closeAt, last, ok := arrayEnd(data, off)
		if !ok {
			return nil, ErrNotEditable
		}
		sep := ", "
		if last == '[' {
			sep = ""
		} else if last == ',' {
			sep = " "
		}
		var b bytes.Buffer
		b.Write(data[:closeAt])
		b.WriteString(sep + tomlString(rule))
		b.Write(data[closeAt:])
		return b.Bytes(), nil
	}
	if exists {
		return nil, ErrNotEditable
	}
	// No such key yet: add it after the table's header.
	ins := key + " = [" + tomlString(rule) + "]\n"
	return []byte(strings.Join(lines[:start+1], "") + ins + strings.Join(lines[start+1:], "")), nil
}

// arrayEnd scans a TOML array value starting at data[off:] (after the
// '='): it returns the offset of the array's closing bracket and the last
// significant character before it ('[' for an empty array, ',' after a
// trailing comma). Strings and comments are skipped; ok is false when the
// value is not an array or does not end.
func arrayEnd(data []byte, off int) (closeAt int, last byte, ok bool) {
	depth := 0
	for i := off; i < len(data); i++ {
		c := data[i]
		switch {
		case c == ' ' || c == '\t' || c == '\r' || c == '\n':
			continue
		case c == '#':
			for i < len(data) && data[i] != '\n' {
				i++
			}
			continue
		case depth == 0 && c != '[':
			return 0, 0, false
		case c == '"' || c == '\'':
			j, ok := skipString(data, i)
			if !ok {
				return 0, 0, false
			}
			i = j
			last = '"'
			continue
		case c == '[':
			depth++
		case c == ']':
			depth--
			if depth == 0 {
				return i, last, true
			}
		}
		last = c
	}
	return 0, 0, false
}

// skipString returns the offset of the last byte of the TOML string
// starting at data[i] (basic, literal, or their multi-line forms).
func skipString(data []byte, i int) (int, bool) {
	q := data[i]
	delim := []byte{q}
	if bytes.HasPrefix(data[i:], []byte{q, q, q}) {
		delim = []byte{q, q, q}
	}
	for j := i + len(delim); j < len(data); j++ {
		if q == '"' && data[j] == '\\' {
			j++
			continue
		}
		if bytes.HasPrefix(data[j:], delim) {
			return j + len(delim) - 1, true
		}
		if len(delim) == 1 && data[j] == '\n' {
			return 0, false
		}
	}
	return 0, false
}

// splitKey splits a dotted TOML key into its parts, unquoting quoted ones
// ("workspaces."/src/a.b".permissions" has three parts).
func splitKey(s string) []string {
	var parts []string
	var cur strings.Builder
	quote := byte(0)
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case quote != 0 && c == quote:
			quote = 0
		case quote == '"' && c == '\\' && i+1 < len(s):
			i++
			cur.WriteByte(s[i])
		case quote != 0:
			cur.WriteByte(c)
		case c == '"' || c == '\'':
			quote = c
		case c == '.':
			parts = append(parts, strings.TrimSpace(cur.String()))
			cur.Reset()
		case c == ' ' || c == '\t':
		default:
			cur.WriteByte(c)
		}
	}
	return append(parts, strings.TrimSpace(cur.String()))
}
