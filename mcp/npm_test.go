package mcp

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/reinhq/rein/tool"
)

// The reference servers from npm, pinned in testdata/npm (package.json
// and package-lock.json) and installed there by .ci/run with npm ci.

// npmBin returns the path of an installed server's binary. Without node or
// the installed packages the test is skipped with the reason, except in
// CI, where it fails: there the servers must be installed.
func npmBin(t *testing.T, name string) string {
	t.Helper()
	bin, err := npmPath(name)
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("%v (CI must install the reference MCP servers: npm ci in mcp/testdata/npm)", err)
		}
		t.Skip(err)
	}
	return bin
}

// npmPath finds an installed server's binary, or says why it cannot.
func npmPath(name string) (string, error) {
	if _, err := exec.LookPath("node"); err != nil {
		return "", fmt.Errorf("node is not installed; install it and run 'npm ci' in mcp/testdata/npm to test against the reference MCP servers")
	}
	bin, err := filepath.Abs(filepath.Join("testdata", "npm", "node_modules", ".bin", name))
	if err != nil {
		return "", err
	}
	if _, err := os.Stat(bin); err != nil {
		return "", fmt.Errorf("%s is not installed; run 'npm ci' in mcp/testdata/npm to test against the reference MCP servers", name)
	}
	return bin, nil
}

// npmEnviron is what the npm servers get: enough to find node.
func npmEnviron() []string { return []string{"PATH=" + os.Getenv("PATH"), "REIN_VISIBLE=yes"} }

func TestEverythingServerStdio(t *testing.T) {
	bin := npmBin(t, "mcp-server-everything")
	cfg := ServerConfig{Name: "everything", Command: bin, Args: []string{"stdio"}, ToolTimeout: 1500 * time.Millisecond}
	f := start(t, Options{Servers: []ServerConfig{cfg}, Images: true, Environ: npmEnviron()})
	f.sync()
	st := f.status("everything")
	if st.State != Ready || len(st.Tools) < 10 || !strings.Contains(st.Server, "everything") {
		t.Fatalf("status %+v", st)
	}
	if !strings.Contains(f.m.Instructions(), "# MCP server instructions (everything)") {
		t.Errorf("no instructions: %.200q", f.m.Instructions())
	}
	if res, _ := f.call("mcp__everything__echo", `{"message":"hello"}`); res.IsError || text(res) != "Echo: hello" {
		t.Errorf("echo: %+v", res)
	}
	if res, _ := f.call("mcp__everything__get-sum", `{"a":2,"b":40}`); !strings.Contains(text(res), "42") {
		t.Errorf("get-sum: %+v", res)
	}
	res, _ := f.call("mcp__everything__get-tiny-image", `{}`)
	var img bool
	for _, p := range res.Content {
		img = img || p.Type == "image" && p.MediaType == "image/png" && len(p.Data) > 100
	}
	if !img {
		t.Errorf("get-tiny-image: no image part in %d parts", len(res.Content))
	}
	res, _ = f.call("mcp__everything__get-resource-reference", `{"resourceType":"Text","resourceId":2}`)
	if !strings.Contains(text(res), "[resource <demo://resource/dynamic/text/2> (text/plain)]") {
		t.Errorf("get-resource-reference: %s", text(res))
	}
	// 3 s of work with progress every 0.75 s: more than the 1.5 s
	// timeout, which each progress notification restarts.
	res, meta := f.call("mcp__everything__trigger-long-running-operation", `{"duration":3,"steps":4}`)
	if res.IsError || meta.Progress == "" && !strings.Contains(text(res), "completed") {
		t.Errorf("long-running operation: %+v %+v", res, meta)
	}
	// The server's environment is Options.Environ and nothing else.
	res, _ = f.call("mcp__everything__get-env", `{}`)
	if out := text(res); !strings.Contains(out, "REIN_VISIBLE") || strings.Contains(out, `"HOME"`) {
		t.Errorf("get-env: %.300s", out)
	}
	echo, _ := f.reg.Lookup("mcp__everything__echo")
	toggle, ok := f.reg.Lookup("mcp__everything__toggle-simulated-logging")
	if echo.Mode() != tool.Parallel || !ok || toggle.Mode() != tool.Exclusive {
		t.Errorf("modes from readOnlyHint: echo %s, toggle %v", echo.Mode(), toggle)
	}
}

