package builtin

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/reinhq/rein/tool"
)

func TestRegistry(t *testing.T) {
	r, err := Registry(Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"read", "write", "edit", "glob", "grep", "ls", "bash", "todo"}
	if got := r.Names(); !slices.Equal(got, want) {
		t.Fatalf("names %v", got)
	}
	parallel := map[string]bool{"read": true, "glob": true, "grep": true, "ls": true}
	for _, name := range want {
		tl, _ := r.Lookup(name)
		if (tl.Mode() == tool.Parallel) != parallel[name] {
			t.Errorf("%s: mode %s", name, tl.Mode())
		}
		spec := tl.Spec()
		var schema struct {
			Type       string         `json:"type"`
			Properties map[string]any `json:"properties"`
		}
		if err := json.Unmarshal(spec.Parameters, &schema); err != nil || schema.Type != "object" || len(schema.Properties) == 0 {
			t.Errorf("%s: parameters %s", name, spec.Parameters)
		}
		if len(spec.Description) < 80 || len(spec.Description) > 800 {
			t.Errorf("%s: description of %d bytes", name, len(spec.Description))
		}
	}
}
