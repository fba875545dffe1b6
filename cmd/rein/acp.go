package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/reinhq/rein/acp"
	"github.com/reinhq/rein/agent"
	"github.com/reinhq/rein/config"
	"github.com/reinhq/rein/guard"
	"github.com/reinhq/rein/hook"
	"github.com/reinhq/rein/llm/catalog"
	"github.com/reinhq/rein/sandbox"
	"github.com/reinhq/rein/tool"
	"github.com/reinhq/rein/tool/builtin"
	"github.com/reinhq/rein/tool/shell"
	"github.com/reinhq/rein/transcript"
	"github.com/reinhq/rein/trust"
)

func (a *app) acpCmd() *cobra.Command {
	var noFS, noTerminal bool
	cmd := &cobra.Command{
		Use:   "acp",
		Short: "Serve the Agent Client Protocol on stdio, for editors",
		Long: `Acp makes rein an Agent Client Protocol agent: an editor (Zed, a JetBrains
IDE, a Neovim or Emacs plugin) starts 'rein acp' and talks JSON-RPC with it
on stdin and stdout. Diagnostics go to stderr only (-v for more).

Sessions are rein's ordinary sessions (see 'rein sessions ls'): an editor can
reopen one, and rein replays its whole history from the log, with context
that did not come from you shown for what it is. Permission questions of the
policy (--permission-mode, 'ask' rules) are asked in the editor. When the
editor offers them, the file tools read and write through its buffers and
bash runs in its terminal; --no-client-fs and --no-client-terminal keep them
on rein's side.

The model comes from the configuration (or --model), its key from the
environment the editor starts rein in. See docs/acp.md for configuring Zed
(agent_servers in settings.json) and other clients, and for the protocol
mapping.`,
		Example: `  # Zed settings.json
  "agent_servers": { "rein": { "command": "rein", "args": ["acp"] } }`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.serveACP(cmd.Context(), noFS, noTerminal)
		},
	}
	cmd.Flags().BoolVar(&noFS, "no-client-fs", false, "read and write files on disk even when the editor offers its buffers")
	cmd.Flags().BoolVar(&noTerminal, "no-client-terminal", false, "run bash in rein even when the editor offers terminals")
	return cmd
}

func (a *app) serveACP(ctx context.Context, noFS, noTerminal bool) error {
	st, err := a.openStore()
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	rules := &acpRules{}
	mode := a.cfg.PermissionMode
	if mode == "" {
		mode = string(guard.WorkspaceWrite)
	}
	cfg := acp.Config{
		Modes:            permissionModes,
		Mode:             mode,
		Store:            st,
		Name:             "rein",
		Version:          version(),
		NoClientFS:       noFS,
		NoClientTerminal: noTerminal,
		Rules:            rules,
		Logger:           a.log,
		Auth: func() error {
			if _, err := a.resolveModel(); errors.Is(err, catalog.ErrMissingKey) {
				return err
			}
			return nil
		},
	}
	ws := &acpWorkspaces{a: a, views: map[string]*app{}, models: map[string]*model{}}
	cfg.Open = func(ctx context.Context, req acp.OpenRequest) (*acp.Opened, error) {
		dir := req.Cwd
		w, hc, m, err := ws.open(ctx, dir, req.Ask)
		if err != nil {
			return nil, err
		}
		ps, err := rules.session(w, dir, w.cfg.PermissionMode)
		if err != nil {
			return nil, err
		}
		hooks, _, err := w.hooksWith(dir, hc, st, ps.current.Load, guardApprover{req.Approver}, false, ps.hookMode)
		if err != nil {
			return nil, err
		}
		if req.Create { // titled from its first admitted prompt, as 'rein run' does
			hooks.PromptAdmission = append([]agent.Hook[agent.Prompt, agent.Admission]{titleHook(a.red)}, hooks.PromptAdmission...)
		}
		tools, err := ps.tools(req)
		if err != nil {
			return nil, err
		}
		cfg := agent.Config{
			Store:    st,
			Provider: m.provider,
			Model:    m.spec,
			Params:   m.params,
			MaxSteps: w.cfg.MaxSteps,
			Tools:    tools,
			System:   w.systemSections(dir, w.workspaceRoot(dir)),
			Cwd:      dir,
			Hooks:    hooks,
			Approver: req.Approver,
		}
		w.configureCompaction(&cfg, m.contextWindow)
		// The configured MCP servers and the editor's.
		servers, err := w.startMCP(ctx, dir, mcpLogPath(st, req.SessionID), m.catalog, &cfg, acpMCPServers(req.MCPServers))
		if err != nil {
			return nil, err
		}
		if servers != nil {
			ps.mcpKinds = servers.kinds
		}
		var ag *agent.Agent
		if req.Create {
			cfg.SessionID = req.SessionID
			ag, err = a.newAgent(ctx, cfg)
		} else {
			ag, err = a.resumeAgent(ctx, st, req.SessionID, cfg)
		}
		if err != nil {
			servers.Close()
			return nil, err
		}
		return &acp.Opened{Agent: ag, Mode: ps.mode(), SetMode: func(id string) error { return rules.setMode(ps, id) }, Close: servers.Close}, nil
	}

	a.log.Debug("acp: serving on stdio")
	err = acp.Serve(ctx, cfg, a.stdin, a.stdout)
	for _, m := range ws.models {
		// A scripted run must use its whole script.
		if m.scripted == nil {
			continue
		}
		if verr := m.scripted.Verify(); verr != nil {
			fmt.Fprintf(a.stderr, "rein: scripted model: %v\n", verr)
			if err == nil {
				err = exitWith(ExitError, nil)
			}
		}
	}
	return err
}

