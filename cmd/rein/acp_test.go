package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/coder/acp-go-sdk"

	"github.com/reinhq/rein/llm"
	"github.com/reinhq/rein/session"
	"github.com/reinhq/rein/store"
	"github.com/reinhq/rein/store/jsonl"
	"github.com/reinhq/rein/trust"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden")

func checkGolden(t *testing.T, path, got string) {
	t.Helper()
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update)", err)
	}
	if got != string(want) {
		t.Errorf("%s differs (run with -update and review the diff)\n%s", path, lineDiff(string(want), got))
	}
}

// lineDiff shows the first lines where want and got differ.
func lineDiff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	var b strings.Builder
	shown := 0
	for i := 0; i < max(len(w), len(g)) && shown < 8; i++ {
		var wl, gl string
		if i < len(w) {
			wl = w[i]
		}
		if i < len(g) {
			gl = g[i]
		}
		if wl != gl {
			fmt.Fprintf(&b, "line %d\n  want: %s\n  got:  %s\n", i+1, wl, gl)
			shown++
		}
	}
	return b.String()
}

// waitFile waits until a file exists.
func waitFile(t *testing.T, path string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if _, err := os.Stat(path); err == nil {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("%s never appeared", path)
}

// writeCrashedSession stores a session whose process died in the middle of
// a tool call: the turn is open, a call started, nothing answered it.
func writeCrashedSession(t *testing.T, home, cwd string) string {
	t.Helper()
	st, err := jsonl.Open(home)
	if err != nil {
		t.Fatal(err)
	}
	id := "crashed-session"
	at := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	w, err := st.Create(context.Background(), session.Header{ID: id, Cwd: cwd, CreatedAt: at, Version: session.Version})
	if err != nil {
		t.Fatal(err)
	}
	l := session.NewLog(session.Header{ID: id, Cwd: cwd, CreatedAt: at, Version: session.Version})
	var evs []session.Event
	for _, p := range []session.Payload{
		&session.UserMessage{ID: "m1", Content: llm.Text("from an earlier session"), Source: session.Source{Kind: session.SourceSessionRef, Name: "s0@12"}},
		&session.TurnStart{Turn: 1, Trigger: session.Trigger{Kind: session.TriggerSend, MessageID: "m2"}},
		&session.UserMessage{ID: "m2", Content: llm.Text("list the files"), Source: session.Source{Kind: session.SourceUser}},
		&session.StepStart{Turn: 1, Step: 1},
		&session.AssistantMessage{Turn: 1, Step: 1, Content: llm.Text("Listing."), ToolCalls: []llm.ToolCall{{ID: "c1", Name: "ls", Arguments: "{}"}, {ID: "c2", Name: "read", Arguments: `{"file_path":"hello.txt"}`}}, Finish: llm.FinishToolCalls},
		&session.ToolCall{Turn: 1, Step: 1, CallID: "c1", Name: "ls", Arguments: "{}"},
	} {
		ev, err := l.Append(at, p)
		if err != nil {
			t.Fatal(err)
		}
		evs = append(evs, ev)
	}
	if err := w.Append(context.Background(), evs); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return id
}

// acpEnv is a workspace and a REIN_HOME for driving 'rein acp' processes.
type acpEnv struct {
	t    *testing.T
	root string // temp root
	home string // REIN_HOME
	work string // the workspace (session cwd)
	env  []string
}

func newACPEnv(t *testing.T) *acpEnv {
	t.Helper()
	if _, err := exec.LookPath("rein"); err != nil {
		t.Skip("the rein test binary is not on PATH (run through go test)")
	}
	root := t.TempDir()
	root, _ = filepath.EvalSymlinks(root)
	e := &acpEnv{t: t, root: root, home: filepath.Join(root, "home"), work: filepath.Join(root, "work")}
	if err := os.MkdirAll(e.work, 0o755); err != nil {
		t.Fatal(err)
	}
	// A temp directory of its own: the system one (a write root of the
	// sandboxed modes) holds the test's commands, which rein would
	// refuse to run as MCP servers from there.
	if err := os.MkdirAll(filepath.Join(root, "tmp"), 0o755); err != nil {
		t.Fatal(err)
	}
	e.env = append(os.Environ(), "REIN_HOME="+e.home, "XDG_CONFIG_HOME="+filepath.Join(root, "config"), "HOME="+root, "TMPDIR="+filepath.Join(root, "tmp"),
		"GORACE="+strings.TrimSpace(os.Getenv("GORACE")+" atexit_sleep_ms=0"))
	return e
}

func (e *acpEnv) write(name, content string) {
	e.t.Helper()
	p := filepath.Join(e.work, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		e.t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		e.t.Fatal(err)
	}
}

// transcript records every JSON-RPC line in arrival order: "> " what the
// client sent, "< " what rein sent.
type rpcTranscript struct {
	mu    sync.Mutex
	lines []string
}

func (r *rpcTranscript) add(dir string, line []byte) {
	r.mu.Lock()
	r.lines = append(r.lines, dir+" "+strings.TrimRight(string(line), "\n"))
	r.mu.Unlock()
}

// recWriter records each line written to rein.
type recWriter struct {
	w   io.Writer
	rec *rpcTranscript
}

func (w recWriter) Write(p []byte) (int, error) {
	for _, l := range bytes.SplitAfter(p, []byte("\n")) {
		if len(bytes.TrimSpace(l)) > 0 {
			w.rec.add(">", l)
		}
	}
	return w.w.Write(p)
}

// acpProc is one 'rein acp' process and a client connection to it.
type acpProc struct {
	cmd    *exec.Cmd
	conn   *sdk.ClientSideConnection
	client *testClient
	stdin  io.WriteCloser
	stderr *bytes.Buffer
	done   chan struct{}
	init   sdk.InitializeResponse // what initialize answered
}

func (e *acpEnv) start(rec *rpcTranscript, caps sdk.ClientCapabilities, args ...string) *acpProc {
	e.t.Helper()
	cmd := exec.Command("rein", append([]string{"acp"}, args...)...)
	cmd.Dir = e.work
	cmd.Env = e.env
	stdin, err := cmd.StdinPipe()
	if err != nil {
		e.t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		e.t.Fatal(err)
	}
	p := &acpProc{cmd: cmd, stdin: stdin, stderr: &bytes.Buffer{}, done: make(chan struct{})}
	cmd.Stderr = p.stderr
	if err := cmd.Start(); err != nil {
		e.t.Fatal(err)
	}
	// Record rein's lines before the SDK sees them.
	pr, pw := io.Pipe()
	go func() {
		br := bufio.NewReader(stdout)
		for {
			line, err := br.ReadBytes('\n')
			if len(line) > 0 {
				rec.add("<", line)
				if !json.Valid(bytes.TrimSpace(line)) {
					rec.add("!", []byte("NOT JSON: "+string(line)))
				}
				_, _ = pw.Write(line)
			}
			if err != nil {
				pw.Close()
				return
			}
		}
	}()
	p.client = &testClient{dir: e.work, terms: map[string]*testTerm{}}
	p.conn = sdk.NewClientSideConnection(p.client, recWriter{stdin, rec}, pr)
	go func() {
		_ = cmd.Wait()
		close(p.done)
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	ir, err := p.conn.Initialize(ctx, sdk.InitializeRequest{ProtocolVersion: sdk.ProtocolVersionNumber, ClientCapabilities: caps,
		ClientInfo: &sdk.Implementation{Name: "rein-test", Version: "1"}})
	if err != nil {
		e.t.Fatalf("initialize: %v\nstderr:\n%s", err, p.stderr)
	}
	p.init = ir
	e.t.Cleanup(func() {
		_ = stdin.Close()
		select {
		case <-p.done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
		}
	})
	return p
}

// stop closes rein's stdin (the client goes away) and waits for it to exit.
func (p *acpProc) stop(t *testing.T) {
	t.Helper()
	_ = p.stdin.Close()
	select {
	case <-p.done:
	case <-time.After(20 * time.Second):
		_ = p.cmd.Process.Kill()
		t.Fatalf("rein acp did not exit after its stdin closed\nstderr:\n%s", p.stderr)
	}
	if code := p.cmd.ProcessState.ExitCode(); code != 0 {
		t.Fatalf("rein acp exited %d\nstderr:\n%s", code, p.stderr)
	}
}

// testClient is an editor: it serves files from disk, runs terminals with
// os/exec and answers permission requests from a queue.
type testClient struct {
	dir     string
	mu      sync.Mutex
	answers []string // permission option ids, in order
	terms   map[string]*testTerm
	nterm   int
	waiting chan string // a terminal/wait_for_exit arrived (terminal id)
}

type testTerm struct {
	cmd  *exec.Cmd
	out  bytes.Buffer
	mu   sync.Mutex
	done chan struct{}
}

func (c *testClient) ReadTextFile(_ context.Context, p sdk.ReadTextFileRequest) (sdk.ReadTextFileResponse, error) {
	b, err := os.ReadFile(p.Path)
	if errors.Is(err, os.ErrNotExist) {
		return sdk.ReadTextFileResponse{}, &sdk.RequestError{Code: -32002, Message: "Resource not found"}
	}
	if err != nil {
		return sdk.ReadTextFileResponse{}, err
	}
	return sdk.ReadTextFileResponse{Content: string(b)}, nil
}

func (c *testClient) WriteTextFile(_ context.Context, p sdk.WriteTextFileRequest) (sdk.WriteTextFileResponse, error) {
	return sdk.WriteTextFileResponse{}, os.WriteFile(p.Path, []byte(p.Content), 0o644)
}

func (c *testClient) RequestPermission(_ context.Context, p sdk.RequestPermissionRequest) (sdk.RequestPermissionResponse, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.answers) == 0 {
		return sdk.RequestPermissionResponse{Outcome: sdk.NewRequestPermissionOutcomeCancelled()}, nil
	}
	a := c.answers[0]
	c.answers = c.answers[1:]
	return sdk.RequestPermissionResponse{Outcome: sdk.NewRequestPermissionOutcomeSelected(sdk.PermissionOptionId(a))}, nil
}

func (c *testClient) SessionUpdate(context.Context, sdk.SessionNotification) error { return nil }

func (c *testClient) CreateTerminal(_ context.Context, p sdk.CreateTerminalRequest) (sdk.CreateTerminalResponse, error) {
	c.mu.Lock()
	c.nterm++
	id := fmt.Sprintf("term-%d", c.nterm)
	c.mu.Unlock()
	t := &testTerm{cmd: exec.Command(p.Command, p.Args...), done: make(chan struct{})}
	if p.Cwd != nil {
		t.cmd.Dir = *p.Cwd
	}
	t.cmd.Env = append(os.Environ(), "SOME_API_KEY=leak", "GITHUB_TOKEN=leak")
	t.cmd.Stdout, t.cmd.Stderr = termWriter{t}, termWriter{t}
	if err := t.cmd.Start(); err != nil {
		return sdk.CreateTerminalResponse{}, err
	}
	go func() { _ = t.cmd.Wait(); close(t.done) }()
	c.mu.Lock()
	c.terms[id] = t
	c.mu.Unlock()
	return sdk.CreateTerminalResponse{TerminalId: id}, nil
}

type termWriter struct{ t *testTerm }

func (w termWriter) Write(p []byte) (int, error) {
	w.t.mu.Lock()
	defer w.t.mu.Unlock()
	return w.t.out.Write(p)
}

func (c *testClient) term(id string) (*testTerm, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if t := c.terms[id]; t != nil {
		return t, nil
	}
	return nil, fmt.Errorf("no terminal %s", id)
}

func (c *testClient) exit(t *testTerm) *sdk.TerminalExitStatus {
	select {
	case <-t.done:
	default:
		return nil
	}
	code := t.cmd.ProcessState.ExitCode()
	return &sdk.TerminalExitStatus{ExitCode: &code}
}

func (c *testClient) KillTerminal(_ context.Context, p sdk.KillTerminalRequest) (sdk.KillTerminalResponse, error) {
	t, err := c.term(p.TerminalId)
	if err == nil {
		_ = t.cmd.Process.Kill()
	}
	return sdk.KillTerminalResponse{}, err
}

func (c *testClient) TerminalOutput(_ context.Context, p sdk.TerminalOutputRequest) (sdk.TerminalOutputResponse, error) {
	t, err := c.term(p.TerminalId)
	if err != nil {
		return sdk.TerminalOutputResponse{}, err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return sdk.TerminalOutputResponse{Output: t.out.String(), ExitStatus: c.exit(t)}, nil
}

func (c *testClient) ReleaseTerminal(_ context.Context, p sdk.ReleaseTerminalRequest) (sdk.ReleaseTerminalResponse, error) {
	c.mu.Lock()
	delete(c.terms, p.TerminalId)
	c.mu.Unlock()
	return sdk.ReleaseTerminalResponse{}, nil
}

func (c *testClient) WaitForTerminalExit(ctx context.Context, p sdk.WaitForTerminalExitRequest) (sdk.WaitForTerminalExitResponse, error) {
	t, err := c.term(p.TerminalId)
	if err != nil {
		return sdk.WaitForTerminalExitResponse{}, err
	}
	select {
	case <-t.done:
	case <-ctx.Done():
		return sdk.WaitForTerminalExitResponse{}, ctx.Err()
	}
	st := c.exit(t)
	return sdk.WaitForTerminalExitResponse{ExitCode: st.ExitCode}, nil
}

// normalize makes a transcript stable: keys sorted, ids minted by rein
// (26-character ULIDs) numbered by first appearance, the temp root named.
func normalize(lines []string, repl map[string]string) string {
	ulid := regexp.MustCompile(`\b[0-9A-HJKMNP-TV-Z]{26}\b`)
	ids := map[string]string{}
	var b strings.Builder
	for _, l := range lines {
		dir, body, _ := strings.Cut(l, " ")
		var v any
		if err := json.Unmarshal([]byte(body), &v); err == nil {
			if nb, err := json.Marshal(v); err == nil {
				body = string(nb)
			}
		}
		keys := make([]string, 0, len(repl))
		for k := range repl {
			keys = append(keys, k)
		}
		sort.Slice(keys, func(i, j int) bool { return len(keys[i]) > len(keys[j]) })
		for _, k := range keys {
			body = strings.ReplaceAll(body, k, repl[k])
		}
		body = ulid.ReplaceAllStringFunc(body, func(s string) string {
			if ids[s] == "" {
				ids[s] = fmt.Sprintf("{{id%d}}", len(ids)+1)
			}
			return ids[s]
		})
		b.WriteString(dir + " " + body + "\n")
	}
	return b.String()
}

const acpScriptA = `{"calls": [
 {"comment": "prompt 1: read, edit, plan, answer",
  "expect": {"lastUser": "fix the greeting"},
  "reply": {"reasoning": ["The file has a typo."], "text": ["Let me look."],
            "toolCalls": [{"id": "c_read", "name": "read", "arguments": {"file_path": "hello.txt"}}]}},
 {"expect": {"contains": ["helo world"]},
  "reply": {"toolCalls": [{"id": "c_edit", "name": "edit", "arguments": {"file_path": "hello.txt", "old_string": "helo", "new_string": "hello"}}]}},
 {"reply": {"toolCalls": [{"id": "c_todo", "name": "todo", "arguments": {"todos": [{"content": "Fix the typo", "status": "completed"}, {"content": "Run the tests", "status": "pending"}]}}]}},
 {"comment": "full-access: bash runs in the editor's terminal, without the keys",
  "reply": {"toolCalls": [{"id": "c_term", "name": "bash", "arguments": {"command": "echo ok; env | grep -c leak || true"}}]}},
 {"reply": {"text": ["Fixed the ", "typo."]}},
 {"comment": "prompt 2: read-only: bash asked, and run in rein's sandbox, not in the editor's terminal",
  "expect": {"lastUser": "run the checks"},
  "reply": {"toolCalls": [{"id": "c_bash1", "name": "bash", "arguments": {"command": "echo sandboxed"}}]}},
 {"reply": {"toolCalls": [{"id": "c_bash2", "name": "bash", "arguments": {"command": "echo again"}}]}},
 {"reply": {"toolCalls": [{"id": "c_bash3", "name": "bash", "arguments": {"command": "echo again and again"}}]}},
 {"reply": {"text": ["All ran."]}},
 {"comment": "/compact: the summary request",
  "reply": {"text": ["The user had a typo fixed and ran three checks."]}}
]}`

const acpScriptB = `{"calls": [
 {"comment": "after load: a long command, cancelled while it runs",
  "expect": {"lastUser": "wait for it"},
  "reply": {"toolCalls": [{"id": "c_sleep", "name": "bash", "arguments": {"command": "echo started > started.txt; sleep 30"}}]}}
]}`

// TestACPTranscript drives 'rein acp' like an editor, over pipes, with the
// scripted model, and compares the JSON-RPC transcript with
// testdata/acp.golden: a new session, the workspace trust question asked
// through it at first use, context injected over the wire, a
// prompt with tools through the editor's buffers, a permission round trip
// with "always", bash in the editor's terminal, a steer refused by its
// precondition, a blocked prompt, /compact; then a fresh process loads the
// session (the whole history replayed before the answer, the compaction
// summary included), and a turn is cancelled while its tool runs; then a
// third process loads a session a crash left open.
func TestACPTranscript(t *testing.T) {
	e := newACPEnv(t)
	e.write("hello.txt", "helo world\n")
	e.write("script-a.json", acpScriptA)
	e.write("script-b.json", acpScriptB)
	e.write("none.json", `{"calls": []}`)
	e.write(".git/HEAD", "ref: refs/heads/main\n")
	e.write(".rein/settings.json", `{"hooks": {"UserPromptSubmit": [{"hooks": [{"type": "command", "command": "if grep -o '\"prompt\":\"[^\"]*\"' | grep -q rm; then echo 'no destructive commands' >&2; exit 2; fi"}]}]}}`)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	rec := &rpcTranscript{}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%v", err)
		}
	}
	text := func(s string) []sdk.ContentBlock { return []sdk.ContentBlock{sdk.TextBlock(s)} }

	// Process A: an editor with buffers and terminals.
	a := e.start(rec, sdk.ClientCapabilities{Fs: sdk.FileSystemCapabilities{ReadTextFile: true, WriteTextFile: true}, Terminal: true},
		"--model", "scripted:script-a.json", "--permission-mode", "full-access") // no sandbox: bash may run in the editor
	ns, err := a.conn.NewSession(ctx, sdk.NewSessionRequest{Cwd: e.work, McpServers: []sdk.McpServer{}})
	must(err)
	sid := ns.SessionId
	a.client.answers = []string{"trust"} // the workspace's hook is asked about at first use
	_, err = a.conn.CallExtension(ctx, "_rein/inject", map[string]any{"sessionId": sid, "content": text("CI is red on main"),
		"source": map[string]string{"kind": "plugin", "name": "ci-watch"}})
	must(err)
	r, err := a.conn.Prompt(ctx, sdk.PromptRequest{SessionId: sid, Prompt: text("fix the greeting")})
	must(err)
	if r.StopReason != sdk.StopReasonEndTurn {
		t.Fatalf("prompt 1: stop reason %s", r.StopReason)
	}
	if b, _ := os.ReadFile(filepath.Join(e.work, "hello.txt")); string(b) != "hello world\n" {
		t.Fatalf("hello.txt = %q after the edit", b)
	}
	_, err = a.conn.SetSessionMode(ctx, sdk.SetSessionModeRequest{SessionId: sid, ModeId: "read-only"})
	must(err)
	a.client.answers = []string{"allow", "always"}
	r, err = a.conn.Prompt(ctx, sdk.PromptRequest{SessionId: sid, Prompt: text("run the checks")})
	must(err)
	if r.StopReason != sdk.StopReasonEndTurn {
		t.Fatalf("prompt 2: stop reason %s", r.StopReason)
	}
	_, err = a.conn.CallExtension(ctx, "_rein/steer", map[string]any{"sessionId": sid, "content": text("only the unit tests"), "expectedTurn": 2})
	must(err)
	r, err = a.conn.Prompt(ctx, sdk.PromptRequest{SessionId: sid, Prompt: text("please rm everything")})
	must(err)
	if r.StopReason != sdk.StopReasonRefusal {
		t.Fatalf("blocked prompt: stop reason %s", r.StopReason)
	}
	r, err = a.conn.Prompt(ctx, sdk.PromptRequest{SessionId: sid, Prompt: text("/compact")})
	must(err)
	a.stop(t)
	// "Always" wrote the rule to the user's config, for this workspace.
	cfgFile, _ := os.ReadFile(filepath.Join(e.root, "config", "rein", "config.toml"))
	if want := "[workspaces." + strconv.Quote(trust.Key(e.work)) + ".permissions]\nallow = [\"bash(echo:*)\"]\n"; string(cfgFile) != want {
		t.Errorf("user config after allow always:\n%s\nwant:\n%s", cfgFile, want)
	}

	// Process B: an editor without buffers or terminals reopens it.
	b := e.start(rec, sdk.ClientCapabilities{}, "--model", "scripted:script-b.json")
	_, err = b.conn.LoadSession(ctx, sdk.LoadSessionRequest{SessionId: sid, Cwd: e.work, McpServers: []sdk.McpServer{}})
	must(err)
	prompted := make(chan sdk.PromptResponse, 1)
	go func() {
		r, err := b.conn.Prompt(ctx, sdk.PromptRequest{SessionId: sid, Prompt: text("wait for it")})
		if err != nil {
			t.Errorf("prompt 5: %v", err)
		}
		prompted <- r
	}()
	waitFile(t, filepath.Join(e.work, "started.txt")) // the command runs
	must(b.conn.Cancel(ctx, sdk.CancelNotification{SessionId: sid}))
	if r := <-prompted; r.StopReason != sdk.StopReasonCancelled {
		t.Fatalf("cancelled prompt: stop reason %s", r.StopReason)
	}
	b.stop(t)

	// Process C: load a session a crash left with a turn open.
	crashed := writeCrashedSession(t, e.home, e.work)
	c := e.start(rec, sdk.ClientCapabilities{}, "--model", "scripted:none.json")
	_, err = c.conn.LoadSession(ctx, sdk.LoadSessionRequest{SessionId: sdk.SessionId(crashed), Cwd: e.work, McpServers: []sdk.McpServer{}})
	must(err)
	_, err = c.conn.LoadSession(ctx, sdk.LoadSessionRequest{SessionId: "no-such-session", Cwd: e.work, McpServers: []sdk.McpServer{}})
	if err == nil {
		t.Fatal("loading an unknown session succeeded")
	}
	c.stop(t)

	for _, l := range rec.lines {
		if strings.HasPrefix(l, "!") {
			t.Errorf("rein wrote a line that is not JSON-RPC: %s", l)
		}
	}
	got := normalize(rec.lines, map[string]string{e.work: "{{cwd}}", e.root: "{{root}}", version(): "{{version}}"})
	checkGolden(t, filepath.Join("testdata", "acp.golden"), got)
	// The sessions' logs hold: the invariant, and the cancelled turn closed.
	st, err := jsonl.Open(e.home)
	must(err)
	for _, id := range []string{string(sid), crashed} {
		ld, err := st.Load(ctx, id, store.LoadOptions{})
		must(err)
		if vs := session.Check(ld.Log.Events(0)); len(vs) > 0 {
			t.Errorf("session %s breaks the invariant: %v", id, vs)
		}
	}
}

