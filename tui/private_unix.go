//go:build unix

package tui

import (
	"fmt"
	"os"
	"syscall"
)

// privateDir checks that dir, which holds live-session sockets, is a
// directory (not a symlink) of this user that no one else may write: in a
// shared place (the temporary directory) another user could otherwise
// have made it first, and swap the sockets in it for their own.
func privateDir(dir string) error {
	fi, err := os.Lstat(dir)
	if err != nil {
		return err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	switch {
	case !fi.IsDir():
		return fmt.Errorf("%s is not a directory", dir)
	case ok && int(st.Uid) != os.Getuid():
		return fmt.Errorf("%s belongs to uid %d, not to you", dir, st.Uid)
	case fi.Mode().Perm()&0o022 != 0:
		return fmt.Errorf("%s may be written by others (mode %v)", dir, fi.Mode().Perm())
	}
	return nil
}
