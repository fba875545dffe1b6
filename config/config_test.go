package config_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/reinhq/rein/config"
)

func write(t *testing.T, dir, name, text string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestPrecedence(t *testing.T) {
	dir := t.TempDir()
	user := write(t, dir, "user.toml", "model = \"openai:gpt-4o\"\npermission_mode = \"read-only\"\ncontext_window = 1000\n\n[providers.openai]\nbase_url = \"http://x\"\n")
	proj := write(t, dir, "proj.toml", "# project\n\nmodel = \"deepseek:deepseek-reasoner\"\n")
	c, err := config.Load([]string{user, proj, filepath.Join(dir, "missing.toml")}, env(map[string]string{"REIN_PERMISSION_MODE": "full-access"}))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Set("context_window", "2000", "flag --context-window"); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, s := range c.Settings() {
		got[s.Key] = s.Value + " @ " + s.Origin
	}
	want := map[string]string{
		"model":                     "deepseek:deepseek-reasoner @ " + proj + ":3",
		"permission_mode":           "full-access @ env REIN_PERMISSION_MODE",
		"context_window":            "2000 @ flag --context-window",
		"instructions_budget":       "32768 @ default",
		"providers.openai.base_url": "http://x @ " + user + ":6",
		"sandbox.network_access":    "false @ default",
	}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("%s = %q, want %q", k, got[k], w)
		}
	}
	if len(got) != len(want) {
		t.Errorf("settings = %v", got)
	}
}

func TestUnknownKeyNamesFileAndLine(t *testing.T) {
	dir := t.TempDir()
	p := write(t, dir, "c.toml", "model = \"a:b\"\n\nmodle = \"x\"\n")
	_, err := config.Load([]string{p}, env(nil))
	if !errors.Is(err, config.ErrUnknownKey) {
		t.Fatalf("err = %v, want ErrUnknownKey", err)
	}
	if !strings.Contains(err.Error(), p+":3") || !strings.Contains(err.Error(), `"modle"`) {
		t.Fatalf("err = %v, want file:3 and the key", err)
	}
}

func TestInvalidValues(t *testing.T) {
	dir := t.TempDir()
	for name, text := range map[string]string{
		"type":  "context_window = \"big\"\n",
		"mode":  "permission_mode = \"yolo\"\n",
		"model": "model = \"nocolon\"\n",
		"syntx": "model = \n",
	} {
		p := write(t, dir, name+".toml", text)
		_, err := config.Load([]string{p}, env(nil))
		if !errors.Is(err, config.ErrInvalid) || !strings.Contains(err.Error(), p) {
			t.Errorf("%s: err = %v, want ErrInvalid naming the file", name, err)
		}
	}
	if _, err := config.Load(nil, env(map[string]string{"REIN_CONTEXT_WINDOW": "-1"})); !errors.Is(err, config.ErrInvalid) || !strings.Contains(err.Error(), "env REIN_CONTEXT_WINDOW") {
		t.Errorf("env: err = %v", err)
	}
}

func TestUserFile(t *testing.T) {
	if got := config.UserFile(env(map[string]string{"XDG_CONFIG_HOME": "/x", "HOME": "/h"})); got != "/x/rein/config.toml" {
		t.Errorf("xdg: %s", got)
	}
	if got := config.UserFile(env(map[string]string{"HOME": "/h"})); got != "/h/.config/rein/config.toml" {
		t.Errorf("home: %s", got)
	}
}

func TestSandboxAndPermissions(t *testing.T) {
	dir := t.TempDir()
	user := write(t, dir, "user.toml", "[sandbox]\nwritable_roots = [\"~/.cache/go-build\"]\n\n[permissions]\nallow = [\"Bash(git status:*)\"]\ndeny = [\"Read(~/.ssh/**)\"]\n")
	proj := write(t, dir, "proj.toml", "[sandbox]\nnetwork_access = true\nwritable_roots = [\"/opt/x\"]\n[permissions]\ndeny = [\"Bash(rm -rf*)\"]\nask = [\"Bash(git push:*)\"]\n")
	c, err := config.Load([]string{user, proj}, env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Add("permissions.deny", "Bash(curl:*)", "flag --deny"); err != nil {
		t.Fatal(err)
	}
	if !c.NetworkAccess || c.Origin("sandbox.network_access") != proj+":2" {
		t.Errorf("network_access %v from %s", c.NetworkAccess, c.Origin("sandbox.network_access"))
	}
	if got := strings.Join(c.WritableRoots, " "); got != "~/.cache/go-build /opt/x" {
		t.Errorf("writable_roots %q", got)
	}
	if got := strings.Join(c.Permissions.Deny, " "); got != "Read(~/.ssh/**) Bash(rm -rf*) Bash(curl:*)" {
		t.Errorf("deny %q", got)
	}
	if len(c.Permissions.Allow) != 1 || len(c.Permissions.Ask) != 1 {
		t.Errorf("permissions %+v", c.Permissions)
	}
	deny := c.ListOrigin("permissions.deny")
	if len(deny) != 3 || deny[0].Origin != user+":6" || deny[1].Origin != proj+":5" || deny[2].Origin != "flag --deny" {
		t.Errorf("deny origins %+v", deny)
	}
	if _, err := config.Load([]string{write(t, dir, "rel.toml", "[sandbox]\nwritable_roots = [\"rel/dir\"]\n")}, env(nil)); !errors.Is(err, config.ErrInvalid) {
		t.Errorf("relative writable root: %v", err)
	}
	if _, err := config.Load(nil, env(map[string]string{"REIN_NETWORK_ACCESS": "maybe"})); !errors.Is(err, config.ErrInvalid) {
		t.Errorf("bad env bool: %v", err)
	}
}
