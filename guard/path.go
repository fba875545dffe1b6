package guard

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// pathSubject is a path argument, resolved.
type pathSubject struct {
	given    string
	lexical  string // absolute and cleaned, symlinks untouched
	resolved string // absolute, symlinks and ".." resolved as the kernel would
	err      error
}

func (p *Policy) pathOf(s string) pathSubject { return p.pathAt(p.dir(), s) }

// pathAt resolves s against the directory base.
func (p *Policy) pathAt(base, s string) pathSubject {
	ps := pathSubject{given: s}
	if s == "" {
		s = "."
	}
	s = expandHome(s)
	if !filepath.IsAbs(s) {
		if base == "" {
			ps.err = errors.New("relative path and no working directory")
			ps.lexical = s
			return ps
		}
		s = base + string(filepath.Separator) + s
	}
	ps.lexical = filepath.Clean(s)
	ps.resolved, ps.err = resolvePath(s)
	return ps
}

// homeDir is the user's home directory (a variable for tests).
var homeDir = os.UserHomeDir

func expandHome(s string) string {
	if s == "~" || strings.HasPrefix(s, "~/") {
		if home, err := homeDir(); err == nil {
			return filepath.Join(home, s[1:])
		}
	}
	return s
}

// maxHops bounds symlink resolution, as the kernel's ELOOP does.
const maxHops = 40

// resolvePath returns the absolute path p names after resolving every
// symbolic link and ".." component physically, component by component, as
// the kernel does when opening it. Components that do not exist are
// appended lexically; a dangling symlink is followed to its target, since a
// write through it creates the target.
func resolvePath(p string) (string, error) {
	if !filepath.IsAbs(p) {
		return "", fmt.Errorf("guard: not absolute: %s", p)
	}
	rest := strings.Split(filepath.ToSlash(p), "/")
	cur := "/"
	hops := 0
	for i := 0; i < len(rest); i++ {
		c := rest[i]
		switch c {
		case "", ".":
			continue
		case "..":
			cur = filepath.Dir(cur)
			continue
		}
		next := filepath.Join(cur, c)
		fi, err := os.Lstat(next)
		if err != nil {
			// Does not exist (or cannot be seen): the rest is lexical.
			return filepath.Join(append([]string{next}, rest[i+1:]...)...), nil
		}
		if fi.Mode()&os.ModeSymlink == 0 {
			cur = next
			continue
		}
		if hops++; hops > maxHops {
			return "", fmt.Errorf("guard: too many symbolic links in %s", p)
		}
		target, err := os.Readlink(next)
		if err != nil {
			return "", err
		}
		if filepath.IsAbs(target) {
			cur = "/"
		}
		rest = append(strings.Split(filepath.ToSlash(target), "/"), rest[i+1:]...)
		i = -1
	}
	return cur, nil
}

// within reports whether p is root or lies below it (both resolved).
func within(root, p string) bool {
	if root == "/" {
		return true
	}
	return p == root || strings.HasPrefix(p, root+string(filepath.Separator))
}

// confined reports whether a write to ps stays inside the workspace root
// or a Writable directory; if not, it says why.
func (p *Policy) confined(ps pathSubject) (bool, string) {
	if ps.err != nil {
		return false, fmt.Sprintf("cannot resolve %s: %v", ps.given, ps.err)
	}
	if p.Root == "" {
		return false, "no workspace root is configured"
	}
	for _, r := range append([]string{p.Root}, p.Writable...) {
		rr, err := resolvePath(expandHome(r))
		if err != nil {
			continue
		}
		if within(rr, ps.resolved) {
			return true, ""
		}
	}
	why := fmt.Sprintf("%s is outside the workspace %s", ps.given, p.Root)
	if ps.resolved != ps.lexical {
		why = fmt.Sprintf("%s resolves to %s, outside the workspace %s", ps.given, ps.resolved, p.Root)
	}
	return false, why
}

// isDevice reports redirection targets that are not files.
func isDevice(target string) bool {
	switch target {
	case "/dev/null", "/dev/stdout", "/dev/stderr", "/dev/tty":
		return true
	}
	return strings.HasPrefix(target, "/dev/fd/")
}
