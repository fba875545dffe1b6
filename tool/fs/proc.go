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
	// tree: a walk of a tree (grep, glob), which leaves out the kernel's
	// file systems (kernelDirs) below its root; a listing shows them.
	tree bool
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
	if procEntry(real) || (w.tree && kernelDir(real)) {
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

// kernelDirs are the kernel's own file systems at their usual places:
// their files are made up when read and some never end (/proc/kcore, the
// size of the address space; /dev/zero), so no walk enters them.
var kernelDirs = []string{"/proc", "/sys", "/dev"}

// kernelDir reports whether p (absolute and clean, symlinks resolved) is
// one of kernelDirs or lies below one.
func kernelDir(p string) bool {
	for _, d := range kernelDirs {
		if p == d || strings.HasPrefix(p, d+"/") {
			return true
		}
	}
	return false
}

// walkRootErr refuses a walk (grep, glob) whose root directory is in a
// kernel file system: one file there can be searched, not the tree.
func walkRootErr(env tool.Env, p string) tool.Result {
	return tool.Errorf(tool.CodeDenied, "%s is in a kernel file system (/proc, /sys, /dev), whose files are made up as they are read and may never end: grep and glob do not walk it; name one file, or use bash", display(env, p))
}

// kernelExcludes are the kernelDirs below root (symlinks resolved), as
// paths relative to it: what a search of / leaves out.
func kernelExcludes(root string) []string {
	var out []string
	for _, d := range kernelDirs {
		if rel, err := filepath.Rel(root, d); err == nil && rel != "." && !strings.HasPrefix(rel, "..") {
			out = append(out, filepath.ToSlash(rel))
		}
	}
	return out
}
