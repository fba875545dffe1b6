package fs

import (
	"bufio"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/bmatcuk/doublestar/v4"
)

// ignoreFile is the parsed .gitignore of one directory. It implements the
// common subset of gitignore(5): blank lines and # comments, ! negation,
// a trailing / for directories only, patterns with an inner or leading /
// anchored to the file's directory, others matched against the name at any
// depth, and * ? [...] ** wildcards.
type ignoreFile struct {
	dir      string // absolute directory holding the .gitignore
	patterns []ignorePattern
}

type ignorePattern struct {
	glob     string
	negate   bool
	dirOnly  bool
	anchored bool
}

// loadIgnore reads dir/.gitignore; nil when there is none.
func loadIgnore(dir string) *ignoreFile {
	f, err := os.Open(filepath.Join(dir, ".gitignore"))
	if err != nil {
		return nil
	}
	defer f.Close()
	ig := &ignoreFile{dir: dir}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimRight(sc.Text(), "\r")
		if !strings.HasSuffix(line, `\ `) {
			line = strings.TrimRight(line, " \t")
		}
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		var p ignorePattern
		if strings.HasPrefix(line, "!") {
			p.negate, line = true, line[1:]
		} else if strings.HasPrefix(line, `\!`) || strings.HasPrefix(line, `\#`) {
			line = line[1:]
		}
		if strings.HasSuffix(line, "/") {
			p.dirOnly, line = true, strings.TrimRight(line, "/")
		}
		if strings.Contains(line, "/") {
			p.anchored, line = true, strings.TrimPrefix(line, "/")
		}
		if line == "" || !doublestar.ValidatePattern(line) {
			continue
		}
		p.glob = line
		ig.patterns = append(ig.patterns, p)
	}
	if len(ig.patterns) == 0 {
		return nil
	}
	return ig
}

// match reports whether the file decides about abs (inside ig.dir), and if
// so whether abs is ignored. The last matching pattern decides.
func (ig *ignoreFile) match(abs string, isDir bool) (decided, ignored bool) {
	rel, err := filepath.Rel(ig.dir, abs)
	if err != nil || strings.HasPrefix(rel, "..") {
		return false, false
	}
	rel = filepath.ToSlash(rel)
	base := path.Base(rel)
	for i := len(ig.patterns) - 1; i >= 0; i-- {
		p := ig.patterns[i]
		if p.dirOnly && !isDir {
			continue
		}
		target := base
		if p.anchored {
			target = rel
		}
		if ok, _ := doublestar.Match(p.glob, target); ok {
			return true, !p.negate
		}
	}
	return false, false
}

// ignoreStack is the .gitignore files in force for a directory, outermost
// first.
type ignoreStack []*ignoreFile

// ignored reports whether abs is ignored; deeper files override shallower.
func (s ignoreStack) ignored(abs string, isDir bool) bool {
	for i := len(s) - 1; i >= 0; i-- {
		if decided, ig := s[i].match(abs, isDir); decided {
			return ig
		}
	}
	return false
}

// parentIgnores loads the .gitignore files of dir's ancestors, up to and
// including the nearest one holding .git (or the file-system root).
func parentIgnores(dir string) ignoreStack {
	if _, err := os.Stat(filepath.Join(dir, ".git")); err == nil {
		return nil // dir is a repository root: nothing above applies
	}
	var chain []string
	for d := dir; ; {
		parent := filepath.Dir(d)
		if parent == d {
			break
		}
		chain = append(chain, parent)
		if _, err := os.Stat(filepath.Join(parent, ".git")); err == nil {
			break
		}
		d = parent
	}
	var s ignoreStack
	for i := len(chain) - 1; i >= 0; i-- {
		if ig := loadIgnore(chain[i]); ig != nil {
			s = append(s, ig)
		}
	}
	return s
}
