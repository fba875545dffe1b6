package tool

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCreateSpill(t *testing.T) {
	tmp := t.TempDir()
	dir := filepath.Join(tmp, "rein-s1")
	f, err := CreateSpill(dir, "bash-c1-*.log")
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("out")
	f.Close()
	if !strings.HasPrefix(f.Name(), dir+"/bash-c1-") || !strings.HasSuffix(f.Name(), ".log") {
		t.Fatalf("name %s", f.Name())
	}
	if b, err := os.ReadFile(f.Name()); err != nil || string(b) != "out" {
		t.Fatalf("%q %v", b, err)
	}
	fi, _ := os.Stat(dir)
	if fi.Mode().Perm() != 0o700 {
		t.Errorf("dir mode %v", fi.Mode().Perm())
	}
	g, err := CreateSpill(dir, "bash-c1-*.log") // the directory exists now
	if err != nil || g.Name() == f.Name() {
		t.Fatalf("second: %v", err)
	}
	g.Close()
}

// A sandboxed command can write the temp directory and guess the session
// id: it puts a symlink where rein's spill directory will be, to make
// rein (unsandboxed) write the model's output into a directory of its
// choice. rein refuses and writes nothing there.
func TestCreateSpillRefusesPlantedLink(t *testing.T) {
	tmp, target := t.TempDir(), t.TempDir()
	dir := filepath.Join(tmp, "rein-s1")
	if err := os.Symlink(target, dir); err != nil {
		t.Fatal(err)
	}
	f, err := CreateSpill(dir, "bash-c1-*.log")
	if err == nil {
		f.Close()
		t.Fatalf("a spill through a planted symlink was created: %s", f.Name())
	}
	if !errors.Is(err, ErrUnsafeSpillDir) {
		t.Errorf("err %v, want ErrUnsafeSpillDir", err)
	}
	if ents, _ := os.ReadDir(target); len(ents) != 0 {
		t.Fatalf("the link's target holds %d files", len(ents))
	}
	// A directory others may write is refused too.
	open := filepath.Join(tmp, "rein-s2")
	os.Mkdir(open, 0o777)
	os.Chmod(open, 0o777)
	if _, err := CreateSpill(open, "x-*"); !errors.Is(err, ErrUnsafeSpillDir) {
		t.Errorf("world-writable dir: %v", err)
	}
}
