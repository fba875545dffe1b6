package tui

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// samePeer refuses a connection from a process of another user (the
// socket's directory and mode already keep them out; this is the second
// lock), and from a sandboxed command: those run with no_new_privs, which
// no process can clear, and were one let in (a sandbox with the network
// allowed may connect to unix sockets) it could put words into any live
// session of the user, in another workspace and another permission mode.
func samePeer(c net.Conn) error {
	cred, err := peerCred(c)
	if err != nil || cred == nil {
		return err
	}
	if int(cred.Uid) != os.Getuid() {
		return fmt.Errorf("connection from uid %d refused: only uid %d may inject into this session", cred.Uid, os.Getuid())
	}
	status, err := os.ReadFile("/proc/" + strconv.Itoa(int(cred.Pid)) + "/status")
	if err != nil {
		return fmt.Errorf("connection refused: cannot tell whether process %d is sandboxed: %v", cred.Pid, err)
	}
	if bytes.Contains(status, []byte("\nNoNewPrivs:\t1")) {
		return fmt.Errorf("connection from process %d refused: it runs with no_new_privs, as a sandboxed command does", cred.Pid)
	}
	return nil
}

// serverIsSelf checks, from the client's side, that the process serving
// the socket is of this user: one that took the socket's place (in a
// shared temporary directory, say) would otherwise read what is sent.
func serverIsSelf(c net.Conn) error {
	cred, err := peerCred(c)
	if err != nil || cred == nil {
		return err
	}
	if int(cred.Uid) != os.Getuid() {
		return fmt.Errorf("the socket is served by uid %d, not by you: nothing was sent", cred.Uid)
	}
	return nil
}

func peerCred(c net.Conn) (*unix.Ucred, error) {
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return nil, nil
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return nil, err
	}
	var cred *unix.Ucred
	var cerr error
	if err := raw.Control(func(fd uintptr) {
		cred, cerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return nil, err
	}
	return cred, cerr
}

func listenPrivate(path string) (net.Listener, error) { return net.Listen("unix", path) }
