package tool

import (
	"errors"
	"fmt"
	iofs "io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// ErrUnsafeSpillDir: the directory for a call's full output is not one
// rein made for itself (a symbolic link, another user's, or open to
// others); nothing was written.
var ErrUnsafeSpillDir = errors.New("tool: unsafe spill directory")

// CreateSpill creates a new file for a call's full output in dir, making
// dir (mode 0700) when it is missing; the file's name is pattern with its
// last "*" replaced by a random string, as os.CreateTemp does. rein runs
// it with the user's rights while dir usually lies in the system temp
// directory, which sandboxed commands may write: so dir is opened below
// its parent without following a symbolic link at dir itself (a link put
// there to make rein write elsewhere is refused, as is a directory that
// another user owns or others may write), and the file is created inside
// the directory that was checked, never through a link.
func CreateSpill(dir, pattern string) (*os.File, error) {
	parent, name := filepath.Dir(dir), filepath.Base(dir)
	root, err := os.OpenRoot(parent)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	if err := root.Mkdir(name, 0o700); err != nil && !errors.Is(err, iofs.ErrExist) {
		return nil, err
	}
	fi, err := root.Lstat(name)
	if err != nil {
		return nil, err
	}
	if err := safeSpillDir(dir, fi); err != nil {
		return nil, err
	}
	sub, err := root.OpenRoot(name)
	if err != nil {
		return nil, err
	}
	defer sub.Close()
	if now, err := sub.Stat("."); err != nil || !os.SameFile(fi, now) {
		return nil, fmt.Errorf("%w: %s changed while it was opened", ErrUnsafeSpillDir, dir)
	}
	prefix, suffix := pattern, ""
	if i := strings.LastIndexByte(pattern, '*'); i >= 0 {
		prefix, suffix = pattern[:i], pattern[i+1:]
	}
	for range 100 {
		n := prefix + strconv.FormatUint(uint64(rand.Uint32()), 10) + suffix
		f, err := sub.OpenFile(n, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
		if errors.Is(err, iofs.ErrExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		return f, nil // named dir/n: where read and grep look for it
	}
	return nil, fmt.Errorf("tool: no free name for a spill file in %s", dir)
}

// safeSpillDir refuses fi (the Lstat of dir) unless it is a directory of
// this user that no one else may write.
func safeSpillDir(dir string, fi os.FileInfo) error {
	switch {
	case fi.Mode()&os.ModeSymlink != 0:
		return fmt.Errorf("%w: %s is a symbolic link", ErrUnsafeSpillDir, dir)
	case !fi.IsDir():
		return fmt.Errorf("%w: %s is not a directory", ErrUnsafeSpillDir, dir)
	case fi.Mode().Perm()&0o022 != 0:
		return fmt.Errorf("%w: others may write %s (mode %v)", ErrUnsafeSpillDir, dir, fi.Mode().Perm())
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Geteuid() {
		return fmt.Errorf("%w: %s belongs to user %d", ErrUnsafeSpillDir, dir, st.Uid)
	}
	return nil
}
