// Package sandbox runs a child process under an operating-system sandbox:
// on Linux, a Landlock ruleset that lets the child read the whole file
// system, write only below the directories it is given, make no network
// connection (unless network access is allowed), and neither signal nor
// trace (nor read /proc/PID/environ or /proc/PID/mem of) any process
// outside its own sandbox. The child never holds CAP_SYS_PTRACE,
// CAP_SYS_ADMIN, CAP_MKNOD and a few other capabilities that reach past a
// file-system sandbox, not even when rein runs as root, and cannot gain
// privileges (no_new_privs: setuid programs such as sudo do not elevate).
// When network access is denied the child also gets a network namespace
// of its own (only a loopback device) where the kernel lets rein create
// one, and a seccomp filter that refuses the sockets Landlock does not
// cover on this kernel (pathname unix sockets before ABI 9, UDP before
// ABI 10, raw and other families always) and io_uring.
//
// No child has a controlling terminal: the launcher gives it up before it
// execs (and an unconfined child, where there is no sandbox, leads a
// session of its own), so a command cannot type into the user's shell
// (TIOCSTI) or open /dev/tty behind rein's back. A caller's Setpgid is
// kept, so killing the group still kills what the command started.
//
// The ruleset is never applied to the calling process. Start re-executes a
// launcher — the program's own executable called with ExecArg as its first
// argument, which must call Main — and the launcher restricts itself and
// then replaces itself with the command (execve), so the command's process
// is the launcher's: same pid, same process group, no process in between.
// A program that uses this package therefore has to route ExecArg to Main
// before doing anything else (cmd/rein does it in Main; tests in TestMain).
//
// What is fixed when the sandbox is made (New) cannot be changed by a
// sandboxed command afterwards: the launcher is opened once and executed
// through that descriptor (a launcher file replaced on disk, say by a
// command that can write where the binary lies, is never run), and each
// write root is opened once and handed to the launcher as a descriptor, so
// the Landlock rules name the directories that were opened, not whatever
// their paths lead to later. A write root whose path no longer names the
// directory that was opened (the workspace renamed away and a symlink put
// in its place) makes Start refuse with ErrRootMoved. Start reports
// success only when the launcher said, on a status pipe, that it applied
// the ruleset.
//
// Where Landlock is not available (a kernel older than 5.13, Landlock not
// enabled, another OS) Probe says so and Start runs the command unconfined
// (in a session of its own) with ErrUnavailable; the caller decides
// whether that is acceptable and tells the user.
//
// Concurrency: a Sandbox is safe for concurrent use once built; Probe runs
// once. This package imports only golang.org/x/sys and go-landlock.
package sandbox

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// ExecArg is the hidden first argument that makes a program act as the
// launcher: "PROGRAM __sandbox-exec [options] -- PATH ARGV0 ARGS...".
const ExecArg = "__sandbox-exec"

// Launch runs the launcher and exits when this process was started as one
// (its first argument is ExecArg), and returns otherwise. Call it first in
// main, or in TestMain of tests that run sandboxed commands with the test
// binary as the launcher.
func Launch() {
	if len(os.Args) > 1 && os.Args[1] == ExecArg {
		os.Exit(Main(os.Args[2:], os.Stderr))
	}
}

// Sentinel errors.
var (
	// ErrUnavailable: the OS sandbox cannot be applied here (see
	// Status.Why).
	ErrUnavailable = errors.New("sandbox: unavailable")
	// ErrRootMoved: a write root no longer names the directory that was
	// opened when the sandbox was made; nothing was started.
	ErrRootMoved = errors.New("sandbox: a write root was moved or replaced")
	// ErrNotConfined: the launcher did not confirm that it applied the
	// ruleset; the command did not run.
	ErrNotConfined = errors.New("sandbox: the command could not be confined")
)

