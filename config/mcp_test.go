package config_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/reinhq/rein/config"
)

func TestMCPServers(t *testing.T) {
	dir := t.TempDir()
	user := write(t, dir, "user/config.toml", `model = "openai:gpt-4o"

[mcp_servers.github]
command = "npx"
args = ["-y", "@modelcontextprotocol/server-github"]
env = { GITHUB_PERSONAL_ACCESS_TOKEN = "${GITHUB_TOKEN}" }
startup_timeout = "20s"
tool_timeout_sec = 90

[mcp_servers.docs]
url = "https://docs.example.com/mcp"
headers = { "X-Team" = "infra" }
bearer_token_env = "DOCS_TOKEN"
enabled = false
tool_timeout = 2.5
`)
	proj := write(t, dir, "ws/.rein/config.toml", "[mcp_servers.docs]\ncommand = \"./docs-server\"\n\n[mcp_servers.local]\ncommand = \"make\"\nargs = [\"mcp\"]\n")
	c, err := config.Load(user, proj, env(nil))
	if err != nil {
		t.Fatal(err)
	}
	names := func() string {
		var got []string
		for _, s := range c.MCPServers {
			got = append(got, s.Name)
		}
		return strings.Join(got, ",")
	}
	// The workspace's servers are held until it is trusted.
	if names() != "docs,github" || c.MCPServers[0].URL == "" {
		t.Fatalf("before trust: servers %v", c.MCPServers)
	}
	var held []string
	for _, h := range c.Held() {
		if strings.HasPrefix(h.Key, "mcp_servers.") {
			held = append(held, h.Key+"="+h.Value+"@"+h.Origin)
		}
	}
	if strings.Join(held, ";") != `mcp_servers.docs={"command":"./docs-server","type":"stdio"}@`+proj+`:1;mcp_servers.local={"args":["mcp"],"command":"make","type":"stdio"}@`+proj+":4" {
		t.Errorf("held %v", held)
	}
	if hs := c.HeldMCPServers(); len(hs) != 2 || hs[1].Name != "local" || hs[1].Target() != "make mcp" {
		t.Errorf("HeldMCPServers %+v", hs)
	}
	c.ApplyHeld()
	if names() != "docs,github,local" {
		t.Fatalf("after trust: servers %v", names())
	}
	docs, gh, local := c.MCPServers[0], c.MCPServers[1], c.MCPServers[2]
	if docs.Command != "./docs-server" || docs.URL != "" || !docs.Project || docs.Origin != proj+":1" {
		t.Errorf("the project's docs does not replace the user's: %+v", docs)
	}
	if gh.Project || gh.StartupTimeout != 20*time.Second || gh.ToolTimeout != 90*time.Second || gh.Env["GITHUB_PERSONAL_ACCESS_TOKEN"] != "${GITHUB_TOKEN}" || gh.Origin != user+":3" {
		t.Errorf("github %+v", gh)
	}
	if !local.Project || local.Target() != "make mcp" {
		t.Errorf("local %+v", local)
	}
	c2, err := config.Load(user, "", env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if d := c2.MCPServers[0]; !d.Disabled() || d.ToolTimeout != 2500*time.Millisecond || d.Headers["X-Team"] != "infra" || d.BearerTokenEnv != "DOCS_TOKEN" {
		t.Errorf("user docs %+v", d)
	}
	var lines []string
	for _, s := range c2.Settings() {
		if strings.HasPrefix(s.Key, "mcp_servers.") {
			lines = append(lines, s.Key+"="+s.Value)
		}
	}
	if strings.Join(lines, ";") != "mcp_servers.docs=https://docs.example.com/mcp (disabled);mcp_servers.github=npx -y @modelcontextprotocol/server-github" {
		t.Errorf("settings %v", lines)
	}
	for text, want := range map[string]string{
		"[mcp_servers.x]\ncommand = \"a\"\nstartup_timeout = \"soon\"\n":             "want a duration",
		"[mcp_servers.x]\ncommand = \"a\"\ntool_timeout = 0\n":                       "more than zero",
		"[mcp_servers.x]\ncommand = \"a\"\ntool_timeout = 5\ntool_timeout_sec = 5\n": "set it once",
		"[mcp_servers.x]\ncommand = \"a\"\nenv_vars = [\"X\"]\n":                     "unknown key",
		"[mcp_servers.x]\ncommand = [\"a\"]\n":                                       "invalid value",
	} {
		p := write(t, dir, "bad.toml", text)
		if _, err := config.Load(p, "", env(nil)); err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), p) {
			t.Errorf("%q: %v, want %q", text, err, want)
		}
	}
}

