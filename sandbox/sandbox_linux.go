package sandbox

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"syscall"

	"github.com/landlock-lsm/go-landlock/landlock"
	ll "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"golang.org/x/sys/unix"
)

// devices are the device files any command may write (and ioctl): the
// null sink and the terminal.
var devices = []string{"/dev/null", "/dev/zero", "/dev/full", "/dev/tty"}

// Main is the launcher: it parses args (everything after ExecArg),
// restricts its own process with Landlock and execs the command. It returns
// only on failure, with 126 (the sandbox could not be applied, or the
// command could not be executed) or 127 (the command was not found),
// after saying why on stderr. It must run before the program starts
// anything else.
func Main(args []string, stderr io.Writer) int {
	l, err := parseLaunch(args)
	if err != nil {
		fmt.Fprintf(stderr, "rein sandbox: %v\n", err)
		return 126
	}
	if err := restrictSelf(l); err != nil {
		fmt.Fprintf(stderr, "rein sandbox: %v\n", err)
		return 126
	}
	if l.probe {
		return 0
	}
	err = syscall.Exec(l.path, l.argv, os.Environ())
	fmt.Fprintf(stderr, "rein sandbox: %s: %v\n", l.path, err)
	if errors.Is(err, syscall.ENOENT) {
		return 127
	}
	return 126
}

// restrictSelf applies the ruleset to the calling thread, which then
// execs: the thread stays locked, so the rest of the (short-lived)
// launcher never runs unrestricted code on another thread before execve.
func restrictSelf(l launch) error {
	abi, err := ll.LandlockGetABIVersion()
	if err != nil || abi < 1 {
		return fmt.Errorf("landlock is not available in this kernel: %v", err)
	}
	cfg := landlock.V11.BestEffort()
	if l.network {
		cfg.HandledAccessNet = 0
	}
	rules := []landlock.Rule{landlock.RODirs("/")}
	for _, d := range devices {
		rules = append(rules, landlock.RWFiles(d).WithIoctlDev().IgnoreIfMissing())
	}
	for _, w := range l.write {
		fi, err := os.Stat(w)
		if err != nil {
			continue // a writable root that does not exist grants nothing
		}
		r := landlock.RWFiles(w)
		if fi.IsDir() {
			r = landlock.RWDirs(w)
		}
		if abi >= 2 {
			// Moving and linking between directories of the
			// writable roots (mv a/x b/); with ABI 1 asking for it
			// would downgrade the whole ruleset to nothing.
			r = r.WithRefer()
		}
		rules = append(rules, r)
	}
	fd, flags, err := cfg.NewRulesetFD(rules...)
	if err != nil {
		return fmt.Errorf("landlock ruleset: %w", err)
	}
	if fd < 0 {
		return errors.New("landlock ruleset: nothing would be enforced")
	}
	defer unix.Close(fd)
	runtime.LockOSThread() // never unlocked: this thread execs
	dropCaps()
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("prctl(PR_SET_NO_NEW_PRIVS): %w", err)
	}
	if err := ll.LandlockRestrictSelf(fd, flags); err != nil {
		return fmt.Errorf("landlock_restrict_self: %w", err)
	}
	return nil
}

// droppedCaps are the capabilities a sandboxed command never gets, even
// when rein runs as root: with CAP_SYS_PTRACE a root child could read the
// memory and environment of rein (non-dumpable or not: Landlock's ptrace
// scoping does not cover every /proc file), and the others reach past any
// file-system sandbox (mounts, namespaces, kernel modules, raw devices,
// BPF). Dropped from the bounding set, they are gone for root after
// execve too.
var droppedCaps = []uintptr{
	unix.CAP_SYS_PTRACE, unix.CAP_SYS_ADMIN, unix.CAP_SYS_MODULE, unix.CAP_SYS_RAWIO,
	unix.CAP_SYS_BOOT, unix.CAP_BPF, unix.CAP_PERFMON, unix.CAP_MAC_ADMIN, unix.CAP_MAC_OVERRIDE,
}

// dropCaps removes droppedCaps from the bounding set and clears the
// ambient set. Without CAP_SETPCAP (not root) the bounding set cannot be
// changed, but then the process does not hold these capabilities anyway.
func dropCaps() {
	for _, c := range droppedCaps {
		_ = unix.Prctl(unix.PR_CAPBSET_DROP, c, 0, 0, 0)
	}
	_ = unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
}

// probe implements Probe.
func (s *Sandbox) probe() Status {
	abi, err := ll.LandlockGetABIVersion()
	if err != nil || abi < 1 {
		why := "Landlock is not enabled in this kernel"
		if err != nil {
			why += " (" + err.Error() + ")"
		}
		return Status{Why: why}
	}
	if s.Launcher.Path == "" {
		return Status{Why: "no sandbox launcher is configured"}
	}
	st := Status{ABI: abi}
	run := func(netns bool) error {
		cmd := exec.Command(s.Launcher.Path)
		cmd.Args = s.launcherArgs(true)
		cmd.Env = []string{}
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if netns {
			cmd.SysProcAttr = withNetNS(nil)
		}
		if err := cmd.Run(); err != nil {
			if msg := strings.TrimSpace(out.String()); msg != "" {
				return fmt.Errorf("%w: %s", err, msg)
			}
			return err
		}
		return nil
	}
	if !s.Policy.Network && run(true) == nil {
		st.NetNS = true
		return st
	}
	if err := run(false); err != nil {
		return Status{Why: fmt.Sprintf("the sandbox launcher %s does not work: %v", s.Launcher.Path, err)}
	}
	if !s.Policy.Network && !st.NetworkDenied() {
		st.Why = "network access cannot be restricted: Landlock ABI < 4 and no network namespace"
	}
	return st
}

// withNetNS returns a copy of attr that also puts the child in a new
// network namespace (and, when rein is not root, a user namespace mapping
// only its own user and group, which creating the network namespace
// needs).
func withNetNS(attr *syscall.SysProcAttr) *syscall.SysProcAttr {
	a := &syscall.SysProcAttr{}
	if attr != nil {
		*a = *attr
	}
	a.Cloneflags |= syscall.CLONE_NEWNET
	if uid := os.Geteuid(); uid != 0 {
		a.Cloneflags |= syscall.CLONE_NEWUSER
		a.UidMappings = []syscall.SysProcIDMap{{ContainerID: uid, HostID: uid, Size: 1}}
		gid := os.Getegid()
		a.GidMappings = []syscall.SysProcIDMap{{ContainerID: gid, HostID: gid, Size: 1}}
		a.GidMappingsEnableSetgroups = false
	}
	return a
}

// NoDump makes the calling process non-dumpable (prctl PR_SET_DUMPABLE 0):
// no core dumps, and its /proc/PID files (environ, mem, maps, fd) and
// ptrace are closed to processes of the same user that lack
// CAP_SYS_PTRACE. It does not stop root, or any process with
// CAP_SYS_PTRACE; against those only the Landlock sandbox (which scopes
// ptrace to the sandbox's own processes) helps. The flag is reset by
// execve, so children are not affected.
func NoDump() error {
	return unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0)
}