// Policy is what a sandboxed process may do.
type Policy struct {
	// Write lists the directories (or files) the process may create,
	// change, rename and delete things in. Everything else is read-only.
	// Entries that do not exist when the sandbox is made are skipped for
	// its whole life.
	Write []string
	// Network allows network access. When false, TCP connect and bind are
	// denied (Landlock ABI 4 and later), the process runs in a network
	// namespace of its own where rein may create one, and a seccomp filter
	// refuses the other sockets (see the package doc).
	Network bool
}

// Launcher names the executable that acts as the launcher.
type Launcher struct {
	// Path is the executable; its main must call Main when its first
	// argument is ExecArg. "" means this program itself
	// (/proc/self/exe): the file it was started from, even if that path
	// has been replaced since.
	Path string
	// Arg0 is the argv[0] it is started with; "" means Path (or the
	// program's own argv[0]). (A test binary that dispatches on argv[0],
	// as testscript does, needs it.)
	Arg0 string
}

// Sandbox starts commands under one Policy. Make it with New.
type Sandbox struct {
	Launcher Launcher
	Policy   Policy
	// Notify, when set, is called once, on the first Probe, when the
	// sandbox is unavailable or partial (Status.Why is not empty): the
	// place to tell the user once per session.
	Notify func(Status)

	holdOnce sync.Once
	held     *held

	once   sync.Once
	status Status
}

// New returns a sandbox that starts commands through l under p. It opens
// the launcher and p's write roots now and holds them until Close (see
// the package doc), so make it when the session starts, before anything
// the model chose has run. A Sandbox written as a literal opens them on
// its first Probe instead.
func New(l Launcher, p Policy) *Sandbox {
	s := &Sandbox{Launcher: l, Policy: p}
	s.hold()
	return s
}

// Close releases the launcher and the write roots. The sandbox must not
// be used afterwards.
func (s *Sandbox) Close() error {
	s.hold()
	return s.held.close()
}

// hold opens the launcher and the roots, once.
func (s *Sandbox) hold() *held {
	s.holdOnce.Do(func() { s.held = openHeld(s.Launcher, s.Policy.Write) })
	return s.held
}

// Status is what the sandbox can enforce on this machine.
type Status struct {
	// ABI is the kernel's Landlock ABI version; 0 means none.
	ABI int
	// NetNS says whether a network namespace can be created for a child.
	NetNS bool
	// Seccomp says whether the launcher installs its socket filter when
	// the network is denied.
	Seccomp bool
	// Why explains a missing or partial sandbox; "" when complete.
	Why string
}

// Available reports whether commands can be confined at all.
func (s Status) Available() bool { return s.ABI > 0 }

// NetworkDenied reports whether TCP can be denied: a network namespace,
// or Landlock's TCP rules (ABI 4).
func (s Status) NetworkDenied() bool { return s.NetNS || s.ABI >= 4 }

// networkGaps lists what stays reachable with the network denied.
func (s Status) networkGaps() []string {
	var gaps []string
	if !s.NetworkDenied() {
		gaps = append(gaps, "TCP (Landlock ABI < 4 and no network namespace)")
	}
	if !s.NetNS && !s.Seccomp && s.ABI < 10 {
		gaps = append(gaps, "UDP (Landlock ABI < 10, no network namespace, no seccomp filter)")
	}
	if !s.Seccomp && s.ABI < 9 {
		gaps = append(gaps, "pathname unix sockets such as ssh-agent, D-Bus or Docker (Landlock ABI < 9, no seccomp filter)")
	}
	return gaps
}

// String says what is enforced, for a log line.
func (s Status) String() string {
	if !s.Available() {
		return "no OS sandbox: " + s.Why
	}
	parts := []string{fmt.Sprintf("Landlock ABI %d", s.ABI)}
	if s.NetNS {
		parts = append(parts, "network namespace")
	}
	if s.Seccomp {
		parts = append(parts, "seccomp socket filter")
	}
	out := strings.Join(parts, ", ")
	if s.Why != "" {
		out += " (" + s.Why + ")"
	}
	return out
}

