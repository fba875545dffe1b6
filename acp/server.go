// Package acp is rein's Agent Client Protocol server: it makes rein an
// agent that editors (Zed, JetBrains, Neovim and Emacs plugins) drive over
// JSON-RPC on stdio, using github.com/coder/acp-go-sdk for the protocol's
// types and connection.
//
// Every session/update it sends comes from the one translator of log events
// to what a person sees (package transcript): session/load replays the
// whole log through it before answering, streaming the stored session
// (store.Stream: every line validated, never the whole log in memory), and
// live turns stream through the same mapping, so a reopened conversation
// looks as it did live. What a
// person typed is a user message; context injected by other sources, hook
// outcomes, steering, compaction summaries, blocked prompts and crash
// repairs are labelled notices, never merged into the user's words. The
// mapping, the extension methods (_rein/steer, _rein/inject) and the
// choices behind them are in docs/acp.md.
//
// Concurrency: the SDK runs each request on its own goroutine. A session's
// agent starts at its first use (a prompt, an inject, a steer), also for a
// loaded session, whose replay needs none. From then on the session has one
// follower goroutine that reads the agent's log (Agent.Events) from where
// the replay stopped and writes its updates; prompt handlers wait for the
// follower to pass their turn's end, so a response always follows the
// updates of its turn. Prompts of one session run one at a time: a prompt
// that arrives while another runs waits for it (docs/acp.md). stdout
// carries protocol lines only.
//
// This package sits above agent: it imports agent, transcript, session,
// store, tool and llm, never a concrete store, provider, tool set or the
// CLI; cmd/rein wires those in through Config.Open.
package acp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	sdk "github.com/coder/acp-go-sdk"

	"github.com/reinhq/rein/agent"
	"github.com/reinhq/rein/llm"
	"github.com/reinhq/rein/store"
)

// ProtocolVersion is the ACP version rein speaks.
const ProtocolVersion = sdk.ProtocolVersionNumber

// Errors of Serve.
var (
	// ErrNoOpen: Config.Open is required.
	ErrNoOpen = errors.New("acp: config: Open is required")
)

// Config configures a Server. Open is required.
type Config struct {
	// Open starts the agent of a session: a new session when
	// req.SessionID is empty, else the stored session req.SessionID,
	// resumed (crash-repaired). The agent must use req.Approver for its
	// approvals. Errors wrapping store.ErrNotFound and store.ErrLocked are
	// answered as such.
	Open func(ctx context.Context, req OpenRequest) (*Opened, error)
	// Store, when set, backs session/list and session/load, which
	// replays a stored session from it (streaming, without opening the
	// agent). Without it loadSession is not advertised.
	Store store.Store
	// Name and Version identify the agent in initialize.
	Name, Version string
	// Auth reports whether the model can be reached. An error (it should
	// name the missing environment variable) makes session/new and
	// session/load answer auth_required with its text.
	Auth func() error
	// Images says the model accepts images in prompts.
	Images bool
	// Rules, when set, offers "allow always" in permission requests.
	Rules Rules
	// Modes are the permission modes a client may switch between
	// (session/set_mode), Mode the initial one (a session's workspace may
	// say another: Opened.Mode); Opened.SetMode switches.
	Modes []Mode
	Mode  string
	// NoClientFS and NoClientTerminal keep the file tools and bash off the
	// client's fs/* and terminal/* even when it offers them.
	NoClientFS, NoClientTerminal bool
	// Logger gets diagnostics (never stdout). Default: slog.Default(),
	// which the SDK's connection logs through too: point it away from
	// stdout.
	Logger *slog.Logger
	// ShutdownTimeout bounds how long closing the sessions may take when
	// the client goes away (default 30 s).
	ShutdownTimeout time.Duration
}

// OpenRequest is what the server asks Config.Open for.
type OpenRequest struct {
	// SessionID is the session: a new one to create with that id when
	// Create, else a stored one to resume.
	SessionID string
	Create    bool
	// Ask asks the person at the client, through the session, whether to
	// trust the session's workspace (give it to the trust decision).
	Ask *Asker
	// Cwd is the session's working directory (absolute).
	Cwd string
	// Approver asks the client (session/request_permission).
	Approver agent.Approver
	// Files, when set, reads and writes files through the client's
	// editor buffers (fs/read_text_file, fs/write_text_file); give it to
	// the file tools.
	Files Files
	// Terminal, when set, runs commands in the client's terminals
	// (terminal/*); use it for the bash tool.
	Terminal *Terminal
	// MCPServers are the MCP servers the client asked for (stdio, and
	// http and sse, which initialize advertises), passed through unchanged
	// for Open to start with the session.
	MCPServers []sdk.McpServer
}

