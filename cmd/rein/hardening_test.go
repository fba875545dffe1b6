package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/reinhq/rein/config"
)

// ripgrep and MCP commands run outside the sandbox: one found in a write
// root (a workspace directory on PATH), or reached through a symlink to
// one, is not run.
func TestCommandsInWriteRootsAreNotRun(t *testing.T) {
	ws, bin, tmp := t.TempDir(), t.TempDir(), t.TempDir()
	t.Setenv("TMPDIR", tmp) // the system temp directory is a write root too
	var stderr bytes.Buffer
	a := &app{cfg: config.Default(), stderr: &stderr, getenv: func(string) string { return "" }}
	fake := filepath.Join(ws, ".venv", "bin", "rg")
	if err := os.MkdirAll(filepath.Dir(fake), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(fake, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", filepath.Dir(fake)+string(os.PathListSeparator)+bin)
	if got := a.rgPath(ws); got != "-" || !strings.Contains(stderr.String(), "not running "+fake) {
		t.Errorf("rg in the workspace: %q, stderr %q", got, stderr.String())
	}
	if err := a.checkCommand(ws)(fake, fake); err == nil {
		t.Error("an MCP command in the workspace is accepted")
	}
	if err := a.checkCommand(ws)(filepath.Join(bin, "x"), fake); err == nil {
		t.Error("a symlink outside to a command in the workspace is accepted")
	}
	// Outside the write roots they run; in full-access mode everything is
	// writable anyway.
	good := filepath.Join(bin, "rg")
	if err := os.WriteFile(good, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin)
	if got := a.rgPath(ws); got != good {
		t.Errorf("rg outside: %q", got)
	}
	if err := a.checkCommand(ws)(good, good); err != nil {
		t.Errorf("an MCP command outside: %v", err)
	}
	t.Setenv("PATH", filepath.Dir(fake))
	a.cfg.PermissionMode = config.FullAccess
	if got := a.rgPath(ws); got != fake {
		t.Errorf("full-access: %q", got)
	}
}
