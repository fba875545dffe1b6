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
)

// TestMain makes this test binary its own launcher, and non-dumpable, as
// cmd/rein does.
func TestMain(m *testing.M) {
	Launch()
	if h := os.Getenv("SANDBOX_TEST_HELPER"); h != "" {
		os.Exit(helper(h, os.Args[1:]))
	}
	if err := NoDump(); err != nil {
		fmt.Fprintln(os.Stderr, "NoDump:", err)
		os.Exit(1)
	}
	os.Exit(m.Run())
}

// newSandbox returns a sandbox with p, or skips the test (saying why)
// where this machine cannot enforce one.
func newSandbox(t *testing.T, p Policy) *Sandbox {
	t.Helper()
	s := New(Launcher{}, p) // this test binary, as cmd/rein uses rein
	t.Cleanup(func() { s.Close() })
	if st := s.Probe(); !st.Available() {
		t.Skipf("no OS sandbox here: %s", st.Why)
	}
	return s
}

// run runs bash -c script, sandboxed when s is not nil, and returns its
// combined output and error.
func run(t *testing.T, s *Sandbox, dir, script string) (string, error) {
	t.Helper()
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("bash is not installed")
	}
	cmd := exec.Command(bash, "-c", script)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "SECRET_FOR_TEST=s3cr3t"}
	return runCmd(s, dir, cmd)
}

// runCmd runs cmd in dir, sandboxed when s is not nil, and returns its
// combined output and error.
func runCmd(s *Sandbox, dir string, cmd *exec.Cmd) (string, error) {
	cmd.Dir = dir
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	var err error
	if s == nil {
		err = cmd.Run()
	} else if err = s.Start(cmd); err == nil {
		err = cmd.Wait()
	}
	return out.String(), err
}

func TestProbeThisMachine(t *testing.T) {
	s := newSandbox(t, Policy{})
	st := s.Probe()
	t.Logf("sandbox: %s", st)
	if !st.NetworkDenied() {
		t.Errorf("network cannot be denied here: %s", st)
	}
}

func TestWritesOnlyUnderWritableRoots(t *testing.T) {
	base := t.TempDir()
	ws, outside := filepath.Join(base, "ws"), filepath.Join(base, "outside")
	for _, d := range []string{ws, outside} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(outside, "old"), []byte("keep"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(ws, "escape")); err != nil {
		t.Fatal(err)
	}
	s := newSandbox(t, Policy{Write: []string{ws}})

	if out, err := run(t, s, ws, "mkdir -p a/b && echo x > a/b/f && mv a/b/f a/g && ln -s g a/h && rm a/h && cat a/g"); err != nil || out != "x\n" {
		t.Fatalf("write inside the workspace: %v\n%s", err, out)
	}
	// Each of these must fail under the sandbox; the control run without
	// it shows each would succeed, so the sandbox is what stops it.
	escapes := map[string]string{
		"redirect":       "echo x > " + filepath.Join(outside, "new"),
		"symlink":        "echo x > escape/new",
		"dotdot":         "echo x > ../outside/new",
		"cp -t":          "touch f && cp -t " + outside + " f && mv " + filepath.Join(outside, "f") + " " + filepath.Join(outside, "new"),
		"cd -P":          "cd -P escape && echo x > new",
		"truncate":       ": > " + filepath.Join(outside, "old"),
		"rm":             "rm " + filepath.Join(outside, "old"),
		"mv out":         "mv " + filepath.Join(outside, "old") + " " + filepath.Join(ws, "stolen"),
		"hard link":      "ln " + filepath.Join(outside, "old") + " " + filepath.Join(ws, "hl") + " && echo x >> hl",
		"python-ish":     "/bin/sh -c 'echo x > " + filepath.Join(outside, "new") + "'",
		"symlink made":   "ln -s " + outside + " later && echo x > later/new",
		"mkdir outside":  "mkdir " + filepath.Join(outside, "newdir"),
		"chmod via perl": "install -m 644 /dev/null " + filepath.Join(outside, "new"),
	}
	for name, script := range escapes {
		t.Run(name, func(t *testing.T) {
			reset := func() {
				os.RemoveAll(outside)
				os.Mkdir(outside, 0o755)
				os.WriteFile(filepath.Join(outside, "old"), []byte("keep"), 0o644)
				for _, f := range []string{"f", "stolen", "hl", "later"} {
					os.Remove(filepath.Join(ws, f))
				}
			}
			reset()
			out, err := run(t, s, ws, script)
			if err == nil {
				t.Errorf("sandboxed %q succeeded:\n%s", script, out)
			}
			if b, _ := os.ReadFile(filepath.Join(outside, "old")); string(b) != "keep" {
				t.Errorf("outside/old changed: %q", b)
			}
			ents, _ := os.ReadDir(outside)
			if len(ents) != 1 {
				t.Errorf("outside holds %d entries after %q", len(ents), script)
			}
			reset()
			if out, err := run(t, nil, ws, script); err != nil {
				t.Errorf("control: unsandboxed %q failed, so the case proves nothing: %v\n%s", script, err, out)
			}
			reset()
		})
	}
}

