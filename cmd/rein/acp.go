package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/reinhq/rein/acp"
	"github.com/reinhq/rein/agent"
	"github.com/reinhq/rein/guard"
	"github.com/reinhq/rein/llm/catalog"
	"github.com/reinhq/rein/tool"
	"github.com/reinhq/rein/tool/builtin"
	"github.com/reinhq/rein/tool/fs"
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
	// One provider for the whole connection: a scripted model's calls are
	// consumed across sessions in order, and verified once at the end.
	var (
		provOnce sync.Once
		resolved *model
		provErr  error
	)
	resolve := func() (*model, error) {
		provOnce.Do(func() { resolved, provErr = a.resolveModel() })
		return resolved, provErr
	}
	rules := &acpRules{a: a}
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
	var openMu sync.Mutex // the trust decision and the configuration it changes
	cfg.Open = func(ctx context.Context, req acp.OpenRequest) (*acp.Opened, error) {
		dir := req.Cwd
		openMu.Lock()
		// Trust first: the workspace's held settings (provider URLs,
		// allow rules, hooks) apply only once it is trusted. The question
		// goes to the person through the session.
		a.trustAsker = acpTrustAsker{req.Ask}
		hc, err := a.trustWorkspace(ctx, dir)
		a.trustAsker = nil
		var m *model
		if err == nil {
			m, err = resolve()
		}
		openMu.Unlock()
		if err != nil {
			return nil, err
		}
		ps, err := rules.session(dir, mode)
		if err != nil {
			return nil, err
		}
		hooks, _, err := a.hooksFor(dir, hc, st, ps.current.Load, guardApprover{req.Approver}, false)
		if err != nil {
			return nil, err
		}
		if req.Create { // titled from its first admitted prompt, as 'rein run' does
			hooks.PromptAdmission = append([]agent.Hook[agent.Prompt, agent.Admission]{titleHook(a.red)}, hooks.PromptAdmission...)
		}
		tools, err := a.acpTools(dir, req)
		if err != nil {
			return nil, err
		}
		cfg := agent.Config{
			Store:    st,
			Provider: m.provider,
			Model:    m.spec,
			Params:   m.params,
			MaxSteps: a.cfg.MaxSteps,
			Tools:    tools,
			System:   a.systemSections(dir, a.workspaceRoot(dir)),
			Cwd:      dir,
			Hooks:    hooks,
			Approver: req.Approver,
			Logger:   a.log,
		}
		a.configureCompaction(&cfg, m.contextWindow)
		// The configured MCP servers and the editor's.
		servers, err := a.startMCP(ctx, dir, mcpLogPath(st, req.SessionID), m.catalog, &cfg, acpMCPServers(req.MCPServers))
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
		return &acp.Opened{Agent: ag, SetMode: func(id string) error { return rules.setMode(ps, id) }, Close: servers.Close}, nil
	}

	a.log.Debug("acp: serving on stdio")
	err = acp.Serve(ctx, cfg, a.stdin, a.stdout)
	if resolved != nil && resolved.scripted != nil {
		sm := resolved.scripted
		// A scripted run must use its whole script.
		if verr := sm.Verify(); verr != nil {
			fmt.Fprintf(a.stderr, "rein: scripted model: %v\n", verr)
			if err == nil {
				err = exitWith(ExitError, nil)
			}
		}
	}
	return err
}

// permissionModes are the modes an editor may switch between.
var permissionModes = []acp.Mode{
	{ID: string(guard.ReadOnly), Name: "Read only", Description: "Read anywhere; ask before commands; no writes"},
	{ID: string(guard.WorkspaceWrite), Name: "Workspace write", Description: "Read anywhere; write inside the workspace"},
	{ID: string(guard.FullAccess), Name: "Full access", Description: "Everything the rules do not restrict"},
}

// acpTools is the session's tool set, as 'rein run' has it (confinement and
// the OS sandbox included), with the file tools on the editor's buffers
// when the client offers them, and bash in the editor's terminals when it
// offers them and rein runs without its sandbox: a process the editor
// starts cannot be confined, so a sandboxed session keeps bash in rein.
func (a *app) acpTools(dir string, req acp.OpenRequest) (*tool.Registry, error) {
	opts := builtin.Options{
		FS:    fs.Options{Confine: a.sandboxed(), WriteRoots: a.writeRoots(dir), Buffers: req.Files},
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
	return tool.NewRegistry(tools...)
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
// it is added to the loaded configuration (permissions.allow) and every
// open session of the workspace gets a policy with it, so the policy itself
// allows such calls from then on. Writing it into a configuration file
// waits for a configuration API that writes files; until then the rule
// holds until rein exits.
type acpRules struct {
	a        *app
	mu       sync.Mutex // a.cfg and sessions
	sessions []*acpPolicy
}

// acpPolicy is the policy in force for one session.
type acpPolicy struct {
	dir, mode string
	current   atomic.Pointer[guard.Policy]
	// mcpKinds classifies the session's MCP tools; set before its agent
	// starts, read-only after.
	mcpKinds func(string) (guard.Kind, bool)
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

func (r *acpRules) session(dir, mode string) (*acpPolicy, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	p, err := r.policyLocked(dir, mode)
	if err != nil {
		return nil, err
	}
	ps := &acpPolicy{dir: dir, mode: mode}
	p.Classify = ps.classify
	ps.current.Store(p)
	r.sessions = append(r.sessions, ps)
	return ps, nil
}

func (r *acpRules) policyLocked(dir, mode string) (*guard.Policy, error) {
	pm := r.a.cfg.Permissions
	return guard.Settings{Mode: mode, Allow: pm.Allow, Ask: pm.Ask, Deny: pm.Deny, Writable: r.a.writable()}.Policy(dir)
}

func (r *acpRules) setMode(ps *acpPolicy, mode string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	p, err := r.policyLocked(ps.dir, mode)
	if err != nil {
		return err
	}
	p.Classify = ps.classify
	ps.mode = mode
	ps.current.Store(p)
	return nil
}

func (r *acpRules) Rule(cwd string, req agent.ApprovalRequest) (string, bool) {
	return ruleFor(cwd, req.Name, req.Arguments)
}

func (r *acpRules) Save(_ context.Context, cwd, rule string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.a.cfg.Add("permissions.allow", rule, "allowed always in the editor"); err != nil {
		return err
	}
	root := r.a.workspaceRoot(cwd)
	for _, ps := range r.sessions {
		if r.a.workspaceRoot(ps.dir) != root {
			continue
		}
		p, err := r.policyLocked(ps.dir, ps.mode)
		if err != nil {
			return err
		}
		p.Classify = ps.classify
		ps.current.Store(p)
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
