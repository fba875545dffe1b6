// Package mcp makes the tools of Model Context Protocol servers rein tools.
// It is a client built on the official go-sdk: stdio servers (a child
// process), Streamable HTTP and the older HTTP+SSE transport.
//
// A Manager owns the servers of one session. Start launches them all in
// parallel and returns at once; Sync, called at each step boundary (a
// BeforeStep hook), puts the tools of the servers that are ready into the
// session's tool registry as mcp__SERVER__TOOL and renders the servers'
// instructions for the system prompt (Instructions, for an
// agent.Section.Dynamic). The first Sync waits for servers still starting,
// each at most its startup timeout; a server that is slower keeps
// starting and its tools appear at a later step. A server's
// notifications/tools/list_changed, a restart and a server that gives up
// change the tool set the same way: at the next Sync, so the agent logs
// the new set in the next request/header and a step never sees its tools
// change under it.
//
// A stdio server that exits is restarted with backoff (its calls in flight
// end as tool errors); one that keeps failing is given up and its tools
// removed. Close stops every server and returns when every process it
// started (and everything in their process groups) is gone. Server stderr
// goes to Options.Log, never to the terminal.
//
// A call's result keeps text, images (when Options.Images) and embedded
// resources; text beyond Options.MaxOutput is cut to its head and tail
// with a note, and the whole saved to a file the model can read. Every
// failure — a server that cannot start, speaks garbage, times out, or
// answers with an error — is a tool result the model reads and a message
// in Status, never a Go error of the turn.
//
// Concurrency: a Manager is safe for concurrent use. Sync must not run
// while a tool batch of the same session runs (a BeforeStep hook
// guarantees that). This package imports tool, llm and the MCP go-sdk; it
// must not import agent, guard or a face.
package mcp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/reinhq/rein/llm"
	"github.com/reinhq/rein/tool"
)

// Defaults of Options.
const (
	// DefaultMaxOutput is the bytes of a result's text shown to the model.
	DefaultMaxOutput = 30000
	// DefaultInstructionsBudget caps the servers' instructions in the
	// system prompt.
	DefaultInstructionsBudget = 8 << 10
	// DefaultMaxRestarts is how many restarts in a row a server gets
	// before rein gives up on it.
	DefaultMaxRestarts = 5
	// DefaultKillGrace is how long a stopping server gets after stdin is
	// closed, and again after SIGTERM, before SIGKILL.
	DefaultKillGrace = 2 * time.Second
)

// Options configure a Manager. Only Servers is required.
type Options struct {
	Servers []ServerConfig
	// Registry receives the ready servers' tools (names starting with
	// Prefix) at each Sync; nil keeps them out of any registry (rein mcp
	// list).
	Registry *tool.Registry
	// Environ is the environment every stdio server starts from, already
	// filtered by the caller's environment policy; a server's Env is added
	// to it. nil means an empty environment.
	Environ []string
	// Dir is what a stdio server's relative Cwd is relative to: the
	// workspace.
	Dir string
	// ServerDir is where stdio servers without a Cwd run (default: the
	// user's home directory, else the root directory). It must not be a
	// directory the session's tools can write: the directory a server
	// starts in chooses its code (see ServerConfig.Cwd).
	ServerDir string
	// Log receives the servers' stderr, one line each, prefixed with the
	// time and the server's name (at most 16 MiB). nil discards it.
	Log io.Writer
	// Images sends image content to the model; when false each image is
	// replaced by a note saying what it was.
	Images bool
	// MaxOutput is the bytes of result text shown to the model (default
	// DefaultMaxOutput).
	MaxOutput int
	// SpillDir is where results over MaxOutput are saved in full, in a
	// rein-<session> subdirectory (default os.TempDir()), when the session
	// has no scratch directory (tool.Env.ScratchDir, used when set).
	SpillDir string
	// InstructionsBudget caps the bytes of server instructions in the
	// system prompt; 0 means DefaultInstructionsBudget, negative none.
	InstructionsBudget int
	// HTTPClient is the base client of HTTP and SSE servers (default
	// http.DefaultClient's transport).
	HTTPClient *http.Client
	// Lookup resolves the ${VAR} references of the servers' configuration
	// (see ServerConfig.Expand) and their bearer_token_env variables
	// (default os.LookupEnv). A caller that must keep some variables from
	// servers (rein's own API keys) answers false for them.
	Lookup func(string) (string, bool)
	// Version is rein's version, sent to servers in initialize.
	Version string
	// MaxRestarts (default DefaultMaxRestarts) and Backoff (default
	// 1 s doubling to 30 s) govern restarts of a server that stopped.
	MaxRestarts int
	Backoff     func(attempt int) time.Duration
	// KillGrace is DefaultKillGrace when zero.
	KillGrace time.Duration
	// CheckCommand, when set, is asked about each stdio server's command
	// before its first start, with the path found (on rein's PATH, or
	// against the server's directory) and that path with symlinks
	// resolved; an error refuses the server. Restarts run the same file.
	// rein refuses commands that its sandboxed tools could have written (a
	// workspace's .venv/bin or node_modules/.bin on PATH).
	CheckCommand func(found, real string) error
	Logger       *slog.Logger
}

