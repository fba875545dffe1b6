package fs

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/reinhq/rein/llm"
	"github.com/reinhq/rein/tool"
)

// testEnv returns a session environment rooted in a fresh directory.
func testEnv(t *testing.T) tool.Env {
	t.Helper()
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return tool.Env{SessionID: "s1", Dir: dir, State: &tool.State{}}
}

func run(t *testing.T, tl tool.Tool, env tool.Env, args any) tool.Result {
	t.Helper()
	raw, ok := args.(string)
	if !ok {
		b, err := json.Marshal(args)
		if err != nil {
			t.Fatal(err)
		}
		raw = string(b)
	}
	res, err := tl.Run(context.Background(), tool.Call{ID: "c1", Arguments: json.RawMessage(raw), Env: env})
	if err != nil {
		t.Fatalf("%s(%s): Go error %v", tl.Spec().Name, raw, err)
	}
	return res
}

func text(r tool.Result) string { return llm.PlainText(r.Content) }

func wantOK(t *testing.T, r tool.Result) string {
	t.Helper()
	if r.IsError {
		t.Fatalf("unexpected error result %q: %s", r.Code, text(r))
	}
	return text(r)
}

func wantErr(t *testing.T, r tool.Result, code string) string {
	t.Helper()
	if !r.IsError || r.Code != code {
		t.Fatalf("want error %q, got isError=%v code=%q: %s", code, r.IsError, r.Code, text(r))
	}
	return text(r)
}

func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestSpecs(t *testing.T) {
	modes := map[string]tool.Mode{"read": tool.Parallel, "glob": tool.Parallel, "grep": tool.Parallel, "ls": tool.Parallel, "write": tool.Exclusive, "edit": tool.Exclusive}
	for _, tl := range All(Options{}) {
		s := tl.Spec()
		if want, ok := modes[s.Name]; !ok || tl.Mode() != want {
			t.Errorf("%s: mode %s, want %s", s.Name, tl.Mode(), want)
		}
		var schema map[string]any
		if err := json.Unmarshal(s.Parameters, &schema); err != nil || schema["type"] != "object" {
			t.Errorf("%s: parameters %s", s.Name, s.Parameters)
		}
		if s.Description == "" {
			t.Errorf("%s: no description", s.Name)
		}
	}
}

func TestInvalidArguments(t *testing.T) {
	env := testEnv(t)
	cases := []struct {
		tl   tool.Tool
		args string
	}{
		{Read(), `{}`},
		{Read(), `{"file_path":"a","offset":0}`},
		{Read(), `{"file_path":"a","limit":"ten"}`},
		{Read(), `not json`},
		{Write(), `{"file_path":"a"}`},
		{Edit(), `{"file_path":"a","old_string":"x","new_string":"y","extra":1}`},
		{Grep(Options{Rg: "-"}), `{"pattern":"x","output_mode":"lines"}`},
		{Grep(Options{Rg: "-"}), `{"pattern":"x","context":99}`},
		{Glob(), `{"path":"."}`},
		{Ls(), `{"path":3}`},
	}
	for _, c := range cases {
		r := run(t, c.tl, env, c.args)
		msg := wantErr(t, r, tool.CodeInvalidArguments)
		if !strings.HasPrefix(msg, "invalid arguments") {
			t.Errorf("%s %s: message %q", c.tl.Spec().Name, c.args, msg)
		}
	}
}

func TestReadLineNumbersAndRanges(t *testing.T) {
	env := testEnv(t)
	writeFile(t, env.Dir, "a.txt", "one\ntwo\r\nthree\nfour")
	got := wantOK(t, run(t, Read(), env, map[string]any{"file_path": "a.txt"}))
	want := "     1\tone\n     2\ttwo\n     3\tthree\n     4\tfour\n"
	if got != want {
		t.Fatalf("got %q\nwant %q", got, want)
	}
	got = wantOK(t, run(t, Read(), env, map[string]any{"file_path": filepath.Join(env.Dir, "a.txt"), "offset": 2, "limit": 2}))
	want = "     2\ttwo\n     3\tthree\n[showing lines 2-3 of 4 (line limit); call read with offset=4 to continue]\n"
	if got != want {
		t.Fatalf("got %q\nwant %q", got, want)
	}
	got = wantOK(t, run(t, Read(), env, map[string]any{"file_path": "a.txt", "offset": 9}))
	if !strings.Contains(got, "has 4 lines; offset 9 is past the end") {
		t.Fatalf("past end: %q", got)
	}
	writeFile(t, env.Dir, "empty", "")
	if got := wantOK(t, run(t, Read(), env, map[string]any{"file_path": "empty"})); got != "[empty file]\n" {
		t.Fatalf("empty: %q", got)
	}
	wantErr(t, run(t, Read(), env, map[string]any{"file_path": "nope"}), CodeNotFound)
	wantErr(t, run(t, Read(), env, map[string]any{"file_path": "."}), CodeIsDirectory)
}