// Probe finds out, once, what can be enforced here: it asks the kernel for
// its Landlock ABI and starts the launcher once in probe mode (which
// applies the ruleset and exits), with a network namespace and the socket
// filter when the network is denied and they can be had. A launcher that
// cannot run makes the sandbox unavailable, with the reason.
func (s *Sandbox) Probe() Status {
	s.once.Do(func() {
		s.status = s.probe()
		if s.Notify != nil && s.status.Why != "" {
			s.Notify(s.status)
		}
	})
	return s.status
}

// Start starts cmd (built with exec.Command, not yet started) under the
// sandbox: it rewrites cmd.Path and cmd.Args to run through the launcher
// and appends the launcher's descriptors to cmd.ExtraFiles (the command
// does not inherit them); the launcher gives up the controlling terminal
// before it execs. Everything else about cmd (Dir, Env,
// Stdin/Stdout/Stderr, Setpgid, Cancel, WaitDelay) is kept; the command's
// environment is cmd.Env exactly. Start returns once the launcher has
// confirmed the ruleset, or has failed.
//
// When the sandbox is unavailable, Start starts cmd unconfined, leading a
// session of its own (Setsid; Setpgid, Setctty and Foreground are
// cleared: the session is also a process group), and returns an error
// wrapping ErrUnavailable together with a started process: the caller
// may Wait for it. Any other
// error means the command did not run: with ErrRootMoved or a start
// failure nothing started; with ErrNotConfined the launcher ran, failed,
// and was waited for.
func (s *Sandbox) Start(cmd *exec.Cmd) error {
	st := s.Probe()
	if !st.Available() {
		cmd.SysProcAttr = newSession(cmd.SysProcAttr)
		if err := cmd.Start(); err != nil {
			return err
		}
		return fmt.Errorf("%w: %s", ErrUnavailable, st.Why)
	}
	if err := s.hold().check(); err != nil {
		return err
	}
	msg, ok, err := s.launch(cmd, st, false)
	if err != nil {
		return err
	}
	if !ok {
		_ = cmd.Wait()
		return fmt.Errorf("%w: %s", ErrNotConfined, msg)
	}
	return nil
}

// launch starts cmd through the launcher and waits for its report: an
// error when nothing started, ok when the launcher confirmed the ruleset,
// else what it said instead.
func (s *Sandbox) launch(cmd *exec.Cmd, st Status, probe bool) (string, bool, error) {
	status, err := s.wrap(cmd, st, s.hold(), probe)
	if err != nil {
		return "", false, err
	}
	err = cmd.Start()
	status.w.Close()
	if err != nil {
		status.r.Close()
		return "", false, err
	}
	msg, ok := status.read()
	return msg, ok, nil
}

// newSession returns a copy of attr with Setsid set and what conflicts
// with it cleared.
func newSession(attr *syscall.SysProcAttr) *syscall.SysProcAttr {
	a := &syscall.SysProcAttr{}
	if attr != nil {
		*a = *attr
	}
	a.Setsid, a.Setpgid, a.Pgid, a.Setctty, a.Foreground = true, false, 0, false, false
	return a
}

// statusPipe carries the launcher's word that it applied the ruleset.
type statusPipe struct{ r, w *os.File }

// statusOK is what the launcher writes once it is confined.
const statusOK = "ok"

// read reads the launcher's report to its end (the launcher closes its end
// when it execs or exits) and reports whether it is statusOK; otherwise it
// returns what was said, or that nothing was.
func (p statusPipe) read() (string, bool) {
	defer p.r.Close()
	b, _ := io.ReadAll(io.LimitReader(p.r, 4096))
	msg := strings.TrimSpace(string(b))
	if msg == statusOK {
		return "", true
	}
	if msg == "" {
		msg = "the launcher exited without saying that it applied the ruleset"
	}
	return msg, false
}

