package fs

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/reinhq/rein/tool"
)

// escapeWorld builds a workspace full of ways out:
//
//	base/outside/secret              the file no write may touch
//	base/ws/a -> b/c                 relative symlink to a subdirectory
//	base/ws/b/c/                     (so a/.. is b, physically)
//	base/ws/out -> base/outside      absolute symlink out
//	base/ws/rel -> ../outside        relative symlink out
//	base/ws/hop -> a/../../../outside a chain: symlink, "..", out
//	base/ws/b/c/up -> ../../..       a symlink to the workspace's parent
//	base/ws/dang -> ../outside/new   dangling, pointing out
//	base/ws/sec -> ../outside/secret a file symlink out
//	base/ws/inner -> b/c/f           a file symlink inside
//	base/ws/b/c/f
func escapeWorld(t *testing.T) (env tool.Env, ws, outside string) {
	t.Helper()
	env = testEnv(t)
	base := env.Dir
	ws, outside = filepath.Join(base, "ws"), filepath.Join(base, "outside")
	for _, d := range []string{ws + "/b/c", outside} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for f, c := range map[string]string{outside + "/secret": "secret", ws + "/b/c/f": "inside"} {
		if err := os.WriteFile(f, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for link, target := range map[string]string{
		"a": "b/c", "out": outside, "rel": "../outside", "hop": "a/../../../outside",
		"b/c/up": "../../..", "dang": "../outside/new", "sec": "../outside/secret", "inner": "b/c/f",
	} {
		if err := os.Symlink(target, filepath.Join(ws, link)); err != nil {
			t.Fatal(err)
		}
	}
	env.Dir = ws
	return env, ws, outside
}

func confined(roots ...string) (write, edit, read tool.Tool) {
	ts := All(Options{Rg: "-", Confine: true, WriteRoots: roots})
	return ts[1], ts[2], ts[0]
}

// outsideUntouched fails when anything under outside changed.
func outsideUntouched(t *testing.T, outside string) {
	t.Helper()
	ents, _ := os.ReadDir(outside)
	if len(ents) != 1 {
		var names []string
		for _, e := range ents {
			names = append(names, e.Name())
		}
		t.Fatalf("outside holds %v", names)
	}
	if b, _ := os.ReadFile(outside + "/secret"); string(b) != "secret" {
		t.Fatalf("outside/secret is now %q", b)
	}
}

// TestConfinedWritesCannotEscape: every path below leads out of the
// workspace; write must refuse each and leave outside/ as it was. The
// unconfined write tool (full-access) is run on the same paths as the
// control, so each case proves the confinement is what stopped it.
func TestConfinedWritesCannotEscape(t *testing.T) {
	env, ws, outside := escapeWorld(t)
	write, _, _ := confined(ws)
	paths := []string{
		"../outside/new",
		"out/new",
		"rel/new",
		"hop/new",
		"a/../../../outside/new", // physically: b/c -> b -> ws -> base
		"b/c/up/outside/new",     // symlink to the parent
		"a/up/outside/new",       // chain of two symlinks
		"dang",                   // dangling symlink pointing out
		"sec",                    // file symlink pointing out
		outside + "/new",         // absolute
		ws + "/../outside/new",   // absolute with ..
		ws + "/out/new",          // absolute through a symlink
		"nonexistent/../../outside/new",
		"./././../outside/new",
		ws + "//out//new",
	}
	for _, p := range paths {
		t.Run(p, func(t *testing.T) {
			r := run(t, write, env, map[string]any{"file_path": p, "content": "pwned"})
			if !r.IsError || r.Code != tool.CodeDenied {
				t.Errorf("confined write of %s: isError=%v code=%q: %s", p, r.IsError, r.Code, text(r))
			}
			outsideUntouched(t, outside)
		})
	}
	// Control: unconfined, the same paths do get out (those that can be
	// created: a first write of a dangling link or a new file).
	escaped := 0
	for _, p := range []string{"out/new1", "hop/new2", "a/../../../outside/new3", "dang"} {
		r := run(t, Write(), env, map[string]any{"file_path": p, "content": "x"})
		if !r.IsError {
			escaped++
		}
	}
	if escaped != 4 {
		t.Fatalf("control: only %d of 4 unconfined writes got out; the cases prove nothing", escaped)
	}
}

func TestConfinedWritesInside(t *testing.T) {
	env, ws, outside := escapeWorld(t)
	write, edit, read := confined(ws)
	for p, real := range map[string]string{
		"new.txt":             ws + "/new.txt",
		"a/../x.txt":          ws + "/b/x.txt", // physically: a is b/c, so a/.. is b
		"a/../../y.txt":       ws + "/y.txt",
		"a/../../outside/n":   ws + "/outside/n", // textually outside, physically inside
		"deep/er/z.txt":       ws + "/deep/er/z.txt",
		ws + "/abs.txt":       ws + "/abs.txt",
		"~/../notme/../w.txt": "", // ~ is not the workspace: refused below
	} {
		r := run(t, write, env, map[string]any{"file_path": p, "content": "ok"})
		if real == "" {
			if !r.IsError {
				t.Errorf("write %s succeeded", p)
			}
			continue
		}
		out := wantOK(t, r)
		if b, err := os.ReadFile(real); err != nil || string(b) != "ok" {
			t.Errorf("write %s: %s holds %q %v", p, real, b, err)
		}
		// The result names the file that was written, not the text.
		if rel, _ := filepath.Rel(ws, real); !strings.Contains(out, rel) {
			t.Errorf("write %s: result %q does not name %s", p, out, rel)
		}
	}
	// Through an in-workspace file symlink: the target changes, the link
	// stays a link.
	wantOK(t, run(t, read, env, map[string]any{"file_path": "inner"}))
	wantOK(t, run(t, edit, env, map[string]any{"file_path": "inner", "old_string": "inside", "new_string": "edited"}))
	if b, _ := os.ReadFile(ws + "/b/c/f"); string(b) != "edited" {
		t.Errorf("b/c/f = %q", b)
	}
	if fi, _ := os.Lstat(ws + "/inner"); fi.Mode()&os.ModeSymlink == 0 {
		t.Error("inner is no longer a symlink")
	}
	// A second writable root.
	tmp := t.TempDir()
	write2, _, _ := confined(ws, tmp)
	wantOK(t, run(t, write2, env, map[string]any{"file_path": tmp + "/t.txt", "content": "ok"}))
	wantErr(t, run(t, write, env, map[string]any{"file_path": tmp + "/t2.txt", "content": "no"}), tool.CodeDenied)
	outsideUntouched(t, outside)
}

// TestConfinedEditCannotEscape: edit of a file read through a path that
// leads out (read is allowed anywhere; the edit must not be).
func TestConfinedEditCannotEscape(t *testing.T) {
	env, ws, outside := escapeWorld(t)
	_, edit, read := confined(ws)
	for _, p := range []string{"sec", "out/secret", "rel/secret", "hop/secret", "a/../../../outside/secret", outside + "/secret"} {
		wantOK(t, run(t, read, env, map[string]any{"file_path": p}))
		r := run(t, edit, env, map[string]any{"file_path": p, "old_string": "secret", "new_string": "pwned"})
		if !r.IsError || r.Code != tool.CodeDenied {
			t.Errorf("edit %s: isError=%v code=%q: %s", p, r.IsError, r.Code, text(r))
		}
	}
	outsideUntouched(t, outside)
}

// TestSwapDirectoryForSymlinkRace: while write creates files in sub/, a
// goroutine keeps replacing sub/ with a symlink to outside/ and back. A
// check-then-write implementation loses this race; resolving inside the
// root handle cannot.
func TestSwapDirectoryForSymlinkRace(t *testing.T) {
	env, ws, outside := escapeWorld(t)
	write, _, _ := confined(ws)
	sub := ws + "/sub"
	var stop atomic.Bool
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for !stop.Load() {
			_ = os.RemoveAll(sub)
			_ = os.Mkdir(sub, 0o755)
			_ = os.RemoveAll(sub)
			_ = os.Symlink(outside, sub)
		}
	}()
	deadline := time.Now().Add(300 * time.Millisecond)
	n := 0
	for ; time.Now().Before(deadline) || n < 200; n++ {
		args, _ := json.Marshal(map[string]any{"file_path": "sub/f" + string(rune('a'+n%26)), "content": "x"})
		_, _ = write.Run(context.Background(), tool.Call{ID: "c", Arguments: args, Env: env})
	}
	stop.Store(true)
	wg.Wait()
	outsideUntouched(t, outside)
	t.Logf("%d writes raced against the swap", n)
}

func TestHardLinkRefused(t *testing.T) {
	env, ws, outside := escapeWorld(t)
	write, edit, read := confined(ws)
	// A hard link to a file outside (possible when both are on one file
	// system and whoever made it could write both directories).
	if err := os.Link(outside+"/secret", ws+"/hl"); err != nil {
		t.Skipf("cannot make a hard link here: %v", err)
	}
	wantOK(t, run(t, read, env, map[string]any{"file_path": "hl"}))
	wantErr(t, run(t, edit, env, map[string]any{"file_path": "hl", "old_string": "secret", "new_string": "pwned"}), CodeHardLink)
	wantErr(t, run(t, write, env, map[string]any{"file_path": "hl", "content": "pwned"}), CodeHardLink)
	outsideUntouched(t, outside)
}

func TestOddPaths(t *testing.T) {
	env, ws, outside := escapeWorld(t)
	write, _, _ := confined(ws)
	// NUL bytes: refused, nothing created.
	r := run(t, write, env, `{"file_path": "x\u0000/../../outside/n", "content": "x"}`)
	if !r.IsError {
		t.Errorf("NUL path written: %s", text(r))
	}
	// Very long paths: deeper than PATH_MAX is fine inside (the root
	// resolves one component at a time), and still cannot get out.
	long := strings.Repeat("d123456789/", 400) + "f.txt"
	wantOK(t, run(t, write, env, map[string]any{"file_path": long, "content": "deep"}))
	up := strings.Repeat("../", 401) + "outside/n"
	r = run(t, write, env, map[string]any{"file_path": strings.Repeat("d123456789/", 400) + up, "content": "x"})
	if !r.IsError {
		t.Errorf("long .. path written: %s", text(r))
	}
	// ~ is the home directory, never a file named ~ here.
	r = run(t, write, env, map[string]any{"file_path": "~", "content": "x"})
	if !r.IsError {
		t.Errorf("~ written: %s", text(r))
	}
	if _, err := os.Lstat(ws + "/~"); err == nil {
		t.Error("a file named ~ was created")
	}
	// Names that are not UTF-8 cannot be named in JSON (they arrive as
	// U+FFFD): writing the mangled name creates a new file and leaves the
	// original alone.
	odd := ws + "/b/\xff\xfe.txt"
	if err := os.WriteFile(odd, []byte("orig"), 0o644); err != nil {
		t.Skipf("file system refuses non-UTF-8 names: %v", err)
	}
	wantOK(t, run(t, write, env, map[string]any{"file_path": strings.ToValidUTF8("b/\xff\xfe.txt", "\uFFFD"), "content": "new"}))
	if b, _ := os.ReadFile(odd); string(b) != "orig" {
		t.Errorf("non-UTF-8 file changed: %q", b)
	}
	outsideUntouched(t, outside)
}
