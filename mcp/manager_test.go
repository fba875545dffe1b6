package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/reinhq/rein/llm"
	"github.com/reinhq/rein/tool"
)

// syncBuffer is a Log that tests can read while servers write.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

type fixture struct {
	t   *testing.T
	m   *Manager
	reg *tool.Registry
	log *syncBuffer
}

// start starts a manager over servers with a registry, closes it on
// cleanup and checks that Close left no server process behind.
func start(t *testing.T, opts Options) *fixture {
	t.Helper()
	reg, err := tool.NewRegistry()
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{t: t, reg: reg, log: &syncBuffer{}}
	opts.Registry = reg
	if opts.Log == nil {
		opts.Log = f.log
	}
	if opts.Backoff == nil {
		opts.Backoff = func(int) time.Duration { return 10 * time.Millisecond }
	}
	if opts.SpillDir == "" {
		opts.SpillDir = t.TempDir()
	}
	opts.KillGrace = 500 * time.Millisecond
	f.m = Start(opts)
	t.Cleanup(func() {
		if err := f.m.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return f
}

func (f *fixture) sync() {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := f.m.Sync(ctx); err != nil {
		f.t.Fatalf("Sync: %v", err)
	}
}

func (f *fixture) call(name, args string) (tool.Result, Meta) {
	f.t.Helper()
	return f.callCtx(context.Background(), name, args)
}

func (f *fixture) callCtx(ctx context.Context, name, args string) (tool.Result, Meta) {
	f.t.Helper()
	tl, ok := f.reg.Lookup(name)
	if !ok {
		f.t.Fatalf("no tool %s in %v", name, f.reg.Names())
	}
	res, err := tl.Run(ctx, tool.Call{ID: "c1", Arguments: json.RawMessage(args), Env: tool.Env{SessionID: "s1"}})
	if err != nil {
		f.t.Fatalf("%s: Go error %v (failures must be results)", name, err)
	}
	var meta Meta
	if err := json.Unmarshal(res.Meta, &meta); err != nil {
		f.t.Fatalf("%s: meta %s: %v", name, res.Meta, err)
	}
	return res, meta
}

// waitFor polls cond (after a Sync) until it holds.
func (f *fixture) waitFor(what string, cond func() bool) {
	f.t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		f.sync() // conditions on the registry need it synced
		if cond() {
			// And again once the condition holds, so the registry reflects
			// the state the condition saw, not the one before it.
			f.sync()
			return
		}
		if time.Now().After(deadline) {
			f.t.Fatalf("timed out waiting for %s; status %+v", what, f.m.Status())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (f *fixture) status(name string) Status {
	for _, s := range f.m.Status() {
		if s.Name == name {
			return s
		}
	}
	f.t.Fatalf("no server %s", name)
	return Status{}
}

func text(r tool.Result) string { return llm.PlainText(r.Content) }

func TestToolsCallsAndInstructions(t *testing.T) {
	f := start(t, Options{Servers: []ServerConfig{testServerConfig(t, "t")}})
	f.sync()
	want := []string{"mcp__t__echo", "mcp__t__add", "mcp__t__big", "mcp__t__image", "mcp__t__resource", "mcp__t__fail", "mcp__t__crash", "mcp__t__hang", "mcp__t__progress", "mcp__t__addtool"}
	slices.Sort(want)
	got := f.reg.Names()
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Fatalf("tools %v, want %v", got, want)
	}
	res, meta := f.call("mcp__t__echo", `{"message":"hi"}`)
	if res.IsError || text(res) != "echo: hi" || meta.Server != "t" || meta.Tool != "echo" {
		t.Fatalf("echo: %+v %+v", res, meta)
	}
	echo, _ := f.reg.Lookup("mcp__t__echo")
	big, _ := f.reg.Lookup("mcp__t__big")
	if echo.Mode() != tool.Parallel || big.Mode() != tool.Exclusive {
		t.Errorf("modes: echo %s (read-only), big %s", echo.Mode(), big.Mode())
	}
	add, _ := f.reg.Lookup("mcp__t__add")
	if got := string(add.Spec().Parameters); got != `{"properties":{"a":{"type":"number"},"b":{"type":"number"},"c":{"type":"number"}},"required":["a"],"type":"object"}` {
		t.Errorf("add schema %s", got)
	}
	if res, _ := f.call("mcp__t__add", `{"a":2,"b":3}`); text(res) != "5" {
		t.Errorf("add: %+v", res)
	}
	if got := f.m.Instructions(); !strings.Contains(got, "# MCP server instructions (t)") || !strings.Contains(got, "Call echo before anything else.") {
		t.Errorf("instructions %q", got)
	}
	st := f.status("t")
	if st.State != Ready || st.Server != "rein-test-server 1.0" || len(st.Tools) != 10 || st.Instructions == 0 {
		t.Errorf("status %+v", st)
	}
	if !strings.Contains(f.log.String(), "[t] test server up") {
		t.Errorf("stderr not in the log:\n%s", f.log.String())
	}
}

func TestResultContent(t *testing.T) {
	for _, images := range []bool{true, false} {
		t.Run(fmt.Sprint("images=", images), func(t *testing.T) {
			f := start(t, Options{Servers: []ServerConfig{testServerConfig(t, "t")}, Images: images})
			f.sync()
			res, meta := f.call("mcp__t__image", `{}`)
			var kinds []string
			for _, p := range res.Content {
				kinds = append(kinds, p.Type)
			}
			if images {
				if !slices.Equal(kinds, []string{"text", "image"}) || res.Content[1].MediaType != "image/png" || res.Content[1].Data != "iVBORyBmYWtl" {
					t.Fatalf("image result %+v", res.Content)
				}
			} else if !slices.Equal(kinds, []string{"text"}) || !strings.Contains(text(res), "image (image/png, 9 bytes) not shown: this model does not take images") {
				t.Fatalf("image result without images %+v", res.Content)
			}
			if !strings.Contains(text(res), "audio (audio/wav, 4 bytes) not shown") || len(meta.Omitted) == 0 {
				t.Errorf("audio not noted: %q %v", text(res), meta.Omitted)
			}
		})
	}
	f := start(t, Options{Servers: []ServerConfig{testServerConfig(t, "t")}})
	f.sync()
	res, _ := f.call("mcp__t__resource", `{}`)
	for _, want := range []string{"[resource <file:///notes.txt> (text/plain)]\nthe notes", "resource <file:///x.bin> (application/octet-stream, 3 bytes of binary data) not shown", "[resource link: big.log <file:///big.log>: the log]"} {
		if !strings.Contains(text(res), want) {
			t.Errorf("resource result lacks %q:\n%s", want, text(res))
		}
	}
}

func TestLargeResultIsCutAndSaved(t *testing.T) {
	f := start(t, Options{Servers: []ServerConfig{testServerConfig(t, "t")}, MaxOutput: 1000})
	f.sync()
	res, meta := f.call("mcp__t__big", `{"n":20000}`)
	out := text(res)
	if !meta.Truncated || meta.OutputBytes < 20000 || len(out) > 1300 || !strings.HasPrefix(out, "line 0\n") || !strings.Contains(out, "bytes of") {
		t.Fatalf("not cut: %d bytes, meta %+v:\n%s", len(out), meta, out)
	}
	full, err := os.ReadFile(meta.SpillPath)
	if err != nil || len(full) != meta.OutputBytes || !strings.Contains(out, meta.SpillPath) {
		t.Fatalf("spill %s: %d bytes, %v", meta.SpillPath, len(full), err)
	}
	last := strings.TrimSpace(string(full))
	last = last[strings.LastIndexByte(last, '\n')+1:]
	if !strings.HasSuffix(strings.TrimSpace(out), last) {
		t.Errorf("the tail %q is not kept", last)
	}
}

// The spill directory lies where sandboxed commands may write (the temp
// directory): a symlink planted at rein-SESSION must not make rein write
// the result (text the server, or the model through it, chose) into the
// link's target.
func TestLargeResultSpillRefusesPlantedLink(t *testing.T) {
	tmp, target := t.TempDir(), t.TempDir()
	if err := os.Symlink(target, filepath.Join(tmp, "rein-s1")); err != nil {
		t.Fatal(err)
	}
	f := start(t, Options{Servers: []ServerConfig{testServerConfig(t, "t")}, MaxOutput: 1000, SpillDir: tmp})
	f.sync()
	res, meta := f.call("mcp__t__big", `{"n":20000}`)
	if !meta.Truncated || meta.SpillPath != "" || !strings.Contains(text(res), "could not be saved") {
		t.Errorf("meta %+v:\n%s", meta, text(res))
	}
	if ents, _ := os.ReadDir(target); len(ents) != 0 {
		t.Fatalf("rein wrote %d files through the planted link", len(ents))
	}
	// With the session's scratch directory the result goes there, under
	// the same rule.
	scratch := filepath.Join(t.TempDir(), "s1.scratch")
	tl, _ := f.reg.Lookup("mcp__t__big")
	call := tool.Call{ID: "c2", Arguments: json.RawMessage(`{"n":20000}`), Env: tool.Env{SessionID: "s1", ScratchDir: scratch}}
	res, _ = tl.Run(context.Background(), call)
	if !strings.Contains(text(res), "the full result is in "+scratch+"/mcp-c2-") {
		t.Errorf("not in the scratch directory: %s", text(res))
	}
	os.RemoveAll(scratch)
	if err := os.Symlink(target, scratch); err != nil {
		t.Fatal(err)
	}
	if res, _ = tl.Run(context.Background(), call); !strings.Contains(text(res), "could not be saved") {
		t.Errorf("through a planted scratch link: %s", text(res))
	}
	if ents, _ := os.ReadDir(target); len(ents) != 0 {
		t.Fatalf("rein wrote %d files through the planted scratch link", len(ents))
	}
}

func TestErrorResults(t *testing.T) {
	f := start(t, Options{Servers: []ServerConfig{testServerConfig(t, "t")}})
	f.sync()
	res, _ := f.call("mcp__t__fail", `{}`)
	if !res.IsError || res.Code != CodeToolError || text(res) != "no such issue: 42" {
		t.Errorf("fail: %+v", res)
	}
	for _, args := range []string{`[]`, `"x"`, `{"message":`} {
		res, _ = f.call("mcp__t__echo", args)
		if !res.IsError || res.Code != tool.CodeInvalidArguments {
			t.Errorf("args %s: %+v", args, res)
		}
	}
}

func TestTimeoutAndProgress(t *testing.T) {
	cfg := testServerConfig(t, "t")
	cfg.ToolTimeout = 300 * time.Millisecond
	f := start(t, Options{Servers: []ServerConfig{cfg}})
	f.sync()
	began := time.Now()
	res, _ := f.call("mcp__t__hang", `{}`)
	if res.Code != tool.CodeTimeout || !strings.Contains(text(res), "did not answer hang within 300ms") {
		t.Errorf("hang: %+v", res)
	}
	if d := time.Since(began); d > 5*time.Second {
		t.Errorf("timeout took %s", d)
	}
	// 12 progress notifications 50 ms apart: 600 ms in all, twice the
	// timeout, but never 300 ms of silence.
	res, meta := f.call("mcp__t__progress", `{"n":12}`)
	if res.IsError || text(res) != "finished" || !strings.HasPrefix(meta.Progress, "step ") {
		t.Errorf("progress: %+v %+v", res, meta)
	}
	// The server is still usable after a cancelled call.
	if res, _ := f.call("mcp__t__echo", `{"message":"still"}`); text(res) != "echo: still" {
		t.Errorf("after timeout: %+v", res)
	}
}

func TestCrashRestartsAndFailsCallsInFlight(t *testing.T) {
	f := start(t, Options{Servers: []ServerConfig{testServerConfig(t, "t")}})
	f.sync()
	hung := make(chan tool.Result, 1)
	go func() {
		tl, _ := f.reg.Lookup("mcp__t__hang")
		res, _ := tl.Run(context.Background(), tool.Call{ID: "h", Arguments: json.RawMessage(`{}`)})
		hung <- res
	}()
	time.Sleep(100 * time.Millisecond)
	res, _ := f.call("mcp__t__crash", `{}`)
	if res.Code != CodeServerError || !strings.Contains(text(res), "exit status 3") || !strings.Contains(text(res), "unknown") {
		t.Errorf("crash: %+v", res)
	}
	select {
	case res := <-hung:
		if res.Code != CodeServerError {
			t.Errorf("call in flight: %+v", res)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the call in flight did not end when the server crashed")
	}
	f.waitFor("restart", func() bool { s := f.status("t"); return s.State == Ready && s.Restarts == 1 })
	if res, _ := f.call("mcp__t__echo", `{"message":"back"}`); text(res) != "echo: back" {
		t.Errorf("after restart: %+v", res)
	}
	if !strings.Contains(f.log.String(), "panic: crash requested") || !strings.Contains(f.log.String(), "restarting in") {
		t.Errorf("log:\n%s", f.log.String())
	}
	if len(f.reg.Names()) != 10 {
		t.Errorf("tools after restart: %v", f.reg.Names())
	}
}

func TestGivesUpAfterRestarts(t *testing.T) {
	f := start(t, Options{Servers: []ServerConfig{testServerConfig(t, "t")}, MaxRestarts: 2})
	f.sync()
	for i := 0; i < 3; i++ {
		// Ready after i restarts: a Ready read before the last crash was
		// noticed would send the next crash to the dead process.
		f.waitFor(fmt.Sprintf("ready after %d restarts", i), func() bool {
			st := f.status("t")
			return st.State == Ready && st.Restarts == i
		})
		f.call("mcp__t__crash", `{}`)
	}
	f.waitFor("give up", func() bool { return f.status("t").State == Failed })
	if st := f.status("t"); !strings.Contains(st.Error, "gave up after 2 restarts") {
		t.Errorf("status %+v", st)
	}
	if n := len(f.reg.Names()); n != 0 {
		t.Errorf("a failed server's tools stay: %v", f.reg.Names())
	}
}

func TestStartFailures(t *testing.T) {
	missing := ServerConfig{Name: "missing", Command: "/nonexistent/mcp-server"}
	hang := testServerConfig(t, "hang", "hang-init")
	hang.StartupTimeout = 300 * time.Millisecond
	f := start(t, Options{Servers: []ServerConfig{
		testServerConfig(t, "exits", "exit"),
		testServerConfig(t, "garbage", "garbage"),
		missing,
		hang,
		{Name: "bad name!", Command: "x"},
		{Name: "both", Command: "x", URL: "http://localhost:1/"},
		{Name: "off", Command: "x", Disabled: true},
		{Name: "unset", Command: "x", Args: []string{"--token=${REIN_TEST_NOPE}"}},
		testServerConfig(t, "ok"),
		{Name: "ok", Command: "x"},
	}})
	began := time.Now()
	f.sync()
	if d := time.Since(began); d > 5*time.Second {
		t.Errorf("the first Sync waited %s for a server that hangs (startup timeout 300ms)", d)
	}
	for name, want := range map[string][]string{
		"exits":     {"stopped (exit status 2) before it finished starting", "GITHUB_TOKEN is not set"},
		"garbage":   {"not JSON-RPC"},
		"missing":   {"cannot start /nonexistent/mcp-server"},
		"bad name!": {"the name must be"},
		"both":      {"command, args, env and cwd are for stdio servers"},
		"unset":     {"environment variable not set: ${REIN_TEST_NOPE}"},
	} {
		st := f.status(name)
		if st.State != Failed {
			t.Errorf("%s: state %s (%s)", name, st.State, st.Error)
		}
		for _, w := range want {
			if !strings.Contains(st.Error, w) {
				t.Errorf("%s: error %q lacks %q", name, st.Error, w)
			}
		}
	}
	if st := f.status("hang"); st.State != Starting {
		t.Errorf("hang: %+v", st)
	}
	if st := f.status("off"); st.State != Disabled {
		t.Errorf("off: %+v", st)
	}
	if st := f.status("ok"); st.State != Ready {
		t.Errorf("ok: %+v", st)
	}
	if all := f.m.Status(); !strings.Contains(all[len(all)-1].Error, `another server is already called "ok"`) {
		t.Errorf("duplicate name: %+v", all[len(all)-1])
	}
	if _, ok := f.reg.Lookup("mcp__ok__echo"); !ok {
		t.Errorf("the good server's tools are missing: %v", f.reg.Names())
	}
}

func TestCallWaitsForAStartingServerThenFails(t *testing.T) {
	hang := testServerConfig(t, "hang", "hang-init")
	hang.StartupTimeout = 200 * time.Millisecond
	slow := testServerConfig(t, "slow", "slowstart=700")
	slow.StartupTimeout = 100 * time.Millisecond
	f := start(t, Options{Servers: []ServerConfig{hang, slow, testServerConfig(t, "fast")}})
	f.sync()
	if _, ok := f.reg.Lookup("mcp__slow__echo"); ok {
		t.Fatal("the slow server's tools are there before it started")
	}
	if _, ok := f.reg.Lookup("mcp__fast__echo"); !ok {
		t.Fatal("the fast server's tools are missing")
	}
	f.waitFor("the slow server's tools", func() bool { _, ok := f.reg.Lookup("mcp__slow__echo"); return ok })
	// A tool of a server that is not up yet (here: reached by lookup of
	// its tool object, as a model could call one of a restarting server).
	s := f.m.servers[0]
	_, err := s.session(context.Background())
	if err == nil || !strings.Contains(err.Error(), "has not finished starting within 200ms") {
		t.Errorf("waiting for a hung server: %v", err)
	}
}

func TestToolsListChanged(t *testing.T) {
	f := start(t, Options{Servers: []ServerConfig{testServerConfig(t, "t")}})
	f.sync()
	before := f.reg.Names()
	f.call("mcp__t__addtool", `{}`)
	if !slices.Equal(f.reg.Names(), before) {
		t.Fatal("the tool set changed outside Sync")
	}
	f.waitFor("the new tool", func() bool { _, ok := f.reg.Lookup("mcp__t__extra"); return ok })
	if res, _ := f.call("mcp__t__extra", `{}`); text(res) != "extra ran" {
		t.Errorf("extra: %+v", res)
	}
	if got := f.reg.Names(); !slices.Equal(got[:len(before)], before) {
		t.Errorf("existing tools moved: %v", got)
	}
}

func TestBadSchemasAreSkippedWithAReason(t *testing.T) {
	f := start(t, Options{Servers: []ServerConfig{testServerConfig(t, "t", "badschema")}})
	f.sync()
	st := f.status("t")
	if len(st.Skipped) != 1 || st.Skipped[0].Tool != "strange" || !strings.Contains(st.Skipped[0].Note, `type "string"`) {
		t.Errorf("skipped %+v", st.Skipped)
	}
	if _, ok := f.reg.Lookup("mcp__t__dotted_name"); !ok {
		t.Errorf("dotted.name not offered as mcp__t__dotted_name: %v", f.reg.Names())
	}
	if !strings.Contains(f.log.String(), `tool "strange" skipped`) {
		t.Errorf("log:\n%s", f.log.String())
	}
}

// alive reports whether pid is a process that has not exited (a zombie
// waiting to be reaped counts as exited).
func alive(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	fields := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	return len(fields) == 0 || fields[0] != "Z"
}

func readPid(t *testing.T, file string) int {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		b, err := os.ReadFile(file)
		if n, perr := strconv.Atoi(string(b)); err == nil && perr == nil {
			return n
		}
		if time.Now().After(deadline) {
			t.Fatalf("no pid in %s", file)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestCloseLeavesNoProcess(t *testing.T) {
	dir := t.TempDir()
	var servers []ServerConfig
	var files []string
	for i, modes := range [][]string{{"child=" + filepath.Join(dir, "c0")}, {"hang-init", "child=" + filepath.Join(dir, "c1")}, {}} {
		pf := filepath.Join(dir, fmt.Sprint("p", i))
		servers = append(servers, testServerConfig(t, fmt.Sprint("s", i), append(modes, "pidfile="+pf)...))
		files = append(files, pf)
		if len(modes) > 0 && strings.HasPrefix(modes[len(modes)-1], "child=") {
			files = append(files, strings.TrimPrefix(modes[len(modes)-1], "child="))
		}
	}
	servers[1].StartupTimeout = 100 * time.Millisecond
	lg := &syncBuffer{}
	defer func() {
		if t.Failed() {
			t.Log(lg.String())
		}
	}()
	m := Start(Options{Servers: servers, Log: lg, KillGrace: 300 * time.Millisecond, Environ: []string{"PATH=" + os.Getenv("PATH")}})
	var pids []int
	for _, f := range files {
		pids = append(pids, readPid(t, f))
	}
	m.Sync(context.Background())
	began := time.Now()
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	for i, pid := range pids {
		if alive(pid) {
			t.Errorf("process %d (%s) is still alive after Close", pid, files[i])
			syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	if d := time.Since(began); d > 5*time.Second {
		t.Errorf("Close took %s", d)
	}
	for _, st := range m.Status() {
		if st.State != Stopped {
			t.Errorf("%s: state %s after Close", st.Name, st.State)
		}
	}
}

func TestCloseAbortsCallsInFlight(t *testing.T) {
	f := start(t, Options{Servers: []ServerConfig{testServerConfig(t, "t")}})
	f.sync()
	done := make(chan tool.Result, 1)
	go func() {
		tl, _ := f.reg.Lookup("mcp__t__hang")
		res, _ := tl.Run(context.Background(), tool.Call{ID: "h", Arguments: json.RawMessage(`{}`)})
		done <- res
	}()
	time.Sleep(100 * time.Millisecond)
	f.m.Close()
	select {
	case res := <-done:
		if res.Code != tool.CodeAborted {
			t.Errorf("in flight at Close: %+v", res)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a call in flight outlived Close")
	}
	res, _ := f.call("mcp__t__echo", `{"message":"x"}`)
	if res.Code != CodeServerError || !strings.Contains(text(res), "stopped") {
		t.Errorf("after Close: %+v", res)
	}
}

func TestCancelledCallIsAborted(t *testing.T) {
	f := start(t, Options{Servers: []ServerConfig{testServerConfig(t, "t")}})
	f.sync()
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Millisecond)
	defer cancel()
	res, _ := f.callCtx(ctx, "mcp__t__hang", `{}`)
	if res.Code != tool.CodeAborted {
		t.Errorf("cancelled: %+v", res)
	}
}

func TestEnvironment(t *testing.T) {
	t.Setenv("TEST_SECRET_TOKEN", "must-not-pass")
	cfg := testServerConfig(t, "t")
	f := start(t, Options{Servers: []ServerConfig{cfg}, Environ: []string{"PATH=" + os.Getenv("PATH")}})
	f.sync()
	if !strings.Contains(f.log.String(), "env TEST_SECRET_TOKEN=\n") {
		t.Errorf("the server saw a variable outside Options.Environ:\n%s", f.log.String())
	}
	cfg.Env["TEST_SECRET_TOKEN"] = "configured"
	g := start(t, Options{Servers: []ServerConfig{cfg}, Environ: []string{"TEST_SECRET_TOKEN=x"}})
	g.sync()
	if !strings.Contains(g.log.String(), "env TEST_SECRET_TOKEN=configured") {
		t.Errorf("the server's own env does not win:\n%s", g.log.String())
	}
}

// A stdio server runs in ServerDir (by default the user's home), never in
// the workspace, unless its Cwd says so (relative to Dir): the directory a
// launcher starts in chooses code (npx resolves ./node_modules first), so a
// cloned repository must not pick the code of the user's own servers.
func TestServerWorkingDirectory(t *testing.T) {
	ws, neutral, home := t.TempDir(), t.TempDir(), t.TempDir()
	if err := os.Mkdir(filepath.Join(ws, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("HOME", home)
	out := t.TempDir()
	cfg := func(name, cwd string) ServerConfig {
		c := testServerConfig(t, name, "cwdfile="+filepath.Join(out, name))
		c.Cwd = cwd
		return c
	}
	f := start(t, Options{Dir: ws, ServerDir: neutral, Servers: []ServerConfig{cfg("plain", ""), cfg("rel", "sub"), cfg("abs", neutral)}})
	f.sync()
	g := start(t, Options{Dir: ws, Servers: []ServerConfig{cfg("home", "")}})
	g.sync()
	for name, want := range map[string]string{"plain": neutral, "rel": filepath.Join(ws, "sub"), "abs": neutral, "home": home} {
		b, err := os.ReadFile(filepath.Join(out, name))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		got, _ := filepath.EvalSymlinks(string(b))
		if w, _ := filepath.EvalSymlinks(want); got != w {
			t.Errorf("%s ran in %s, want %s", name, b, want)
		}
	}
}

// A stdio server's command is found on PATH once and checked: one that
// the model's sandboxed tools could have written (a workspace directory on
// PATH) is refused, and a restart runs the file found first, not whatever
// a directory earlier on PATH holds by then.
func TestCommandIsPinnedAndChecked(t *testing.T) {
	exe := testServerConfig(t, "t").Command
	ws, bin, early := t.TempDir(), t.TempDir(), t.TempDir()
	for _, d := range []string{ws, bin} {
		if err := os.Symlink(exe, filepath.Join(d, "mcpserver")); err != nil {
			t.Fatal(err)
		}
	}
	var asked [][2]string
	check := func(found, real string) error {
		asked = append(asked, [2]string{found, real})
		if strings.HasPrefix(found, ws+"/") || strings.HasPrefix(real, ws+"/") {
			return errors.New("it lies in the workspace")
		}
		return nil
	}
	cfg := testServerConfig(t, "t")
	cfg.Command = "mcpserver"

	t.Setenv("PATH", ws+string(os.PathListSeparator)+bin)
	f := start(t, Options{Servers: []ServerConfig{cfg}, CheckCommand: check})
	f.waitFor("refusal", func() bool { return f.status("t").State == Failed })
	if st := f.status("t"); !strings.Contains(st.Error, "refusing to start mcpserver: it lies in the workspace") {
		t.Errorf("status %+v", st)
	}

	t.Setenv("PATH", early+string(os.PathListSeparator)+bin)
	f = start(t, Options{Servers: []ServerConfig{cfg}, CheckCommand: check})
	f.sync()
	if len(asked) != 2 || asked[1][0] != filepath.Join(bin, "mcpserver") || asked[1][1] != exe {
		t.Fatalf("CheckCommand calls %q", asked)
	}
	marker := filepath.Join(t.TempDir(), "hijacked")
	if err := os.WriteFile(filepath.Join(early, "mcpserver"), []byte("#!/bin/sh\ntouch "+marker+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	f.call("mcp__t__crash", `{}`)
	f.waitFor("restart", func() bool { s := f.status("t"); return s.State == Ready && s.Restarts == 1 })
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("the restart ran the command found on PATH anew")
	}
	if len(asked) != 2 {
		t.Errorf("the restart looked the command up again: %q", asked)
	}
}