func TestChildCannotReadParent(t *testing.T) {
	s := newSandbox(t, Policy{Write: []string{t.TempDir()}})
	dir := t.TempDir()
	for _, f := range []string{"environ", "mem", "maps", "fd/0"} {
		script := fmt.Sprintf("head -c 64 /proc/$PPID/%s >/dev/null", f)
		if f == "fd/0" {
			// One stable descriptor: listing every fd with ls -l raced
			// with descriptors the test process opened and closed.
			script = "readlink -v /proc/$PPID/fd/0 >/dev/null"
		}
		t.Run(f, func(t *testing.T) {
			// As root, an unsandboxed child reads even a non-dumpable
			// parent (CAP_SYS_PTRACE): the control shows the sandbox is
			// what stops it. (Not as another user: non-dumpable alone
			// stops that child.)
			if out, err := run(t, nil, dir, script); err != nil && f != "mem" && os.Geteuid() == 0 {
				t.Fatalf("control: unsandboxed read of /proc/PPID/%s failed: %v\n%s", f, err, out)
			}
			out, err := run(t, s, dir, script)
			if err == nil {
				t.Fatalf("sandboxed read of /proc/PPID/%s succeeded:\n%s", f, out)
			}
			if !strings.Contains(out, "Permission denied") {
				t.Errorf("want permission denied, got: %s", out)
			}
		})
	}
	t.Run("signal", func(t *testing.T) {
		if s.Probe().ABI < 6 {
			t.Skipf("Landlock ABI %d has no signal scoping (needs 6)", s.Probe().ABI)
		}
		if out, err := run(t, nil, dir, "kill -0 $PPID"); err != nil {
			t.Fatalf("control: %v\n%s", err, out)
		}
		if out, err := run(t, s, dir, "kill -0 $PPID"); err == nil {
			t.Fatalf("sandboxed kill -0 $PPID succeeded:\n%s", out)
		}
	})
}

