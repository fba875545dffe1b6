//go:build unix

package jsonl

import (
	"errors"
	"fmt"
	"os"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/reinhq/rein/store"
)

// lockFile takes an exclusive, non-blocking flock(2) on f. flock locks
// belong to the open file description, so a second open of the same file
// conflicts even within one process. The lock goes with the descriptor:
// closing f (or the process dying) releases it.
func lockFile(f *os.File) error { return flock(f, syscall.LOCK_EX) }

func flock(f *os.File, how int) error {
	for {
		err := syscall.Flock(int(f.Fd()), how|syscall.LOCK_NB)
		switch {
		case err == nil:
			return nil
		case errors.Is(err, syscall.EINTR):
			continue
		case errors.Is(err, syscall.EWOULDBLOCK):
			return store.ErrLocked
		default:
			return fmt.Errorf("jsonl: lock: %w", err)
		}
	}
}

// held reports whether an exclusive lock is held on path (by anyone, this
// process included), without waiting: it takes a shared lock and lets it
// go at once. A missing or unreadable file is not held.
func held(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	return flock(f, syscall.LOCK_SH) == store.ErrLocked
}

// renamed returns f as a file named path (the same open file description,
// and so the same flock), closing f: errors of a writer must name the
// session file, not the temporary name it was written under, which is
// gone. The copy is close-on-exec, as every descriptor Go opens: a
// descriptor of the session file that leaked into a child (a tool's
// command, a hook, an MCP server) would let it rewrite the log and hold
// its lock.
func renamed(f *os.File, path string) (*os.File, error) {
	fd, err := unix.FcntlInt(f.Fd(), unix.F_DUPFD_CLOEXEC, 0)
	f.Close()
	if err != nil {
		return nil, fmt.Errorf("jsonl: dup %s: %w", path, err)
	}
	return os.NewFile(uintptr(fd), path), nil
}
