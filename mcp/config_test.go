package mcp

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestValidNameAndSanitize(t *testing.T) {
	for name, ok := range map[string]bool{"github": true, "my-server_2": true, "": false, "a__b": false, "_x": false, "a.b": false, "a b": false, strings.Repeat("a", 49): false} {
		if ValidName(name) != ok {
			t.Errorf("ValidName(%q) = %v", name, !ok)
		}
	}
	for in, want := range map[string]string{"my.server": "my_server", "GitHub Copilot": "GitHub_Copilot", "a..__b": "a_b", "__x": "x", "...": ""} {
		if got := SanitizeName(in); got != want {
			t.Errorf("SanitizeName(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestExpand(t *testing.T) {
	env := map[string]string{"HOME": "/home/ana", "TOKEN": "t0k", "EMPTY": ""}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	c := ServerConfig{Name: "x", Command: "${HOME}/bin/srv", Args: []string{"--token=${TOKEN}", "$$literal", "${MISSING:-dflt}", "${EMPTY:-e}", "$PLAIN"},
		Env: map[string]string{"A": "${TOKEN}"}, Headers: map[string]string{"X": "Bearer ${TOKEN}"}}
	got, err := c.Expand(lookup)
	if err != nil {
		t.Fatal(err)
	}
	if got.Command != "/home/ana/bin/srv" || !slices.Equal(got.Args, []string{"--token=t0k", "$literal", "dflt", "e", "$PLAIN"}) || got.Env["A"] != "t0k" || got.Headers["X"] != "Bearer t0k" {
		t.Errorf("expanded %+v", got)
	}
	if c.Args[0] != "--token=${TOKEN}" || c.Env["A"] != "${TOKEN}" {
		t.Error("Expand changed its receiver")
	}
	if _, err := (ServerConfig{Name: "x", URL: "https://h/${NOPE}"}).Expand(lookup); !errors.Is(err, ErrUnset) || !strings.Contains(err.Error(), "${NOPE}") {
		t.Errorf("unset: %v", err)
	}
	if _, err := (ServerConfig{Name: "x", Command: "${OPEN"}).Expand(lookup); err == nil {
		t.Error("unclosed ${ accepted")
	}
}

func TestValidate(t *testing.T) {
	for _, c := range []struct {
		cfg  ServerConfig
		want string
	}{
		{ServerConfig{Name: "ok", Command: "x"}, ""},
		{ServerConfig{Name: "ok", URL: "https://example.com/mcp", Headers: map[string]string{"A": "b"}}, ""},
		{ServerConfig{Name: "ok", Type: SSE, URL: "http://127.0.0.1:3001/sse"}, ""},
		{ServerConfig{Name: "no"}, "needs a command"},
		{ServerConfig{Name: "no", Type: HTTP}, "needs a url"},
		{ServerConfig{Name: "no", URL: "ftp://x"}, "want an http"},
		{ServerConfig{Name: "no", Command: "x", BearerTokenEnv: "T"}, "for http and sse servers"},
		{ServerConfig{Name: "no", Type: "grpc", Command: "x"}, `type "grpc"`},
		{ServerConfig{Name: "no", Command: "x", ToolTimeout: -1}, "negative"},
	} {
		err := c.cfg.Validate()
		if c.want == "" && err != nil || c.want != "" && (err == nil || !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), c.want)) {
			t.Errorf("%+v: %v, want %q", c.cfg, err, c.want)
		}
	}
}

func TestLoadProjectFile(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, ".mcp.json")
	if s, w, err := LoadProjectFile(p); s != nil || w != nil || err != nil {
		t.Fatalf("missing file: %v %v %v", s, w, err)
	}
	os.WriteFile(p, []byte(`{"mcpServers":{
		"github":{"command":"npx","args":["-y","@modelcontextprotocol/server-github"],"env":{"GITHUB_PERSONAL_ACCESS_TOKEN":"${GITHUB_TOKEN}"}},
		"docs.site":{"type":"http","url":"https://docs.example.com/mcp","headers":{"X-Key":"k"},"oauth":{}},
		"legacy":{"type":"sse","url":"http://127.0.0.1:9/sse","timeout":5,"a\u001b.b":1},
		"streamy":{"type":"streamable-http","url":"http://127.0.0.1:9/mcp"}}}`), 0o644)
	servers, warnings, err := LoadProjectFile(p)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range servers {
		names = append(names, s.Name+":"+string(s.Transport()))
		if s.Origin != p {
			t.Errorf("origin %q", s.Origin)
		}
		if err := s.Validate(); err != nil {
			t.Error(err)
		}
	}
	if !slices.Equal(names, []string{"docs_site:http", "github:stdio", "legacy:sse", "streamy:http"}) {
		t.Errorf("servers %v", names)
	}
	if w := strings.Join(warnings, "\n"); !strings.Contains(w, `"docs.site" is called "docs_site"`) || !strings.Contains(w, `mcpServers["docs.site"].oauth is not used`) ||
		!strings.Contains(w, "mcpServers.legacy.timeout is not used") || !strings.Contains(w, `mcpServers.legacy["a\x1b.b"] is not used`) {
		t.Errorf("warnings %v", warnings)
	}
	os.WriteFile(p, []byte(`{"mcpServers":{"x":{"command":5}}}`), 0o644)
	if _, _, err := LoadProjectFile(p); err == nil || !strings.Contains(err.Error(), p+": mcpServers.x.command: want a string, not a number") {
		t.Errorf("bad file: %v", err)
	}
	os.WriteFile(p, []byte(`{"mcpServers":{"x.y":{"command":"c","env":{"A":5}}}}`), 0o644)
	if _, _, err := LoadProjectFile(p); err == nil || !strings.Contains(err.Error(), p+`: mcpServers["x.y"].env: want an object of strings, not a number`) {
		t.Errorf("bad file: %v", err)
	}
}
