package acp_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	sdk "github.com/coder/acp-go-sdk"

	"github.com/reinhq/rein/acp"
	"github.com/reinhq/rein/agent"
	"github.com/reinhq/rein/llm"
	"github.com/reinhq/rein/llm/scripted"
	"github.com/reinhq/rein/llm/scripted/scriptedtest"
	"github.com/reinhq/rein/session"
	"github.com/reinhq/rein/store"
	"github.com/reinhq/rein/store/memstore"
)

// harness is an in-process server on pipes, with a client connection.
type harness struct {
	t      *testing.T
	st     store.Store
	opens  atomic.Int32 // agents started (Config.Open calls)
	conn   *sdk.ClientSideConnection
	client *recClient
	toSrv  *io.PipeWriter // the client's side of the server's stdin
	served chan error
	dir    string
}

// recClient records the updates it gets.
type recClient struct {
	mu      sync.Mutex
	updates []sdk.SessionNotification
	notify  chan struct{}
	// permission, when set, answers permission requests.
	permission func(sdk.RequestPermissionRequest) sdk.RequestPermissionResponse
}

func (c *recClient) SessionUpdate(_ context.Context, n sdk.SessionNotification) error {
	c.mu.Lock()
	c.updates = append(c.updates, n)
	c.mu.Unlock()
	select {
	case c.notify <- struct{}{}:
	default:
	}
	return nil
}

// waitFor waits until an update satisfies ok.
func (c *recClient) waitFor(t *testing.T, ok func(sdk.SessionUpdate) bool) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		c.mu.Lock()
		for _, n := range c.updates {
			if ok(n.Update) {
				c.mu.Unlock()
				return
			}
		}
		c.mu.Unlock()
		select {
		case <-c.notify:
		case <-deadline:
			t.Fatal("the update never came")
		}
	}
}

func (c *recClient) RequestPermission(_ context.Context, p sdk.RequestPermissionRequest) (sdk.RequestPermissionResponse, error) {
	if c.permission != nil {
		return c.permission(p), nil
	}
	return sdk.RequestPermissionResponse{Outcome: sdk.NewRequestPermissionOutcomeSelected("allow")}, nil
}
func (c *recClient) ReadTextFile(context.Context, sdk.ReadTextFileRequest) (sdk.ReadTextFileResponse, error) {
	return sdk.ReadTextFileResponse{}, errors.New("not offered")
}
func (c *recClient) WriteTextFile(context.Context, sdk.WriteTextFileRequest) (sdk.WriteTextFileResponse, error) {
	return sdk.WriteTextFileResponse{}, errors.New("not offered")
}
func (c *recClient) CreateTerminal(context.Context, sdk.CreateTerminalRequest) (sdk.CreateTerminalResponse, error) {
	return sdk.CreateTerminalResponse{}, errors.New("not offered")
}
func (c *recClient) KillTerminal(context.Context, sdk.KillTerminalRequest) (sdk.KillTerminalResponse, error) {
	return sdk.KillTerminalResponse{}, errors.New("not offered")
}
func (c *recClient) TerminalOutput(context.Context, sdk.TerminalOutputRequest) (sdk.TerminalOutputResponse, error) {
	return sdk.TerminalOutputResponse{}, errors.New("not offered")
}
func (c *recClient) ReleaseTerminal(context.Context, sdk.ReleaseTerminalRequest) (sdk.ReleaseTerminalResponse, error) {
	return sdk.ReleaseTerminalResponse{}, errors.New("not offered")
}
func (c *recClient) WaitForTerminalExit(context.Context, sdk.WaitForTerminalExitRequest) (sdk.WaitForTerminalExitResponse, error) {
	return sdk.WaitForTerminalExitResponse{}, errors.New("not offered")
}

// serve starts a server whose sessions run model, and a client.
func serve(t *testing.T, model llm.Provider) *harness { return serveAsking(t, model, nil) }

// serveAsking is serve whose Open first asks the trust question when ask
// is set, and reports the answer on it.
func serveAsking(t *testing.T, model llm.Provider, ask chan acp.TrustAnswer) *harness {
	t.Helper()
	return serveOn(t, memstore.New(memstore.Options{}), t.TempDir(), model, ask)
}

