//go:build unix

package mcp

import (
	"os/exec"
	"syscall"
	"time"
)

// setGroup makes the command lead a process group of its own.
func setGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
}

// signalGroup sends SIGTERM (or SIGKILL when kill) to the command's
// process group.
func signalGroup(cmd *exec.Cmd, kill bool) {
	if cmd.Process == nil {
		return
	}
	sig := syscall.SIGTERM
	if kill {
		sig = syscall.SIGKILL
	}
	_ = syscall.Kill(-cmd.Process.Pid, sig)
}

// awaitGroup waits, at most limit, until no process of the command's group
// is left. SIGKILL is delivered asynchronously: a grandchild killed with
// the group may still be running when the signal call returns. A member
// that died but is not yet reaped by its new parent still counts, so the
// wait is bounded.
func awaitGroup(cmd *exec.Cmd, limit time.Duration) {
	if cmd.Process == nil {
		return
	}
	deadline := time.Now().Add(limit)
	for syscall.Kill(-cmd.Process.Pid, 0) == nil && time.Now().Before(deadline) {
		time.Sleep(2 * time.Millisecond)
	}
}
