package fs

import (
	"path/filepath"
	"strings"

	"github.com/reinhq/rein/tool"
)

// procEntry reports whether p (absolute and clean) is a process's entry in
// /proc or lies below one: /proc/self, /proc/thread-self, /proc/PID for
// any pid or thread id. rein's own holds its environment (its API keys: a
// search of /proc/self/environ is an oracle on them), its memory and its
// open files; the entries of the processes that started rein (your shell,
// an editor) hold the same keys in their environments. The file tools run
// in rein's process, outside the OS sandbox that keeps commands from
// those entries, so none of them reads, searches or lists any.
func procEntry(p string) bool {
	rest, ok := strings.CutPrefix(p, "/proc/")
	if !ok {
		return false
	}
	first, _, _ := strings.Cut(rest, "/")
	switch first {
	case "self", "thread-self":
		return true
	case "":
		return false
	}
	return strings.Trim(first, "0123456789") == ""
}

// inProcEntry reports whether the path p (absolute) leads into a process's
// /proc entry: as written, after resolving its symlinks, or through its
// parent directory (/dev/fd/N is /proc/self/fd/N).
func inProcEntry(p string) bool {
	if procEntry(filepath.Clean(p)) {
		return true
	}
	if r, err := filepath.EvalSymlinks(p); err == nil && procEntry(r) {
		return true
	}
	r, err := filepath.EvalSymlinks(filepath.Dir(p))
	return err == nil && procEntry(r)
}

// walkFilter decides what a walk below root (as given) leaves out: the
// process entries in /proc and what hide (the permission rules on reading)
// names. Below a root with symlinks resolved the walk follows no symlink, so a
// walked path's real form is the resolved root plus the rest.
type walkFilter struct {
	root, real string
	hide       func(paths ...string) bool
}

func newWalkFilter(root string, hide func(paths ...string) bool) walkFilter {
	real, err := filepath.EvalSymlinks(root)
	if err != nil {
		real = root
	}
	return walkFilter{root: root, real: real, hide: hide}
}

// skip reports whether p (root or a path below it) is left out.
func (w walkFilter) skip(p string) bool {
	real := w.real + strings.TrimPrefix(p, w.root)
	if procEntry(real) {
		return true
	}
	if w.hide == nil {
		return false
	}
	if real == p {
		return w.hide(p)
	}
	return w.hide(p, real)
}

// procEntryErr refuses a path in a process's /proc entry.
func procEntryErr(env tool.Env, p string) tool.Result {
	return tool.Errorf(tool.CodeDenied, "%s is in a process's /proc entry (rein's own, or one holding your keys in its environment); the file tools do not read those (bash can, within its sandbox)", display(env, p))
}