// State is where a server is in its life.
type State string

// States.
const (
	Starting   State = "starting"
	Ready      State = "ready"
	Restarting State = "restarting"
	Failed     State = "failed"
	Disabled   State = "disabled"
	Stopped    State = "stopped"
)

// Status is a server as Manager.Status reports it.
type Status struct {
	Name      string    `json:"name"`
	Origin    string    `json:"origin,omitempty"`
	Transport Transport `json:"transport"`
	// Target is the command line or URL.
	Target string `json:"target"`
	State  State  `json:"state"`
	// Error says why the server failed, is restarting, or last stopped.
	Error string `json:"error,omitempty"`
	// Server is the name and version the server gave in initialize.
	Server string `json:"server,omitempty"`
	// Tools are the tools offered to the model; Skipped those that could
	// not be (Note says why).
	Tools   []ToolInfo `json:"tools"`
	Skipped []ToolInfo `json:"skipped,omitempty"`
	// Instructions is the size of the server's instructions in bytes.
	Instructions int `json:"instructions,omitempty"`
	Restarts     int `json:"restarts,omitempty"`
}

// ToolInfo is one tool of a server.
type ToolInfo struct {
	// Name is what the model sees (mcp__SERVER__TOOL); Tool the server's
	// own name.
	Name     string `json:"name"`
	Tool     string `json:"tool"`
	ReadOnly bool   `json:"readOnly,omitempty"`
	// Note says what was changed in the tool's schema, or why it was
	// skipped.
	Note string `json:"note,omitempty"`
}

// Manager runs the MCP servers of one session. Create it with Start and
// dispose of it with Close.
type Manager struct {
	opts    Options
	ctx     context.Context
	cancel  context.CancelFunc
	started time.Time
	servers []*server
	wg      sync.WaitGroup
	sink    *logSink
	gen     atomic.Int64 // bumped when what Sync publishes changes
	token   atomic.Int64

	progress sync.Map // progress token -> func(*sdk.ProgressNotificationParams)

	syncMu  sync.Mutex
	mu      sync.Mutex
	synced  bool
	applied int64
	instr   string
	closed  bool
}

