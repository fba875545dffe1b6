package fs

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/reinhq/rein/tool"
)

// A workspace under a writable parent (a repository cloned into the temp
// directory) is renamed away and replaced by a symlink to outside, as a
// sandboxed command can do: write and edit must not follow it. The roots
// are opened when the tools are made; a root whose path now leads
// elsewhere is refused.
func TestSwappedWorkspaceIsRefused(t *testing.T) {
	env := testEnv(t)
	base := env.Dir
	ws, outside := filepath.Join(base, "ws"), filepath.Join(base, "outside")
	for _, d := range []string{ws, outside} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	writeFile(t, outside, "secret", "secret")
	write, _, _ := confined(ws, base) // the parent is a write root too
	env.Dir = ws
	wantOK(t, run(t, write, env, map[string]any{"file_path": "before", "content": "x"}))

	if err := os.Rename(ws, ws+".old"); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, ws); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"via-write", ws + "/via-abs"} {
		r := run(t, write, env, map[string]any{"file_path": p, "content": "pwned"})
		if !r.IsError || r.Code != tool.CodeDenied || !strings.Contains(text(r), "moved or replaced") {
			t.Errorf("write of %s after the swap: %s %s", p, r.Code, text(r))
		}
	}
	outsideUntouched(t, outside)
}

// grepTools returns grep with each engine available here.
func grepTools(t *testing.T, opts Options) map[string]tool.Tool {
	t.Helper()
	out := map[string]tool.Tool{}
	opts.Rg = "-"
	out["go"] = Grep(opts)
	if rg, err := exec.LookPath("rg"); err == nil {
		opts.Rg = rg
		out["rg"] = Grep(opts)
	} else {
		t.Logf("no ripgrep here: only the Go engine is tested")
	}
	return out
}

// rein's environment holds the API keys. A grep of /proc/self/environ in
// count mode answers whether a guessed prefix of a key matches: an oracle
// that recovers the key a few calls per character. No file tool reads,
// searches or lists rein's own /proc entry, by any of its names.
func TestOwnProcIsRefused(t *testing.T) {
	if _, err := os.Stat("/proc/self/environ"); err != nil {
		t.Skip("no /proc here")
	}
	env := testEnv(t)
	if err := os.Symlink("/proc/self", filepath.Join(env.Dir, "me")); err != nil {
		t.Fatal(err)
	}
	pid := strconv.Itoa(os.Getpid())
	// Control: the file is there and readable to this process.
	if b, err := os.ReadFile("/proc/self/environ"); err != nil || len(b) == 0 {
		t.Fatalf("control: /proc/self/environ: %v", err)
	}
	// Another thread's id names this process too.
	tids, _ := os.ReadDir("/proc/self/task")
	other := pid
	for _, d := range tids {
		if d.Name() != pid {
			other = d.Name()
		}
	}
	files := []string{"/proc/self/environ", "/proc/" + pid + "/environ", "/proc/thread-self/environ",
		"/proc/" + other + "/environ", "/proc/" + pid + "/task/" + other + "/environ", "me/environ",
		"/proc/self/../self/environ", "/dev/fd/0", "/proc/self/fd/0", "/proc/self/mem"}
	ts := All(Options{Rg: "-"})
	read, glob, ls := ts[0], ts[3], ts[5]
	for _, f := range files {
		r := run(t, read, env, map[string]any{"file_path": f})
		if !r.IsError || r.Code != tool.CodeDenied {
			t.Errorf("read %s: %s %s", f, r.Code, text(r))
		}
	}
	for name, grep := range grepTools(t, Options{}) {
		for _, p := range []string{"/proc/self/environ", "/proc/self", "/proc/" + pid, "me"} {
			r := run(t, grep, env, map[string]any{"pattern": "PATH=", "path": p, "output_mode": "count"})
			if !r.IsError || r.Code != tool.CodeDenied {
				t.Errorf("%s grep %s: %s %s", name, p, r.Code, text(r))
			}
		}
	}
	for _, p := range []string{"/proc/self", "/proc/" + pid, "/proc/thread-self", "me"} {
		if r := run(t, ls, env, map[string]any{"path": p}); r.Code != tool.CodeDenied {
			t.Errorf("ls %s: %s %s", p, r.Code, text(r))
		}
		if r := run(t, glob, env, map[string]any{"pattern": "*", "path": p}); r.Code != tool.CodeDenied {
			t.Errorf("glob %s: %s %s", p, r.Code, text(r))
		}
	}
	// A walk of /proc itself leaves rein's entry out.
	r := run(t, glob, env, map[string]any{"pattern": "*/environ", "path": "/proc"})
	for _, l := range strings.Split(text(r), "\n") {
		if l == "/proc/"+pid+"/environ" || l == "/proc/self/environ" || l == "/proc/"+other+"/environ" {
			t.Errorf("glob of /proc lists %s", l)
		}
	}
	// Devices, pipes and sockets are not files to read.
	if r := run(t, read, env, map[string]any{"file_path": "/dev/zero"}); r.Code != CodeNotRegular {
		t.Errorf("read /dev/zero: %s %s", r.Code, text(r))
	}
}

