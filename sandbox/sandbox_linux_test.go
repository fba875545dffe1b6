package sandbox

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

func dumpable() (int, error) { return unix.PrctlRetInt(unix.PR_GET_DUMPABLE, 0, 0, 0, 0) }

func TestNoDump(t *testing.T) {
	// Run in a child: the test process itself stays dumpable.
	if os.Getenv("SANDBOX_NODUMP_CHILD") == "1" {
		if err := NoDump(); err != nil {
			fmt.Println("error", err)
			os.Exit(1)
		}
		d, _ := dumpable()
		fmt.Println("dumpable", d)
		os.Exit(0)
	}
	exe, _ := os.Executable()
	cmd := exec.Command(exe, "-test.run=^TestNoDump$")
	cmd.Env = append(os.Environ(), "SANDBOX_NODUMP_CHILD=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if !strings.Contains(string(out), "dumpable 0") {
		t.Fatalf("after NoDump: %s", out)
	}
}
