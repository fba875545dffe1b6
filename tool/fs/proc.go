package fs

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/reinhq/rein/tool"
)

// ownPid is this process's id, as /proc names it.
var ownPid = strconv.Itoa(os.Getpid())

// ownProc reports whether p (absolute and clean) is rein's own /proc entry
// or lies below it: /proc/self, /proc/thread-self, /proc/PID for rein's
// pid or any of its threads' ids. Those hold rein's environment (its API
// keys: a search of /proc/self/environ is an oracle on them), its memory
// and its open files; no file tool reads, searches or lists them.
func ownProc(p string) bool {
	rest, ok := strings.CutPrefix(p, "/proc/")
	if !ok {
		return false
	}
	first, _, _ := strings.Cut(rest, "/")
	switch first {
	case "self", "thread-self", ownPid:
		return true
	case "":
		return false
	}
	if strings.Trim(first, "0123456789") != "" {
		return false
	}
	// Another thread of this process is reachable as /proc/TID too.
	_, err := os.Lstat("/proc/self/task/" + first)
	return err == nil
}

// inOwnProc reports whether the path p (absolute) leads into rein's own
// /proc entry: as written, after resolving its symlinks, or through its
// parent directory (/dev/fd/N is /proc/self/fd/N).
func inOwnProc(p string) bool {
	if ownProc(filepath.Clean(p)) {
		return true
	}
	if r, err := filepath.EvalSymlinks(p); err == nil && ownProc(r) {
		return true
	}
	r, err := filepath.EvalSymlinks(filepath.Dir(p))
	return err == nil && ownProc(r)
}

// walkFilter decides what a walk below root (as given) leaves out: rein's
// own /proc entry and what hide (the permission rules on reading) names.
// Below a root with symlinks resolved the walk follows no symlink, so a
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
	if ownProc(real) {
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

// ownProcErr refuses a path in rein's own /proc entry.
func ownProcErr(env tool.Env, p string) tool.Result {
	return tool.Errorf(tool.CodeDenied, "%s is rein's own process entry (its environment and memory); the file tools do not read it", display(env, p))
}