func TestNetworkDenied(t *testing.T) {
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Skipf("no loopback TCP: %v", err)
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
	port := ln.Addr().(*net.TCPAddr).Port
	script := fmt.Sprintf("exec 3<>/dev/tcp/127.0.0.1/%d", port)
	dir := t.TempDir()
	if out, err := run(t, nil, dir, script); err != nil {
		t.Fatalf("control: %v\n%s", err, out)
	}
	t.Run("namespace and landlock", func(t *testing.T) {
		s := newSandbox(t, Policy{})
		if out, err := run(t, s, dir, script); err == nil {
			t.Fatalf("sandboxed connect succeeded:\n%s", out)
		}
	})
	t.Run("landlock alone", func(t *testing.T) {
		s := newSandbox(t, Policy{})
		if s.Probe().ABI < 4 {
			t.Skipf("Landlock ABI %d has no TCP rules (needs 4)", s.Probe().ABI)
		}
		s.status.NetNS = false
		out, err := run(t, s, dir, script)
		if err == nil {
			t.Fatalf("sandboxed connect succeeded:\n%s", out)
		}
		if !strings.Contains(out, "Permission denied") {
			t.Errorf("want Landlock's permission denied, got: %s", out)
		}
	})
	t.Run("allowed", func(t *testing.T) {
		s := newSandbox(t, Policy{Network: true})
		if out, err := run(t, s, dir, script); err != nil {
			t.Fatalf("connect with network allowed: %v\n%s", err, out)
		}
	})
}

func TestCommandKeepsItsSetup(t *testing.T) {
	dir := t.TempDir()
	s := newSandbox(t, Policy{Write: []string{dir}})
	cmd := exec.Command("/bin/sh", "-c", `echo "$SECRET_FOR_TEST $(pwd) $$ $(ps -o pgid= -p $$)"; exit 7`)
	cmd.Dir = dir
	cmd.Env = []string{"PATH=/usr/bin:/bin", "SECRET_FOR_TEST=v"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	var out bytes.Buffer
	cmd.Stdout = &out
	if err := s.Start(cmd); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	err := cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 7 {
		t.Fatalf("exit: %v", err)
	}
	f := strings.Fields(out.String())
	if len(f) < 3 || f[0] != "v" || f[1] != dir || f[2] != fmt.Sprint(pid) {
		t.Fatalf("got %q; want env, dir %s and pid %d (the launcher execs, no process in between)", out.String(), dir, pid)
	}
	if len(f) == 4 && f[3] != fmt.Sprint(pid) {
		t.Errorf("process group %s, want %d", f[3], pid)
	}
}

func TestBrokenLauncherIsUnavailable(t *testing.T) {
	var told []Status
	s := &Sandbox{Launcher: Launcher{Path: filepath.Join(t.TempDir(), "missing")}, Notify: func(st Status) { told = append(told, st) }}
	st := s.Probe()
	if st.Available() {
		t.Fatalf("a missing launcher probes as available: %s", st)
	}
	s.Probe()
	if len(told) != 1 || told[0].Why == "" {
		t.Fatalf("Notify calls: %+v (want one, with the reason)", told)
	}
	cmd := exec.Command("/bin/sh", "-c", "exit 0")
	err := s.Start(cmd)
	if !errors.Is(err, ErrUnavailable) {
		t.Fatalf("Start: %v, want ErrUnavailable", err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("the unconfined command should still run: %v", err)
	}
	if len(told) != 1 {
		t.Fatalf("Notify called %d times", len(told))
	}
}

func TestLauncherArgs(t *testing.T) {
	for _, c := range []struct {
		args []string
		ok   bool
	}{
		{[]string{"-w", "5", "-exe", "3", "-status", "4", "-net", "--", "/bin/true", "true"}, true},
		{[]string{"-seccomp", "-probe"}, true},
		{[]string{"-w"}, false},
		{[]string{"-w", "/a", "--", "/bin/true", "true"}, false},
		{[]string{"-status", "1", "--", "/bin/true", "true"}, false},
		{[]string{"--", "/bin/true"}, false},
		{[]string{"-x", "--", "/bin/true", "true"}, false},
		{nil, false},
	} {
		_, err := parseLaunch(c.args)
		if (err == nil) != c.ok {
			t.Errorf("parseLaunch(%q): %v", c.args, err)
		}
	}
	var stderr bytes.Buffer
	if code := Main([]string{"-bogus"}, &stderr); code != 126 || !strings.Contains(stderr.String(), "unknown option") {
		t.Errorf("Main with a bad option: %d %q", code, stderr.String())
	}
}