// Opened is a started session.
type Opened struct {
	Agent *agent.Agent
	// Close, when set, is called after the agent has closed, to release
	// what was started with it (the session's MCP servers).
	Close func() error
	// SetMode switches the session's permission mode to one of
	// Config.Modes.
	SetMode func(id string) error
	// Mode is the permission mode the session runs in ("": Config.Mode):
	// its workspace's configuration may say another than Config.Mode. A
	// resumed session reports it with the answer; a new or loaded one,
	// whose agent starts at first use, tells the client with a
	// current_mode_update unless the client chose a mode meanwhile (that
	// one is applied).
	Mode string
}

// Mode is a permission mode offered to the client.
type Mode struct {
	ID, Name, Description string
}

// Rules turn an "allow always" answer into a rule.
type Rules interface {
	// Rule returns the rule that would allow calls like req from now on
	// (such as "bash(go test:*)"), or false when none can be written.
	Rule(cwd string, req agent.ApprovalRequest) (string, bool)
	// Save persists rule for the workspace. The server also remembers it
	// for the rest of the session.
	Save(ctx context.Context, cwd, rule string) error
}

// Server is one ACP connection's agent side. Create it with Serve.
type Server struct {
	cfg  Config
	log  *slog.Logger
	conn *sdk.AgentSideConnection
	out  *lineWriter
	// ctx ends when the connection does.
	ctx    context.Context
	cancel context.CancelFunc

	mu       sync.Mutex
	caps     sdk.ClientCapabilities
	sessions map[string]*sess
	loading  map[string]bool
}

// Serve runs the agent side of one connection: requests are read from in,
// responses and notifications written to out, one JSON line each. It
// returns when in ends (the client went away) or ctx is done, after closing
// every session it opened: a turn still running is cancelled and its log
// closed cleanly.
func Serve(ctx context.Context, cfg Config, in io.Reader, out io.Writer) error {
	if cfg.Open == nil {
		return ErrNoOpen
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.ShutdownTimeout <= 0 {
		cfg.ShutdownTimeout = 30 * time.Second
	}
	s := &Server{cfg: cfg, log: cfg.Logger, out: &lineWriter{w: out}, sessions: map[string]*sess{}, loading: map[string]bool{}}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	defer s.cancel()
	// The SDK logs through slog.Default (its SetLogger races with the
	// connection's reader, which starts in the constructor). For the same
	// reason no input reaches the connection until it is built: a handler
	// running on the first message reads the connection (ours and the
	// SDK's own field), which the constructor assigns only after starting
	// the reader.
	built := make(chan struct{})
	s.conn = sdk.NewAgentSideConnection(s, s.out, &gatedReader{open: built, r: checkParams(filterInput(in, s.out, s.log), s.out)})
	close(built)
	select {
	case <-s.conn.Done():
		s.log.Debug("acp: client disconnected")
	case <-ctx.Done():
		s.log.Debug("acp: stopping", "cause", context.Cause(ctx))
	}
	s.cancel()
	return s.shutdown()
}

// shutdown closes every session: running turns are cancelled (cause
// "closed"), logs flushed and released.
func (s *Server) shutdown() error {
	s.mu.Lock()
	sessions := make([]*sess, 0, len(s.sessions))
	for _, ss := range s.sessions {
		sessions = append(sessions, ss)
	}
	s.sessions = map[string]*sess{}
	s.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.ShutdownTimeout)
	defer cancel()
	var errs []error
	for _, ss := range sessions {
		if err := ss.close(ctx); err != nil && !errors.Is(err, agent.ErrClosed) {
			errs = append(errs, fmt.Errorf("session %s: %w", ss.id, err))
		}
	}
	return errors.Join(errs...)
}

