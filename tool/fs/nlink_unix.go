//go:build unix

package fs

import (
	"os"
	"syscall"
)

// linkCount is the number of hard links of an open file (0 if unknown).
func linkCount(f *os.File) uint64 {
	fi, err := f.Stat()
	if err != nil {
		return 0
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return uint64(st.Nlink)
	}
	return 0
}
