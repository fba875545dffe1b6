//go:build unix

package jsonl

import (
	"errors"
	"fmt"
	"os"
	"syscall"

	"github.com/reinhq/rein/store"
)

// lockFile takes an exclusive, non-blocking flock(2) on f. flock locks
// belong to the open file description, so a second open of the same file
// conflicts even within one process. The lock goes with the descriptor:
// closing f (or the process dying) releases it.
func lockFile(f *os.File) error {
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		switch {
		case err == nil:
			return nil
		case errors.Is(err, syscall.EINTR):
			continue
		case errors.Is(err, syscall.EWOULDBLOCK):
			return store.ErrLocked
		default:
			return fmt.Errorf("jsonl: lock %s: %w", f.Name(), err)
		}
	}
}
