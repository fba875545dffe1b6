package tui

import (
	"fmt"
	"net"
	"os"

	"golang.org/x/sys/unix"
)

// samePeer refuses a connection from a process of another user (the
// socket's directory and mode already keep them out; this is the second
// lock).
func samePeer(c net.Conn) error {
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return nil
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return err
	}
	var cred *unix.Ucred
	var cerr error
	if err := raw.Control(func(fd uintptr) {
		cred, cerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return err
	}
	if cerr != nil {
		return cerr
	}
	if int(cred.Uid) != os.Getuid() {
		return fmt.Errorf("connection from uid %d refused: only uid %d may inject into this session", cred.Uid, os.Getuid())
	}
	return nil
}

func listenPrivate(path string) (net.Listener, error) { return net.Listen("unix", path) }
