package sandbox

import (
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"

	"github.com/landlock-lsm/go-landlock/landlock"
	ll "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"golang.org/x/sys/unix"
)

// devices are the device files any command may write (and ioctl): the
// null sinks. Not the terminal: a command has no controlling terminal (it
// leads its own session) and may not write to one.
var devices = []string{"/dev/null", "/dev/zero", "/dev/full"}

// held is what a Sandbox opened when it was made: the launcher and the
// write roots, each an O_PATH descriptor.
type held struct {
	exe   *os.File
	roots []heldRoot
	err   error // the launcher could not be opened
}

// heldRoot is a write root opened once.
type heldRoot struct {
	path string   // as configured
	real string   // where the opened directory was, symlinks resolved
	f    *os.File // O_PATH
	dev  uint64
	ino  uint64
}

// openHeld opens the launcher (this program when l.Path is "") and the
// write roots that exist.
func openHeld(l Launcher, write []string) *held {
	h := &held{}
	exe := l.Path
	if exe == "" {
		exe = "/proc/self/exe"
	}
	f, err := openPath(exe)
	if err != nil {
		h.err = fmt.Errorf("%w: cannot pin the launcher %s: %v", ErrNotConfined, exe, err)
	} else {
		h.exe = f
	}
	for _, w := range write {
		f, err := openPath(w)
		if err != nil {
			continue // a root that does not exist grants nothing
		}
		r := heldRoot{path: w, f: f}
		r.real, _ = os.Readlink("/proc/self/fd/" + strconv.Itoa(int(f.Fd())))
		var st unix.Stat_t
		if unix.Fstat(int(f.Fd()), &st) != nil || r.real == "" {
			f.Close()
			continue
		}
		r.dev, r.ino = st.Dev, st.Ino
		h.roots = append(h.roots, r)
	}
	return h
}

// openPath opens name (following symlinks) as an O_PATH descriptor.
func openPath(name string) (*os.File, error) {
	fd, err := unix.Open(name, unix.O_PATH|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: name, Err: err}
	}
	return os.NewFile(uintptr(fd), name), nil
}

// check refuses roots whose path no longer names the directory opened.
func (h *held) check() error {
	for _, r := range h.roots {
		var st unix.Stat_t
		if err := unix.Stat(r.real, &st); err != nil || st.Dev != r.dev || st.Ino != r.ino {
			now, _ := os.Readlink("/proc/self/fd/" + strconv.Itoa(int(r.f.Fd())))
			return fmt.Errorf("%w: %s is no longer the directory the session started with (that one is now at %s); refusing to run commands", ErrRootMoved, r.real, now)
		}
	}
	return nil
}

func (h *held) close() error {
	if h.exe != nil {
		h.exe.Close()
	}
	for _, r := range h.roots {
		r.f.Close()
	}
	return nil
}

