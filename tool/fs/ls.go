package fs

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/reinhq/rein/llm"
	"github.com/reinhq/rein/tool"
	"github.com/reinhq/rein/tool/internal/args"
)

type lsArgs struct {
	Path string `json:"path,omitempty" jsonschema:"Directory to list. Default: the working directory."`
}

var lsSchema = args.New[lsArgs](nil)

var lsSpec = llm.ToolSpec{
	Name: "ls",
	Description: `List one directory (not recursive): directories end in /, files show their size in bytes, symbolic links show their target.
Sorted by name; .git is omitted; at most 1000 entries. Use glob to find files in subdirectories.`,
	Parameters: lsSchema.Parameters(),
}

type lsTool struct{ hide func(paths ...string) bool }

// Ls returns the ls tool.
func Ls() tool.Tool { return lsTool{} }

func (lsTool) Spec() llm.ToolSpec { return lsSpec }
func (lsTool) Mode() tool.Mode    { return tool.Parallel }

// Entry is one line of ls's Meta.
type Entry struct {
	Name   string `json:"name"`
	Type   string `json:"type"` // "file", "dir", "symlink" or "other"
	Size   int64  `json:"size,omitempty"`
	Target string `json:"target,omitempty"`
}

type lsMeta struct {
	Path    string  `json:"path"`
	Total   int     `json:"total"`
	Entries []Entry `json:"entries"`
}

func (t lsTool) Run(ctx context.Context, call tool.Call) (tool.Result, error) {
	a, bad := lsSchema.Decode(call.Arguments)
	if bad != nil {
		return *bad, nil
	}
	env := call.Env
	p := abs(env, a.Path)
	if inProcEntry(p) {
		return procEntryErr(env, p), nil
	}
	walk := newWalkFilter(p, t.hide)
	fi, err := os.Stat(p)
	if err != nil {
		return openErr(env, p, err), nil
	}
	if !fi.IsDir() {
		return tool.Errorf(CodeNotDirectory, "%s is not a directory; use read to read a file", display(env, p)), nil
	}
	des, err := os.ReadDir(p)
	if err != nil && len(des) == 0 {
		return openErr(env, p, err), nil
	}
	meta := lsMeta{Path: p}
	var b strings.Builder
	for _, d := range des {
		if d.Name() == ".git" || walk.skip(filepath.Join(p, d.Name())) {
			continue
		}
		meta.Total++
		if len(meta.Entries) == MaxLsEntries {
			continue
		}
		e := Entry{Name: d.Name(), Type: "other"}
		info, ierr := d.Info()
		switch {
		case d.Type()&os.ModeSymlink != 0:
			e.Type = "symlink"
			e.Target, _ = os.Readlink(filepath.Join(p, d.Name()))
			fmt.Fprintf(&b, "%s -> %s\n", e.Name, e.Target)
		case d.IsDir():
			e.Type = "dir"
			fmt.Fprintf(&b, "%s/\n", e.Name)
		case d.Type().IsRegular():
			e.Type = "file"
			if ierr == nil {
				e.Size = info.Size()
			}
			fmt.Fprintf(&b, "%s  %d\n", e.Name, e.Size)
		default:
			fmt.Fprintf(&b, "%s  (%s)\n", e.Name, d.Type())
		}
		meta.Entries = append(meta.Entries, e)
	}
	switch {
	case meta.Total == 0:
		b.WriteString("[empty directory]\n")
	case meta.Total > len(meta.Entries):
		fmt.Fprintf(&b, "[showing %d of %d entries; use glob to narrow down]\n", len(meta.Entries), meta.Total)
	}
	return tool.Result{Content: llm.Text(b.String()), Meta: jsonMeta(meta)}, nil
}
