package mcp

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestInputSchema(t *testing.T) {
	for _, c := range []struct {
		in, want, err, note string
	}{
		{`null`, `{"type":"object","properties":{}}`, "", ""},
		{`{"type":"object"}`, `{"properties":{},"type":"object"}`, "", ""},
		{`{"properties":{"a":{"type":"string"}}}`, `{"properties":{"a":{"type":"string"}},"type":"object"}`, "", ""},
		{`{"$schema":"http://json-schema.org/draft-07/schema#","$id":"x","type":"object","properties":{"n":{"type":"integer","maximum":100}}}`,
			`{"properties":{"n":{"maximum":100,"type":"integer"}},"type":"object"}`, "", ""},
		{`{"type":["object","null"],"properties":{}}`, `{"properties":{},"type":"object"}`, "", "narrowed"},
		{`{"type":"object","oneOf":[{"properties":{"id":{"type":"string"}},"required":["id"]},{"properties":{"url":{"type":"string"}},"required":["url"]}]}`,
			`{"properties":{"id":{"type":"string"},"url":{"type":"string"}},"type":"object"}`, "", "folded the top-level oneOf"},
		{`{"type":"object","properties":{"a":{}},"required":["a"],"allOf":[{"properties":{"b":{}},"required":["b"]},{"required":["c"]}]}`,
			`{"properties":{"a":{},"b":{}},"required":["a","b","c"],"type":"object"}`, "", "allOf"},
		{`{"type":"object","properties":{},"not":{"required":["x"]},"enum":[{}]}`, `{"properties":{},"type":"object"}`, "", "dropped the top-level not"},
		{`{"$ref":"#/$defs/Args","$defs":{"Args":{"type":"object","properties":{"q":{"type":"string"}}}}}`,
			`{"$defs":{"Args":{"properties":{"q":{"type":"string"}},"type":"object"}},"properties":{"q":{"type":"string"}},"type":"object"}`, "", "inlined"},
		{`{"type":"string"}`, "", `type "string"`, ""},
		{`{"type":["string","null"]}`, "", "only object schemas", ""},
		{`{"type":5}`, "", "malformed type", ""},
		{`[1,2]`, "", "not a JSON object", ""},
		{`{"type":"object","description":"` + strings.Repeat("x", 70000) + `"}`, "", "more than the 64 KiB", ""},
	} {
		var in any
		if err := json.Unmarshal([]byte(c.in), &in); err != nil {
			t.Fatal(err)
		}
		got, notes, err := inputSchema(in)
		switch {
		case c.err != "":
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%.60s: error %v, want %q", c.in, err, c.err)
			}
		case err != nil:
			t.Errorf("%.60s: %v", c.in, err)
		case string(got) != c.want:
			t.Errorf("%.60s:\n got %s\nwant %s", c.in, got, c.want)
		case c.note != "" && !strings.Contains(strings.Join(notes, ";"), c.note):
			t.Errorf("%.60s: notes %v lack %q", c.in, notes, c.note)
		}
	}
}

func TestToolName(t *testing.T) {
	long := strings.Repeat("very_long_tool_name_", 5)
	for _, c := range []struct{ server, tool, want string }{
		{"github", "create_issue", "mcp__github__create_issue"},
		{"fs", "read.file/v2", "mcp__fs__read_file_v2"},
		{"x", "", "mcp__x__tool"},
		{"x", "ünï", "mcp__x___n_"},
	} {
		if got := ToolName(c.server, c.tool); got != c.want {
			t.Errorf("ToolName(%q, %q) = %q, want %q", c.server, c.tool, got, c.want)
		}
	}
	a, b := ToolName("srv", long+"a"), ToolName("srv", long+"b")
	if len(a) != 64 || len(b) != 64 || a == b || !strings.HasPrefix(a, "mcp__srv__very_long") {
		t.Errorf("long names %q %q", a, b)
	}
}
