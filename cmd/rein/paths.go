package main

import (
	"os"
	"path/filepath"
	"strings"
)

// realPath resolves p as the kernel would reach it: symbolic links in its
// longest existing prefix resolved, the rest (not created yet) appended.
// p is made absolute first.
func realPath(p string) string {
	p, err := filepath.Abs(p)
	if err != nil {
		return filepath.Clean(p)
	}
	rest := ""
	for d := p; ; {
		if r, err := filepath.EvalSymlinks(d); err == nil {
			return filepath.Join(r, rest)
		}
		parent := filepath.Dir(d)
		if parent == d {
			return p
		}
		rest = filepath.Join(filepath.Base(d), rest)
		d = parent
	}
}

// within reports whether p is dir or below it, after resolving both
// (realPath).
func within(dir, p string) bool {
	rel, err := filepath.Rel(realPath(dir), realPath(p))
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}

// isDir reports whether p is a directory.
func isDir(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.IsDir()
}
