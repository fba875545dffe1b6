package guard

import (
	"path/filepath"
	"strings"

	"github.com/bmatcuk/doublestar/v4"
)

// readTools are the tools a walk of a directory stands in for.
var readTools = []string{"read", "glob", "grep", "ls"}

// Hider returns a function reporting whether a deny or ask rule on
// reading (Read(...), or a read tool's own name, with a path pattern)
// matches any of the given absolute paths; nil when the policy has no such
// rule. The tools that walk directories (grep, glob, ls) leave those paths
// out, so a search of a parent directory does not get round a rule on a
// file below it (the policy itself only sees the directory searched). It
// matches the paths as given and never touches the file system, so it is
// cheap per walked file: the caller passes a path as walked and, when it
// differs, its real form. Relative patterns are matched against the path
// relative to the workspace root as given and as resolved (once, here), as
// Decide matches them.
func (p *Policy) Hider() func(paths ...string) bool {
	var pats []string
	for _, r := range p.Rules {
		if r.Action == Allow || r.Pattern == "" {
			continue
		}
		for _, name := range readTools {
			if r.matchesTool(name, KindRead) {
				pats = append(pats, filepath.ToSlash(expandHome(r.Pattern)))
				break
			}
		}
	}
	if len(pats) == 0 {
		return nil
	}
	var bases []string
	if base := p.Root; base != "" || p.dir() != "" {
		if base == "" {
			base = p.dir()
		}
		bases = append(bases, filepath.Clean(base))
		if res, err := resolvePath(base); err == nil && res != bases[0] {
			bases = append(bases, res)
		}
	}
	return func(paths ...string) bool {
		for _, pat := range pats {
			abs := strings.HasPrefix(pat, "/")
			for _, path := range paths {
				if abs {
					if ok, _ := doublestar.Match(pat, filepath.ToSlash(path)); ok {
						return true
					}
					continue
				}
				for _, b := range bases {
					rel, err := filepath.Rel(b, path)
					if err != nil {
						continue
					}
					if ok, _ := doublestar.Match(pat, filepath.ToSlash(rel)); ok {
						return true
					}
				}
			}
		}
		return false
	}
}
