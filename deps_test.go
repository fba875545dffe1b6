package rein_test

import (
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/reinhq/rein"

// allowed maps a package (or a subtree, written "pkg/...") to the rein
// packages it may import, as the floors of AGENTS.md's layout lay them out:
// llm, session, sandbox, redact, display, trust -> tool, store, transcript -> agent,
// guard, mcp -> hook, acp, tui -> cmd/rein. No arrow runs back up. The most
// specific entry wins.
var allowed = map[string][]string{
	"llm":                   {},
	"redact":                {},
	"trust":                 {"display"},
	"display":               {},
	"llm/scripted":          {"llm"},
	"llm/scripted/...":      {"llm", "llm/scripted"},
	"llm/wire":              {"llm"},
	"llm/wire/...":          {"llm", "llm/wire"},
	"llm/sse":               {"llm", "llm/wire", "redact"},
	"llm/retry":             {"llm"},
	"llm/openai":            {"llm", "llm/sse", "llm/wire"},
	"llm/anthropic":         {"llm", "llm/sse", "llm/wire"},
	"llm/mock":              {"llm", "llm/sse"},
	"llm/catalog":           {"llm", "llm/openai", "llm/anthropic", "llm/scripted", "llm/retry"},
	"session":               {"llm", "session/internal/wire"},
	"session/internal/wire": {},
	"sandbox":               {},
	"store":                 {"session", "llm"},
	"store/...":             {"store", "session", "llm"},
	"tool":                  {"llm"},
	"tool/...":              {"tool", "llm", "tool/fs", "tool/shell", "tool/todo", "sandbox"},
	"transcript":            {"session", "llm"},
	"agent":                 {"session", "llm", "llm/wire", "store", "tool", "redact"},
	"guard":                 {"tool", "llm"},
	"mcp":                   {"tool", "llm"},
	"hook":                  {"agent", "session", "llm", "tool", "sandbox"},
	"acp":                   {"agent", "transcript", "session", "llm", "store", "tool"},
	"tui":                   {"agent", "transcript", "session", "llm", "store", "trust", "display"},
	"cmd/...":               {"*"},
	"bench":                 {"*"},
	"bench/...":             {"*"},
	"config":                {"llm", "guard", "tool"},
}

// testOnly lists packages that tests (not the package itself) may import on
// top of the rules, e.g. in-memory stores and the scripted model.
var testOnly = []string{"bench", "llm/wire/wiretest", "store", "store/memstore", "llm/scripted", "llm/scripted/scriptedtest", "store/storetest", "store/jsonl", "llm/mock", "llm/openai", "llm/anthropic", "llm/retry", "tool/builtin", "guard", "hook"}

func rule(pkg string) ([]string, bool) {
	if r, ok := allowed[pkg]; ok {
		return r, true
	}
	for p := pkg; p != "."; {
		i := strings.LastIndex(p, "/")
		if i < 0 {
			break
		}
		p = p[:i]
		if r, ok := allowed[p+"/..."]; ok {
			return r, true
		}
	}
	return nil, false
}

func TestImportRules(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", "{{.ImportPath}}|{{join .Imports \" \"}}|{{join .TestImports \" \"}} {{join .XTestImports \" \"}}", module+"/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		parts := strings.SplitN(line, "|", 3)
		pkg := strings.TrimPrefix(strings.TrimPrefix(parts[0], module), "/")
		if pkg == "" {
			continue
		}
		ok, known := rule(pkg)
		if !known {
			t.Errorf("package %s has no import rule in deps_test.go: add it on its floor", pkg)
			continue
		}
		check := func(imports string, extra []string) {
			for _, imp := range strings.Fields(imports) {
				if !strings.HasPrefix(imp, module+"/") {
					continue
				}
				dep := strings.TrimPrefix(imp, module+"/")
				if i := strings.Index(dep, "/internal/"); i >= 0 && strings.HasPrefix(pkg, dep[:i]) {
					continue // Go's own internal rule already confines it
				}
				if dep == pkg || strings.HasPrefix(dep, pkg+"/") && pkg != "llm" && pkg != "store" && pkg != "tool" {
					continue
				}
				if !contains(ok, dep) && !contains(ok, "*") && !contains(extra, dep) {
					t.Errorf("%s imports %s: not allowed by the floors (AGENTS.md, Layout)", pkg, dep)
				}
			}
		}
		check(parts[1], nil)
		check(parts[2], append(testOnly, ok...))
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
