package sandbox

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"
	"golang.org/x/sys/unix"
)

// helper runs the test binary as a small program (SANDBOX_TEST_HELPER),
// so sandboxed tests can make system calls a shell cannot: it prints what
// happened and exits 0 when the operation succeeded.
func helper(name string, args []string) int {
	fail := func(err error) int {
		fmt.Println("error:", err)
		return 1
	}
	switch name {
	case "tiocsti": // type a character into the controlling terminal
		f, err := os.Open("/dev/tty") // read-only: TIOCSTI needs no more
		if err != nil {
			return fail(err)
		}
		b := byte('#')
		if _, _, e := unix.Syscall(unix.SYS_IOCTL, f.Fd(), unix.TIOCSTI, uintptr(unsafePointer(&b))); e != 0 {
			return fail(e)
		}
		fmt.Println("injected")
	case "unix-connect": // connect to a pathname unix socket
		c, err := net.Dial("unix", args[0])
		if err != nil {
			return fail(err)
		}
		c.Write([]byte("hello from the sandbox"))
		c.Close()
	case "unix-sendto": // a datagram from a socketpair socket to a path
		fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_DGRAM, 0)
		if err != nil {
			return fail(err)
		}
		if err := unix.Sendto(fds[0], []byte("hello from the sandbox"), 0, &unix.SockaddrUnix{Name: args[0]}); err != nil {
			return fail(err)
		}
	case "udp-send": // a datagram to ADDR
		c, err := net.Dial("udp", args[0])
		if err != nil {
			return fail(err)
		}
		if _, err := c.Write([]byte("hello from the sandbox")); err != nil {
			return fail(err)
		}
	case "raw-socket":
		fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW, 0)
		if err != nil {
			return fail(err)
		}
		unix.Close(fd)
	case "io-uring": // io_uring makes sockets without socket(2)
		var params [120]byte // struct io_uring_params
		fd, _, e := unix.Syscall(unix.SYS_IO_URING_SETUP, 1, uintptr(unsafePointer(&params[0])), 0)
		if e != 0 {
			return fail(e)
		}
		unix.Close(int(fd))
	case "session": // the session id and whether /dev/tty (a controlling terminal) opens
		sid, _ := unix.Getsid(0)
		_, err := os.Open("/dev/tty")
		fmt.Printf("pid %d sid %d tty %v\n", os.Getpid(), sid, err == nil)
	default:
		return fail(errors.New("unknown helper " + name))
	}
	return 0
}

// runHelper runs helper name with args, sandboxed when s is not nil.
func runHelper(t *testing.T, s *Sandbox, dir, name string, args ...string) (string, error) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, args...)
	cmd.Env = []string{"SANDBOX_TEST_HELPER=" + name}
	return runCmd(s, dir, cmd)
}