// acpWorkspaces are the workspaces rein acp opens sessions in: each root
// gets its own view of the app (inWorkspace), with the configuration
// loaded from that workspace and its trust decided for it, so that the
// settings of the directory rein acp started in, or of another session's
// workspace, never apply to a session. Models are shared by what resolves
// them (providerKey): a scripted model's calls are consumed across sessions
// in order and verified once at the end.
type acpWorkspaces struct {
	a      *app
	mu     sync.Mutex // views, models, and each view's configuration while its trust is decided
	views  map[string]*app
	models map[string]*model
}

// open returns the view of dir's workspace with its trust decided (the
// question goes to the person through ask), its hooks, and the model.
func (ws *acpWorkspaces) open(ctx context.Context, dir string, ask *acp.Asker) (*app, *hook.Config, *model, error) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	root := ws.a.workspaceRoot(dir)
	key := trust.Key(root)
	w := ws.views[key]
	if w == nil {
		var err error
		if w, err = ws.a.inWorkspace(root); err != nil {
			return nil, nil, nil, err
		}
		ws.views[key] = w
	}
	// Trust first: the workspace's held settings (provider URLs, allow
	// rules, hooks) apply only once it is trusted.
	w.trustAsker = acpTrustAsker{ask}
	hc, err := w.trustWorkspace(ctx, dir)
	w.trustAsker = nil
	if err != nil {
		return nil, nil, nil, err
	}
	if err := w.confineWrites(dir); err != nil {
		return nil, nil, nil, err
	}
	pk := w.providerKey()
	base := ws.models[pk]
	if base == nil {
		if base, err = w.resolveModel(); err != nil {
			return nil, nil, nil, err
		}
		ws.models[pk] = base
	}
	m := *base
	w.tune(&m)
	return w, hc, &m, nil
}

// permissionModes are the modes an editor may switch between.
var permissionModes = []acp.Mode{
	{ID: string(guard.ReadOnly), Name: "Read only", Description: "Read anywhere; ask before commands; no writes"},
	{ID: string(guard.WorkspaceWrite), Name: "Workspace write", Description: "Read anywhere; write inside the workspace"},
	{ID: string(guard.FullAccess), Name: "Full access", Description: "Everything the rules do not restrict"},
}

// acpTools is a session's tool set in a's permission mode, as 'rein run'
// has it (confinement and the OS sandbox included), with the file tools on
// the editor's buffers when the client offers them, and bash in the
// editor's terminals when it offers them and the mode runs without the
// sandbox: a process the editor starts cannot be confined, so a sandboxed
// session keeps bash in rein.
func (a *app) acpTools(dir string, req acp.OpenRequest) []tool.Tool {
	opts := builtin.Options{
		FS:    a.fsOptions(dir, req.Files),
		Shell: shell.Options{Sandbox: a.sandbox(dir), Env: a.envPolicy()},
	}
	tools := a.maskSpills(builtin.All(opts))
	if req.Terminal != nil && opts.Shell.Sandbox == nil {
		for i, t := range tools {
			if t.Spec().Name == "bash" {
				tools[i] = req.Terminal.Bash(t.Spec(), a.envPolicy())
			}
		}
	} else if req.Terminal != nil {
		a.log.Debug("acp: bash stays in rein: the editor's terminals cannot run under rein's sandbox")
	}
	return tools
}

