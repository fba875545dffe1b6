package sandbox

import (
	"fmt"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The socket filter: a seccomp program the launcher installs when the
// network is denied, for what Landlock does not cover on this kernel.
// socket(2) is allowed for AF_INET and AF_INET6 stream sockets of TCP
// (Landlock ABI 4 and the network namespace deny their connections), for
// UDP only from Landlock ABI 10, for AF_UNIX only from ABI 9 (which
// scopes pathname unix sockets to the sandbox), and for AF_NETLINK (the
// kernel's own interfaces); every other family (raw packets, vsock to the
// hypervisor, bluetooth, ...) fails with EAFNOSUPPORT and the rest with
// EACCES. socketpair(2) of unix datagram sockets is refused with AF_UNIX
// (sendto on one can name a path). io_uring, which makes sockets without
// socket(2), fails with ENOSYS, as do system calls of another
// architecture (x86's 32-bit and x32 entry points).

// filterArch is the audit architecture of this build, or 0 where the
// filter is not built (the network denial is then partial on kernels
// before Landlock ABI 10).
func filterArch() uint32 {
	switch runtime.GOARCH {
	case "amd64":
		return unix.AUDIT_ARCH_X86_64
	case "arm64":
		return unix.AUDIT_ARCH_AARCH64
	case "riscv64":
		return unix.AUDIT_ARCH_RISCV64
	}
	return 0
}

// bpfProg is a classic BPF program under construction, with symbolic
// jump targets.
type bpfProg struct {
	ins    []unix.SockFilter
	jumps  map[int][2]string // instruction index -> true and false targets
	labels map[string]int
}

func (p *bpfProg) stmt(code uint16, k uint32) {
	p.ins = append(p.ins, unix.SockFilter{Code: code, K: k})
}

// jump adds a conditional jump to t when it holds, else to f ("" is the next instruction).
func (p *bpfProg) jump(code uint16, k uint32, t, f string) {
	p.jumps[len(p.ins)] = [2]string{t, f}
	p.stmt(code, k)
}

func (p *bpfProg) label(name string) { p.labels[name] = len(p.ins) }

func (p *bpfProg) resolve() ([]unix.SockFilter, error) {
	for i, tf := range p.jumps {
		for j, name := range tf {
			if name == "" {
				continue
			}
			to, ok := p.labels[name]
			off := to - i - 1
			if !ok || off < 0 || off > 255 {
				return nil, fmt.Errorf("seccomp filter: bad jump to %q", name)
			}
			if j == 0 {
				p.ins[i].Jt = uint8(off)
			} else {
				p.ins[i].Jf = uint8(off)
			}
		}
	}
	return p.ins, nil
}

// socketFilter builds the filter for a kernel of Landlock ABI abi.
func socketFilter(abi int) ([]unix.SockFilter, error) {
	arch := filterArch()
	if arch == 0 {
		return nil, fmt.Errorf("no seccomp socket filter for %s", runtime.GOARCH)
	}
	const (
		ld      = unix.BPF_LD | unix.BPF_W | unix.BPF_ABS
		jeq     = unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K
		jge     = unix.BPF_JMP | unix.BPF_JGE | unix.BPF_K
		and     = unix.BPF_ALU | unix.BPF_AND | unix.BPF_K
		ret     = unix.BPF_RET | unix.BPF_K
		nrOff   = 0 // offsetof(struct seccomp_data, nr)
		archOff = 4 // offsetof(struct seccomp_data, arch)
	)
	arg := func(i int) uint32 { return uint32(16 + 8*i) } // low word, little-endian
	unixOK, udpOK := "deny", "deny"
	if abi >= 9 {
		unixOK = "allow"
	}
	if abi >= 10 {
		udpOK = "allow"
	}
	p := &bpfProg{jumps: map[int][2]string{}, labels: map[string]int{}}
	p.stmt(ld, archOff)
	p.jump(jeq, arch, "", "nosys")
	p.stmt(ld, nrOff)
	if runtime.GOARCH == "amd64" {
		p.jump(jge, 0x40000000, "nosys", "") // the x32 ABI
	}
	p.jump(jeq, unix.SYS_IO_URING_SETUP, "nosys", "")
	p.jump(jeq, unix.SYS_IO_URING_ENTER, "nosys", "")
	p.jump(jeq, unix.SYS_IO_URING_REGISTER, "nosys", "")
	p.jump(jeq, unix.SYS_SOCKET, "socket", "")
	p.jump(jeq, unix.SYS_SOCKETPAIR, "socketpair", "")
	p.stmt(ret, unix.SECCOMP_RET_ALLOW)

	p.label("socket")
	p.stmt(ld, arg(0))
	p.jump(jeq, unix.AF_INET, "inet", "")
	p.jump(jeq, unix.AF_INET6, "inet", "")
	p.jump(jeq, unix.AF_NETLINK, "allow", "")
	p.jump(jeq, unix.AF_UNIX, unixOK, "")
	p.stmt(ret, unix.SECCOMP_RET_ERRNO|uint32(unix.EAFNOSUPPORT))
	p.label("inet")
	p.stmt(ld, arg(1))
	p.stmt(and, 0xf) // the type without SOCK_NONBLOCK and SOCK_CLOEXEC
	p.jump(jeq, unix.SOCK_DGRAM, udpOK, "")
	p.jump(jeq, unix.SOCK_STREAM, "", "deny")
	p.stmt(ld, arg(2)) // TCP only: Landlock's rules do not cover SCTP or MPTCP
	p.jump(jeq, 0, "allow", "")
	p.jump(jeq, unix.IPPROTO_TCP, "allow", "deny")

	p.label("socketpair")
	p.stmt(ld, arg(0))
	p.jump(jeq, unix.AF_UNIX, "", "allow")
	p.stmt(ld, arg(1))
	p.stmt(and, 0xf)
	p.jump(jeq, unix.SOCK_DGRAM, unixOK, "allow")

	p.label("allow")
	p.stmt(ret, unix.SECCOMP_RET_ALLOW)
	p.label("deny")
	p.stmt(ret, unix.SECCOMP_RET_ERRNO|uint32(unix.EACCES))
	p.label("nosys")
	p.stmt(ret, unix.SECCOMP_RET_ERRNO|uint32(unix.ENOSYS))
	return p.resolve()
}

// installFilter installs filter on the calling thread (which must have
// no_new_privs set); execve keeps it.
func installFilter(filter []unix.SockFilter) error {
	prog := unix.SockFprog{Len: uint16(len(filter)), Filter: &filter[0]}
	if err := unix.Prctl(unix.PR_SET_SECCOMP, unix.SECCOMP_MODE_FILTER, uintptr(unsafe.Pointer(&prog)), 0, 0); err != nil {
		return fmt.Errorf("seccomp: %w", err)
	}
	runtime.KeepAlive(filter)
	return nil
}