// Main is the launcher: it parses args (everything after ExecArg),
// restricts its own process with Landlock (and the socket filter), tells
// the parent on the status descriptor, closes every descriptor it was
// given and execs the command. It returns only on failure, with 126 (the
// sandbox could not be applied, or the command could not be executed) or
// 127 (the command was not found), after saying why on stderr (and on the
// status descriptor). It must run before the program starts anything
// else.
func Main(args []string, stderr io.Writer) int {
	l, err := parseLaunch(args)
	if err != nil {
		fmt.Fprintf(stderr, "rein sandbox: %v\n", err)
		return 126
	}
	status := func(msg string) {
		if l.status >= 0 {
			_, _ = unix.Write(l.status, []byte(msg+"\n"))
			_ = unix.Close(l.status)
			l.status = -1
		}
	}
	dropTerminal()
	if err := restrictSelf(l); err != nil {
		fmt.Fprintf(stderr, "rein sandbox: %v\n", err)
		status(err.Error())
		return 126
	}
	// The command inherits none of the launcher's descriptors.
	for _, fd := range append([]int{l.exe}, l.write...) {
		if fd >= 0 {
			_ = unix.Close(fd)
		}
	}
	// Nor any it inherited from the process that started it (rein used
	// as a library need not have marked them).
	if err := CloseInherited(); err != nil {
		fmt.Fprintf(stderr, "rein sandbox: %v\n", err)
		status(err.Error())
		return 126
	}
	status(statusOK)
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

// dropTerminal gives up the controlling terminal the launcher inherited
// from rein (TIOCNOTTY: a process that does not lead its session only
// loses the terminal): the command cannot open /dev/tty, and TIOCSTI on
// the terminal's device needs it to be the caller's controlling terminal.
// Without a session leader it cannot take one again (TIOCSCTTY). This
// does what setsid would without a new session, which costs every
// command a scheduler autogroup (measured: a third more time to start).
func dropTerminal() {
	fd, err := unix.Open("/dev/tty", unix.O_RDONLY|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		return // no controlling terminal
	}
	_ = unix.IoctlSetInt(fd, unix.TIOCNOTTY, 0)
	_ = unix.Close(fd)
}

// Access rights of a write root: everything but making block and
// character devices (a root command could otherwise make a node for a
// disk in the workspace and write the disk through it).
const (
	rootDirAccess = ll.AccessFSExecute | ll.AccessFSReadFile | ll.AccessFSReadDir |
		ll.AccessFSWriteFile | ll.AccessFSTruncate | ll.AccessFSRemoveDir | ll.AccessFSRemoveFile |
		ll.AccessFSMakeDir | ll.AccessFSMakeReg | ll.AccessFSMakeSock | ll.AccessFSMakeFifo | ll.AccessFSMakeSym
	rootFileAccess = ll.AccessFSExecute | ll.AccessFSReadFile | ll.AccessFSWriteFile | ll.AccessFSTruncate
)

// restrictSelf applies the ruleset (and, with l.seccomp, the socket
// filter) to the calling thread, which then execs: the thread stays
// locked, so the rest of the (short-lived) launcher never runs
// unrestricted code on another thread before execve.
func restrictSelf(l launch) error {
	abi, err := ll.LandlockGetABIVersion()
	if err != nil || abi < 1 {
		return fmt.Errorf("landlock is not available in this kernel: %v", err)
	}
	cfg := landlock.V11.BestEffort()
	root := landlock.RODirs("/")
	if l.network {
		cfg.HandledAccessNet = 0
		// Unix sockets are the network too (Landlock ABI 9 handles
		// them; without this they would be denied).
		root = root.WithResolveUnix()
	}
	rules := []landlock.Rule{root}
	for _, d := range devices {
		rules = append(rules, landlock.RWFiles(d).WithIoctlDev().IgnoreIfMissing())
	}
	for _, fd := range l.write {
		// The root as the descriptor rein opened: the kernel reopens
		// "/proc/self/fd/N" as that very directory, wherever its path
		// leads now.
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			return fmt.Errorf("write root descriptor %d: %w", fd, err)
		}
		access := landlock.AccessFSSet(rootFileAccess)
		if st.Mode&unix.S_IFMT == unix.S_IFDIR {
			access = rootDirAccess
			if abi >= 2 {
				// Moving and linking between directories of the
				// writable roots (mv a/x b/); with ABI 1 asking for it
				// would downgrade the whole ruleset to nothing.
				access |= ll.AccessFSRefer
			}
		}
		rules = append(rules, landlock.PathAccess(access, "/proc/self/fd/"+strconv.Itoa(fd)))
	}
	fd, flags, err := cfg.NewRulesetFD(rules...)
	if err != nil {
		return fmt.Errorf("landlock ruleset: %w", err)
	}
	if fd < 0 {
		return errors.New("landlock ruleset: nothing would be enforced")
	}
	defer unix.Close(fd)
	var filter []unix.SockFilter
	if l.seccomp {
		if filter, err = socketFilter(abi); err != nil {
			return err
		}
	}
	runtime.LockOSThread() // never unlocked: this thread execs
	dropCaps(l.network)
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("prctl(PR_SET_NO_NEW_PRIVS): %w", err)
	}
	if err := ll.LandlockRestrictSelf(fd, flags); err != nil {
		return fmt.Errorf("landlock_restrict_self: %w", err)
	}
	if filter != nil {
		if err := installFilter(filter); err != nil {
			return err
		}
	}
	return nil
}

