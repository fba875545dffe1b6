package main

import (
	"context"
	"errors"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/reinhq/rein/acp"
	"github.com/reinhq/rein/agent"
	"github.com/reinhq/rein/config"
	"github.com/reinhq/rein/guard"
	"github.com/reinhq/rein/llm/catalog"
	"github.com/reinhq/rein/tool"
	"github.com/reinhq/rein/tool/builtin"
	"github.com/reinhq/rein/tool/shell"
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
	rules := &alwaysRules{a: a, face: "the editor"}
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
		Images:           a.modelInfo().Images,
		Rules:            rules,
		Logger:           a.log,
		Auth: func() error {
			if _, err := a.resolveModel(); errors.Is(err, catalog.ErrMissingKey) {
				return err
			}
			return nil
		},
	}
	ws := newWorkspaces(a)
	cfg.Open = func(ctx context.Context, req acp.OpenRequest) (*acp.Opened, error) {
		dir := req.Cwd
		w, hc, m, err := ws.open(ctx, dir, acpTrustAsker{req.Ask}, "")
		if err != nil {
			return nil, err
		}
		if !req.Create { // a loaded session keeps its model, as with 'rein run --session'
			var notice string
			if m, notice = ws.resumed(w, m, lastRequestModel(st, req.SessionID)); notice != "" {
				a.log.Warn("acp: " + notice)
			}
		}
		ps, err := rules.session(w, dir, w.cfg.PermissionMode)
		if err != nil {
			return nil, err
		}
		fail := func(err error) (*acp.Opened, error) {
			rules.drop(ps)
			return nil, err
		}
		hooks, _, err := w.hooksWith(dir, hc, st, ps.current.Load, guardApprover{req.Approver}, false, ps.hookMode)
		if err != nil {
			return fail(err)
		}
		if req.Create { // titled from its first admitted prompt, as 'rein run' does
			hooks.PromptAdmission = append([]agent.Hook[agent.Prompt, agent.Admission]{titleHook(a.red)}, hooks.PromptAdmission...)
		}
		tools, err := ps.tools(req)
		if err != nil {
			return fail(err)
		}
		cfg := w.agentConfig(st, m, dir, tools, hooks, req.Approver)
		// The configured MCP servers and the editor's.
		servers, err := w.startMCP(ctx, dir, mcpLogPath(st, req.SessionID), m.catalog, &cfg, acpMCPServers(req.MCPServers))
		if err != nil {
			return fail(err)
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
			return fail(err)
		}
		return &acp.Opened{Agent: ag, Mode: ps.mode(), SetMode: func(id string) error { return rules.setMode(ps, id) }, Close: func() error {
			rules.drop(ps)
			return servers.Close()
		}}, nil
	}

	a.log.Debug("acp: serving on stdio")
	err = acp.Serve(ctx, cfg, a.stdin, a.stdout)
	// A scripted run must use its whole script.
	if verr := ws.verify(); err == nil {
		err = verr
	}
	return err
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

// tools returns an editor session's tools: each runs with the tool of
// the mode in force (modeTool).
func (ps *sessionPolicy) tools(req acp.OpenRequest) (*tool.Registry, error) {
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