// Start launches every enabled server of opts in parallel and returns at
// once. A server whose configuration is invalid, or whose name another
// server already has, is reported failed (see Status) without starting.
func Start(opts Options) *Manager {
	if opts.MaxOutput <= 0 {
		opts.MaxOutput = DefaultMaxOutput
	}
	if opts.InstructionsBudget == 0 {
		opts.InstructionsBudget = DefaultInstructionsBudget
	}
	if opts.Lookup == nil {
		opts.Lookup = os.LookupEnv
	}
	if opts.MaxRestarts <= 0 {
		opts.MaxRestarts = DefaultMaxRestarts
	}
	if opts.Backoff == nil {
		opts.Backoff = func(n int) time.Duration { return min(time.Second<<min(n-1, 5), 30*time.Second) }
	}
	if opts.KillGrace <= 0 {
		opts.KillGrace = DefaultKillGrace
	}
	if opts.SpillDir == "" {
		opts.SpillDir = os.TempDir()
	}
	if opts.ServerDir == "" {
		opts.ServerDir = string(filepath.Separator)
		if h, err := os.UserHomeDir(); err == nil {
			opts.ServerDir = h
		}
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithCancel(context.Background())
	m := &Manager{opts: opts, ctx: ctx, cancel: cancel, started: time.Now(), sink: &logSink{w: opts.Log, max: maxLog}}
	seen := map[string]bool{}
	for _, cfg := range opts.Servers {
		cfg, xerr := cfg.Expand(opts.Lookup)
		s := &server{m: m, cfg: cfg, log: &serverLog{sink: m.sink, name: cfg.Name}, refresh: make(chan struct{}, 1),
			state: Starting, changed: make(chan struct{})}
		m.servers = append(m.servers, s)
		switch err := cfg.Validate(); {
		case cfg.Disabled:
			s.state, s.settled = Disabled, true
		case xerr != nil:
			s.state, s.err, s.settled = Failed, xerr.Error(), true
		case err != nil:
			s.state, s.err, s.settled = Failed, err.Error(), true
		case seen[cfg.Name]:
			s.state, s.err, s.settled = Failed, fmt.Sprintf("another server is already called %q", cfg.Name), true
		default:
			m.wg.Add(1)
			go s.run()
		}
		seen[cfg.Name] = true
	}
	return m
}

// Sync publishes what changed since the last Sync: the tools of every
// ready server go into Options.Registry (in server order, then the
// server's own order), the tools of servers that failed or were given up
// leave it, and Instructions changes. The first Sync first waits until
// every server has started or failed, each at most its startup timeout
// from Start, or until ctx is done. Call it between steps only.
func (m *Manager) Sync(ctx context.Context) error {
	m.syncMu.Lock()
	defer m.syncMu.Unlock()
	m.mu.Lock()
	first := !m.synced
	m.synced = true
	m.mu.Unlock()
	if first {
		m.waitStarted(ctx, true)
	}
	gen := m.gen.Load()
	m.mu.Lock()
	if !first && gen == m.applied {
		m.mu.Unlock()
		return nil
	}
	m.applied = gen
	m.mu.Unlock()
	var tools []tool.Tool
	var docs []instructions
	for _, s := range m.servers {
		ts, text := s.published()
		for _, t := range ts {
			tools = append(tools, t)
		}
		if text != "" {
			docs = append(docs, instructions{s.cfg.Name, text})
		}
	}
	if m.opts.Registry != nil {
		if err := m.opts.Registry.Sync(Prefix, tools); err != nil {
			return fmt.Errorf("mcp: %w", err)
		}
	}
	text := renderInstructions(docs, m.opts.InstructionsBudget)
	m.mu.Lock()
	m.instr = text
	m.mu.Unlock()
	return nil
}

// Wait returns when every server has started or failed, each at most its
// startup timeout from Start, or when ctx is done (rein mcp list).
func (m *Manager) Wait(ctx context.Context) { m.waitStarted(ctx, true) }

// waitStarted waits for each server's first start to settle, at most
// until its startup deadline when bounded.
func (m *Manager) waitStarted(ctx context.Context, bounded bool) {
	for _, s := range m.servers {
		deadline := m.started.Add(s.cfg.startupTimeout())
		for {
			s.mu.Lock()
			settled, ch := s.settled, s.changed
			s.mu.Unlock()
			if settled {
				break
			}
			var timeout <-chan time.Time
			if bounded {
				d := time.Until(deadline)
				if d <= 0 {
					break
				}
				t := time.NewTimer(d)
				timeout = t.C
				defer t.Stop()
			}
			select {
			case <-ch:
				continue
			case <-timeout:
			case <-ctx.Done():
				return
			}
			break
		}
	}
}

// Instructions returns the servers' instructions as of the last Sync, as
// one system-prompt section ("" when no ready server has any). It returns
// at once.
func (m *Manager) Instructions() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.instr
}

// Status reports every server, in configuration order.
func (m *Manager) Status() []Status {
	out := make([]Status, len(m.servers))
	for i, s := range m.servers {
		out[i] = s.status()
	}
	return out
}

// Close stops every server and returns when every process they ran is
// gone. Calls in flight end as aborted. Close is idempotent.
func (m *Manager) Close() error {
	m.mu.Lock()
	m.closed = true
	m.mu.Unlock()
	m.cancel()
	m.wg.Wait()
	for _, s := range m.servers {
		s.mu.Lock()
		if s.state != Failed && s.state != Disabled {
			s.setStateLocked(Stopped, s.err)
		}
		s.mu.Unlock()
	}
	return nil
}