// lineWriter serialises whole lines from the SDK and from the update
// writers: every Write is one or more complete JSON lines.
type lineWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lineWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// Initialize negotiates the protocol and advertises what rein does.
func (s *Server) Initialize(_ context.Context, p sdk.InitializeRequest) (sdk.InitializeResponse, error) {
	s.mu.Lock()
	s.caps = p.ClientCapabilities
	s.mu.Unlock()
	sc := sdk.SessionCapabilities{
		Resume: &sdk.SessionResumeCapabilities{},
		Close:  &sdk.SessionCloseCapabilities{},
	}
	if s.cfg.Store != nil {
		sc.List = &sdk.SessionListCapabilities{}
	}
	name := s.cfg.Name
	if name == "" {
		name = "rein"
	}
	return sdk.InitializeResponse{
		ProtocolVersion: ProtocolVersion,
		AgentCapabilities: sdk.AgentCapabilities{
			LoadSession:         s.cfg.Store != nil,
			PromptCapabilities:  sdk.PromptCapabilities{Image: s.cfg.Images, EmbeddedContext: true},
			McpCapabilities:     sdk.McpCapabilities{Http: true, Sse: true},
			SessionCapabilities: sc,
			Meta:                map[string]any{"rein": map[string]any{"steer": true, "inject": true, "expectedTurn": true}},
		},
		AgentInfo:   &sdk.Implementation{Name: name, Version: s.cfg.Version},
		AuthMethods: []sdk.AuthMethod{},
	}, nil
}

// Authenticate is not needed: keys come from the environment.
func (s *Server) Authenticate(context.Context, sdk.AuthenticateRequest) (sdk.AuthenticateResponse, error) {
	if err := s.authError(); err != nil {
		return sdk.AuthenticateResponse{}, err
	}
	return sdk.AuthenticateResponse{}, nil
}

func (s *Server) authError() error {
	if s.cfg.Auth == nil {
		return nil
	}
	if err := s.cfg.Auth(); err != nil {
		return sdk.NewAuthRequired(map[string]any{"reason": err.Error()})
	}
	return nil
}

// errUnknownSession is the answer for a session id this connection does
// not hold.
func errUnknownSession(id sdk.SessionId) error {
	return &sdk.RequestError{Code: -32002, Message: "Resource not found", Data: map[string]any{"error": fmt.Sprintf("unknown session %q: create it with session/new or open it with session/load", id)}}
}

func invalidParams(format string, args ...any) error {
	return sdk.NewInvalidParams(map[string]any{"error": fmt.Sprintf(format, args...)})
}

