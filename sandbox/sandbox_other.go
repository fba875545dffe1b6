//go:build !linux

package sandbox

import (
	"fmt"
	"io"
	"os"
	"runtime"
	"syscall"
)

// Main is the launcher; on this OS there is no sandbox to apply, so it
// refuses to run anything.
func Main(args []string, stderr io.Writer) int {
	fmt.Fprintf(stderr, "rein sandbox: not supported on %s\n", runtime.GOOS)
	return 126
}

func (s *Sandbox) probe() Status {
	return Status{Why: "rein has no OS sandbox for " + runtime.GOOS + " (Landlock is Linux only)"}
}

// held is empty here: nothing is ever launched through it.
type held struct {
	exe   *os.File
	roots []struct{ f *os.File }
	err   error
}

func openHeld(Launcher, []string) *held { return &held{} }
func (h *held) check() error            { return nil }
func (h *held) close() error            { return nil }

func withNetNS(attr *syscall.SysProcAttr) *syscall.SysProcAttr { return attr }

// NoDump does nothing on this OS.
func NoDump() error { return nil }

// CloseInherited does nothing on this OS.
func CloseInherited() error { return nil }