type instructions struct{ server, text string }

// renderInstructions makes the system-prompt section of the servers'
// instructions, within budget bytes of instruction text.
func renderInstructions(docs []instructions, budget int) string {
	if budget < 0 || len(docs) == 0 {
		return ""
	}
	var b strings.Builder
	left := budget
	for _, d := range docs {
		text := strings.TrimSpace(d.text)
		if left <= 0 {
			fmt.Fprintf(&b, "\n\n[rein: the instructions of MCP server %s (%d bytes) did not fit the instructions budget]", d.server, len(text))
			continue
		}
		if b.Len() > 0 {
			b.WriteString("\n\n")
		}
		fmt.Fprintf(&b, "# MCP server instructions (%s)\n\n", d.server)
		if len(text) > left {
			cut := cutUTF8(text, left)
			fmt.Fprintf(&b, "%s\n\n[rein: cut: %d of %d bytes fit the instructions budget]", text[:cut], cut, len(text))
			left = 0
			continue
		}
		b.WriteString(text)
		left -= len(text)
	}
	return strings.TrimSpace(b.String())
}

// cutUTF8 returns the largest n <= max at which s can be cut without
// splitting a character.
func cutUTF8(s string, max int) int {
	if max >= len(s) {
		return len(s)
	}
	for max > 0 && s[max]&0xC0 == 0x80 {
		max--
	}
	return max
}

// server is one configured server and its current connection.
type server struct {
	m       *Manager
	cfg     ServerConfig
	exe     string // the command's path, found once (see pinCommand)
	log     *serverLog
	refresh chan struct{}

	mu       sync.Mutex
	state    State
	err      string
	conn     *conn
	tools    []*mcpTool
	skipped  []ToolInfo
	instr    string
	info     string
	restarts int
	settled  bool          // the first start ended
	everUp   bool          // it was ready once
	changed  chan struct{} // closed and replaced on every change
}

// conn is one connection to a server (one process, for stdio).
type conn struct {
	cs     *sdk.ClientSession
	proc   *proc
	ctx    context.Context // done when the connection is shut down
	cancel context.CancelFunc
}

// setStateLocked changes the state and wakes waiters; s.mu is held. It
// bumps the generation after the change, so a Sync that sees the new
// generation also sees the new state (what a server publishes depends on
// its state).
func (s *server) setStateLocked(st State, why string) {
	s.state, s.err = st, why
	close(s.changed)
	s.changed = make(chan struct{})
	s.m.gen.Add(1)
}

func (s *server) setState(st State, why string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.setStateLocked(st, why)
}

// published returns what Sync offers of the server: its tools while it is
// ready or restarting, and its instructions while it is ready.
func (s *server) published() ([]*mcpTool, string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch s.state {
	case Ready:
		return s.tools, s.instr
	case Restarting:
		return s.tools, ""
	}
	return nil, ""
}

func (s *server) status() Status {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := Status{Name: s.cfg.Name, Origin: s.cfg.Origin, Transport: s.cfg.Transport(), Target: s.cfg.Target(),
		State: s.state, Error: s.err, Server: s.info, Skipped: slices.Clone(s.skipped), Instructions: len(s.instr), Restarts: s.restarts,
		Tools: []ToolInfo{}}
	for _, t := range s.tools {
		st.Tools = append(st.Tools, ToolInfo{Name: t.spec.Name, Tool: t.remote, ReadOnly: t.readOnly, Note: t.note})
	}
	return st
}

// connectLimit bounds one attempt to start the server, handshake and
// tool list included: four times its startup timeout, at least a minute.
func (s *server) connectLimit() time.Duration {
	return max(4*s.cfg.startupTimeout(), time.Minute)
}

