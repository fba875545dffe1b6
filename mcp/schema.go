package mcp

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Prefix starts the name of every MCP tool: mcp__SERVER__TOOL.
const Prefix = "mcp__"

// maxToolName is the longest tool name the providers accept (OpenAI: 64).
const maxToolName = 64

// maxSchema caps a tool's input schema; a larger one is refused.
const maxSchema = 64 << 10

// ToolName returns the name the model sees for tool of server: "mcp__"
// server "__" tool, with characters the providers refuse in names turned
// into "_", cut to 64 bytes with a short hash of the full name when
// longer (so two long names stay apart).
func ToolName(server, tool string) string {
	var b strings.Builder
	for _, r := range tool {
		if !nameRune(r) {
			r = '_'
		}
		b.WriteRune(r)
	}
	t := b.String()
	if t == "" {
		t = "tool"
	}
	name := Prefix + server + "__" + t
	if len(name) <= maxToolName {
		return name
	}
	sum := sha256.Sum256([]byte(server + "\x00" + tool))
	h := hex.EncodeToString(sum[:4])
	return name[:maxToolName-len(h)-1] + "_" + h
}

// inputSchema returns a tool's input schema (as the SDK decoded it) in a
// form the model providers accept, and notes on what it changed:
//
//   - no schema is an object with no properties;
//   - "$schema" and "$id" at the top are dropped (some providers refuse
//     them), and a top-level "$ref" into "$defs"/"definitions" is inlined;
//   - a missing "type" becomes "object", and a missing "properties" {};
//   - allOf/anyOf/oneOf at the top level (which OpenAI and Anthropic
//     refuse) are folded into the object: their properties join the top
//     level, required only when every alternative requires it (for allOf,
//     when any does); "not", "enum" and "const" at the top are dropped.
//     The server still validates the arguments.
//
// A schema that is not an object schema, or larger than 64 KiB, is an
// error saying why the tool cannot be offered.
func inputSchema(in any) (json.RawMessage, []string, error) {
	if in == nil {
		return json.RawMessage(`{"type":"object","properties":{}}`), nil, nil
	}
	raw, err := json.Marshal(in)
	if err != nil {
		return nil, nil, fmt.Errorf("its input schema does not encode: %w", err)
	}
	if len(raw) > maxSchema {
		return nil, nil, fmt.Errorf("its input schema is %d KiB, more than the %d KiB rein offers a model", len(raw)>>10, maxSchema>>10)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil || m == nil {
		return nil, nil, errors.New("its input schema is not a JSON object")
	}
	var notes []string
	for _, k := range []string{"$schema", "$id"} {
		if _, ok := m[k]; ok {
			delete(m, k)
		}
	}
	if ref, ok := m["$ref"].(string); ok {
		if def := localDef(m, ref); def != nil {
			delete(m, "$ref")
			for k, v := range def {
				if _, has := m[k]; !has {
					m[k] = v
				}
			}
			notes = append(notes, "inlined the top-level $ref")
		}
	}
	switch t := m["type"].(type) {
	case nil:
		m["type"] = "object"
	case string:
		if t != "object" {
			return nil, nil, fmt.Errorf("its input schema has type %q; model providers take only object schemas", t)
		}
	case []any:
		if !slices.Contains(t, any("object")) {
			return nil, nil, fmt.Errorf("its input schema has type %v; model providers take only object schemas", t)
		}
		m["type"] = "object"
		notes = append(notes, "narrowed the top-level type to object")
	default:
		return nil, nil, fmt.Errorf("its input schema has a malformed type %v", t)
	}
	props, _ := m["properties"].(map[string]any)
	if props == nil {
		props = map[string]any{}
	}
	required := stringList(m["required"])
	for _, comb := range []string{"allOf", "anyOf", "oneOf"} {
		v, ok := m[comb]
		if !ok {
			continue
		}
		delete(m, comb)
		branches, _ := v.([]any)
		var common []string
		for i, b := range branches {
			bm, _ := b.(map[string]any)
			if bm == nil {
				continue
			}
			if bp, ok := bm["properties"].(map[string]any); ok {
				for k, pv := range bp {
					if _, has := props[k]; !has {
						props[k] = pv
					}
				}
			}
			br := stringList(bm["required"])
			switch {
			case comb == "allOf":
				common = append(common, br...)
			case i == 0:
				common = br
			default:
				common = slices.DeleteFunc(common, func(s string) bool { return !slices.Contains(br, s) })
			}
		}
		for _, r := range common {
			if !slices.Contains(required, r) {
				required = append(required, r)
			}
		}
		notes = append(notes, "folded the top-level "+comb+" into the object")
	}
	for _, k := range []string{"not", "enum", "const"} {
		if _, ok := m[k]; ok {
			delete(m, k)
			notes = append(notes, "dropped the top-level "+k)
		}
	}
	m["properties"] = props
	if len(required) > 0 {
		m["required"] = required
	} else {
		delete(m, "required")
	}
	out, err := json.Marshal(m)
	if err != nil {
		return nil, nil, fmt.Errorf("its input schema does not encode: %w", err)
	}
	return out, notes, nil
}

// localDef resolves "#/$defs/NAME" or "#/definitions/NAME" in m.
func localDef(m map[string]any, ref string) map[string]any {
	for _, base := range []string{"$defs", "definitions"} {
		if name, ok := strings.CutPrefix(ref, "#/"+base+"/"); ok {
			defs, _ := m[base].(map[string]any)
			def, _ := defs[name].(map[string]any)
			return def
		}
	}
	return nil
}

func stringList(v any) []string {
	l, _ := v.([]any)
	var out []string
	for _, x := range l {
		if s, ok := x.(string); ok && !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}
