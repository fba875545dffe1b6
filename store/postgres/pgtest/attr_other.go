//go:build unix && !linux

package pgtest

import "syscall"

// serverAttr runs the server as cred in a process group of its own. There
// is no parent-death signal here: a test binary killed outright leaves the
// server to the cluster's own cleanup.
func serverAttr(cred *syscall.Credential) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Credential: cred, Setpgid: true}
}
