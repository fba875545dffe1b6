package args

import (
	"strings"
	"testing"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/reinhq/rein/llm"
	"github.com/reinhq/rein/tool"
)

type sample struct {
	Path  string `json:"file_path" jsonschema:"the path"`
	Count int    `json:"count,omitempty"`
	Items []struct {
		Status string `json:"status"`
	} `json:"items,omitempty"`
}

var schema = New[sample](func(s *jsonschema.Schema) {
	one := 1.0
	s.Properties["count"].Minimum = &one
	s.Properties["items"].Items.Properties["status"].Enum = []any{"a", "b"}
})

func TestDecode(t *testing.T) {
	v, bad := schema.Decode([]byte(`{"file_path":"x","count":2,"items":[{"status":"a"}]}`))
	if bad != nil || v.Path != "x" || v.Count != 2 || v.Items[0].Status != "a" {
		t.Fatalf("%+v %+v", v, bad)
	}
	cases := map[string]string{
		``:                              `required: missing properties: ["file_path"]`,
		`{"file_path":3}`:               `file_path: type: 3 has type "integer", want "string"`,
		`{"file_path":"x","count":0}`:   `count: minimum:`,
		`{"file_path":"x","count":1.5}`: `count: type:`,
		`{"file_path":"x","extra":1}`:   `unexpected additional properties ["extra"]`,
		`{"file_path":"x","items":[{"status":"c"}]}`: `items[].status: enum:`,
		`[1]`:           `type: [1] has type "array"`,
		`{"file_path":`: `not JSON`,
	}
	for in, want := range cases {
		_, bad := schema.Decode([]byte(in))
		if bad == nil || bad.Code != tool.CodeInvalidArguments || !bad.IsError {
			t.Errorf("%s: accepted", in)
			continue
		}
		if msg := llm.PlainText(bad.Content); !strings.HasPrefix(msg, "invalid arguments: ") || !strings.Contains(msg, want) {
			t.Errorf("%s: message %q, want it to contain %q", in, msg, want)
		}
	}
	if !strings.Contains(string(schema.Parameters()), `"description":"the path"`) {
		t.Errorf("parameters %s", schema.Parameters())
	}
}