// freePort returns a TCP port on the loopback interface that was free a
// moment ago.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// serveHTTP runs the everything server with an HTTP transport on a free
// loopback port until the test ends, and returns the port.
func serveHTTP(t *testing.T, bin, transport string) int {
	t.Helper()
	port := freePort(t)
	cmd := exec.Command(bin, transport)
	cmd.Env = append(npmEnviron(), fmt.Sprintf("PORT=%d", port))
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Wait()
	})
	deadline := time.Now().Add(20 * time.Second)
	for {
		c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err == nil {
			c.Close()
			return port
		}
		if time.Now().After(deadline) {
			t.Fatalf("the %s server did not listen on %d", transport, port)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestEverythingServerHTTPAndSSE(t *testing.T) {
	bin := npmBin(t, "mcp-server-everything")
	httpPort := serveHTTP(t, bin, "streamableHttp")
	ssePort := serveHTTP(t, bin, "sse")
	f := start(t, Options{Servers: []ServerConfig{
		{Name: "streamable", URL: fmt.Sprintf("http://127.0.0.1:%d/mcp", httpPort), Headers: map[string]string{"X-Test": "1"}},
		{Name: "legacy", Type: SSE, URL: fmt.Sprintf("http://127.0.0.1:%d/sse", ssePort)},
		{Name: "nobody", URL: fmt.Sprintf("http://127.0.0.1:%d/mcp", freePort(t)), StartupTimeout: time.Second},
		{Name: "token", URL: fmt.Sprintf("http://127.0.0.1:%d/mcp", httpPort), BearerTokenEnv: "REIN_TEST_UNSET_TOKEN"},
	}, Lookup: func(string) (string, bool) { return "", false }})
	f.sync()
	for _, name := range []string{"streamable", "legacy"} {
		if st := f.status(name); st.State != Ready {
			t.Fatalf("%s: %+v", name, st)
		}
		if res, _ := f.call("mcp__"+name+"__echo", `{"message":"over `+name+`"}`); text(res) != "Echo: over "+name {
			t.Errorf("%s echo: %+v", name, res)
		}
	}
	if st := f.status("nobody"); st.State != Failed || !strings.Contains(st.Error, "connection refused") {
		t.Errorf("nobody: %+v", st)
	}
	if st := f.status("token"); st.State != Failed || !strings.Contains(st.Error, "bearer_token_env REIN_TEST_UNSET_TOKEN is not set") {
		t.Errorf("token: %+v", st)
	}
}

func TestFilesystemServer(t *testing.T) {
	bin := npmBin(t, "mcp-server-filesystem")
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("remember the milk\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	f := start(t, Options{Servers: []ServerConfig{{Name: "fs", Command: bin, Args: []string{dir}}}, Environ: npmEnviron()})
	f.sync()
	if st := f.status("fs"); st.State != Ready {
		t.Fatalf("status %+v", st)
	}
	res, _ := f.call("mcp__fs__read_text_file", fmt.Sprintf(`{"path":%q}`, filepath.Join(dir, "notes.txt")))
	if res.IsError || !strings.Contains(text(res), "remember the milk") {
		t.Errorf("read_text_file: %+v", res)
	}
	res, _ = f.call("mcp__fs__write_file", fmt.Sprintf(`{"path":%q,"content":"written by rein"}`, filepath.Join(dir, "out.txt")))
	if b, err := os.ReadFile(filepath.Join(dir, "out.txt")); res.IsError || string(b) != "written by rein" {
		t.Errorf("write_file: %+v, file %q %v", res, b, err)
	}
	// Outside its allowed directory the server refuses: a tool error the
	// model reads.
	res, _ = f.call("mcp__fs__read_text_file", `{"path":"/etc/hostname"}`)
	if !res.IsError || !strings.Contains(strings.ToLower(text(res)), "access denied") {
		t.Errorf("outside the allowed directory: %+v", res)
	}
	read, _ := f.reg.Lookup("mcp__fs__read_text_file")
	write, _ := f.reg.Lookup("mcp__fs__write_file")
	if read.Mode() != tool.Parallel || write.Mode() != tool.Exclusive {
		t.Errorf("modes: read %s, write %s", read.Mode(), write.Mode())
	}
}