// withMode returns a view of a whose permission mode is mode (and whose
// sandboxes are its own): what a session switched to mode runs with. The
// configuration is copied, not changed.
func (a *app) withMode(mode string) *app {
	v := *a
	c := *a.cfg
	c.PermissionMode = mode
	v.cfg, v.sandboxes = &c, nil
	return &v
}

// modeTool runs each call with the tool of the mode in force: the same
// name, schema and execution mode in every mode, another confinement.
type modeTool struct {
	tool.Tool // the workspace-write one: the spec and mode the model sees
	byMode    map[string]tool.Tool
	mode      func() string
}

func (t *modeTool) Run(ctx context.Context, call tool.Call) (tool.Result, error) {
	return t.byMode[t.mode()].Run(ctx, call)
}

// acpTrustAsker asks the trust question through the ACP session.
type acpTrustAsker struct{ ask *acp.Asker }

func (t acpTrustAsker) AskTrust(ctx context.Context, q trust.Question) (trust.Answer, error) {
	ans, err := t.ask.AskTrust(ctx, "Trust the workspace "+q.Decision.Root+"?", q.Text())
	switch ans {
	case acp.TrustAlways:
		return trust.Always, err
	case acp.TrustOnce:
		return trust.Once, err
	}
	return trust.No, err
}

// guardApprover asks the policy's questions through the face's approver.
type guardApprover struct{ ap agent.Approver }

func (g guardApprover) Approve(ctx context.Context, req guard.Request) (guard.Approval, error) {
	ap, err := g.ap.Approve(ctx, agent.ApprovalRequest{CallID: req.CallID, Name: req.Tool, Arguments: string(req.Args), Reason: req.Reason})
	return guard.Approval{Allow: ap.Allow, By: ap.By, Reason: ap.Reason}, err
}

// acpRules turns "allow always" into a permission rule of the workspace:
// it is added to the workspace's configuration (permissions.allow) and
// every open session of the workspace gets a policy with it, so the policy
// itself allows such calls from then on. Writing it into a configuration
// file waits for a configuration API that writes files; until then the
// rule holds until rein exits.
type acpRules struct {
	mu       sync.Mutex // the views' configurations and sessions
	sessions []*acpPolicy
}

// acpPolicy is one session's permission mode and the policy and tools in
// force for it. session/set_mode changes both: the guard's policy, and the
// confinement of write and edit, the OS sandbox of bash and hooks, and
// whether bash runs in the editor's terminal.
type acpPolicy struct {
	a       *app // the session's workspace view
	dir     string
	current atomic.Pointer[guard.Policy]
	modeID  atomic.Pointer[string]
	// mcpKinds classifies the session's MCP tools; set before its agent
	// starts, read-only after.
	mcpKinds func(string) (guard.Kind, bool)
	// byMode are the views the session's tools and hooks run with, by
	// permission mode.
	byMode map[string]*app
}

// mode is the permission mode in force.
func (ps *acpPolicy) mode() string { return *ps.modeID.Load() }

// hookMode is the hooks' permission mode and sandbox, as the mode in force
// says (hook.Runtime.Mode).
func (ps *acpPolicy) hookMode() (string, *sandbox.Sandbox) {
	m := ps.mode()
	return hook.ClaudePermissionMode(m), ps.byMode[m].sandbox(ps.dir)
}

// tools returns the session's tools: each runs with the tool of the mode
// in force.
func (ps *acpPolicy) tools(req acp.OpenRequest) (*tool.Registry, error) {
	sets := map[string][]tool.Tool{}
	for m, w := range ps.byMode {
		sets[m] = w.acpTools(ps.dir, req)
	}
	base := sets[config.WorkspaceWrite]
	tools := make([]tool.Tool, len(base))
	for i := range base {
		mt := &modeTool{Tool: base[i], byMode: map[string]tool.Tool{}, mode: ps.mode}
		for m, set := range sets {
			mt.byMode[m] = set[i]
		}
		tools[i] = mt
	}
	return tool.NewRegistry(tools...)
}