func TestReadCaps(t *testing.T) {
	env := testEnv(t)
	var b strings.Builder
	for i := 1; i <= 2500; i++ {
		fmt.Fprintf(&b, "line %d\n", i)
	}
	writeFile(t, env.Dir, "long.txt", b.String())
	r := run(t, Read(), env, map[string]any{"file_path": "long.txt", "limit": 5000})
	got := wantOK(t, r)
	if n := strings.Count(got, "\n"); n != MaxReadLines+1 {
		t.Fatalf("lines shown: %d", n)
	}
	if !strings.HasSuffix(got, "[showing lines 1-2000 of 2500 (line limit); call read with offset=2001 to continue]\n") {
		t.Fatalf("tail: %q", got[len(got)-200:])
	}
	var meta readMeta
	if err := json.Unmarshal(r.Meta, &meta); err != nil || !meta.Truncated || meta.TotalLines != 2500 || meta.EndLine != 2000 {
		t.Fatalf("meta %+v %v", meta, err)
	}

	// Byte cap: 2000 lines of ~1 KiB is ~2 MiB, far over 256 KiB.
	b.Reset()
	row := strings.Repeat("x", 1000)
	for i := 0; i < 2000; i++ {
		b.WriteString(row + "\n")
	}
	writeFile(t, env.Dir, "wide.txt", b.String())
	got = wantOK(t, run(t, Read(), env, map[string]any{"file_path": "wide.txt"}))
	if len(got) > MaxReadBytes+200 || !strings.Contains(got, "(256 KiB output limit); call read with offset=") {
		t.Fatalf("byte cap: len %d tail %q", len(got), got[len(got)-120:])
	}

	// A long line is cut, on a rune boundary.
	writeFile(t, env.Dir, "one.txt", strings.Repeat("é", 1500)+"\nnext\n")
	got = wantOK(t, run(t, Read(), env, map[string]any{"file_path": "one.txt"}))
	first, _, _ := strings.Cut(got, "\n")
	if !strings.HasSuffix(first, "… [line cut: 1000 more bytes]") || !strings.Contains(got, "     2\tnext\n") {
		t.Fatalf("long line: %q", first[len(first)-60:])
	}
}

func TestReadBinary(t *testing.T) {
	env := testEnv(t)
	writeFile(t, env.Dir, "nul.bin", "abc\x00def")
	wantErr(t, run(t, Read(), env, map[string]any{"file_path": "nul.bin"}), CodeBinary)
	bad := make([]byte, 1000)
	for i := range bad {
		bad[i] = 'a'
		if i%5 == 0 {
			bad[i] = 0xff
		}
	}
	writeFile(t, env.Dir, "latin.bin", string(bad))
	wantErr(t, run(t, Read(), env, map[string]any{"file_path": "latin.bin"}), CodeBinary)
	// A few stray bytes in text are not binary.
	writeFile(t, env.Dir, "mostly.txt", strings.Repeat("good text ", 100)+"\xff\n")
	wantOK(t, run(t, Read(), env, map[string]any{"file_path": "mostly.txt"}))
}

