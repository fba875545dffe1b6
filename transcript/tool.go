package transcript

import (
	"encoding/json"
	"path/filepath"
	"strings"
)

// ToolKind classifies a tool call for a face's icon and treatment. It is
// face-neutral; ACP maps it to its own tool kinds.
type ToolKind string

// Tool kinds.
const (
	KindRead    ToolKind = "read"    // reads files (read)
	KindEdit    ToolKind = "edit"    // changes files (write, edit)
	KindSearch  ToolKind = "search"  // finds files or text (glob, grep, ls)
	KindExecute ToolKind = "execute" // runs a command (bash)
	KindPlan    ToolKind = "plan"    // writes the plan (todo)
	KindOther   ToolKind = "other"   // anything else (MCP tools, embedders' tools)
)

// Status is a tool call's state as a face shows it.
type Status string

// Tool call states: the model asked for the call (pending), it started
// (running: its tool/call is in the log and its body runs), it ended
// (completed, or failed: an error result, a denial, not run).
const (
	Pending   Status = "pending"
	Running   Status = "running"
	Completed Status = "completed"
	Failed    Status = "failed"
)

// Diff is a change to one file, for faces that show diffs. Old is nil for
// a file the call created; when only a unified diff is known (a write that
// replaced a file), Old and New are nil and Unified holds it.
type Diff struct {
	Path    string  `json:"path"`
	Old     *string `json:"old,omitempty"`
	New     *string `json:"new,omitempty"`
	Unified string  `json:"unified,omitempty"`
}

// PlanItem is one step of a plan written by the todo tool.
type PlanItem struct {
	Content string `json:"content"`
	// Status is pending, in_progress or completed.
	Status string `json:"status"`
}

// Describe returns what a face shows for a call of the built-in tool name
// with the given raw arguments: a one-line title ("read README.md",
// "bash: go test ./..."), its kind, the file paths it touches (absolute
// when cwd is given), and for edit and write the change it proposes.
// Unknown tools get their name as title and KindOther.
func Describe(name, arguments, cwd string) (title string, kind ToolKind, paths []string, diff *Diff) {
	var a struct {
		FilePath    string  `json:"file_path"`
		Path        string  `json:"path"`
		Pattern     string  `json:"pattern"`
		Command     string  `json:"command"`
		Description string  `json:"description"`
		Content     *string `json:"content"`
		OldString   *string `json:"old_string"`
		NewString   *string `json:"new_string"`
	}
	_ = json.Unmarshal([]byte(arguments), &a)
	abs := func(p string) string {
		if p == "" || cwd == "" || filepath.IsAbs(p) || strings.HasPrefix(p, "~") {
			return p
		}
		return filepath.Join(cwd, p)
	}
	switch name {
	case "read":
		kind = KindRead
		if a.FilePath != "" {
			paths = []string{abs(a.FilePath)}
		}
		return strings.TrimSpace("read " + a.FilePath), kind, paths, nil
	case "write", "edit":
		kind = KindEdit
		if a.FilePath == "" {
			return name, kind, nil, nil
		}
		p := abs(a.FilePath)
		paths = []string{p}
		switch {
		case name == "edit" && a.OldString != nil && a.NewString != nil:
			diff = &Diff{Path: p, Old: a.OldString, New: a.NewString}
		case name == "write" && a.Content != nil:
			diff = &Diff{Path: p, New: a.Content}
		}
		return name + " " + a.FilePath, kind, paths, diff
	case "glob", "grep", "ls":
		kind = KindSearch
		subject := a.Pattern
		if subject == "" {
			subject = a.Path
		}
		if a.Path != "" {
			paths = []string{abs(a.Path)}
		}
		return strings.TrimSpace(name + " " + oneLine(subject)), kind, paths, nil
	case "bash":
		title = "bash: " + cut(oneLine(a.Command), 120)
		if a.Description != "" {
			title = a.Description
		}
		return title, KindExecute, nil, nil
	case "todo":
		return "plan", KindPlan, nil, nil
	}
	return name, KindOther, nil, nil
}

// planOf reads the todo tool's result meta ({"todos":[...]}).
func planOf(meta json.RawMessage) ([]PlanItem, bool) {
	if len(meta) == 0 {
		return nil, false
	}
	var m struct {
		Todos *[]PlanItem `json:"todos"`
	}
	if json.Unmarshal(meta, &m) != nil || m.Todos == nil {
		return nil, false
	}
	items := *m.Todos
	if items == nil {
		items = []PlanItem{}
	}
	return items, true
}

// resultDiff reads the change a successful write or edit made from its
// result meta: the file tools record the path, whether the file was
// created, and a unified diff. For edit the proposed old and new text is
// the truth of the change; for a write that created a file the content is.
func resultDiff(name string, meta json.RawMessage, proposed *Diff) *Diff {
	if name != "write" && name != "edit" || len(meta) == 0 {
		return nil
	}
	var m struct {
		Path    string `json:"path"`
		Created bool   `json:"created"`
		Diff    string `json:"diff"`
	}
	if json.Unmarshal(meta, &m) != nil || m.Path == "" {
		return nil
	}
	switch {
	case name == "edit" && proposed != nil:
		d := *proposed
		d.Path, d.Unified = m.Path, m.Diff
		return &d
	case name == "write" && m.Created && proposed != nil:
		return &Diff{Path: m.Path, New: proposed.New}
	case m.Diff != "":
		return &Diff{Path: m.Path, Unified: m.Diff}
	}
	return nil
}

// exitOf reads how a bash command ended from its result meta.
func exitOf(meta json.RawMessage) (code *int, signal string, timedOut bool) {
	if len(meta) == 0 {
		return nil, "", false
	}
	var m struct {
		ExitCode *int   `json:"exitCode"`
		Signal   string `json:"signal"`
		TimedOut bool   `json:"timedOut"`
	}
	if json.Unmarshal(meta, &m) != nil {
		return nil, "", false
	}
	return m.ExitCode, m.Signal, m.TimedOut
}