// A sandboxed command that replaces the launcher's file (here a copy of
// the launcher in a write root, as "go run" puts rein under $TMPDIR) must
// not get the next command run unconfined: the launcher is executed
// through the descriptor opened when the sandbox was made.
func TestReplacedLauncherIsNotRun(t *testing.T) {
	base := t.TempDir()
	bin, outside := filepath.Join(base, "bin"), t.TempDir()
	if err := os.Mkdir(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	exe, _ := os.Executable()
	data, err := os.ReadFile(exe)
	if err != nil {
		t.Fatal(err)
	}
	launcher := filepath.Join(bin, "rein")
	if err := os.WriteFile(launcher, data, 0o755); err != nil {
		t.Fatal(err)
	}
	s := New(Launcher{Path: launcher}, Policy{Write: []string{base}})
	defer s.Close()
	if st := s.Probe(); !st.Available() {
		t.Skipf("no OS sandbox here: %s", st.Why)
	}
	// The attacker's launcher: skip to "--", exec the command as is.
	fake := "#!/bin/sh\nwhile [ \"$1\" != -- ]; do shift; done; shift; p=$1; shift; shift; exec \"$p\" \"$@\"\n"
	replace := fmt.Sprintf("printf '%%s' '%s' > fake && chmod +x fake && mv fake %s", fake, launcher)
	if out, err := run(t, s, base, replace); err != nil {
		t.Fatalf("replacing the launcher's file (a write inside the root): %v\n%s", err, out)
	}
	if b, _ := os.ReadFile(launcher); !bytes.HasPrefix(b, []byte("#!/bin/sh")) {
		t.Fatal("the launcher's file was not replaced; the test proves nothing")
	}
	escape := "echo x > " + filepath.Join(outside, "escaped") + "; grep NoNewPrivs /proc/self/status"
	out, err := run(t, s, base, escape)
	if _, serr := os.Stat(filepath.Join(outside, "escaped")); serr == nil {
		t.Fatalf("the replaced launcher ran the command unconfined:\n%s", out)
	}
	if err != nil || !strings.Contains(out, "Permission denied") || !strings.Contains(out, "NoNewPrivs:\t1") {
		t.Fatalf("want a confined command whose write was denied (NoNewPrivs 1): %v\n%s", err, out)
	}
}

// A launcher that does not confirm on the status pipe that it applied the
// ruleset is not believed: the sandbox reports the command not confined,
// rather than "sandboxed".
func TestUnconfirmedLaunchIsNotConfined(t *testing.T) {
	s := New(Launcher{Path: "/bin/true"}, Policy{})
	defer s.Close()
	if st := s.Probe(); st.Available() {
		t.Fatalf("a launcher that never confirms probes as available: %s", st)
	}
	// Past a good probe (as if the launcher changed later), Start
	// refuses too.
	s = New(Launcher{Path: "/bin/true"}, Policy{})
	defer s.Close()
	s.once.Do(func() {})
	s.status = Status{ABI: 1}
	marker := filepath.Join(t.TempDir(), "ran")
	cmd := exec.Command("/bin/sh", "-c", "touch "+marker)
	err := s.Start(cmd)
	if !errors.Is(err, ErrNotConfined) {
		t.Fatalf("Start: %v, want ErrNotConfined", err)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("the command ran")
	}
}

// Sandboxed commands have no controlling terminal, so no TIOCSTI into the
// user's shell and no /dev/tty. The test runs itself under a
// pseudo-terminal that is its controlling terminal, as rein is in a
// terminal.
func TestNoControllingTerminal(t *testing.T) {
	if os.Getenv("SANDBOX_TTY_CHILD") == "1" {
		s := New(Launcher{}, Policy{Write: []string{os.TempDir()}})
		if st := s.Probe(); !st.Available() {
			fmt.Println("SKIP", st.Why)
			return
		}
		dir := os.TempDir()
		out, err := runHelper(t, nil, dir, "session")
		fmt.Printf("control session: %s control err: %v\n", strings.TrimSpace(out), err)
		out, err = runHelper(t, nil, dir, "tiocsti")
		fmt.Printf("control tiocsti: %s %v\n", strings.TrimSpace(out), err)
		out, err = runHelper(t, s, dir, "session")
		fmt.Printf("sandboxed session: %s err: %v\n", strings.TrimSpace(out), err)
		out, err = runHelper(t, s, dir, "tiocsti")
		fmt.Printf("sandboxed tiocsti: %s %v\n", strings.TrimSpace(out), err)
		return
	}
	exe, _ := os.Executable()
	cmd := exec.Command(exe, "-test.run=^TestNoControllingTerminal$", "-test.v")
	cmd.Env = append(os.Environ(), "SANDBOX_TTY_CHILD=1")
	ptmx, err := pty.Start(cmd) // the child leads a session whose terminal is the pty
	if err != nil {
		t.Skipf("no pseudo-terminal: %v", err)
	}
	defer ptmx.Close()
	var buf bytes.Buffer
	done := make(chan struct{})
	go func() { buf.ReadFrom(ptmx); close(done) }()
	cmd.Wait()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
	}
	out := buf.String()
	if i := strings.Index(out, "SKIP"); i >= 0 {
		t.Skip(out[i:])
	}
	line := func(prefix string) string {
		for _, l := range strings.Split(out, "\n") {
			if i := strings.Index(l, prefix); i >= 0 { // after any echo of an injected character
				return strings.TrimSpace(l[i:])
			}
		}
		t.Fatalf("no %q line in the child's output:\n%s", prefix, out)
		return ""
	}
	if l := line("control session:"); !strings.Contains(l, "tty true") {
		t.Fatalf("control: the unsandboxed command has no terminal, so the test proves nothing: %s", l)
	}
	if l := line("sandboxed session:"); !strings.Contains(l, "tty false") {
		t.Errorf("the sandboxed command opened the terminal: %s", l)
	}
	if l := line("sandboxed tiocsti:"); strings.Contains(l, "injected") {
		t.Errorf("the sandboxed command typed into the terminal: %s", l)
	}
	if l := line("control tiocsti:"); !strings.Contains(l, "injected") {
		t.Logf("TIOCSTI is off on this machine (%s); the sandboxed case still shows no terminal", l)
	}
}

