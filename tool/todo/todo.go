// Package todo holds rein's todo tool: the model writes its whole plan,
// a list of items with a status, and the UI shows the latest one.
//
// The list lives in the session's tool.State (Current reads it) and in
// each result's Meta, so a UI that follows the log can show it without
// access to the state. The tool is Exclusive; Current is safe for
// concurrent use. This package imports tool, llm and third-party libraries
// only.
package todo

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/reinhq/rein/llm"
	"github.com/reinhq/rein/tool"
	"github.com/reinhq/rein/tool/internal/args"
)

// Status of an item.
const (
	Pending    = "pending"
	InProgress = "in_progress"
	Completed  = "completed"
)

// MaxItems bounds a list.
const MaxItems = 100

// Item is one step of the plan.
type Item struct {
	Content string `json:"content" jsonschema:"The step, as a short imperative sentence."`
	Status  string `json:"status" jsonschema:"pending, in_progress or completed. At most one item is in_progress."`
}

type todoArgs struct {
	Todos []Item `json:"todos" jsonschema:"The complete list, in order. It replaces the previous list."`
}

var todoSchema = args.New[todoArgs](func(s *jsonschema.Schema) {
	todos := s.Properties["todos"]
	todos.Types, todos.Type = nil, "array"
	maxItems := MaxItems
	todos.MaxItems = &maxItems
	minLen := 1
	todos.Items.Properties["content"].MinLength = &minLen
	todos.Items.Properties["status"].Enum = []any{Pending, InProgress, Completed}
})

var todoSpec = llm.ToolSpec{
	Name: "todo",
	Description: `Write your plan for the current task as a list of steps the user can follow. Send the complete list each time: it replaces the previous one.
Use it for tasks of three or more steps. Mark a step in_progress before starting it (at most one at a time) and completed as soon as it is done. At most 100 items.`,
	Parameters: todoSchema.Parameters(),
}

type todoTool struct{}

// Tool returns the todo tool.
func Tool() tool.Tool { return todoTool{} }

func (todoTool) Spec() llm.ToolSpec { return todoSpec }
func (todoTool) Mode() tool.Mode    { return tool.Exclusive }

// Meta is the todo tool's Meta.
type Meta struct {
	Todos []Item `json:"todos"`
}

type list struct {
	mu    sync.Mutex
	items []Item
}

const stateKey = "todo"

func listOf(st *tool.State) *list {
	if st == nil {
		return &list{}
	}
	return st.Get(stateKey, func() any { return &list{} }).(*list)
}

// Current returns a copy of the session's latest list (nil before the first
// call).
func Current(st *tool.State) []Item {
	l := listOf(st)
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.items)
}

func (todoTool) Run(ctx context.Context, call tool.Call) (tool.Result, error) {
	a, bad := todoSchema.Decode(call.Arguments)
	if bad != nil {
		return *bad, nil
	}
	active := 0
	for i, it := range a.Todos {
		if strings.TrimSpace(it.Content) == "" {
			return tool.Errorf(tool.CodeInvalidArguments, "invalid arguments: todos[%d].content is blank", i), nil
		}
		if it.Status == InProgress {
			active++
		}
	}
	if active > 1 {
		return tool.Errorf(tool.CodeInvalidArguments, "invalid arguments: %d items are in_progress; at most one may be", active), nil
	}
	items := slices.Clone(a.Todos)
	if items == nil {
		items = []Item{}
	}
	l := listOf(call.Env.State)
	l.mu.Lock()
	l.items = items
	l.mu.Unlock()
	meta, _ := json.Marshal(Meta{Todos: items})
	return tool.Result{Content: llm.Text(Render(items)), Meta: meta}, nil
}

// Render formats a list as the model sees it: one "[x] / [>] / [ ]" line per
// item and a count.
func Render(items []Item) string {
	if len(items) == 0 {
		return "todo list cleared\n"
	}
	var b strings.Builder
	done := 0
	for _, it := range items {
		mark := "[ ]"
		switch it.Status {
		case Completed:
			mark = "[x]"
			done++
		case InProgress:
			mark = "[>]"
		}
		fmt.Fprintf(&b, "%s %s\n", mark, it.Content)
	}
	fmt.Fprintf(&b, "(%d of %d completed)\n", done, len(items))
	return b.String()
}
