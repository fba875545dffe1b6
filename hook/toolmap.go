package hook

import (
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
)

// ToolMapping translates one rein tool to its Claude Code counterpart, so
// hook scripts see the names and input shapes they were written for.
type ToolMapping struct {
	// Name is the Claude Code tool name (e.g. "Bash").
	Name string
	// Fields renames input fields, rein name -> Claude Code name. Fields
	// not listed keep their name. updatedInput is mapped back through the
	// inverse.
	Fields map[string]string
	// Values renames values of a field, per Claude Code field name: rein
	// value -> Claude Code value.
	Values map[string]map[string]string
}

// DefaultTools is the built-in mapping of rein's tools. Most rein tools
// already use Claude Code's input field names (file_path, old_string,
// new_string, replace_all, offset, limit, pattern, path, glob, command,
// description); the differences are listed here.
var DefaultTools = map[string]ToolMapping{
	"bash":  {Name: "Bash", Fields: map[string]string{"timeout_ms": "timeout"}},
	"read":  {Name: "Read"},
	"write": {Name: "Write"},
	"edit":  {Name: "Edit"},
	"glob":  {Name: "Glob"},
	"grep": {Name: "Grep",
		Fields: map[string]string{"case_insensitive": "-i", "context": "-C"},
		Values: map[string]map[string]string{"output_mode": {"files": "files_with_matches"}}},
	"ls":   {Name: "LS"},
	"todo": {Name: "TodoWrite"},
}

// toolMap resolves rein tool names and inputs to Claude Code's.
type toolMap map[string]ToolMapping

func (m toolMap) name(rein string) string {
	if t, ok := m[rein]; ok && t.Name != "" {
		return t.Name
	}
	return rein
}

// pathFields are the input fields that hold a path; Claude Code gives hooks
// absolute paths in them.
var pathFields = []string{"file_path", "path", "notebook_path"}

// toCC turns rein arguments (JSON text) into Claude Code's tool_input: the
// Claude Code field names and values, and every path field made absolute
// against cwd (rein's tools also take paths relative to the working
// directory; Claude Code's hooks always see absolute ones). A value that is
// not a JSON object is passed as it is.
func (m toolMap) toCC(rein, args, cwd string) json.RawMessage {
	raw := json.RawMessage(args)
	if !json.Valid(raw) {
		b, _ := json.Marshal(args)
		return b
	}
	t := m[rein]
	var obj map[string]json.RawMessage
	if json.Unmarshal(raw, &obj) != nil || obj == nil {
		return raw
	}
	changed := false
	out := make(map[string]json.RawMessage, len(obj))
	for k, v := range obj {
		ck := k
		if n, ok := t.Fields[k]; ok {
			ck = n
		}
		nv := mapValue(v, t.Values[ck], false)
		if slices.Contains(pathFields, ck) {
			nv = absPath(nv, cwd)
		}
		changed = changed || ck != k || string(nv) != string(v)
		out[ck] = nv
	}
	if !changed {
		return raw
	}
	b, err := json.Marshal(out)
	if err != nil {
		return raw
	}
	return b
}

// absPath makes a JSON string holding a relative path absolute against
// cwd; other values are returned as they are.
func absPath(v json.RawMessage, cwd string) json.RawMessage {
	var p string
	if cwd == "" || json.Unmarshal(v, &p) != nil || p == "" || filepath.IsAbs(p) {
		return v
	}
	if strings.HasPrefix(p, "~/") || p == "~" {
		return v // the tool expands it; so may the hook
	}
	b, _ := json.Marshal(filepath.Join(cwd, p))
	return b
}

// fromCC turns a Claude Code updatedInput back into rein arguments.
func (m toolMap) fromCC(rein string, in json.RawMessage) json.RawMessage {
	t, ok := m[rein]
	if !ok || (len(t.Fields) == 0 && len(t.Values) == 0) {
		return in
	}
	var obj map[string]json.RawMessage
	if json.Unmarshal(in, &obj) != nil {
		return in
	}
	inv := make(map[string]string, len(t.Fields))
	for k, v := range t.Fields {
		inv[v] = k
	}
	out := make(map[string]json.RawMessage, len(obj))
	for ck, v := range obj {
		k := ck
		if n, ok := inv[ck]; ok {
			k = n
		}
		out[k] = mapValue(v, t.Values[ck], true)
	}
	b, err := json.Marshal(out)
	if err != nil {
		return in
	}
	return b
}

// mapValue renames a string value through vals (or its inverse).
func mapValue(v json.RawMessage, vals map[string]string, inverse bool) json.RawMessage {
	if len(vals) == 0 {
		return v
	}
	var s string
	if json.Unmarshal(v, &s) != nil {
		return v
	}
	for from, to := range vals {
		if inverse {
			from, to = to, from
		}
		if s == from {
			b, _ := json.Marshal(to)
			return b
		}
	}
	return v
}