// serveOn is serveAsking on store st, with sessions in dir: a second
// server on the same store is another rein process.
func serveOn(t *testing.T, st store.Store, dir string, model llm.Provider, ask chan acp.TrustAnswer) *harness {
	t.Helper()
	h := &harness{t: t, st: st, served: make(chan error, 1), dir: dir}
	cfg := acp.Config{
		Store:  h.st,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Open: func(ctx context.Context, req acp.OpenRequest) (*acp.Opened, error) {
			h.opens.Add(1)
			if ask != nil {
				ans, _ := req.Ask.AskTrust(ctx, "Trust the workspace?", "Its hooks would run.")
				ask <- ans
			}
			c := agent.Config{Store: h.st, Provider: model, Cwd: req.Cwd, Approver: req.Approver, SessionID: req.SessionID}
			var ag *agent.Agent
			var err error
			if req.Create {
				ag, err = agent.New(ctx, c)
			} else {
				ag, err = agent.Resume(ctx, h.st, req.SessionID, c)
			}
			if err != nil {
				return nil, err
			}
			return &acp.Opened{Agent: ag}, nil
		},
	}
	srvIn, toSrv := io.Pipe()
	fromSrv, srvOut := io.Pipe()
	h.toSrv = toSrv
	go func() {
		h.served <- acp.Serve(context.Background(), cfg, srvIn, srvOut)
		srvOut.Close()
	}()
	h.client = &recClient{notify: make(chan struct{}, 1)}
	h.conn = sdk.NewClientSideConnection(h.client, toSrv, fromSrv)
	t.Cleanup(func() {
		toSrv.Close()
		select {
		case <-h.served:
		case <-time.After(10 * time.Second):
			t.Error("Serve did not return after the client went away")
		}
	})
	ctx := context.Background()
	if _, err := h.conn.Initialize(ctx, sdk.InitializeRequest{ProtocolVersion: sdk.ProtocolVersionNumber}); err != nil {
		t.Fatal(err)
	}
	return h
}

func (h *harness) newSession() sdk.SessionId {
	h.t.Helper()
	ns, err := h.conn.NewSession(context.Background(), sdk.NewSessionRequest{Cwd: h.dir, McpServers: []sdk.McpServer{}})
	if err != nil {
		h.t.Fatal(err)
	}
	return ns.SessionId
}

func text(s string) []sdk.ContentBlock { return []sdk.ContentBlock{sdk.TextBlock(s)} }