// The processes that started rein (a shell, an editor) hold the same keys
// in their environments, readable to rein's own process. The file tools
// run there, outside the sandbox that keeps commands from those entries:
// they refuse every process's /proc entry, and grep's fallback engine
// cannot become the oracle sandboxed ripgrep is not.
func TestOtherProcessEntriesAreRefused(t *testing.T) {
	parent := "/proc/" + strconv.Itoa(os.Getppid())
	if b, err := os.ReadFile(parent + "/environ"); err != nil || len(b) == 0 {
		t.Skipf("control: the parent's environment is not readable here: %v", err)
	}
	env := testEnv(t)
	ts := All(Options{Rg: "-"})
	read, glob, ls := ts[0], ts[3], ts[5]
	for _, f := range []string{parent + "/environ", parent + "/cmdline", "/proc/1/status", parent + "/task/" + strconv.Itoa(os.Getppid()) + "/environ"} {
		if r := run(t, read, env, map[string]any{"file_path": f}); r.Code != tool.CodeDenied {
			t.Errorf("read %s: %s %s", f, r.Code, text(r))
		}
	}
	for name, grep := range grepTools(t, Options{}) {
		for _, p := range []string{parent + "/environ", parent} {
			r := run(t, grep, env, map[string]any{"pattern": "PATH=", "path": p, "output_mode": "count"})
			if strings.Contains(text(r), "environ:") { // a match: path:count
				t.Errorf("%s grep %s found: %s", name, p, text(r))
			}
		}
	}
	if r := run(t, ls, env, map[string]any{"path": parent}); r.Code != tool.CodeDenied {
		t.Errorf("ls %s: %s %s", parent, r.Code, text(r))
	}
	r := run(t, glob, env, map[string]any{"pattern": "*/environ", "path": "/proc"})
	if strings.Contains(text(r), "/environ") {
		t.Errorf("glob of /proc lists process entries:\n%s", text(r))
	}
	// What is not a process's entry stays readable.
	if r := run(t, read, env, map[string]any{"file_path": "/proc/cpuinfo"}); r.IsError {
		t.Errorf("read /proc/cpuinfo: %s %s", r.Code, text(r))
	}
}

// A rule that denies reading ~/.ssh (or asks about it) also holds for a
// search or listing of a parent directory: the walk leaves the paths it
// names out, with both engines.
func TestHiddenPathsAreLeftOut(t *testing.T) {
	env := testEnv(t)
	writeFile(t, env.Dir, ".ssh/id_rsa", "-----BEGIN OPENSSH PRIVATE KEY-----\n")
	writeFile(t, env.Dir, "notes/keys.txt", "no PRIVATE KEY here, only talk\n")
	writeFile(t, env.Dir, "app/.env", "PRIVATE KEY=1\n")
	denied := []string{filepath.Join(env.Dir, ".ssh"), filepath.Join(env.Dir, "app/.env")}
	var asked []string
	hide := func(paths ...string) bool {
		asked = append(asked, paths...)
		for _, p := range paths {
			for _, d := range denied {
				if p == d || strings.HasPrefix(p, d+"/") {
					return true
				}
			}
		}
		return false
	}
	ts := All(Options{Rg: "-", Hide: hide})
	glob, ls := ts[3], ts[5]
	// Control: without the rule both files are found.
	for name, grep := range grepTools(t, Options{}) {
		if r := run(t, grep, env, map[string]any{"pattern": "PRIVATE KEY", "output_mode": "files"}); !strings.Contains(text(r), ".ssh/id_rsa") || !strings.Contains(text(r), "app/.env") {
			t.Fatalf("control %s: %s", name, text(r))
		}
	}
	for name, grep := range grepTools(t, Options{Hide: hide}) {
		for _, mode := range []string{"content", "files", "count"} {
			r := run(t, grep, env, map[string]any{"pattern": "PRIVATE KEY", "output_mode": mode})
			if out := text(r); strings.Contains(out, "id_rsa") || strings.Contains(out, ".env") || !strings.Contains(out, "notes/keys.txt") {
				t.Errorf("%s grep (%s): %s", name, mode, out)
			}
		}
	}
	r := run(t, glob, env, map[string]any{"pattern": "**/*"})
	if out := text(r); strings.Contains(out, "id_rsa") || strings.Contains(out, ".env") || !strings.Contains(out, "notes/keys.txt") {
		t.Errorf("glob: %s", out)
	}
	r = run(t, ls, env, map[string]any{"path": "app"})
	if out := text(r); strings.Contains(out, ".env") {
		t.Errorf("ls: %s", out)
	}
	if r = run(t, ls, env, map[string]any{}); strings.Contains(text(r), ".ssh") {
		t.Errorf("ls: %s", text(r))
	}
	if len(asked) == 0 {
		t.Fatal("Hide was never asked")
	}
}

