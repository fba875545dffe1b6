package fs

import (
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"
	"testing"

	"github.com/reinhq/rein/tool"
)

// grepFixture builds a tree exercising .gitignore (nested, negation,
// directory-only, anchored), hidden files, .git and a binary file.
func grepFixture(t *testing.T) tool.Env {
	env := testEnv(t)
	files := map[string]string{
		".gitignore":     "*.log\nbuild/\n/top.txt\n!keep.log\n",
		"a.go":           "package a\n\nfunc Hello() {}\n// hello again\nvar x = 1\n",
		"b.txt":          "nothing here\nHELLO shouting\n",
		"top.txt":        "hello top (ignored: anchored)\n",
		"debug.log":      "hello log (ignored)\n",
		"keep.log":       "hello kept (negated)\n",
		"build/out.go":   "hello build (ignored dir)\n",
		"sub/.gitignore": "secret.go\n",
		"sub/top.txt":    "hello sub top (not anchored here)\n",
		"sub/secret.go":  "hello secret (ignored nested)\n",
		"sub/c.go":       "one\ntwo\nhello three\nfour\nfive\nsix\nseven\nhello eight\nnine\n",
		".hidden/h.go":   "hello hidden\n",
		".git/config":    "hello git\n",
		"bin.dat":        "hello\x00binary\n",
		"sub/build":      "hello build file (dir-only rule)\n",
		"deep/x/y/z.md":  "Hello deep\n",
	}
	for name, content := range files {
		writeFile(t, env.Dir, name, content)
	}
	return env
}

var grepCases = []struct {
	name string
	args map[string]any
	want string
}{
	{"content", map[string]any{"pattern": "hello"},
		".hidden/h.go:1:hello hidden\n" +
			"a.go:4:// hello again\n" +
			"keep.log:1:hello kept (negated)\n" +
			"sub/build:1:hello build file (dir-only rule)\n" +
			"sub/c.go:3:hello three\n" +
			"sub/c.go:8:hello eight\n" +
			"sub/top.txt:1:hello sub top (not anchored here)\n"},
	{"ignore case", map[string]any{"pattern": "hello", "case_insensitive": true, "glob": "*.{go,txt,md}"},
		".hidden/h.go:1:hello hidden\n" +
			"a.go:3:func Hello() {}\n" +
			"a.go:4:// hello again\n" +
			"b.txt:2:HELLO shouting\n" +
			"deep/x/y/z.md:1:Hello deep\n" +
			"sub/c.go:3:hello three\n" +
			"sub/c.go:8:hello eight\n" +
			"sub/top.txt:1:hello sub top (not anchored here)\n"},
	{"files", map[string]any{"pattern": "hello", "output_mode": "files", "path": "sub"},
		"sub/build\nsub/c.go\nsub/top.txt\n"},
	{"count", map[string]any{"pattern": "hello", "output_mode": "count", "glob": "*.go"},
		".hidden/h.go:1\na.go:1\nsub/c.go:2\n"},
	{"context", map[string]any{"pattern": "hello|^nine", "context": 1, "path": "sub/c.go"},
		"sub/c.go-2-two\nsub/c.go:3:hello three\nsub/c.go-4-four\n--\nsub/c.go-7-seven\nsub/c.go:8:hello eight\nsub/c.go:9:nine\n"},
	{"context across files", map[string]any{"pattern": "^package|^var", "context": 1, "glob": "a.go"},
		"a.go:1:package a\na.go-2-\n--\na.go-4-// hello again\na.go:5:var x = 1\n"},
	{"glob with slash", map[string]any{"pattern": "hello", "glob": "sub/*.go"},
		"sub/c.go:3:hello three\nsub/c.go:8:hello eight\n"},
	{"no match", map[string]any{"pattern": "zebra"}, "no matches\n"},
}

func TestGrepGo(t *testing.T) {
	env := grepFixture(t)
	g := Grep(Options{Rg: "-"})
	for _, c := range grepCases {
		t.Run(c.name, func(t *testing.T) {
			r := run(t, g, env, c.args)
			if got := wantOK(t, r); got != c.want {
				t.Fatalf("got\n%s\nwant\n%s", got, c.want)
			}
			var meta grepMeta
			if err := json.Unmarshal(r.Meta, &meta); err != nil || meta.Engine != "go" {
				t.Fatalf("meta %s", r.Meta)
			}
		})
	}
}

func TestGrepRgSameOutput(t *testing.T) {
	rg, err := exec.LookPath("rg")
	if err != nil {
		t.Skip("rg not on PATH")
	}
	env := grepFixture(t)
	g := Grep(Options{Rg: rg})
	for _, c := range grepCases {
		t.Run(c.name, func(t *testing.T) {
			r := run(t, g, env, c.args)
			if got := wantOK(t, r); got != c.want {
				t.Fatalf("got\n%s\nwant\n%s", got, c.want)
			}
			var meta grepMeta
			if err := json.Unmarshal(r.Meta, &meta); err != nil || meta.Engine != "rg" {
				t.Fatalf("meta %s", r.Meta)
			}
		})
	}
}

func TestGrepErrorsAndCap(t *testing.T) {
	env := testEnv(t)
	var b strings.Builder
	for i := 0; i < 3*MaxGrepLines; i++ {
		fmt.Fprintf(&b, "match %d\n", i)
	}
	writeFile(t, env.Dir, "big.txt", b.String())
	// Not a git repository: .gitignore applies all the same.
	writeFile(t, env.Dir, ".gitignore", "ignored.txt\n")
	writeFile(t, env.Dir, "ignored.txt", "match 7\n")
	engines := []Options{{Rg: "-"}}
	if rg, err := exec.LookPath("rg"); err == nil {
		engines = append(engines, Options{Rg: rg})
	}
	for _, o := range engines {
		g := Grep(o)
		wantErr(t, run(t, g, env, map[string]any{"pattern": "a("}), CodeBadPattern)
		wantErr(t, run(t, g, env, map[string]any{"pattern": "a", "path": "missing"}), CodeNotFound)
		r := run(t, g, env, map[string]any{"pattern": "match"})
		got := wantOK(t, r)
		if n := strings.Count(got, "\n"); n != MaxGrepLines+1 || !strings.HasSuffix(got, "[output cut at 500 lines / 32 KiB; narrow the pattern, path or glob]\n") {
			t.Fatalf("%+v: %d lines, tail %q", o, n, got[len(got)-100:])
		}
		var meta grepMeta
		if _ = json.Unmarshal(r.Meta, &meta); !meta.Truncated {
			t.Fatalf("meta %s", r.Meta)
		}
	}
	// A nonexistent ripgrep binary falls back to the Go engine.
	r := run(t, Grep(Options{Rg: "/nonexistent/rg"}), env, map[string]any{"pattern": "match 7$"})
	if got := wantOK(t, r); got != "big.txt:8:match 7\n" || !strings.Contains(string(r.Meta), `"engine":"go"`) {
		t.Fatalf("fallback: %q %s", got, r.Meta)
	}
}
