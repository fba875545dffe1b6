package config_test

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/reinhq/rein/config"
)

// TestWorkspaceRules: [workspaces."ROOT".permissions] apply only in that
// workspace, only from the user's file, and show in Settings with their
// origin.
func TestWorkspaceRules(t *testing.T) {
	dir := t.TempDir()
	user := write(t, dir, "user.toml", `[permissions]
allow = ["Bash(ls:*)"]

[workspaces."/src/app.v2".permissions]
allow = ["bash(go test:*)"]
deny = ["Bash(rm:*)"]

[workspaces."/src/other".permissions]
allow = ["edit(x.go)"]
`)
	c, err := config.Load(user, "", env(nil))
	if err != nil {
		t.Fatal(err)
	}
	p := c.PermissionsFor("/src/app.v2")
	if !slices.Equal(p.Allow, []string{"Bash(ls:*)", "bash(go test:*)"}) || !slices.Equal(p.Deny, []string{"Bash(rm:*)"}) {
		t.Errorf("app.v2: %+v", p)
	}
	if p := c.PermissionsFor("/src/none"); !slices.Equal(p.Allow, []string{"Bash(ls:*)"}) || len(p.Deny) != 0 {
		t.Errorf("none: %+v", p)
	}
	if len(c.Permissions.Allow) != 1 {
		t.Errorf("global allow list grew: %v", c.Permissions.Allow)
	}
	found := false
	for _, s := range c.Settings() {
		if s.Key == `workspaces."/src/app.v2".permissions.allow` && s.Value == "bash(go test:*)" {
			found = s.Origin == user+":5"
			if !found {
				t.Errorf("origin %q", s.Origin)
			}
		}
	}
	if !found {
		t.Errorf("settings lack the workspace rule: %v", c.Settings())
	}

	proj := write(t, dir, "proj.toml", "[workspaces.\"/src/app\".permissions]\nallow = [\"bash(curl:*)\"]\n")
	if _, err := config.Load("", proj, env(nil)); !errors.Is(err, config.ErrInvalid) {
		t.Errorf("a workspace file with [workspaces]: %v", err)
	}
	rel := write(t, dir, "rel.toml", "[workspaces.\"src\".permissions]\nallow = [\"bash(x)\"]\n")
	if _, err := config.Load(rel, "", env(nil)); !errors.Is(err, config.ErrInvalid) {
		t.Errorf("a relative root: %v", err)
	}
}

// TestAddWorkspaceRule: the rule lands in the workspace's table, every
// other byte of the file stays, and the file loads with exactly one rule
// more.
func TestAddWorkspaceRule(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "rein", "config.toml")
	rules := func(root string) []string {
		t.Helper()
		c, err := config.Load(path, "", env(nil))
		if err != nil {
			t.Fatal(err)
		}
		return c.PermissionsFor(root).Allow
	}

	// A missing file is created (0600) with the table.
	if err := config.AddWorkspaceRule(path, "/src/a", "allow", "bash(go test:*)"); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("created file: %v %v", fi, err)
	}
	// Into the existing one-line array; twice the same rule adds it once.
	for range 2 {
		if err := config.AddWorkspaceRule(path, "/src/a", "allow", `bash(echo "hi":*)`); err != nil {
			t.Fatal(err)
		}
	}
	if got := rules("/src/a"); !slices.Equal(got, []string{"bash(go test:*)", `bash(echo "hi":*)`}) {
		t.Fatalf("rules = %q", got)
	}

	// A hand-written file: comments, other tables, a multi-line array
	// with a trailing comma and a comment before its bracket.
	hand := `# my settings
model = "openai:gpt-4o" # the usual

[workspaces."/src/b".permissions]
deny = ["Bash(rm:*)"]
allow = [
  "bash(make:*)", # builds
  # more later
]

[providers.openai]
base_url = "http://localhost:1"
`
	if err := os.WriteFile(path, []byte(hand), 0o640); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, 0o640); err != nil {
		t.Fatal(err)
	}
	if err := config.AddWorkspaceRule(path, "/src/b", "allow", "edit(a.go)"); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(path)
	if !strings.HasPrefix(string(b), hand[:strings.Index(hand, "  # more later")]) || !strings.HasSuffix(string(b), "]\n\n[providers.openai]\nbase_url = \"http://localhost:1\"\n") {
		t.Errorf("the rest of the file changed:\n%s", b)
	}
	if got := rules("/src/b"); !slices.Equal(got, []string{"bash(make:*)", "edit(a.go)"}) {
		t.Errorf("rules = %q", got)
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o640 {
		t.Errorf("mode changed to %v", fi.Mode().Perm())
	}
	// A table without the key gets it; another workspace gets a table.
	if err := config.AddWorkspaceRule(path, "/src/b", "ask", "bash(git push:*)"); err != nil {
		t.Fatal(err)
	}
	if err := config.AddWorkspaceRule(path, "/src/c", "allow", "read(x)"); err != nil {
		t.Fatal(err)
	}
	c, err := config.Load(path, "", env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if p := c.PermissionsFor("/src/b"); !slices.Equal(p.Ask, []string{"bash(git push:*)"}) || len(p.Deny) != 1 {
		t.Errorf("b: %+v", p)
	}
	if got := c.PermissionsFor("/src/c").Allow; !slices.Equal(got, []string{"read(x)"}) {
		t.Errorf("c: %q", got)
	}
	if c.Model != "openai:gpt-4o" {
		t.Errorf("model = %q", c.Model)
	}

	// A form rein does not rewrite is refused, and the file is untouched.
	dotted := "[workspaces.\"/src/d\"]\npermissions.allow = [\"x\"]\n"
	if err := os.WriteFile(path, []byte(dotted), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := config.AddWorkspaceRule(path, "/src/d", "allow", "y"); !errors.Is(err, config.ErrNotEditable) {
		t.Errorf("dotted keys: %v", err)
	}
	if b, _ := os.ReadFile(path); string(b) != dotted {
		t.Errorf("file changed: %s", b)
	}
	if err := config.AddWorkspaceRule(path, "rel", "allow", "y"); !errors.Is(err, config.ErrInvalid) {
		t.Errorf("relative root: %v", err)
	}
}