func (s *Server) session(id sdk.SessionId) (*sess, error) {
	if id == "" {
		return nil, invalidParams("sessionId is required")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if ss := s.sessions[string(id)]; ss != nil {
		return ss, nil
	}
	return nil, errUnknownSession(id)
}

func checkCwd(cwd string) error {
	if !filepath.IsAbs(cwd) {
		return invalidParams("cwd %q is not an absolute path", cwd)
	}
	if fi, err := os.Stat(cwd); err != nil || !fi.IsDir() {
		return invalidParams("cwd %q is not a directory", cwd)
	}
	return nil
}

// NewSession creates a session. Its agent starts at the session's first
// use (a prompt, an inject or a steer): the trust question about the
// workspace, when there is one, can then be asked through the session,
// which the client knows by then; and a session never used writes nothing.
func (s *Server) NewSession(ctx context.Context, p sdk.NewSessionRequest) (sdk.NewSessionResponse, error) {
	if err := s.authError(); err != nil {
		return sdk.NewSessionResponse{}, err
	}
	if err := checkCwd(p.Cwd); err != nil {
		return sdk.NewSessionResponse{}, err
	}
	ss := newSession(s, p.Cwd)
	ss.id = agent.NewULID("s")
	ss.pending = &OpenRequest{SessionID: ss.id, Create: true, Cwd: p.Cwd, MCPServers: p.McpServers}
	s.mu.Lock()
	s.sessions[ss.id] = ss
	s.mu.Unlock()
	return sdk.NewSessionResponse{SessionId: sdk.SessionId(ss.id), Modes: ss.modes()}, nil
}

// LoadSession replays a stored session whole, as session/update
// notifications, before answering. The replay streams the stored log
// (store.Stream: every line validated, a piece at a time) through the
// translator; the session's agent, which loads the log in full, starts at
// its first use, as a new session's does, and follows the log from where
// the replay stopped (see sess.ensure).
func (s *Server) LoadSession(ctx context.Context, p sdk.LoadSessionRequest) (sdk.LoadSessionResponse, error) {
	if s.cfg.Store == nil {
		return sdk.LoadSessionResponse{}, sdk.NewMethodNotFound("session/load")
	}
	id, done, err := s.reserve(p.SessionId, p.Cwd)
	if err != nil {
		return sdk.LoadSessionResponse{}, err
	}
	defer done()
	ss := newSession(s, p.Cwd)
	ss.id = id
	if err := ss.replay(ctx); err != nil {
		return sdk.LoadSessionResponse{}, err
	}
	ss.pending = &OpenRequest{SessionID: id, Cwd: p.Cwd, MCPServers: p.McpServers}
	if err := s.register(ss); err != nil {
		return sdk.LoadSessionResponse{}, err
	}
	ss.announce()
	return sdk.LoadSessionResponse{Modes: ss.modes()}, nil
}

// ResumeSession opens a stored session without replaying it: the client
// shows the history already. Its agent starts now (crash repair, the trust
// question) and follows the log from its end.
func (s *Server) ResumeSession(ctx context.Context, p sdk.ResumeSessionRequest) (sdk.ResumeSessionResponse, error) {
	id, done, err := s.reserve(p.SessionId, p.Cwd)
	if err != nil {
		return sdk.ResumeSessionResponse{}, err
	}
	defer done()
	ss := newSession(s, p.Cwd)
	ss.id = id
	if err := ss.openAgent(ctx, OpenRequest{SessionID: id, Cwd: p.Cwd, MCPServers: p.McpServers}); err != nil {
		return sdk.ResumeSessionResponse{}, err
	}
	if ss.op.Mode != "" {
		ss.mode = ss.op.Mode // answered with the session
	}
	if err := s.register(ss); err != nil {
		_ = ss.close(context.Background())
		return sdk.ResumeSessionResponse{}, err
	}
	// Every turn of an opened log is closed (crash repair closed a
	// crashed one), so the translator needs nothing of what came before.
	ss.start(ss.ag.Len())
	return sdk.ResumeSessionResponse{Modes: ss.modes()}, nil
}

// reserve checks a load or resume request and marks its session as being
// opened on this connection until done is called.
func (s *Server) reserve(sid sdk.SessionId, cwd string) (id string, done func(), err error) {
	if err := s.authError(); err != nil {
		return "", nil, err
	}
	if err := checkCwd(cwd); err != nil {
		return "", nil, err
	}
	if sid == "" {
		return "", nil, invalidParams("sessionId is required")
	}
	id = string(sid)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.sessions[id] != nil || s.loading[id] {
		return "", nil, invalidParams("session %q is already open on this connection", id)
	}
	s.loading[id] = true
	return id, func() {
		s.mu.Lock()
		delete(s.loading, id)
		s.mu.Unlock()
	}, nil
}

// register adds a loaded or resumed session to the connection's.
func (s *Server) register(ss *sess) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ctx.Err() != nil {
		return sdk.NewInternalError(map[string]any{"error": "the connection closed"})
	}
	s.sessions[ss.id] = ss
	return nil
}

// storeError is the answer to a store's refusal to open or read session
// id.
func storeError(id string, err error) error {
	switch {
	case errors.Is(err, store.ErrNotFound):
		return &sdk.RequestError{Code: -32002, Message: "Resource not found", Data: map[string]any{"error": fmt.Sprintf("no session %q in the store", id)}}
	case errors.Is(err, store.ErrLocked):
		return sdk.NewInternalError(map[string]any{"error": fmt.Sprintf("session %q is open in another rein process", id)})
	}
	return sdk.NewInternalError(map[string]any{"error": err.Error()})
}

// openAgent asks Config.Open for the session's agent, with the client's
// files and terminals when it offers them.
func (ss *sess) openAgent(ctx context.Context, req OpenRequest) error {
	s := ss.srv
	s.mu.Lock()
	caps := s.caps
	s.mu.Unlock()
	req.Approver, req.Ask = ss, &Asker{s: ss}
	if !s.cfg.NoClientFS && (caps.Fs.ReadTextFile || caps.Fs.WriteTextFile) {
		req.Files = &clientFiles{s: ss, read: caps.Fs.ReadTextFile, write: caps.Fs.WriteTextFile}
	}
	if !s.cfg.NoClientTerminal && caps.Terminal {
		req.Terminal = &Terminal{s: ss}
	}
	op, err := s.cfg.Open(ctx, req)
	if err != nil {
		return storeError(req.SessionID, err)
	}
	ss.opened(op)
	return nil
}