// wrap rewrites cmd to run through the held launcher, with a new status
// pipe whose write end the caller closes after cmd.Start.
func (s *Sandbox) wrap(cmd *exec.Cmd, st Status, h *held, probe bool) (statusPipe, error) {
	if h.err != nil {
		return statusPipe{}, h.err
	}
	r, w, err := os.Pipe()
	if err != nil {
		return statusPipe{}, err
	}
	// The launcher's descriptors follow the caller's ExtraFiles: the
	// launcher itself, the status pipe, then one per write root.
	base := 3 + len(cmd.ExtraFiles)
	files := []*os.File{h.exe, w}
	args := []string{s.arg0(), ExecArg, "-exe", strconv.Itoa(base), "-status", strconv.Itoa(base + 1)}
	for _, root := range h.roots {
		args = append(args, "-w", strconv.Itoa(base+len(files)))
		files = append(files, root.f)
	}
	if s.Policy.Network {
		args = append(args, "-net")
	} else if st.Seccomp {
		args = append(args, "-seccomp")
	}
	if probe {
		args = append(args, "-probe")
	} else {
		args = append(args, "--", cmd.Path)
		args = append(args, cmd.Args...)
		if len(cmd.Args) == 0 {
			args = append(args, cmd.Path)
		}
	}
	cmd.ExtraFiles = append(cmd.ExtraFiles, files...)
	cmd.Path = "/proc/self/fd/" + strconv.Itoa(base)
	cmd.Args = args
	if !s.Policy.Network && st.NetNS {
		cmd.SysProcAttr = withNetNS(cmd.SysProcAttr)
	}
	return statusPipe{r, w}, nil
}

func (s *Sandbox) arg0() string {
	switch {
	case s.Launcher.Arg0 != "":
		return s.Launcher.Arg0
	case s.Launcher.Path != "":
		return s.Launcher.Path
	case len(os.Args) > 0:
		return os.Args[0]
	}
	return "launcher"
}

// launch is the parsed command line of the launcher.
type launch struct {
	exe, status int   // descriptors to close before the command runs; -1 when absent
	write       []int // descriptors of the write roots
	network     bool
	seccomp     bool
	probe       bool
	path        string
	argv        []string
}

// parseLaunch reads the launcher's arguments (after ExecArg).
func parseLaunch(args []string) (launch, error) {
	l := launch{exe: -1, status: -1}
	fd := func(opt string) (int, error) {
		if len(args) == 0 {
			return 0, fmt.Errorf("%s needs a descriptor", opt)
		}
		n, err := strconv.Atoi(args[0])
		if err != nil || n < 3 {
			return 0, fmt.Errorf("%s: bad descriptor %q", opt, args[0])
		}
		args = args[1:]
		return n, nil
	}
	for len(args) > 0 {
		a := args[0]
		args = args[1:]
		var err error
		switch a {
		case "-w":
			var n int
			n, err = fd(a)
			l.write = append(l.write, n)
		case "-exe":
			l.exe, err = fd(a)
		case "-status":
			l.status, err = fd(a)
		case "-net":
			l.network = true
		case "-seccomp":
			l.seccomp = true
		case "-probe":
			l.probe = true
			return l, nil
		case "--":
			if len(args) < 2 {
				return l, errors.New("want -- PATH ARGV0 [ARGS...]")
			}
			l.path, l.argv = args[0], args[1:]
			return l, nil
		default:
			return l, fmt.Errorf("unknown option %q", a)
		}
		if err != nil {
			return l, err
		}
	}
	return l, errors.New("missing -- PATH ARGV0 [ARGS...]")
}

// runProbe starts the launcher in probe mode with the given namespace and
// filter and reports whether it confirmed the ruleset.
func (s *Sandbox) runProbe(st Status) error {
	cmd := &exec.Cmd{Env: []string{}}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	msg, ok, err := s.launch(cmd, st, true)
	if err != nil {
		return err
	}
	werr := cmd.Wait()
	switch {
	case !ok:
		return errors.New(msg)
	case werr != nil:
		if m := strings.TrimSpace(out.String()); m != "" {
			return fmt.Errorf("%w: %s", werr, m)
		}
		return werr
	}
	return nil
}
