package todo

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/reinhq/rein/llm"
	"github.com/reinhq/rein/tool"
)

func call(t *testing.T, st *tool.State, raw string) tool.Result {
	t.Helper()
	r, err := Tool().Run(context.Background(), tool.Call{Arguments: json.RawMessage(raw), Env: tool.Env{State: st}})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestTodo(t *testing.T) {
	st := &tool.State{}
	r := call(t, st, `{"todos":[{"content":"read the code","status":"completed"},{"content":"fix the bug","status":"in_progress"},{"content":"run tests","status":"pending"}]}`)
	if r.IsError {
		t.Fatal(llm.PlainText(r.Content))
	}
	want := "[x] read the code\n[>] fix the bug\n[ ] run tests\n(1 of 3 completed)\n"
	if got := llm.PlainText(r.Content); got != want {
		t.Fatalf("got %q", got)
	}
	var m Meta
	if err := json.Unmarshal(r.Meta, &m); err != nil || len(m.Todos) != 3 || m.Todos[1].Status != InProgress {
		t.Fatalf("meta %s", r.Meta)
	}
	if cur := Current(st); len(cur) != 3 || cur[2].Content != "run tests" {
		t.Fatalf("state %+v", cur)
	}

	// Refusals leave the stored list alone.
	for _, bad := range []string{
		`{"todos":[{"content":"a","status":"in_progress"},{"content":"b","status":"in_progress"}]}`,
		`{"todos":[{"content":"a","status":"doing"}]}`,
		`{"todos":[{"content":"  ","status":"pending"}]}`,
		`{"todos":[{"content":"a"}]}`,
		`{}`,
		`{"todos":"a"}`,
	} {
		r := call(t, st, bad)
		if !r.IsError || r.Code != tool.CodeInvalidArguments || !strings.HasPrefix(llm.PlainText(r.Content), "invalid arguments") {
			t.Errorf("%s: %+v", bad, r)
		}
	}
	if cur := Current(st); len(cur) != 3 {
		t.Fatalf("state changed by a refusal: %+v", cur)
	}

	r = call(t, st, `{"todos":[]}`)
	if r.IsError || llm.PlainText(r.Content) != "todo list cleared\n" || len(Current(st)) != 0 || string(r.Meta) != `{"todos":[]}` {
		t.Fatalf("clear: %+v %s", r, r.Meta)
	}
	if Current(&tool.State{}) != nil {
		t.Fatal("fresh state has a list")
	}
}

func TestSchema(t *testing.T) {
	var s map[string]any
	if err := json.Unmarshal(Tool().Spec().Parameters, &s); err != nil {
		t.Fatal(err)
	}
	todos := s["properties"].(map[string]any)["todos"].(map[string]any)
	if todos["type"] != "array" {
		t.Fatalf("todos schema %v", todos)
	}
}