// CloseSession cancels the session's work and releases it.
func (s *Server) CloseSession(ctx context.Context, p sdk.CloseSessionRequest) (sdk.CloseSessionResponse, error) {
	ss, err := s.session(p.SessionId)
	if err != nil {
		return sdk.CloseSessionResponse{}, err
	}
	s.mu.Lock()
	delete(s.sessions, ss.id)
	s.mu.Unlock()
	if err := ss.close(ctx); err != nil && !errors.Is(err, agent.ErrClosed) {
		return sdk.CloseSessionResponse{}, sdk.NewInternalError(map[string]any{"error": err.Error()})
	}
	return sdk.CloseSessionResponse{}, nil
}

// ListSessions lists stored sessions, most recently updated first.
func (s *Server) ListSessions(ctx context.Context, p sdk.ListSessionsRequest) (sdk.ListSessionsResponse, error) {
	if s.cfg.Store == nil {
		return sdk.ListSessionsResponse{}, sdk.NewMethodNotFound("session/list")
	}
	if p.Cwd != nil && !filepath.IsAbs(*p.Cwd) {
		return sdk.ListSessionsResponse{}, invalidParams("cwd %q is not an absolute path", *p.Cwd)
	}
	if p.Cursor != nil && *p.Cursor != "" {
		// rein answers every session in one page: it never gives out a
		// cursor, so none can be continued.
		return sdk.ListSessionsResponse{}, invalidParams("cursor %q is not one rein gave: session/list answers every session at once", *p.Cursor)
	}
	infos, err := s.cfg.Store.List(ctx)
	if err != nil {
		return sdk.ListSessionsResponse{}, sdk.NewInternalError(map[string]any{"error": err.Error()})
	}
	out := sdk.ListSessionsResponse{Sessions: []sdk.SessionInfo{}}
	for _, in := range infos {
		if p.Cwd != nil && *p.Cwd != in.Cwd {
			continue
		}
		si := sdk.SessionInfo{SessionId: sdk.SessionId(in.ID), Cwd: in.Cwd}
		if in.Title != "" {
			si.Title = sdk.Ptr(in.Title)
		}
		if !in.UpdatedAt.IsZero() {
			si.UpdatedAt = sdk.Ptr(in.UpdatedAt.UTC().Format(time.RFC3339))
		}
		out.Sessions = append(out.Sessions, si)
	}
	return out, nil
}

// SetSessionMode switches the session's permission mode.
func (s *Server) SetSessionMode(_ context.Context, p sdk.SetSessionModeRequest) (sdk.SetSessionModeResponse, error) {
	ss, err := s.session(p.SessionId)
	if err != nil {
		return sdk.SetSessionModeResponse{}, err
	}
	if err := ss.setMode(string(p.ModeId)); err != nil {
		return sdk.SetSessionModeResponse{}, err
	}
	return sdk.SetSessionModeResponse{}, nil
}

// SetSessionConfigOption: rein offers no config options.
func (s *Server) SetSessionConfigOption(context.Context, sdk.SetSessionConfigOptionRequest) (sdk.SetSessionConfigOptionResponse, error) {
	return sdk.SetSessionConfigOptionResponse{}, sdk.NewMethodNotFound("session/set_config_option")
}

// Cancel cancels the session's running turn (or the admission of its
// prompt). The prompt answers with stop reason "cancelled".
func (s *Server) Cancel(_ context.Context, p sdk.CancelNotification) error {
	ss, err := s.session(p.SessionId)
	if err != nil {
		s.log.Debug("acp: cancel for an unknown session", "session", p.SessionId)
		return nil
	}
	ss.cancel()
	return nil
}

// Prompt runs one prompt as one turn and answers when it ended.
func (s *Server) Prompt(_ context.Context, p sdk.PromptRequest) (sdk.PromptResponse, error) {
	ss, err := s.session(p.SessionId)
	if err != nil {
		return sdk.PromptResponse{}, err
	}
	return ss.prompt(p)
}

