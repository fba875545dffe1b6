//go:build !linux

package tui

import "net"

// samePeer: without a way to ask who connected, the socket's directory
// (0700) and mode (0600) keep other users out.
func samePeer(net.Conn) error { return nil }

// serverIsSelf: the directory check (privateDir) is all there is here.
func serverIsSelf(net.Conn) error { return nil }

func listenPrivate(path string) (net.Listener, error) { return net.Listen("unix", path) }
