package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/reinhq/rein/config"
	"github.com/reinhq/rein/display"
	"github.com/reinhq/rein/store/jsonl"
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

// storeDirs are the directories of the session store: a JSONL store's
// root, and the default data directory (which also holds the MCP logs of
// sessions in other stores).
func (a *app) storeDirs() []string {
	var out []string
	if s := a.cfg.Store; s != "" && !config.IsPostgresURL(s) {
		out = append(out, s)
	}
	if d, err := jsonl.DefaultRoot(); err == nil {
		out = append(out, d)
	}
	return out
}

// unsafeRoot says why dir must not be a write root of a sandboxed session
// ("" when it may be one): it is the root directory, the home directory or
// a directory above it, or it holds or lies in one of rein's protected
// directories (config.ProtectedDirs: its configuration, ~/.claude, the
// session store), where a model's write would change what rein runs next.
func (a *app) unsafeRoot(dir string) string {
	r := realPath(dir)
	if r == string(filepath.Separator) {
		return "it is the root directory"
	}
	if home := a.getenv("HOME"); home != "" && within(r, home) {
		if realPath(home) == r {
			return "it is your home directory"
		}
		return "it holds your home directory"
	}
	for _, p := range config.ProtectedDirs(a.getenv, a.storeDirs()...) {
		switch {
		case within(r, p):
			return "it holds " + p
		case within(p, r):
			return "it is inside " + p
		}
	}
	return ""
}

// confineWrites keeps rein's own files out of the model's reach in the
// sandboxed modes, for a session in dir: a workspace that may not be a
// write root (unsafeRoot) makes a workspace-write session read-only, and
// the writable roots (the temporary directory included) that may not be
// one are left out (writable). Each is said once on stderr. full-access is
// the user's choice to let the model write anywhere: nothing is changed.
func (a *app) confineWrites(dir string) error {
	if a.cfg.PermissionMode == config.FullAccess {
		return nil
	}
	if a.cfg.PermissionMode == config.WorkspaceWrite {
		if why := a.unsafeRoot(dir); why != "" {
			if err := a.cfg.Set("permission_mode", config.ReadOnly, "rein: the workspace "+dir+" may not be written ("+why+")"); err != nil {
				return err
			}
			a.sayOnce(fmt.Sprintf("rein: %s cannot be a writable workspace (%s): this session is read-only; start rein in a project directory, or choose --permission-mode full-access to let the model write anywhere", display.Quote(dir), why))
		}
	}
	for _, w := range a.writableConfigured() {
		if why := a.unsafeRoot(w); why != "" {
			a.sayOnce(fmt.Sprintf("rein: %s is not writable in this session (%s)", display.Quote(w), why))
		}
	}
	return nil
}

// sayOnce prints msg on stderr unless this process printed it already.
func (a *app) sayOnce(msg string) {
	p := a.proc
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.said == nil {
		p.said = map[string]bool{}
	}
	if !p.said[msg] {
		p.said[msg] = true
		fmt.Fprintln(a.stderr, msg)
	}
}