// run starts the server and keeps it running until the manager closes: a
// server that stops is restarted with backoff, up to MaxRestarts times in
// a row (a run of a minute or more resets the count).
func (s *server) run() {
	defer s.m.wg.Done()
	ctx := s.m.ctx
	failures := 0
	for {
		c, err := s.connect(ctx)
		if ctx.Err() != nil {
			if err == nil {
				s.shutdown(c)
			}
			return
		}
		if err == nil {
			began := time.Now()
			err = s.serve(ctx, c)
			if ctx.Err() != nil {
				return
			}
			if time.Since(began) >= time.Minute {
				failures = 0
			}
		} else if !s.everUp {
			s.log.note("failed to start: %v", err)
			s.mu.Lock()
			s.settled = true
			s.setStateLocked(Failed, err.Error())
			s.mu.Unlock()
			return
		}
		failures++
		if failures > s.m.opts.MaxRestarts {
			s.log.note("giving up: %v", err)
			s.setState(Failed, fmt.Sprintf("%v; gave up after %d restarts", err, failures-1))
			return
		}
		wait := s.m.opts.Backoff(failures)
		s.log.note("stopped: %v; restarting in %s", err, wait)
		s.mu.Lock()
		s.restarts++
		s.setStateLocked(Restarting, err.Error())
		s.mu.Unlock()
		if !waitCtx(ctx, wait) {
			return
		}
	}
}

// connect starts the server (for stdio, its process), does the handshake
// and lists its tools. On success the server is ready; on failure
// everything started is stopped again.
func (s *server) connect(ctx context.Context) (*conn, error) {
	cctx, cancel := context.WithTimeoutCause(ctx, s.connectLimit(), errStartTimeout)
	defer cancel()
	t, p, err := s.transport()
	if err != nil {
		return nil, err
	}
	if p != nil {
		// A process that dies during the handshake ends it at once.
		go func() {
			select {
			case <-p.done:
				cancel()
			case <-cctx.Done():
			}
		}()
	}
	client := sdk.NewClient(&sdk.Implementation{Name: "rein", Version: s.m.opts.Version}, &sdk.ClientOptions{
		Capabilities: &sdk.ClientCapabilities{},
		Logger:       s.m.opts.Logger,
		ToolListChangedHandler: func(context.Context, *sdk.ToolListChangedRequest) {
			select {
			case s.refresh <- struct{}{}:
			default:
			}
		},
		ProgressNotificationHandler: func(_ context.Context, req *sdk.ProgressNotificationClientRequest) {
			if req.Params == nil {
				return
			}
			if f, ok := s.m.progress.Load(fmt.Sprint(req.Params.ProgressToken)); ok {
				f.(func(*sdk.ProgressNotificationParams))(req.Params)
			}
		},
	})
	c := &conn{proc: p}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	c.cs, err = client.Connect(cctx, &lasting{t: t, ctx: c.ctx, cancel: c.cancel}, nil)
	if err == nil {
		var ts []*mcpTool
		var skipped []ToolInfo
		if ts, skipped, err = s.list(cctx, c); err == nil {
			ir := c.cs.InitializeResult()
			s.mu.Lock()
			s.conn, s.tools, s.skipped = c, ts, skipped
			s.instr, s.info = "", ""
			if ir != nil {
				s.instr = ir.Instructions
				if ir.ServerInfo != nil {
					s.info = strings.TrimSpace(ir.ServerInfo.Name + " " + ir.ServerInfo.Version)
				}
			}
			s.settled, s.everUp = true, true
			s.setStateLocked(Ready, "")
			s.mu.Unlock()
			s.m.gen.Add(1)
			s.log.note("ready: %d tools", len(ts))
			return c, nil
		}
	}
	err = s.startError(cctx, err, p)
	s.shutdown(c)
	return nil, err
}

var (
	errStartTimeout = errors.New("start timeout")
	errServerDown   = errors.New("the server stopped")
	errCallTimeout  = errors.New("call timeout")
)

// startError says why a start failed, in words for a person and a model.
func (s *server) startError(ctx context.Context, err error, p *proc) error {
	if p != nil && err != nil {
		// The process is probably exiting: give it a moment, so the
		// message can say how it ended and what it said.
		p.settle(500 * time.Millisecond)
	}
	var why string
	switch {
	case err != nil && (strings.Contains(err.Error(), "invalid character") || strings.Contains(err.Error(), "looking for beginning")):
		why = "it wrote something that is not JSON-RPC on stdout: " + err.Error()
	case p != nil && p.exited() != "":
		why = fmt.Sprintf("it stopped (%s) before it finished starting", p.exited())
	case errors.Is(context.Cause(ctx), errStartTimeout):
		why = fmt.Sprintf("it did not finish starting within %s", s.connectLimit())
	case err != nil:
		why = err.Error()
	default:
		why = "unknown failure"
	}
	if p != nil {
		if t := p.tail.String(); t != "" {
			why += "\nstderr:\n" + t
		}
	}
	return errors.New(why)
}