// effective is the mode a session in ps.dir runs when mode is asked for: a
// workspace that may not be written (unsafeRoot) runs workspace-write as
// read-only.
func (ps *acpPolicy) effective(mode string) string {
	if mode == config.WorkspaceWrite && ps.a.unsafeRoot(ps.dir) != "" {
		return config.ReadOnly
	}
	return mode
}

// classify is the session policy's Classify.
func (ps *acpPolicy) classify(name string) (guard.Kind, bool) {
	if ps.mcpKinds == nil {
		return 0, false
	}
	return ps.mcpKinds(name)
}

// errRulesNotSaved says an "always" answer holds until rein exits.
var errRulesNotSaved = errors.New("the rule applies until rein exits: rules are not written to the configuration files yet")

// session starts the policy of a session in dir of workspace view w, in
// mode.
func (r *acpRules) session(w *app, dir, mode string) (*acpPolicy, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	ps := &acpPolicy{a: w, dir: dir, byMode: map[string]*app{}}
	for _, m := range permissionModes {
		ps.byMode[m.ID] = w.withMode(ps.effective(m.ID))
	}
	if err := r.applyLocked(ps, mode); err != nil {
		return nil, err
	}
	r.sessions = append(r.sessions, ps)
	return ps, nil
}

// applyLocked puts mode (as effective says) and its policy in force.
func (r *acpRules) applyLocked(ps *acpPolicy, mode string) error {
	mode = ps.effective(mode)
	w := ps.byMode[mode]
	pm := ps.a.cfg.Permissions
	p, err := guard.Settings{Mode: mode, Allow: pm.Allow, Ask: pm.Ask, Deny: pm.Deny, Writable: w.writable()}.Policy(ps.dir)
	if err != nil {
		return err
	}
	p.Classify = ps.classify
	ps.current.Store(p)
	ps.modeID.Store(&mode)
	return nil
}

func (r *acpRules) setMode(ps *acpPolicy, mode string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.applyLocked(ps, mode)
}

func (r *acpRules) Rule(cwd string, req agent.ApprovalRequest) (string, bool) {
	return ruleFor(cwd, req.Name, req.Arguments)
}

func (r *acpRules) Save(_ context.Context, cwd, rule string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	key := trust.Key(trust.Root(cwd, os.Getenv("HOME")))
	var added []*app
	for _, ps := range r.sessions {
		if trust.Key(ps.a.root) != key {
			continue
		}
		if !slices.Contains(added, ps.a) { // sessions of a workspace share its view
			if err := ps.a.cfg.Add("permissions.allow", rule, "allowed always in the editor"); err != nil {
				return err
			}
			added = append(added, ps.a)
		}
		if err := r.applyLocked(ps, ps.mode()); err != nil {
			return err
		}
	}
	return errRulesNotSaved
}

// ruleFor proposes the rule that allows calls like this one: for bash the
// command's program (and subcommand for tools like git or go) with any
// arguments, unless the script is more than one simple command; for the file
// tools the file, relative to the workspace; for other tools the tool.
func ruleFor(cwd, name, args string) (string, bool) {
	_, kind, paths, _ := transcript.Describe(name, args, cwd)
	switch kind {
	case transcript.KindExecute:
		var a struct {
			Command string `json:"command"`
		}
		_ = json.Unmarshal([]byte(args), &a)
		cmd := strings.TrimSpace(a.Command)
		if cmd == "" {
			return "", false
		}
		if strings.ContainsAny(cmd, ";|&<>`$()\n\\\"'*?") {
			return "bash(" + cmd + ")", true
		}
		words := strings.Fields(cmd)
		n := 1
		switch words[0] {
		case "git", "go", "npm", "pnpm", "yarn", "cargo", "docker", "kubectl", "make", "uv", "pip", "python", "python3", "node":
			n = 2
		}
		return "bash(" + strings.Join(words[:min(n, len(words))], " ") + ":*)", true
	case transcript.KindRead, transcript.KindEdit, transcript.KindSearch:
		if len(paths) == 0 {
			return name, true
		}
		p := paths[0]
		root := trust.Root(cwd, os.Getenv("HOME"))
		if rel, err := filepath.Rel(root, p); err == nil && !strings.HasPrefix(rel, "..") {
			p = filepath.ToSlash(rel)
		}
		return name + "(" + p + ")", true
	}
	return name, true
}
