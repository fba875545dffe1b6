package fs

import (
	"errors"
	"fmt"
	"io"
	iofs "io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/reinhq/rein/tool"
)

// fsys is where write and edit resolve a path: an os.Root (confined) or
// the whole file system.
type fsys interface {
	Stat(name string) (iofs.FileInfo, error)
	OpenFile(name string, flag int, perm iofs.FileMode) (*os.File, error)
	MkdirAll(name string, perm iofs.FileMode) error
}

// osFS is the unconfined file system; names are absolute.
type osFS struct{}

func (osFS) Stat(name string) (iofs.FileInfo, error) { return os.Stat(name) }
func (osFS) OpenFile(name string, flag int, perm iofs.FileMode) (*os.File, error) {
	return os.OpenFile(name, flag, perm)
}
func (osFS) MkdirAll(name string, perm iofs.FileMode) error { return os.MkdirAll(name, perm) }

// errOutside: a path lies outside every writable root.
var errOutside = errors.New("outside the workspace")

// errRootMoved: a writable root no longer names the directory opened when
// the tools were made.
var errRootMoved = errors.New("the workspace was moved or replaced")

// confine holds the directories write and edit may change files in, each
// opened once, when the tools are made, and kept open: a root renamed
// away and replaced by a symlink later (by a command that can write its
// parent) is not followed, and the change is refused.
type confine struct {
	roots []*heldRoot
}

// heldRoot is one writable root: its os.Root, the path prefixes that lead
// to it (as configured, and with symlinks resolved), and what it was when
// opened.
type heldRoot struct {
	root     *os.Root
	prefixes [][]string
	real     string
	fi       os.FileInfo
}

func newConfine(roots []string) *confine {
	c := &confine{}
	for _, r := range roots {
		r = expandHome(r)
		if !filepath.IsAbs(r) {
			continue
		}
		root, err := os.OpenRoot(r)
		if err != nil {
			continue // a root that does not exist now grants nothing
		}
		fi, err := root.Stat(".")
		real := ""
		if d, derr := root.Open("."); derr == nil {
			real = realPath(d, "")
			d.Close()
		}
		if err != nil || real == "" {
			root.Close()
			continue
		}
		h := &heldRoot{root: root, real: real, fi: fi, prefixes: [][]string{components(filepath.Clean(r))}}
		if real != filepath.Clean(r) {
			h.prefixes = append(h.prefixes, components(real))
		}
		c.roots = append(c.roots, h)
	}
	return c
}

// check reports errRootMoved when the root's path no longer names the
// directory that was opened.
func (h *heldRoot) check() error {
	now, err := os.Stat(h.real)
	if err != nil || !os.SameFile(now, h.fi) {
		return fmt.Errorf("%w: %s", errRootMoved, h.real)
	}
	return nil
}

// open returns where to resolve p (absolute, as given: never cleaned) and
// the name to resolve there, and a closer. With confinement, the name is
// p relative to the root whose path p starts with, and the root is the
// os.Root held for it: the kernel resolves every component, symlinks and
// ".." included, below the root and nowhere else, so what is checked is
// what is opened (no check-then-use race). Only "" and "." components are
// dropped before that, which never changes what a path names.
func (c *confine) open(p string) (fsys, string, func(), error) {
	if c == nil {
		return osFS{}, p, func() {}, nil
	}
	comps := components(p)
	for _, h := range c.roots {
		for _, rc := range h.prefixes {
			if len(comps) < len(rc) || !equalPrefix(rc, comps) {
				continue
			}
			if err := h.check(); err != nil {
				return nil, "", nil, err
			}
			name := strings.Join(comps[len(rc):], "/")
			if name == "" {
				name = "."
			}
			return h.root, name, func() {}, nil
		}
	}
	return nil, "", nil, errOutside
}

// components splits an absolute path into its components, without "" and
// "." (".." stays: only the kernel knows where it leads).
func components(p string) []string {
	var out []string
	for _, c := range strings.Split(filepath.ToSlash(p), "/") {
		if c != "" && c != "." {
			out = append(out, c)
		}
	}
	return out
}

func equalPrefix(prefix, s []string) bool {
	for i := range prefix {
		if prefix[i] != s[i] {
			return false
		}
	}
	return true
}

// parentName is name without its last component ("." for a single one).
func parentName(name string) string {
	if i := strings.LastIndexByte(name, '/'); i >= 0 {
		return name[:i]
	}
	return "."
}

// escapes reports os.Root's refusal of a path that leaves the root (by
// "..", or a symbolic link pointing out of it or to an absolute path).
func escapes(err error) bool {
	return err != nil && strings.Contains(err.Error(), "path escapes from parent")
}

// confineErr turns an error of resolving p inside the roots into a result.
func confineErr(env tool.Env, p string, err error) tool.Result {
	switch {
	case errors.Is(err, errOutside):
		return tool.Errorf(tool.CodeDenied, "%s is outside the workspace and the writable roots; nothing was written", display(env, p))
	case escapes(err):
		return tool.Errorf(tool.CodeDenied, "%s leads outside the workspace (through \"..\" or a symbolic link); nothing was written", display(env, p))
	case errors.Is(err, errRootMoved):
		return tool.Errorf(tool.CodeDenied, "%v since the session started (its path now leads elsewhere); nothing was written — start a new session in the workspace's new place", err)
	}
	return openErr(env, p, err)
}

// openExisting opens an existing regular file for writing and refuses one
// with more than one hard link: its other names may lie outside the
// workspace, and a write through any name changes them all.
func openExisting(sys fsys, name string) (*os.File, error) {
	f, err := sys.OpenFile(name, os.O_WRONLY, 0)
	if err != nil {
		return nil, err
	}
	if n := linkCount(f); n > 1 {
		f.Close()
		return nil, &hardLinkError{n}
	}
	return f, nil
}

// realPath is the path of the file f is open on, as the kernel knows it
// (symlinks and ".." resolved), or fallback where that cannot be told.
// Results, the read-before-edit record and diffs name this path, so they
// say which file was really read or written.
func realPath(f *os.File, fallback string) string {
	if p, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(int(f.Fd()))); err == nil && filepath.IsAbs(p) {
		return p
	}
	return fallback
}

// readAll reads the whole file name.
func readAll(sys fsys, name string) ([]byte, error) {
	f, err := sys.OpenFile(name, os.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(f)
}

// replaceContent truncates f, writes b and closes f.
func replaceContent(f *os.File, b []byte) error {
	err := f.Truncate(0)
	if err == nil {
		_, err = f.Write(b)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

type hardLinkError struct{ n uint64 }

func (e *hardLinkError) Error() string { return "hard links" }

// writeErr turns an error of opening or writing an existing file into a
// result.
func writeErr(env tool.Env, p string, err error) tool.Result {
	var hl *hardLinkError
	if errors.As(err, &hl) {
		return tool.Errorf(CodeHardLink, "%s has %d hard links; rein does not write through a hard link, since its other names may lie outside the workspace (copy it to a new file and replace the original instead)", display(env, p), hl.n)
	}
	return confineErr(env, p, err)
}