func checkLog(t *testing.T, st store.Store, id string) *session.Log {
	t.Helper()
	ld, err := st.Load(context.Background(), id, store.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if vs := session.Check(ld.Log.Events(0)); len(vs) > 0 {
		t.Fatalf("invariant: %v", vs)
	}
	return ld.Log
}

// TestDisconnectMidTurn: a client that goes away while a turn streams
// cancels the turn; the log is closed cleanly and released.
func TestDisconnectMidTurn(t *testing.T) {
	model := scriptedtest.New(t, scripted.Call{Reply: scripted.Reply{Text: []string{"working…"}}, Hang: true})
	h := serve(t, model)
	sid := h.newSession()
	go func() {
		_, _ = h.conn.Prompt(context.Background(), sdk.PromptRequest{SessionId: sid, Prompt: text("go")})
	}()
	h.client.waitFor(t, func(u sdk.SessionUpdate) bool { return u.AgentMessageChunk != nil })
	h.toSrv.Close()
	select {
	case err := <-h.served:
		if err != nil {
			t.Fatalf("Serve: %v", err)
		}
		h.served <- nil // for the cleanup
	case <-time.After(10 * time.Second):
		t.Fatal("Serve did not return")
	}
	l := checkLog(t, h.st, string(sid))
	last := l.Event(l.Len() - 1)
	p, _ := last.Decode()
	te, ok := p.(*session.TurnEnd)
	if !ok || te.Reason.Kind != session.ReasonAborted || te.Reason.Cause != session.CauseClosed {
		t.Fatalf("last event %s %s, want turn/end aborted{closed}", last.Type, last.Data)
	}
	// Released: another writer may open it.
	w, _, err := h.st.Open(context.Background(), string(sid))
	if err != nil {
		t.Fatalf("the session is still held: %v", err)
	}
	_ = w.Close()
}

// TestPromptWhileTurnRuns: a second prompt waits for the first's turn and
// then runs as its own turn. A cancel meanwhile cancels the running turn
// only: the waiting prompt still runs.
func TestPromptWhileTurnRuns(t *testing.T) {
	model := scriptedtest.New(t,
		scripted.Call{Reply: scripted.Reply{Text: []string{"first…"}}, Hang: true},
		scripted.Call{Expect: &scripted.Expect{LastUser: "second"}, Reply: scripted.Reply{Text: []string{"second done"}}},
	)
	h := serve(t, model)
	sid := h.newSession()
	answers := make(chan string, 2)
	prompt := func(s string) {
		r, err := h.conn.Prompt(context.Background(), sdk.PromptRequest{SessionId: sid, Prompt: text(s)})
		if err != nil {
			t.Errorf("prompt %q: %v", s, err)
		}
		answers <- s + ":" + string(r.StopReason)
	}
	go prompt("first")
	h.client.waitFor(t, func(u sdk.SessionUpdate) bool { return u.AgentMessageChunk != nil })
	go prompt("second")
	time.Sleep(50 * time.Millisecond) // the second is waiting
	if err := h.conn.Cancel(context.Background(), sdk.CancelNotification{SessionId: sid}); err != nil {
		t.Fatal(err)
	}
	got := []string{<-answers, <-answers}
	slices.Sort(got)
	if strings.Join(got, ",") != "first:cancelled,second:end_turn" {
		t.Fatalf("answers %v", got)
	}
	// The turns ran one after the other: the first aborted, the second
	// (its own turn, after it) completed.
	l := checkLog(t, h.st, string(sid))
	var ends []string
	for _, ev := range l.Events(0) {
		if ev.Type == session.TypeTurnEnd {
			p, _ := ev.Decode()
			te := p.(*session.TurnEnd)
			ends = append(ends, fmt.Sprintf("%d:%s", te.Turn, te.Reason.Kind))
		}
	}
	if strings.Join(ends, ",") != "1:aborted,2:completed" {
		t.Fatalf("turns ended %v", ends)
	}
}

// TestSteerExpectedTurn: _rein/steer with expectedTurn steers that turn
// while it runs, and refuses (changing nothing) once it ended.
func TestSteerExpectedTurn(t *testing.T) {
	streaming, release := make(chan struct{}), make(chan struct{})
	model := scriptedtest.New(t,
		scripted.Call{Reply: scripted.Reply{Text: []string{"looking"}}, BeforeChunk: func(ctx context.Context, i int) {
			if i == 0 {
				close(streaming)
				<-release
			}
		}},
		scripted.Call{Expect: &scripted.Expect{LastUser: "only the unit tests"}, Reply: scripted.Reply{Text: []string{"ok, unit tests"}}},
	)
	h := serve(t, model)
	sid := h.newSession()
	done := make(chan sdk.PromptResponse, 1)
	go func() {
		r, _ := h.conn.Prompt(context.Background(), sdk.PromptRequest{SessionId: sid, Prompt: text("run the tests")})
		done <- r
	}()
	steer := func(turn int) acp.SteerResponse {
		raw, err := h.conn.CallExtension(context.Background(), acp.MethodSteer, map[string]any{"sessionId": sid, "content": text("only the unit tests"), "expectedTurn": turn})
		if err != nil {
			t.Fatal(err)
		}
		var r acp.SteerResponse
		if err := json.Unmarshal(raw, &r); err != nil {
			t.Fatal(err)
		}
		return r
	}
	// Steer once the first request is streaming: a steer that landed
	// between turn/start and the first request would be drained into that
	// request, and the turn would need no second step.
	<-streaming
	if r := steer(1); r.Status != acp.Steered || r.Turn != 1 {
		t.Fatalf("steer during turn 1: %+v", r)
	}
	close(release)
	if resp := <-done; resp.StopReason != sdk.StopReasonEndTurn {
		t.Fatalf("stop reason %s", resp.StopReason)
	}
	n := checkLog(t, h.st, string(sid)).Len()
	if r := steer(1); r.Status != acp.NotRunning {
		t.Fatalf("steer after turn 1: %+v", r)
	}
	if got := checkLog(t, h.st, string(sid)).Len(); got != n {
		t.Fatalf("a refused steer changed the log: %d -> %d events", n, got)
	}
}

// TestBadMessages: what is not JSON-RPC gets an error answer, unknown
// methods and sessions theirs; the connection survives all of them.
func TestBadMessages(t *testing.T) {
	srvIn, toSrv := io.Pipe()
	fromSrv, srvOut := io.Pipe()
	cfg := acp.Config{Store: memstore.New(memstore.Options{}), Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Open: func(context.Context, acp.OpenRequest) (*acp.Opened, error) {
		return nil, errors.New("no sessions here")
	}}
	done := make(chan error, 1)
	go func() { done <- acp.Serve(context.Background(), cfg, srvIn, srvOut); srvOut.Close() }()
	lines := make(chan string)
	go func() {
		br := bufio.NewReader(fromSrv)
		for {
			line, err := br.ReadString('\n')
			if err != nil {
				close(lines)
				return
			}
			lines <- line
		}
	}()
	for _, tc := range []struct{ in, want string }{
		{"this is not json\n", `"id":null,"error":{"code":-32700`},
		{"[1,2]\n", `"id":null,"error":{"code":-32600`},
		{`{"jsonrpc":"2.0","id":7}` + "\n", `"id":7,"error":{"code":-32600`},
		{`{"jsonrpc":"2.0","id":8,"method":"no/such"}` + "\n", `"id":8,"error":{"code":-32601`},
		{`{"jsonrpc":"2.0","id":9,"method":"session/prompt","params":{"sessionId":"nope","prompt":[]}}` + "\n", `"id":9,"error":{"code":-32002`},
		{`{"jsonrpc":"2.0","id":10,"method":"session/new","params":{"cwd":"relative","mcpServers":[]}}` + "\n", `"id":10,"error":{"code":-32602`},
		{`{"jsonrpc":"2.0","id":11,"method":"_rein/steer","params":{"sessionId":"nope","content":[]}}` + "\n", `"id":11,"error":{"code":-32002`},
		{`{"jsonrpc":"2.0","id":12,"method":"initialize","params":{"protocolVersion":1}}` + "\n", `"id":12,"result":{`},
		// Bad params are -32602, in the protocol's words, not Go's.
		{`{"jsonrpc":"2.0","id":13,"method":"session/prompt","params":{"prompt":[{"type":"text","text":"hi"}]}}` + "\n", `"id":13,"error":{"code":-32602,"message":"Invalidparams","data":{"error":"sessionIdisrequired"}`},
		{`{"jsonrpc":"2.0","id":14,"method":"session/prompt","params":{"sessionId":"nope","prompt":"x"}}` + "\n", `"id":14,"error":{"code":-32602,"message":"Invalidparams","data":{"error":"prompt:wantalistofcontentblocks,notastring"}`},
		{`{"jsonrpc":"2.0","id":15,"method":"session/list","params":{"cwd":"relative"}}` + "\n", `"id":15,"error":{"code":-32602`},
		{`{"jsonrpc":"2.0","id":16,"method":"session/list","params":{"cursor":"garbage"}}` + "\n", `"id":16,"error":{"code":-32602`},
		{`{"jsonrpc":"2.0","id":17,"method":"session/list","params":{}}` + "\n", `"id":17,"result":{"sessions":[]}`},
		{`{"jsonrpc":"2.0","id":18,"method":"_rein/inject","params":{"sessionId":"nope","content":"x"}}` + "\n", `"id":18,"error":{"code":-32602,"message":"Invalidparams","data":{"error":"_rein/inject:content:wantalistofcontentblocks,notastring"}`},
		{`{"jsonrpc":"2.0","id":19,"method":"session/new","params":{"cwd":7,"mcpServers":[]}}` + "\n", `"id":19,"error":{"code":-32602,"message":"Invalidparams","data":{"error":"cwd:wantastring,notanumber"}`},
		{`{"jsonrpc":"2.0","id":20,"method":"session/close","params":{}}` + "\n", `"id":20,"error":{"code":-32602`},
	} {
		if _, err := io.WriteString(toSrv, tc.in); err != nil {
			t.Fatal(err)
		}
		var line string
		select {
		case line = <-lines:
		case <-time.After(5 * time.Second):
			t.Fatalf("%q: no answer", tc.in)
		}
		if !strings.Contains(strings.ReplaceAll(line, " ", ""), tc.want) {
			t.Errorf("%q: got %s, want %s", tc.in, line, tc.want)
		}
	}
	toSrv.Close()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// TestTrustAskedAtFirstUse: a new session's agent starts at its first
// prompt, after the trust question asked through the session; a cancel
// while the question is open answers the prompt cancelled, and no turn
// runs.
func TestTrustAskedAtFirstUse(t *testing.T) {
	asked := make(chan acp.TrustAnswer, 2)
	h := serveAsking(t, scriptedtest.New(t, scripted.Call{Expect: &scripted.Expect{LastUser: "again"}, Reply: scripted.Reply{Text: []string{"ok"}}}), asked)
	question := make(chan sdk.RequestPermissionRequest, 1)
	answer := make(chan sdk.RequestPermissionResponse)
	h.client.permission = func(p sdk.RequestPermissionRequest) sdk.RequestPermissionResponse {
		question <- p
		return <-answer
	}
	sid := h.newSession()
	select {
	case <-asked:
		t.Fatal("the trust question was asked before the session's first use")
	case <-time.After(50 * time.Millisecond):
	}
	done := make(chan sdk.PromptResponse, 1)
	go func() {
		r, err := h.conn.Prompt(context.Background(), sdk.PromptRequest{SessionId: sid, Prompt: text("go")})
		if err != nil {
			t.Errorf("prompt: %v", err)
		}
		done <- r
	}()
	q := <-question
	if q.SessionId != sid || len(q.Options) != 3 || q.Options[0].Kind != sdk.PermissionOptionKindAllowAlways {
		t.Fatalf("trust question %+v", q)
	}
	if err := h.conn.Cancel(context.Background(), sdk.CancelNotification{SessionId: sid}); err != nil {
		t.Fatal(err)
	}
	answer <- sdk.RequestPermissionResponse{Outcome: sdk.NewRequestPermissionOutcomeCancelled()}
	if a := <-asked; a != acp.TrustNo {
		t.Fatalf("a cancelled question answered %v", a)
	}
	if r := <-done; r.StopReason != sdk.StopReasonCancelled {
		t.Fatalf("stop reason %s", r.StopReason)
	}
	// The next prompt runs; the question is not asked again.
	r, err := h.conn.Prompt(context.Background(), sdk.PromptRequest{SessionId: sid, Prompt: text("again")})
	if err != nil || r.StopReason != sdk.StopReasonEndTurn {
		t.Fatalf("second prompt: %v %v", r.StopReason, err)
	}
	if turns, _ := checkLog(t, h.st, string(sid)).Turn(); turns != 1 {
		t.Fatalf("%d turns, want 1 (the cancelled prompt ran none)", turns)
	}
}

// TestCompactNothingIsANotice: /compact with too little to compact says
// so as a rein notice, not as the agent's words, and the prompt answers
// end_turn.
func TestCompactNothingIsANotice(t *testing.T) {
	h := serve(t, scriptedtest.New(t))
	sid := h.newSession()
	n := h.count()
	r, err := h.prompt(sid, "/compact")
	if err != nil {
		t.Fatal(err)
	}
	if r.StopReason != sdk.StopReasonEndTurn {
		t.Errorf("stop reason %s", r.StopReason)
	}
	var notices []sdk.SessionUpdateToolCall
	for _, line := range h.shown(sid, n) {
		if strings.HasPrefix(line, "agent:") {
			t.Errorf("an agent message: %s", line)
		}
	}
	h.client.mu.Lock()
	for _, u := range h.client.updates[n:] {
		if u.Update.ToolCall != nil {
			notices = append(notices, *u.Update.ToolCall)
		}
	}
	h.client.mu.Unlock()
	if len(notices) != 1 {
		t.Fatalf("%d notices, want 1: %v", len(notices), h.shown(sid, n))
	}
	c := notices[0]
	rein, _ := c.Meta["rein"].(map[string]any)
	if c.Title != "Nothing to compact yet" || c.Kind != sdk.ToolKindOther || c.Status != sdk.ToolCallStatusCompleted ||
		rein["entry"] != "compaction" || !strings.HasPrefix(string(c.ToolCallId), "rein-compaction-") {
		t.Errorf("notice %+v", c)
	}
	if len(c.Content) != 1 || c.Content[0].Content == nil || c.Content[0].Content.Content.Text == nil ||
		c.Content[0].Content.Content.Text.Text != "The conversation is too short to compact." {
		t.Errorf("notice content %+v", c.Content)
	}
}
