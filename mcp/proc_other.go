//go:build !unix

package mcp

import (
	"os/exec"
	"time"
)

// setGroup does nothing where process groups are not available.
func setGroup(*exec.Cmd) {}

// signalGroup kills the command's process; without process groups there
// is nothing gentler to send, and its children are not reached.
func signalGroup(cmd *exec.Cmd, _ bool) {
	if cmd.Process != nil {
		_ = cmd.Process.Kill()
	}
}

// awaitGroup has no group to wait for.
func awaitGroup(*exec.Cmd, time.Duration) {}
