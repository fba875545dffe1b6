package fs

import (
	"context"
	"fmt"
	iofs "io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/bmatcuk/doublestar/v4"

	"github.com/reinhq/rein/llm"
	"github.com/reinhq/rein/tool"
	"github.com/reinhq/rein/tool/internal/args"
)

type globArgs struct {
	Pattern string `json:"pattern" jsonschema:"Glob pattern, e.g. **/*.go or src/**/*.{ts,tsx}. ** matches any number of directories."`
	Path    string `json:"path,omitempty" jsonschema:"Directory to search in. Default: the working directory."`
}

var globSchema = args.New[globArgs](nil)

var globSpec = llm.ToolSpec{
	Name: "glob",
	Description: `Find files whose path matches a glob pattern, relative to path. Returns file paths, most recently modified first, at most 100; a note gives the total when there are more.
The .git directory is skipped. Use grep to search file contents.`,
	Parameters: globSchema.Parameters(),
}

type globTool struct{ hide func(paths ...string) bool }

// Glob returns the glob tool.
func Glob() tool.Tool { return globTool{} }

func (globTool) Spec() llm.ToolSpec { return globSpec }
func (globTool) Mode() tool.Mode    { return tool.Parallel }

// globMeta is the glob tool's Meta.
type globMeta struct {
	Total int      `json:"total"`
	Paths []string `json:"paths"`
}

func (t globTool) Run(ctx context.Context, call tool.Call) (tool.Result, error) {
	a, bad := globSchema.Decode(call.Arguments)
	if bad != nil {
		return *bad, nil
	}
	env := call.Env
	root := abs(env, a.Path)
	pattern := filepath.ToSlash(a.Pattern)
	if filepath.IsAbs(a.Pattern) {
		// An absolute pattern names its own root.
		base, rest := doublestar.SplitPattern(pattern)
		root, pattern = filepath.FromSlash(base), rest
	}
	pattern = strings.TrimPrefix(pattern, "./")
	if !doublestar.ValidatePattern(pattern) {
		return tool.Errorf(CodeBadPattern, "invalid glob pattern %q", a.Pattern), nil
	}
	if inProcEntry(root) {
		return procEntryErr(env, root), nil
	}
	if fi, err := os.Stat(root); err != nil {
		return openErr(env, root, err), nil
	} else if !fi.IsDir() {
		return tool.Errorf(CodeNotDirectory, "%s is not a directory", display(env, root)), nil
	}
	// Walk only below the pattern's literal prefix.
	base, _ := doublestar.SplitPattern(pattern)
	start := root
	if base != "." {
		start = filepath.Join(root, filepath.FromSlash(base))
	}
	type hit struct {
		path string
		mod  time.Time
	}
	var hits []hit
	walk := newWalkFilter(root, t.hide)
	walk.tree = true
	if kernelDir(walk.real) {
		return walkRootErr(env, root), nil
	}
	err := filepath.WalkDir(start, func(p string, d iofs.DirEntry, err error) error {
		if err != nil {
			return nil // unreadable entries are skipped
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if d.IsDir() {
			if d.Name() == ".git" && p != start || walk.skip(p) {
				return filepath.SkipDir
			}
			return nil
		}
		if walk.skip(p) {
			return nil
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return nil
		}
		if ok, _ := doublestar.Match(pattern, filepath.ToSlash(rel)); !ok {
			return nil
		}
		var mod time.Time
		if fi, err := d.Info(); err == nil {
			mod = fi.ModTime()
		}
		hits = append(hits, hit{p, mod})
		return nil
	})
	if ctx.Err() != nil {
		return tool.Errorf(tool.CodeAborted, "glob cancelled"), nil
	}
	if err != nil && !os.IsNotExist(err) {
		return tool.Errorf(CodeIO, "glob: %v", err), nil
	}
	slices.SortFunc(hits, func(x, y hit) int {
		if c := y.mod.Compare(x.mod); c != 0 {
			return c
		}
		return strings.Compare(x.path, y.path)
	})
	meta := globMeta{Total: len(hits)}
	var b strings.Builder
	for i, h := range hits {
		if i == MaxGlobResults {
			fmt.Fprintf(&b, "[showing %d of %d matches, newest first; use a narrower pattern or path]\n", MaxGlobResults, len(hits))
			break
		}
		d := display(env, h.path)
		meta.Paths = append(meta.Paths, d)
		b.WriteString(d)
		b.WriteByte('\n')
	}
	if len(hits) == 0 {
		b.WriteString("no files match\n")
	}
	return tool.Result{Content: llm.Text(b.String()), Meta: jsonMeta(meta)}, nil
}