// diskEditor is an editor that writes files by path, as one does.
type diskEditor struct{}

func (diskEditor) ReadFile(_ context.Context, p string) ([]byte, error) { return os.ReadFile(p) }
func (diskEditor) WriteFile(_ context.Context, p string, b []byte) error {
	return os.WriteFile(p, b, 0o644)
}

// With an editor's buffers, rein checks the path through its root and
// hands the editor a path, which the editor resolves again: a directory
// swapped for a symlink to outside in between must not get the editor to
// write outside.
func TestEditorWriteAfterSwapIsRefused(t *testing.T) {
	env := testEnv(t)
	ws, outside := filepath.Join(env.Dir, "ws"), filepath.Join(env.Dir, "outside")
	writeFile(t, ws, "sub/f.txt", "old\n")
	writeFile(t, outside, "secret", "secret")
	env.Dir = ws
	tools := All(Options{Rg: "-", Confine: true, WriteRoots: []string{ws}, Buffers: diskEditor{}})
	read, write, edit := tools[0], tools[1], tools[2]
	swap := func() {
		if err := os.Rename(filepath.Join(ws, "sub"), filepath.Join(ws, "sub.old")); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(outside, filepath.Join(ws, "sub")); err != nil {
			t.Fatal(err)
		}
	}
	unswap := func() {
		os.Remove(filepath.Join(ws, "sub"))
		os.Rename(filepath.Join(ws, "sub.old"), filepath.Join(ws, "sub"))
	}
	defer func() { testHookHandoff = nil }()
	for name, call := range map[string]func() tool.Result{
		"write": func() tool.Result {
			return run(t, write, env, map[string]any{"file_path": "sub/f.txt", "content": "pwned\n"})
		},
		"edit": func() tool.Result {
			return run(t, edit, env, map[string]any{"file_path": "sub/f.txt", "old_string": "old", "new_string": "pwned"})
		},
	} {
		t.Run(name, func(t *testing.T) {
			testHookHandoff = nil
			wantOK(t, run(t, read, env, map[string]any{"file_path": "sub/f.txt"}))
			testHookHandoff = swap
			r := call()
			testHookHandoff = nil
			unswap()
			if !r.IsError || r.Code != tool.CodeDenied {
				t.Errorf("%s after the swap: %s %s", name, r.Code, text(r))
			}
			outsideUntouched(t, outside)
			if b, _ := os.ReadFile(filepath.Join(ws, "sub/f.txt")); string(b) != "old\n" {
				t.Errorf("the file is now %q", b)
			}
		})
	}
	// Without a swap the editor writes as before.
	wantOK(t, run(t, read, env, map[string]any{"file_path": "sub/f.txt"}))
	wantOK(t, run(t, write, env, map[string]any{"file_path": "sub/f.txt", "content": "new\n"}))
	if b, _ := os.ReadFile(filepath.Join(ws, "sub/f.txt")); string(b) != "new\n" {
		t.Errorf("the file is %q", b)
	}
}

// An editor that does not write files leaves the write to the tool's own
// handle: nothing is written by path.
type readOnlyEditor struct{ diskEditor }

func (readOnlyEditor) WriteFile(context.Context, string, []byte) error {
	return errors.ErrUnsupported
}

