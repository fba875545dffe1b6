// Package sandbox runs a child process under an operating-system sandbox:
// on Linux, a Landlock ruleset that lets the child read the whole file
// system, write only below the directories it is given, make no TCP
// connection (unless network access is allowed), and neither signal nor
// trace (nor read /proc/PID/environ or /proc/PID/mem of) any process
// outside its own sandbox. The child never holds CAP_SYS_PTRACE,
// CAP_SYS_ADMIN and a few other capabilities that reach past a file-system
// sandbox, not even when rein runs as root, and cannot gain privileges
// (no_new_privs: setuid programs such as sudo do not elevate). When network
// access is denied the child also
// gets a network namespace of its own (only a loopback device) where the
// kernel lets rein create one.
//
// The ruleset is never applied to the calling process. Start re-executes a
// launcher — the program's own executable called with ExecArg as its first
// argument, which must call Main — and the launcher restricts itself and
// then replaces itself with the command (execve), so the command's process
// is the launcher's: same pid, same process group, no process in between.
// A program that uses this package therefore has to route ExecArg to Main
// before doing anything else (cmd/rein does it in Main; tests in TestMain).
//
// Where Landlock is not available (a kernel older than 5.13, Landlock not
// enabled, another OS) Probe says so and Start runs the command unconfined
// with ErrUnavailable; the caller decides whether that is acceptable and
// tells the user.
//
// Concurrency: a Sandbox is safe for concurrent use once built; Probe runs
// once. This package imports only golang.org/x/sys and go-landlock.
package sandbox

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
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

// ErrUnavailable: the OS sandbox cannot be applied here (see Status.Why).
var ErrUnavailable = errors.New("sandbox: unavailable")

// Policy is what a sandboxed process may do.
type Policy struct {
	// Write lists the directories (or files) the process may create,
	// change, rename and delete things in. Everything else is read-only.
	// Entries that do not exist are skipped.
	Write []string
	// Network allows network access. When false, TCP connect and bind are
	// denied (Landlock ABI 4 and later) and the process runs in a network
	// namespace of its own where rein may create one.
	Network bool
}

// Launcher names the executable that acts as the launcher.
type Launcher struct {
	// Path is the executable; its main must call Main when its first
	// argument is ExecArg.
	Path string
	// Arg0 is the argv[0] it is started with; "" means Path. (A test
	// binary that dispatches on argv[0], as testscript does, needs it.)
	Arg0 string
}

// Sandbox starts commands under one Policy.
type Sandbox struct {
	Launcher Launcher
	Policy   Policy
	// Notify, when set, is called once, on the first Probe, when the
	// sandbox is unavailable or partial (Status.Why is not empty): the
	// place to tell the user once per session.
	Notify func(Status)

	once   sync.Once
	status Status
}

// Status is what the sandbox can enforce on this machine.
type Status struct {
	// ABI is the kernel's Landlock ABI version; 0 means none.
	ABI int
	// NetNS says whether a network namespace can be created for a child.
	NetNS bool
	// Why explains a missing or partial sandbox; "" when complete.
	Why string
}

// Available reports whether commands can be confined at all.
func (s Status) Available() bool { return s.ABI > 0 }

// NetworkDenied reports whether network access can be denied: a network
// namespace, or Landlock's TCP rules (ABI 4).
func (s Status) NetworkDenied() bool { return s.NetNS || s.ABI >= 4 }

// String says what is enforced, for a log line.
func (s Status) String() string {
	if !s.Available() {
		return "no OS sandbox: " + s.Why
	}
	var parts []string
	parts = append(parts, fmt.Sprintf("Landlock ABI %d", s.ABI))
	if s.NetNS {
		parts = append(parts, "network namespace")
	}
	out := strings.Join(parts, ", ")
	if s.Why != "" {
		out += " (" + s.Why + ")"
	}
	return out
}

// Probe finds out, once, what can be enforced here: it asks the kernel for
// its Landlock ABI and starts the launcher once in probe mode (which
// applies the ruleset and exits), with a network namespace if one can be
// made. A launcher that cannot run makes the sandbox unavailable, with the
// reason.
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
// and adds the namespace flags to cmd.SysProcAttr. Everything else about
// cmd (Dir, Env, Stdin/Stdout/Stderr, Setpgid, Cancel, WaitDelay) is kept;
// the command's environment is cmd.Env exactly.
//
// When the sandbox is unavailable, Start starts cmd unconfined and returns
// an error wrapping ErrUnavailable together with a started process: the
// caller may Wait for it. Any other error means nothing started.
func (s *Sandbox) Start(cmd *exec.Cmd) error {
	st := s.Probe()
	if !st.Available() {
		if err := cmd.Start(); err != nil {
			return err
		}
		return fmt.Errorf("%w: %s", ErrUnavailable, st.Why)
	}
	s.wrap(cmd, st)
	return cmd.Start()
}

// wrap rewrites cmd to run through the launcher.
func (s *Sandbox) wrap(cmd *exec.Cmd, st Status) {
	args := s.launcherArgs(false)
	args = append(args, "--", cmd.Path)
	args = append(args, cmd.Args...)
	if len(cmd.Args) == 0 {
		args = append(args, cmd.Path)
	}
	cmd.Path = s.Launcher.Path
	cmd.Args = args
	if !s.Policy.Network && st.NetNS {
		cmd.SysProcAttr = withNetNS(cmd.SysProcAttr)
	}
}

// launcherArgs returns argv up to (not including) "--".
func (s *Sandbox) launcherArgs(probe bool) []string {
	arg0 := s.Launcher.Arg0
	if arg0 == "" {
		arg0 = s.Launcher.Path
	}
	args := []string{arg0, ExecArg}
	for _, w := range s.Policy.Write {
		args = append(args, "-w", w)
	}
	if s.Policy.Network {
		args = append(args, "-net")
	}
	if probe {
		args = append(args, "-probe")
	}
	return args
}

// launch is the parsed command line of the launcher.
type launch struct {
	write   []string
	network bool
	probe   bool
	path    string
	argv    []string
}

// parseLaunch reads the launcher's arguments (after ExecArg).
func parseLaunch(args []string) (launch, error) {
	var l launch
	for len(args) > 0 {
		a := args[0]
		args = args[1:]
		switch a {
		case "-w":
			if len(args) == 0 {
				return l, errors.New("-w needs a path")
			}
			l.write = append(l.write, args[0])
			args = args[1:]
		case "-net":
			l.network = true
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
	}
	return l, errors.New("missing -- PATH ARGV0 [ARGS...]")
}