func TestWrite(t *testing.T) {
	env := testEnv(t)
	got := wantOK(t, run(t, Write(), env, map[string]any{"file_path": "new/dir/f.txt", "content": "a\nb\n"}))
	if got != "created new/dir/f.txt (2 lines, 4 bytes)" {
		t.Fatalf("got %q", got)
	}
	if b, _ := os.ReadFile(filepath.Join(env.Dir, "new/dir/f.txt")); string(b) != "a\nb\n" {
		t.Fatalf("content %q", b)
	}
	// The file just written counts as read: it can be overwritten.
	wantOK(t, run(t, Write(), env, map[string]any{"file_path": "new/dir/f.txt", "content": "c\n"}))

	writeFile(t, env.Dir, "old.txt", "old\n")
	wantErr(t, run(t, Write(), env, map[string]any{"file_path": "old.txt", "content": "x"}), CodeNotRead)
	wantOK(t, run(t, Read(), env, map[string]any{"file_path": "old.txt"}))
	r := run(t, Write(), env, map[string]any{"file_path": "old.txt", "content": "new\n"})
	if got := wantOK(t, r); got != "overwrote old.txt (1 lines, 4 bytes)" {
		t.Fatalf("got %q", got)
	}
	var meta writeMeta
	_ = json.Unmarshal(r.Meta, &meta)
	if !strings.Contains(meta.Diff, "-old\n+new\n") || meta.Created {
		t.Fatalf("meta %+v", meta)
	}
	wantErr(t, run(t, Write(), env, map[string]any{"file_path": ".", "content": "x"}), CodeIsDirectory)
}