func TestEditorWithoutWritesUsesTheHandle(t *testing.T) {
	env := testEnv(t)
	writeFile(t, env.Dir, "f.txt", "old\n")
	os.Chmod(filepath.Join(env.Dir, "f.txt"), 0o600)
	tools := All(Options{Rg: "-", Confine: true, WriteRoots: []string{env.Dir}, Buffers: readOnlyEditor{}})
	wantOK(t, run(t, tools[0], env, map[string]any{"file_path": "f.txt"}))
	wantOK(t, run(t, tools[2], env, map[string]any{"file_path": "f.txt", "old_string": "old", "new_string": "new"}))
	fi, _ := os.Stat(filepath.Join(env.Dir, "f.txt"))
	if b, _ := os.ReadFile(filepath.Join(env.Dir, "f.txt")); string(b) != "new\n" || fi.Mode().Perm() != 0o600 {
		t.Errorf("file %q mode %v", b, fi.Mode().Perm())
	}
}

// The kernel's file systems are not walked: a grep or glob of /proc, /sys
// or /dev is refused (/proc/kcore is as large as the address space and
// ripgrep would read it for ever), a walk of / leaves them out, in both
// of grep's engines; one file there can still be searched, and ls lists
// them.
func TestKernelFileSystemsAreNotWalked(t *testing.T) {
	if _, err := os.Stat("/proc/cpuinfo"); err != nil {
		t.Skip("no /proc here")
	}
	env := testEnv(t)
	ts := All(Options{Rg: "-"})
	glob, ls := ts[3], ts[5]
	for name, grep := range grepTools(t, Options{}) {
		for _, p := range []string{"/proc", "/sys/kernel", "/dev"} {
			if r := run(t, grep, env, map[string]any{"pattern": "x", "path": p}); r.Code != tool.CodeDenied {
				t.Errorf("%s grep %s: %s %s", name, p, r.Code, text(r))
			}
		}
		if r := run(t, grep, env, map[string]any{"pattern": "processor", "path": "/proc/cpuinfo", "output_mode": "count"}); r.IsError {
			t.Errorf("%s grep /proc/cpuinfo: %s %s", name, r.Code, text(r))
		}
	}
	if r := run(t, glob, env, map[string]any{"pattern": "**/kcore", "path": "/proc"}); r.Code != tool.CodeDenied {
		t.Errorf("glob /proc: %s %s", r.Code, text(r))
	}
	if r := run(t, ls, env, map[string]any{"path": "/"}); !strings.Contains(text(r), "proc/") {
		t.Errorf("ls / leaves /proc out:\n%s", text(r))
	}
	w := newWalkFilter("/", nil)
	w.tree = true
	if !w.skip("/proc") || !w.skip("/sys/kernel") || w.skip("/usr") {
		t.Errorf("a walk of / does not leave exactly the kernel's file systems out")
	}
	if got := kernelExcludes("/"); strings.Join(got, " ") != "proc sys dev" {
		t.Errorf("excludes of /: %q", got)
	}
	if got := kernelExcludes(env.Dir); len(got) != 0 {
		t.Errorf("excludes of a workspace: %q", got)
	}
}

// The editor reads by path too: a directory swapped for a symlink between
// rein's check and the editor's read must not get the model the file the
// symlink leads to (outside the workspace, or the editor's /proc entry).
func TestEditorReadAfterSwapIsRefused(t *testing.T) {
	env := testEnv(t)
	ws, outside := filepath.Join(env.Dir, "ws"), filepath.Join(env.Dir, "outside")
	writeFile(t, ws, "sub/f.txt", "inside\n")
	writeFile(t, outside, "f.txt", "outside secret\n")
	env.Dir = ws
	read := All(Options{Rg: "-", Confine: true, WriteRoots: []string{ws}, Buffers: diskEditor{}})[0]
	defer func() { testHookReadHandoff = nil }()
	testHookReadHandoff = func() {
		testHookReadHandoff = nil
		if err := os.Rename(filepath.Join(ws, "sub"), filepath.Join(ws, "sub.old")); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(outside, filepath.Join(ws, "sub")); err != nil {
			t.Fatal(err)
		}
	}
	r := run(t, read, env, map[string]any{"file_path": "sub/f.txt"})
	if r.Code != tool.CodeDenied || strings.Contains(text(r), "outside secret") {
		t.Errorf("read after the swap: %s %s", r.Code, text(r))
	}
	// Without a swap the editor's content is read as before.
	os.Remove(filepath.Join(ws, "sub"))
	os.Rename(filepath.Join(ws, "sub.old"), filepath.Join(ws, "sub"))
	if r := run(t, read, env, map[string]any{"file_path": "sub/f.txt"}); r.IsError || !strings.Contains(text(r), "inside") {
		t.Errorf("read: %s %s", r.Code, text(r))
	}
}