// transport builds the server's transport; for stdio it starts the
// process.
func (s *server) transport() (sdk.Transport, *proc, error) {
	switch s.cfg.Transport() {
	case HTTP, SSE:
		hc, err := s.httpClient()
		if err != nil {
			return nil, nil, err
		}
		if s.cfg.Transport() == SSE {
			return &sdk.SSEClientTransport{Endpoint: s.cfg.URL, HTTPClient: hc}, nil, nil
		}
		return &sdk.StreamableClientTransport{Endpoint: s.cfg.URL, HTTPClient: hc, MaxRetries: -1}, nil, nil
	}
	cfg, err := s.pinCommand()
	if err != nil {
		return nil, nil, err
	}
	p, err := startProc(cfg, s.m.opts.Dir, s.m.opts.ServerDir, s.m.opts.Environ, s.log)
	if err != nil {
		return nil, nil, fmt.Errorf("cannot start %s: %w", s.cfg.Command, err)
	}
	return &sdk.IOTransport{Reader: p.stdout, Writer: p.stdin}, p, nil
}

// httpClient returns the HTTP client of an HTTP or SSE server: the base
// client with the server's headers and bearer token on every request.
func (s *server) httpClient() (*http.Client, error) {
	h := http.Header{}
	for k, v := range s.cfg.Headers {
		h.Set(k, v)
	}
	if name := s.cfg.BearerTokenEnv; name != "" {
		tok, _ := s.m.opts.Lookup(name)
		if tok == "" {
			return nil, fmt.Errorf("bearer_token_env %s is not set", name)
		}
		h.Set("Authorization", "Bearer "+tok)
	}
	base := http.DefaultClient
	if s.m.opts.HTTPClient != nil {
		base = s.m.opts.HTTPClient
	}
	c := *base
	rt := c.Transport
	if rt == nil {
		rt = http.DefaultTransport
	}
	c.Transport = headerTransport{base: rt, h: h}
	return &c, nil
}

// lasting connects its transport with the connection's own context rather
// than the handshake's: the SSE transport ties its event stream to the
// context it connects with, and the handshake's ends when the handshake
// does. A handshake given up before the transport connected cancels the
// connection.
type lasting struct {
	t      sdk.Transport
	ctx    context.Context
	cancel context.CancelFunc
}

func (l *lasting) Connect(ctx context.Context) (sdk.Connection, error) {
	stop := context.AfterFunc(ctx, l.cancel)
	defer stop()
	return l.t.Connect(l.ctx)
}

type headerTransport struct {
	base http.RoundTripper
	h    http.Header
}

func (t headerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if len(t.h) > 0 {
		req = req.Clone(req.Context())
		for k, v := range t.h {
			req.Header[k] = v
		}
	}
	return t.base.RoundTrip(req)
}

// list fetches the server's tools and makes them rein tools; tools that
// cannot be offered are returned as skipped, with the reason.
func (s *server) list(ctx context.Context, c *conn) ([]*mcpTool, []ToolInfo, error) {
	var out []*mcpTool
	var skipped []ToolInfo
	seen := map[string]string{}
	caps := c.cs.InitializeResult()
	if caps != nil && caps.Capabilities != nil && caps.Capabilities.Tools == nil {
		return nil, nil, nil // a server without tools (resources or prompts only)
	}
	for t, err := range c.cs.Tools(ctx, nil) {
		if err != nil {
			return nil, nil, fmt.Errorf("listing its tools: %w", err)
		}
		if t == nil || t.Name == "" {
			skipped = append(skipped, ToolInfo{Note: "a tool without a name"})
			continue
		}
		name := ToolName(s.cfg.Name, t.Name)
		if other, dup := seen[name]; dup {
			skipped = append(skipped, ToolInfo{Name: name, Tool: t.Name, Note: fmt.Sprintf("its name is %s, like tool %q's", name, other)})
			continue
		}
		schema, notes, err := inputSchema(t.InputSchema)
		if err != nil {
			skipped = append(skipped, ToolInfo{Name: name, Tool: t.Name, Note: err.Error()})
			continue
		}
		seen[name] = t.Name
		desc := t.Description
		if desc == "" {
			desc = t.Title
		}
		if desc == "" && t.Annotations != nil {
			desc = t.Annotations.Title
		}
		if desc == "" {
			desc = fmt.Sprintf("Tool %s of MCP server %s.", t.Name, s.cfg.Name)
		}
		out = append(out, &mcpTool{s: s, remote: t.Name, readOnly: t.Annotations != nil && t.Annotations.ReadOnlyHint,
			spec: llm.ToolSpec{Name: name, Description: desc, Parameters: schema}, note: strings.Join(notes, "; ")})
	}
	for _, sk := range skipped {
		s.log.note("tool %q skipped: %s", sk.Tool, sk.Note)
	}
	return out, skipped, nil
}