// TestACPNodeClient runs the official ACP TypeScript SDK client
// (testdata/acp-e2e, installed by 'npm ci') against 'rein acp': new,
// prompt, then session/load in a second process, checking the replay.
func TestACPNodeClient(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node is not installed; .ci/run installs it and runs this test")
	}
	e2e, err := filepath.Abs(filepath.Join("testdata", "acp-e2e"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(e2e, "node_modules", "@agentclientprotocol", "sdk")); err != nil {
		t.Skip("the ACP SDK is not installed: run 'npm ci' in cmd/rein/testdata/acp-e2e (.ci/run does)")
	}
	rein, err := exec.LookPath("rein")
	if err != nil {
		t.Skip("the rein test binary is not on PATH")
	}
	e := newACPEnv(t)
	e.write("notes.txt", "hello\n")
	e.write("none.json", `{"calls": []}`)
	e.write("e2e-script.json", `{"calls": [
 {"expect": {"lastUser": "what does notes.txt say?"},
  "reply": {"text": ["Let me ", "read it."], "toolCalls": [{"id": "call_read", "name": "read", "arguments": {"file_path": "notes.txt"}}]}},
 {"expect": {"contains": ["hello"]}, "reply": {"text": ["It says ", "hello."]}}
]}`)
	cmd := exec.Command(node, filepath.Join(e2e, "client.mjs"))
	cmd.Env = append(e.env, "REIN="+rein, "WORK="+e.work)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the Node client failed: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), `"ok":true`) {
		t.Fatalf("unexpected output:\n%s", out)
	}
	t.Logf("%s", out)
}
