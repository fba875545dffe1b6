package main

import (
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/reinhq/rein/sandbox"
	"github.com/reinhq/rein/tool/fs"
)

// fsOptions are the file tools' options for a session in dir: in the
// sandboxed modes write and edit are confined to the write roots and
// ripgrep runs in the OS sandbox; in every mode grep, glob and ls leave
// out what the read rules deny or ask about. buf, when set, is the
// editor's buffers.
func (a *app) fsOptions(dir string, buf fs.Buffers) fs.Options {
	opts := fs.Options{Confine: a.sandboxed(), WriteRoots: a.writeRoots(dir), Buffers: buf, Hide: a.hider(dir), Rg: a.rgPath(dir)}
	if sb := a.sandbox(dir); sb != nil {
		opts.RgStart = func(cmd *exec.Cmd) error {
			if err := sb.Start(cmd); !errors.Is(err, sandbox.ErrUnavailable) {
				return err
			}
			return nil // started unconfined; rein has said so
		}
	}
	return opts
}

// hider is what the read rules of a session in dir hide from the walking
// tools. Rules that do not parse stop the session where its policy is
// built; should the tools be made all the same, they hide everything.
func (a *app) hider(dir string) func(paths ...string) bool {
	p, err := a.policy(dir)
	if err != nil {
		return func(...string) bool { return true }
	}
	return p.Hider()
}

// writeRootOf returns the write root of a session in dir that holds one of
// paths (as given or with symlinks resolved), or "": a file there may have
// been written by the model's sandboxed commands. Outside the sandboxed
// modes there are no write roots to speak of (everything is writable).
func (a *app) writeRootOf(dir string, paths ...string) string {
	if !a.sandboxed() {
		return ""
	}
	for _, r := range a.writeRoots(dir) {
		forms := []string{filepath.Clean(r)}
		if real, err := filepath.EvalSymlinks(r); err == nil {
			forms = append(forms, real)
		}
		for _, p := range paths {
			for _, f := range forms {
				if p == f || strings.HasPrefix(p, strings.TrimSuffix(f, "/")+"/") {
					return r
				}
			}
		}
	}
	return ""
}

// rgPath is the ripgrep grep runs for a session in dir, found on PATH
// once. One that lies in a write root (a workspace's bin directory on
// PATH, say) could have been put there by the model; it is not used, grep
// falls back to its Go engine, and rein says so.
func (a *app) rgPath(dir string) string {
	rg, err := exec.LookPath("rg")
	if err != nil {
		return "-"
	}
	if abs, err := filepath.Abs(rg); err == nil {
		rg = abs
	}
	real, err := filepath.EvalSymlinks(rg)
	if err != nil {
		return "-"
	}
	if root := a.writeRootOf(dir, rg, real); root != "" {
		fmt.Fprintf(a.stderr, "rein: not running %s: it lies in %s, which the model's commands can write; grep uses its own engine\n", rg, root)
		return "-"
	}
	return rg
}

// checkCommand refuses to start an MCP server (it runs outside the
// sandbox) whose command lies in a write root of a session in dir.
func (a *app) checkCommand(dir string) func(found, real string) error {
	return func(found, real string) error {
		if root := a.writeRootOf(dir, found, real); root != "" {
			return fmt.Errorf("%s lies in %s, which the model's sandboxed commands can write; install it elsewhere", found, root)
		}
		return nil
	}
}