// serve waits for the connection to end, refreshing the tools when the
// server says they changed. It returns why the connection ended (nil
// when the manager closed it).
func (s *server) serve(ctx context.Context, c *conn) error {
	ended := make(chan error, 1)
	go func() { ended <- c.cs.Wait() }()
	var exited <-chan struct{}
	if c.proc != nil {
		exited = c.proc.done
	}
	for {
		select {
		case <-ctx.Done():
			s.shutdown(c)
			return nil
		case err := <-ended:
			s.shutdown(c)
			return s.endError(err, c.proc)
		case <-exited:
			s.shutdown(c)
			return s.endError(nil, c.proc)
		case <-s.refresh:
			lctx, cancel := context.WithTimeout(ctx, s.cfg.startupTimeout())
			ts, skipped, err := s.list(lctx, c)
			cancel()
			if err != nil {
				s.log.note("tools changed, but listing them failed: %v", err)
				continue
			}
			s.mu.Lock()
			s.tools, s.skipped = ts, skipped
			s.setStateLocked(s.state, s.err)
			s.mu.Unlock()
			s.m.gen.Add(1)
			s.log.note("tools changed: %d tools", len(ts))
		}
	}
}

// endError says why a running server's connection ended.
func (s *server) endError(err error, p *proc) error {
	why := "the connection closed"
	if p != nil {
		p.settle(500 * time.Millisecond)
	}
	switch {
	case p != nil && p.exited() != "":
		why = "it stopped (" + p.exited() + ")"
	case err != nil:
		why = "the connection failed: " + err.Error()
	}
	if p != nil {
		if t := p.tail.String(); t != "" {
			why += "\nstderr:\n" + t
		}
	}
	return errors.New(why)
}

// shutdown ends a connection: calls in flight are cancelled, the session
// is closed and the process stopped (gracefully, then by force).
func (s *server) shutdown(c *conn) {
	c.cancel()
	s.mu.Lock()
	if s.conn == c {
		s.conn = nil
	}
	s.mu.Unlock()
	closed := make(chan struct{})
	go func() {
		if c.cs != nil {
			_ = c.cs.Close()
		}
		close(closed)
	}()
	if c.proc != nil {
		c.proc.stop(s.m.opts.KillGrace)
	}
	select {
	case <-closed:
	case <-time.After(5 * time.Second):
		s.m.opts.Logger.Warn("mcp: closing the session took too long; going on", "server", s.cfg.Name)
	}
}

// session returns the server's connection, waiting while the server is
// starting or restarting, at most its startup timeout.
func (s *server) session(ctx context.Context) (*conn, error) {
	deadline := time.NewTimer(s.cfg.startupTimeout())
	defer deadline.Stop()
	for {
		s.mu.Lock()
		st, why, c, ch := s.state, s.err, s.conn, s.changed
		s.mu.Unlock()
		switch st {
		case Ready:
			if c != nil {
				return c, nil
			}
		case Failed:
			return nil, fmt.Errorf("MCP server %s failed: %s", s.cfg.Name, firstLine(why))
		case Disabled, Stopped:
			return nil, fmt.Errorf("MCP server %s is %s", s.cfg.Name, st)
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-s.m.ctx.Done():
			return nil, fmt.Errorf("MCP server %s was stopped", s.cfg.Name)
		case <-deadline.C:
			if st == Restarting {
				return nil, fmt.Errorf("MCP server %s stopped (%s) and has not restarted within %s", s.cfg.Name, firstLine(why), s.cfg.startupTimeout())
			}
			return nil, fmt.Errorf("MCP server %s has not finished starting within %s", s.cfg.Name, s.cfg.startupTimeout())
		}
	}
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return s
}
