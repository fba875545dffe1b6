package pgtest

import "syscall"

// serverAttr runs the server as cred in a process group of its own, and
// has the kernel send it SIGQUIT (immediate shutdown) when the thread that
// started it dies.
func serverAttr(cred *syscall.Credential) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Credential: cred, Pdeathsig: syscall.SIGQUIT, Setpgid: true}
}