func TestEditRefusals(t *testing.T) {
	env := testEnv(t)
	p := writeFile(t, env.Dir, "e.go", "a := 1\nb := 1\nc := 2\n")
	edit := func(old, new string, all bool) tool.Result {
		return run(t, Edit(), env, map[string]any{"file_path": "e.go", "old_string": old, "new_string": new, "replace_all": all})
	}
	wantErr(t, edit("c := 2", "c := 3", false), CodeNotRead)
	wantOK(t, run(t, Read(), env, map[string]any{"file_path": "e.go"}))

	msg := wantErr(t, edit(":= 1", ":= 9", false), CodeAmbiguous)
	if !strings.Contains(msg, "occurs 2 times") || !strings.Contains(msg, "replace_all") {
		t.Fatalf("ambiguous message %q", msg)
	}
	msg = wantErr(t, edit("d := 4", "d := 5", false), CodeNoMatch)
	if !strings.Contains(msg, "not found in e.go") {
		t.Fatalf("no-match message %q", msg)
	}
	wantErr(t, edit("", "x", false), tool.CodeInvalidArguments)
	wantErr(t, edit("c := 2", "c := 2", false), tool.CodeInvalidArguments)
	wantErr(t, run(t, Edit(), env, map[string]any{"file_path": "missing.go", "old_string": "a", "new_string": "b"}), CodeNotFound)

	// Changed on disk after the read: refused until read again.
	if err := os.WriteFile(p, []byte("a := 1\nb := 1\nc := 2\nd := 7\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	future := time.Now().Add(time.Hour)
	_ = os.Chtimes(p, future, future)
	msg = wantErr(t, edit("c := 2", "c := 3", false), CodeStale)
	if !strings.Contains(msg, "changed on disk") {
		t.Fatalf("stale message %q", msg)
	}
	wantOK(t, run(t, Read(), env, map[string]any{"file_path": "e.go"}))
	wantOK(t, edit("c := 2", "c := 3", false))

	// Touched but unchanged content is not stale.
	later := future.Add(time.Hour)
	_ = os.Chtimes(p, later, later)
	wantOK(t, edit("c := 3", "c := 4", false))

	// Nothing was written by the refusals.
	if b, _ := os.ReadFile(p); string(b) != "a := 1\nb := 1\nc := 4\nd := 7\n" {
		t.Fatalf("content %q", b)
	}
}

func TestEditDiff(t *testing.T) {
	env := testEnv(t)
	p := writeFile(t, env.Dir, "src/m.txt", "alpha\nbeta\ngamma\nbeta\n")
	wantOK(t, run(t, Read(), env, map[string]any{"file_path": p}))
	r := run(t, Edit(), env, map[string]any{"file_path": "src/m.txt", "old_string": "beta", "new_string": "BETA", "replace_all": true})
	got := wantOK(t, r)
	wantDiff := "--- a/src/m.txt\n+++ b/src/m.txt\n@@ -1,4 +1,4 @@\n alpha\n-beta\n+BETA\n gamma\n-beta\n+BETA\n"
	if got != "edited src/m.txt (2 replacements)\n"+wantDiff {
		t.Fatalf("got %q", got)
	}
	var meta editMeta
	if err := json.Unmarshal(r.Meta, &meta); err != nil || meta.Diff != wantDiff || meta.Replacements != 2 {
		t.Fatalf("meta %+v %v", meta, err)
	}
	if b, _ := os.ReadFile(p); string(b) != "alpha\nBETA\ngamma\nBETA\n" {
		t.Fatalf("content %q", b)
	}
	// A second edit needs no re-read: the tool's own write is known.
	wantOK(t, run(t, Edit(), env, map[string]any{"file_path": "src/m.txt", "old_string": "gamma", "new_string": "G"}))
}

func TestEditThroughSymlinkCountsAsRead(t *testing.T) {
	env := testEnv(t)
	writeFile(t, env.Dir, "real.txt", "x\n")
	if err := os.Symlink("real.txt", filepath.Join(env.Dir, "link.txt")); err != nil {
		t.Skip(err)
	}
	wantOK(t, run(t, Read(), env, map[string]any{"file_path": "link.txt"}))
	wantOK(t, run(t, Edit(), env, map[string]any{"file_path": "real.txt", "old_string": "x", "new_string": "y"}))
}

func TestGlob(t *testing.T) {
	env := testEnv(t)
	base := time.Now().Add(-time.Hour)
	for i, name := range []string{"a.go", "sub/b.go", "sub/deep/c.go", "d.txt", ".git/x.go"} {
		p := writeFile(t, env.Dir, name, "x")
		mt := base.Add(time.Duration(i) * time.Minute)
		_ = os.Chtimes(p, mt, mt)
	}
	got := wantOK(t, run(t, Glob(), env, map[string]any{"pattern": "**/*.go"}))
	if got != "sub/deep/c.go\nsub/b.go\na.go\n" {
		t.Fatalf("got %q", got)
	}
	got = wantOK(t, run(t, Glob(), env, map[string]any{"pattern": "*.go", "path": "sub"}))
	if got != "sub/b.go\n" {
		t.Fatalf("with path: %q", got)
	}
	got = wantOK(t, run(t, Glob(), env, map[string]any{"pattern": filepath.Join(env.Dir, "sub", "**", "*.go")}))
	if got != "sub/deep/c.go\nsub/b.go\n" {
		t.Fatalf("absolute: %q", got)
	}
	if got := wantOK(t, run(t, Glob(), env, map[string]any{"pattern": "*.rs"})); got != "no files match\n" {
		t.Fatalf("none: %q", got)
	}
	wantErr(t, run(t, Glob(), env, map[string]any{"pattern": "[a-"}), CodeBadPattern)
	wantErr(t, run(t, Glob(), env, map[string]any{"pattern": "*", "path": "nope"}), CodeNotFound)

	for i := 0; i < MaxGlobResults+20; i++ {
		writeFile(t, env.Dir, fmt.Sprintf("many/f%03d.md", i), "x")
	}
	got = wantOK(t, run(t, Glob(), env, map[string]any{"pattern": "many/*.md"}))
	if n := strings.Count(got, "\n"); n != MaxGlobResults+1 || !strings.Contains(got, "[showing 100 of 120 matches") {
		t.Fatalf("cap: %d lines, tail %q", n, got[len(got)-90:])
	}
}

func TestLs(t *testing.T) {
	env := testEnv(t)
	writeFile(t, env.Dir, "b.txt", "hello")
	writeFile(t, env.Dir, "a/x", "")
	writeFile(t, env.Dir, ".git/HEAD", "ref")
	writeFile(t, env.Dir, ".env", "K=V\n")
	_ = os.Symlink("b.txt", filepath.Join(env.Dir, "c"))
	r := run(t, Ls(), env, map[string]any{})
	got := wantOK(t, r)
	if got != ".env  4\na/\nb.txt  5\nc -> b.txt\n" {
		t.Fatalf("got %q", got)
	}
	var meta lsMeta
	_ = json.Unmarshal(r.Meta, &meta)
	if meta.Total != 4 || meta.Entries[1].Type != "dir" || meta.Entries[2].Size != 5 || meta.Entries[3].Type != "symlink" {
		t.Fatalf("meta %+v", meta)
	}
	wantErr(t, run(t, Ls(), env, map[string]any{"path": "b.txt"}), CodeNotDirectory)
	wantErr(t, run(t, Ls(), env, map[string]any{"path": "zz"}), CodeNotFound)
	for i := 0; i < MaxLsEntries+5; i++ {
		writeFile(t, env.Dir, fmt.Sprintf("big/%04d", i), "")
	}
	got = wantOK(t, run(t, Ls(), env, map[string]any{"path": "big"}))
	if !strings.HasSuffix(got, "[showing 1000 of 1005 entries; use glob to narrow down]\n") {
		t.Fatalf("cap tail %q", got[len(got)-80:])
	}
}

func TestParallelReadsShareState(t *testing.T) {
	env := testEnv(t)
	for i := 0; i < 8; i++ {
		writeFile(t, env.Dir, fmt.Sprintf("f%d.txt", i), "x\n")
	}
	done := make(chan tool.Result, 8)
	for i := 0; i < 8; i++ {
		go func() {
			raw, _ := json.Marshal(map[string]any{"file_path": fmt.Sprintf("f%d.txt", i)})
			r, _ := Read().Run(context.Background(), tool.Call{Arguments: raw, Env: env})
			done <- r
		}()
	}
	for i := 0; i < 8; i++ {
		wantOK(t, <-done)
	}
	for i := 0; i < 8; i++ {
		wantOK(t, run(t, Edit(), env, map[string]any{"file_path": fmt.Sprintf("f%d.txt", i), "old_string": "x", "new_string": "y"}))
	}
}

// buffers is an editor holding unsaved contents for some files.
type buffers struct {
	mu    sync.Mutex
	files map[string]string
	reads int
}

func (b *buffers) ReadFile(_ context.Context, p string) ([]byte, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.reads++
	if s, ok := b.files[p]; ok {
		return []byte(s), nil
	}
	return os.ReadFile(p)
}

func (b *buffers) WriteFile(_ context.Context, p string, data []byte) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.files[p] = string(data)
	return nil
}

// TestBuffers: with Buffers, read shows the editor's unsaved content, edit
// and write change the editor's copy (not the disk), and a buffer that
// changed since it was read refuses an edit.
func TestBuffers(t *testing.T) {
	env := testEnv(t)
	p := writeFile(t, env.Dir, "a.txt", "on disk\n")
	buf := &buffers{files: map[string]string{p: "unsaved\n"}}
	tools := map[string]tool.Tool{}
	for _, tl := range All(Options{Buffers: buf}) {
		tools[tl.Spec().Name] = tl
	}
	if got := wantOK(t, run(t, tools["read"], env, map[string]any{"file_path": "a.txt"})); !strings.Contains(got, "unsaved") {
		t.Fatalf("read = %q, want the buffer's content", got)
	}
	wantOK(t, run(t, tools["edit"], env, map[string]any{"file_path": "a.txt", "old_string": "unsaved", "new_string": "edited"}))
	if buf.files[p] != "edited\n" {
		t.Fatalf("buffer = %q after edit", buf.files[p])
	}
	if b, _ := os.ReadFile(p); string(b) != "on disk\n" {
		t.Fatalf("disk = %q: edit wrote past the editor", b)
	}
	buf.files[p] = "someone typed\n"
	wantErr(t, run(t, tools["edit"], env, map[string]any{"file_path": "a.txt", "old_string": "someone", "new_string": "x"}), CodeStale)
	wantErr(t, run(t, tools["write"], env, map[string]any{"file_path": "a.txt", "content": "x"}), CodeStale)
	wantOK(t, run(t, tools["read"], env, map[string]any{"file_path": "a.txt"}))
	wantOK(t, run(t, tools["write"], env, map[string]any{"file_path": "a.txt", "content": "replaced\n"}))
	if buf.files[p] != "replaced\n" {
		t.Fatalf("buffer = %q after write", buf.files[p])
	}
}