// droppedCaps are the capabilities a sandboxed command never gets, even
// when rein runs as root: with CAP_SYS_PTRACE a root child could read the
// memory and environment of rein (non-dumpable or not: Landlock's ptrace
// scoping does not cover every /proc file), and the others reach past any
// file-system sandbox: mounts and namespaces, kernel modules, raw devices
// and device nodes (CAP_MKNOD: a node for a disk, made in the workspace,
// would write the disk), BPF, the host's network configuration, the
// clock, the kernel log, file handles that bypass paths
// (open_by_handle_at), immutable and append-only file flags (a workspace
// file root could no longer change or delete), file capabilities (a
// binary left in the workspace that grants them to whoever runs it),
// process accounting, other processes' IPC objects, checkpoint/restore,
// terminal configuration (vhangup), system alarms and suspend locks.
// Dropped from the bounding set, they are gone for root after execve too.
var droppedCaps = []uintptr{
	unix.CAP_SYS_PTRACE, unix.CAP_SYS_ADMIN, unix.CAP_SYS_MODULE, unix.CAP_SYS_RAWIO,
	unix.CAP_SYS_BOOT, unix.CAP_BPF, unix.CAP_PERFMON, unix.CAP_MAC_ADMIN, unix.CAP_MAC_OVERRIDE,
	unix.CAP_MKNOD, unix.CAP_NET_ADMIN, unix.CAP_SYS_TIME, unix.CAP_SYSLOG, unix.CAP_AUDIT_CONTROL,
	unix.CAP_DAC_READ_SEARCH, unix.CAP_LINUX_IMMUTABLE, unix.CAP_SETFCAP, unix.CAP_SYS_PACCT,
	unix.CAP_IPC_OWNER, unix.CAP_CHECKPOINT_RESTORE, unix.CAP_SYS_TTY_CONFIG, unix.CAP_WAKE_ALARM,
	unix.CAP_BLOCK_SUSPEND,
}

// dropCaps removes droppedCaps (and, when the network is denied,
// CAP_NET_RAW: raw sockets pass by Landlock's TCP rules) from the bounding
// set and clears the ambient set. Without CAP_SETPCAP (not root) the
// bounding set cannot be changed, but then the process does not hold
// these capabilities anyway.
func dropCaps(network bool) {
	caps := droppedCaps
	if !network {
		caps = append(caps[:len(caps):len(caps)], unix.CAP_NET_RAW)
	}
	for _, c := range caps {
		_ = unix.Prctl(unix.PR_CAPBSET_DROP, c, 0, 0, 0)
	}
	_ = unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
}

// probe implements Probe: the launcher in probe mode, with as much as
// this machine allows when the network is denied (a network namespace,
// the socket filter), less where that fails.
func (s *Sandbox) probe() Status {
	abi, err := ll.LandlockGetABIVersion()
	if err != nil || abi < 1 {
		why := "Landlock is not enabled in this kernel"
		if err != nil {
			why += " (" + err.Error() + ")"
		}
		return Status{Why: why}
	}
	if h := s.hold(); h.err != nil {
		return Status{Why: h.err.Error()}
	}
	tries := []Status{{ABI: abi}}
	if !s.Policy.Network {
		seccomp := filterArch() != 0
		tries = []Status{{ABI: abi, NetNS: true, Seccomp: seccomp}, {ABI: abi, Seccomp: seccomp}, {ABI: abi}}
	}
	var last error
	for _, st := range tries {
		err := s.runProbe(st)
		if err == nil {
			if !s.Policy.Network {
				if gaps := st.networkGaps(); len(gaps) > 0 {
					st.Why = "the network is not fully denied: " + strings.Join(gaps, "; ") + " stay reachable"
				}
			}
			return st
		}
		last = err
	}
	what := s.Launcher.Path
	if what == "" {
		what = "(this program)"
	}
	return Status{Why: fmt.Sprintf("the sandbox launcher %s does not work: %v", what, last)}
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

// CloseInherited marks every descriptor from 3 up close-on-exec, so that
// none reaches a process this one starts: what rein inherited from
// whoever started it (an editor's or a CI runner's descriptors, a
// terminal opened as `9>/dev/tty`) would otherwise pass to every tool
// command, hook and MCP server, the sandboxed ones included, since
// Landlock checks paths at open, not descriptors already open. Go opens
// its own descriptors close-on-exec; os/exec's ExtraFiles are unaffected.
func CloseInherited() error {
	if err := unix.CloseRange(3, math.MaxUint32, unix.CLOSE_RANGE_CLOEXEC); err == nil {
		return nil
	}
	// Kernels before 5.11: one by one.
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return fmt.Errorf("sandbox: list descriptors: %w", err)
	}
	for _, e := range ents {
		fd, err := strconv.Atoi(e.Name())
		if err != nil || fd < 3 {
			continue
		}
		_, _ = unix.FcntlInt(uintptr(fd), unix.F_SETFD, unix.FD_CLOEXEC)
	}
	return nil
}