// A workspace whose parent is writable (a repository cloned under the
// temp directory) is renamed away by a sandboxed command and replaced by
// a symlink to outside: the next command is refused, and nothing is
// written outside.
func TestSwappedRootIsRefused(t *testing.T) {
	base := t.TempDir()
	ws, outside := filepath.Join(base, "ws"), t.TempDir()
	if err := os.Mkdir(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	s := New(Launcher{}, Policy{Write: []string{ws, base}})
	defer s.Close()
	if st := s.Probe(); !st.Available() {
		t.Skipf("no OS sandbox here: %s", st.Why)
	}
	swap := fmt.Sprintf("cd / && mv %s %s.old && ln -s %s %s", ws, ws, outside, ws)
	if out, err := run(t, s, base, swap); err != nil {
		t.Fatalf("the swap (inside a write root): %v\n%s", err, out)
	}
	out, err := run(t, s, "/", "echo x > "+filepath.Join(ws, "escaped"))
	if !errors.Is(err, ErrRootMoved) {
		t.Errorf("after the swap: %v, want ErrRootMoved\n%s", err, out)
	}
	if _, err := os.Stat(filepath.Join(outside, "escaped")); err == nil {
		t.Fatal("a command wrote outside through the swapped workspace")
	}
	// Put back, the directory is accepted again.
	if err := os.Remove(ws); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(ws+".old", ws); err != nil {
		t.Fatal(err)
	}
	if out, err := run(t, s, ws, "echo x > inside"); err != nil {
		t.Fatalf("with the workspace back: %v\n%s", err, out)
	}
}

// With the network denied, pathname unix sockets outside (ssh-agent,
// D-Bus, Docker) are out of reach, also by a datagram from a socketpair,
// even without a network namespace (which does not cover them).
func TestUnixSocketsDenied(t *testing.T) {
	dir := t.TempDir()
	stream, dgram := filepath.Join(dir, "s.sock"), filepath.Join(dir, "d.sock")
	ln, err := net.Listen("unix", stream)
	if err != nil {
		t.Skipf("no unix sockets: %v", err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	dc, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: dgram, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer dc.Close()
	withNS, withoutNS := newSandbox(t, Policy{}), newSandbox(t, Policy{})
	if st := withNS.Probe(); !st.Seccomp && st.ABI < 9 {
		t.Skipf("no socket filter and Landlock ABI %d: unix sockets stay open (reported as partial)", st.ABI)
	}
	withoutNS.status.NetNS = false
	for _, c := range []struct{ helper, path string }{{"unix-connect", stream}, {"unix-sendto", dgram}} {
		t.Run(c.helper, func(t *testing.T) {
			if out, err := runHelper(t, nil, dir, c.helper, c.path); err != nil {
				t.Fatalf("control: %v\n%s", err, out)
			}
			for _, s := range []*Sandbox{withNS, withoutNS} {
				if out, err := runHelper(t, s, dir, c.helper, c.path); err == nil {
					t.Errorf("sandboxed %s (netns %v) succeeded:\n%s", c.helper, s.status.NetNS, out)
				}
			}
		})
	}
	// Allowed network: unix sockets work.
	s := newSandbox(t, Policy{Network: true})
	if out, err := runHelper(t, s, dir, "unix-connect", stream); err != nil {
		t.Errorf("unix socket with the network allowed: %v\n%s", err, out)
	}
}

// Without a network namespace, Landlock before ABI 10 does not restrict
// UDP: the socket filter does (a DNS query is a UDP datagram).
func TestUDPDeniedWithoutNamespace(t *testing.T) {
	pc, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		t.Skipf("no loopback UDP: %v", err)
	}
	defer pc.Close()
	addr := pc.LocalAddr().String()
	dir := t.TempDir()
	if out, err := runHelper(t, nil, dir, "udp-send", addr); err != nil {
		t.Fatalf("control: %v\n%s", err, out)
	}
	s := newSandbox(t, Policy{})
	s.status.NetNS = false
	if !s.status.Seccomp && s.status.ABI < 10 {
		t.Skipf("no socket filter here and Landlock ABI %d: UDP is open without a namespace (reported as partial)", s.status.ABI)
	}
	if out, err := runHelper(t, s, dir, "udp-send", addr); err == nil {
		t.Fatalf("sandboxed UDP send without a network namespace succeeded:\n%s", out)
	}
	if out, err := runHelper(t, s, dir, "raw-socket"); err == nil {
		t.Fatalf("sandboxed raw socket succeeded:\n%s", out)
	}
	if out, err := runHelper(t, nil, dir, "io-uring"); err != nil {
		t.Logf("io_uring is not available here (%v: %s); not checked", err, out)
	} else if out, err := runHelper(t, s, dir, "io-uring"); err == nil {
		t.Fatalf("sandboxed io_uring_setup succeeded:\n%s", out)
	}
}

// What stays open is said, not hidden: a kernel without the namespace,
// the filter or a recent Landlock reports the network as partly denied.
func TestPartialNetworkIsReported(t *testing.T) {
	for _, c := range []struct {
		st   Status
		want []string
	}{
		{Status{ABI: 7, NetNS: true, Seccomp: true}, nil},
		{Status{ABI: 7, Seccomp: true}, nil},
		{Status{ABI: 7, NetNS: true}, []string{"pathname unix"}},
		{Status{ABI: 7}, []string{"UDP", "pathname unix"}},
		{Status{ABI: 3}, []string{"TCP", "UDP", "pathname unix"}},
		{Status{ABI: 10}, nil},
	} {
		gaps := strings.Join(c.st.networkGaps(), "; ")
		for _, w := range c.want {
			if !strings.Contains(gaps, w) {
				t.Errorf("%+v: gaps %q, want %q named", c.st, gaps, w)
			}
		}
		if len(c.want) == 0 && gaps != "" {
			t.Errorf("%+v: gaps %q, want none", c.st, gaps)
		}
	}
}

// Root in the sandbox cannot make a device node in the workspace (and
// write a disk through it).
func TestNoDeviceNodes(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("only root can make device nodes")
	}
	dir := t.TempDir()
	script := "mknod node c 1 3 && echo x > node"
	if out, err := run(t, nil, dir, script); err != nil {
		t.Fatalf("control: %v\n%s", err, out)
	}
	os.Remove(filepath.Join(dir, "node"))
	s := newSandbox(t, Policy{Write: []string{dir}})
	if out, err := run(t, s, dir, script); err == nil {
		t.Fatalf("sandboxed mknod succeeded:\n%s", out)
	}
}

// The timeout kill of a process group still reaches what a sandboxed
// command started: the command leads a session, which is its group.
func TestGroupKillReachesChildren(t *testing.T) {
	dir := t.TempDir()
	s := newSandbox(t, Policy{Write: []string{dir}})
	cmd := exec.Command("/bin/sh", "-c", "sleep 60 & echo $! > child; wait")
	cmd.Dir = dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := s.Start(cmd); err != nil {
		t.Fatal(err)
	}
	var child int
	for i := 0; i < 200 && child == 0; i++ {
		b, _ := os.ReadFile(filepath.Join(dir, "child"))
		fmt.Sscan(string(b), &child)
		time.Sleep(10 * time.Millisecond)
	}
	if child == 0 {
		t.Fatal("the child did not start")
	}
	if err := syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); err != nil {
		t.Fatalf("kill the group: %v", err)
	}
	cmd.Wait()
	for i := 0; i < 200; i++ {
		if syscall.Kill(child, 0) != nil {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("the command's child %d survived the group kill", child)
}

// A descriptor the launching process holds without close-on-exec (one it
// inherited, say a terminal) does not reach the sandboxed command: the
// command could write through it where Landlock, which checks paths at
// open, does not look.
func TestInheritedDescriptorsDoNotReachTheCommand(t *testing.T) {
	dir := t.TempDir()
	secret := filepath.Join(dir, "inherited-file")
	f, err := os.Create(secret)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fd, err := unix.Dup(int(f.Fd())) // no close-on-exec, as an inherited one
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	list := `for f in /proc/self/fd/*; do readlink "$f"; done; true`
	if out, err := run(t, nil, dir, list); err != nil || !strings.Contains(out, secret) {
		t.Fatalf("control: an unsandboxed command does not see the descriptor (%v):\n%s", err, out)
	}
	s := newSandbox(t, Policy{Write: []string{dir}})
	out, err := run(t, s, dir, list)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if strings.Contains(out, secret) {
		t.Errorf("the sandboxed command holds the inherited descriptor:\n%s", out)
	}
}

// Run as root, a sandboxed command's bounding set holds none of the
// dropped capabilities (chattr +i, file capabilities, ptrace, mounts...).
func TestDroppedCapabilitiesAreGone(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("only root holds the capabilities to drop")
	}
	dir := t.TempDir()
	s := newSandbox(t, Policy{Write: []string{dir}})
	out, err := run(t, s, dir, "grep CapBnd /proc/self/status")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	var bnd uint64
	if _, err := fmt.Sscanf(strings.TrimSpace(out), "CapBnd:\t%x", &bnd); err != nil {
		t.Fatalf("%q: %v", out, err)
	}
	for _, c := range append([]uintptr{unix.CAP_LINUX_IMMUTABLE, unix.CAP_SETFCAP, unix.CAP_SYS_PTRACE}, droppedCaps...) {
		if bnd&(1<<c) != 0 {
			t.Errorf("capability %d is in the sandbox's bounding set (%x)", c, bnd)
		}
	}
	if bnd&(1<<unix.CAP_CHOWN) == 0 {
		t.Errorf("CAP_CHOWN is gone too (%x): root should still own its workspace", bnd)
	}
}