// HandleExtensionMethod serves _rein/steer and _rein/inject.
func (s *Server) HandleExtensionMethod(_ context.Context, method string, params json.RawMessage) (any, error) {
	switch method {
	case MethodSteer:
		var p SteerRequest
		if err := json.Unmarshal(params, &p); err != nil {
			return nil, invalidParams("%s: %s", method, paramsError(err))
		}
		ss, err := s.session(sdk.SessionId(p.SessionID))
		if err != nil {
			return nil, err
		}
		return ss.steer(p)
	case MethodInject:
		var p InjectRequest
		if err := json.Unmarshal(params, &p); err != nil {
			return nil, invalidParams("%s: %s", method, paramsError(err))
		}
		ss, err := s.session(sdk.SessionId(p.SessionID))
		if err != nil {
			return nil, err
		}
		return ss.inject(p)
	}
	return nil, sdk.NewMethodNotFound(method)
}

// Extension methods.
const (
	MethodSteer  = "_rein/steer"
	MethodInject = "_rein/inject"
)

// SteerRequest is the params of _rein/steer.
type SteerRequest struct {
	SessionID string             `json:"sessionId"`
	Content   []sdk.ContentBlock `json:"content"`
	// ExpectedTurn, when set, steers only that turn while it runs;
	// otherwise the answer says it is not running and nothing is queued.
	ExpectedTurn *int `json:"expectedTurn,omitempty"`
	// MessageID is the steering message's id (minted when empty).
	MessageID string `json:"messageId,omitempty"`
}

// Steer outcomes.
const (
	// Steered: the message reaches the running turn at its next step.
	Steered = "steered"
	// Queued: no turn was running; the message runs as a turn of its own.
	Queued = "queued"
	// NotRunning: ExpectedTurn is not the running turn; nothing changed.
	NotRunning = "not-running"
)

// SteerResponse is the result of _rein/steer.
type SteerResponse struct {
	Status    string `json:"status"`
	MessageID string `json:"messageId,omitempty"`
	// Turn is the turn steered; RunningTurn the turn running when the
	// answer is not-running (0: none).
	Turn        int `json:"turn,omitempty"`
	RunningTurn int `json:"runningTurn,omitempty"`
}

// InjectRequest is the params of _rein/inject.
type InjectRequest struct {
	SessionID string             `json:"sessionId"`
	Content   []sdk.ContentBlock `json:"content"`
	// Source names the producer; default {kind: "user-context", name:
	// "acp"}. Kind "user" is refused: what a person types is a prompt.
	Source *struct {
		Kind string `json:"kind"`
		Name string `json:"name,omitempty"`
	} `json:"source,omitempty"`
}

// InjectResponse is the (empty) result of _rein/inject.
type InjectResponse struct{}

// parts converts content blocks to message parts: text as text, images
// when the model takes them, resource links as markdown links, embedded
// text resources as their text.
func (s *Server) parts(blocks []sdk.ContentBlock) ([]llm.Part, error) {
	var out []llm.Part
	for i, b := range blocks {
		switch {
		case b.Text != nil:
			out = append(out, llm.Part{Type: llm.PartText, Text: b.Text.Text})
		case b.Image != nil:
			if !s.cfg.Images {
				return nil, invalidParams("content[%d]: this model does not take images", i)
			}
			out = append(out, llm.Part{Type: llm.PartImage, MediaType: b.Image.MimeType, Data: b.Image.Data})
		case b.ResourceLink != nil:
			out = append(out, llm.Part{Type: llm.PartText, Text: link(b.ResourceLink.Name, b.ResourceLink.Uri)})
		case b.Resource != nil:
			r := b.Resource.Resource
			switch {
			case r.TextResourceContents != nil:
				out = append(out, llm.Part{Type: llm.PartText, Text: r.TextResourceContents.Text})
			default:
				return nil, invalidParams("content[%d]: binary resources are not supported", i)
			}
		case b.Audio != nil:
			return nil, invalidParams("content[%d]: audio is not supported", i)
		}
	}
	return slices.Clip(out), nil
}

func link(name, uri string) string {
	if name == "" {
		name = uri
	}
	return "[" + name + "](" + uri + ")"
}

// gatedReader holds every Read until open is closed.
type gatedReader struct {
	open <-chan struct{}
	r    io.Reader
}

func (g *gatedReader) Read(p []byte) (int, error) {
	<-g.open
	return g.r.Read(p)
}