func TestAddAndRemoveMCPServer(t *testing.T) {
	dir := t.TempDir()
	orig := "# my settings\nmodel = \"openai:gpt-4o\"   # keep this comment\n\n[permissions]\nallow = [\"Bash(git status:*)\"]\n"
	p := write(t, dir, "config.toml", orig)
	no := false
	err := config.AddMCPServer(p, config.MCPServer{Name: "github", Command: "npx", Args: []string{"-y", "@modelcontextprotocol/server-github"},
		Env: map[string]string{"GITHUB_PERSONAL_ACCESS_TOKEN": "${GITHUB_TOKEN}", "weird key": "a \"quoted\" \\ value\n"}, StartupTimeout: 20 * time.Second, ToolTimeout: 1500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := config.AddMCPServer(p, config.MCPServer{Name: "docs", URL: "https://docs.example.com/mcp", Headers: map[string]string{"X-Team": "infra"}, Enabled: &no}); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(p)
	if !strings.HasPrefix(string(b), orig) {
		t.Fatalf("the rest of the file changed:\n%s", b)
	}
	c, err := config.Load(p, "", env(nil))
	if err != nil {
		t.Fatalf("%v\n%s", err, b)
	}
	if len(c.MCPServers) != 2 || c.MCPServers[1].Env["weird key"] != "a \"quoted\" \\ value\n" || c.MCPServers[1].ToolTimeout != 1500*time.Millisecond || !c.MCPServers[0].Disabled() {
		t.Fatalf("loaded %+v\n%s", c.MCPServers, b)
	}
	if err := config.AddMCPServer(p, config.MCPServer{Name: "github", Command: "x"}); !errors.Is(err, config.ErrExists) {
		t.Errorf("duplicate add: %v", err)
	}
	if err := config.RemoveMCPServer(p, "github"); err != nil {
		t.Fatal(err)
	}
	if err := config.RemoveMCPServer(p, "docs"); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(p); string(b) != orig {
		t.Errorf("add then remove did not restore the file:\n%q\nwant\n%q", b, orig)
	}
	if err := config.RemoveMCPServer(p, "github"); !errors.Is(err, config.ErrNoServer) {
		t.Errorf("remove missing: %v", err)
	}
	// Sub-tables go with their server; other tables stay.
	p2 := write(t, dir, "c2.toml", "[mcp_servers.a]\ncommand = \"a\"\n[mcp_servers.a.env]\nX = \"1\"\n[mcp_servers.b]\ncommand = \"b\"\n")
	if err := config.RemoveMCPServer(p2, "a"); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(p2); string(b) != "[mcp_servers.b]\ncommand = \"b\"\n" {
		t.Errorf("after removing a: %q", b)
	}
	// Forms rein does not rewrite are refused, naming the line.
	p3 := write(t, dir, "c3.toml", "[mcp_servers]\nx = { command = \"a\" }\n")
	if err := config.RemoveMCPServer(p3, "x"); !errors.Is(err, config.ErrNotEditable) || !strings.Contains(err.Error(), "line 2") {
		t.Errorf("inline table: %v", err)
	}
	if err := config.AddMCPServer(p3, config.MCPServer{Name: "x", Command: "b"}); !errors.Is(err, config.ErrNotEditable) {
		t.Errorf("add over an inline table: %v", err)
	}
	// A new file is created private.
	p4 := filepath.Join(dir, "new", "config.toml")
	if err := config.AddMCPServer(p4, config.MCPServer{Name: "n", Command: "srv"}); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(p4); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("new file: %v %v", fi.Mode(), err)
	}
	// An edit whose result would not load is not written.
	p5 := write(t, dir, "c5.toml", "modle = \"x\"\n")
	if err := config.AddMCPServer(p5, config.MCPServer{Name: "n", Command: "srv"}); err == nil || !strings.Contains(err.Error(), "would not load") {
		t.Errorf("add to a broken file: %v", err)
	}
	if b, _ := os.ReadFile(p5); string(b) != "modle = \"x\"\n" {
		t.Errorf("a refused edit changed the file: %q", b)
	}
}

// A workspace server's trust value is the whole server: its environment,
// working directory, headers and bearer token variable as much as its
// command, so changing any of them asks again. Timeouts do not count.
func TestMCPCanonical(t *testing.T) {
	base := config.MCPServer{Command: "npx", Args: []string{"-y", "srv"}, Env: map[string]string{"MARK": "a"}}
	seen := map[string]string{}
	for name, s := range map[string]config.MCPServer{
		"base":       base,
		"env":        {Command: "npx", Args: []string{"-y", "srv"}, Env: map[string]string{"MARK": "b", "LD_PRELOAD": "/tmp/evil.so"}},
		"cwd":        {Command: "npx", Args: []string{"-y", "srv"}, Env: map[string]string{"MARK": "a"}, Cwd: "/tmp/x"},
		"args":       {Command: "npx", Args: []string{"-y", "srv2"}, Env: map[string]string{"MARK": "a"}},
		"url":        {URL: "https://a.example/mcp"},
		"sse":        {Type: "sse", URL: "https://a.example/mcp"},
		"headers":    {URL: "https://a.example/mcp", Headers: map[string]string{"X": "${GITHUB_TOKEN}"}},
		"bearer":     {URL: "https://a.example/mcp", BearerTokenEnv: "GITHUB_TOKEN"},
		"split-args": {Command: "npx", Args: []string{"-y srv"}, Env: map[string]string{"MARK": "a"}},
	} {
		v := s.Canonical()
		if other, dup := seen[v]; dup {
			t.Errorf("%s and %s have the same trust value %s", name, other, v)
		}
		seen[v] = name
	}
	same := base
	same.StartupTimeout, same.Origin, same.Name = time.Minute, "elsewhere", "other"
	same.Env = map[string]string{"MARK": "a"}
	if same.Canonical() != base.Canonical() {
		t.Errorf("timeouts or names change the value: %s vs %s", same.Canonical(), base.Canonical())
	}
	if want := `{"args":["-y","srv"],"command":"npx","env":{"MARK":"a"},"type":"stdio"}`; base.Canonical() != want {
		t.Errorf("canonical %s, want %s", base.Canonical(), want)
	}
}
