package main

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	acpsdk "github.com/coder/acp-go-sdk"
	"github.com/spf13/cobra"

	"github.com/reinhq/rein/agent"
	"github.com/reinhq/rein/config"
	"github.com/reinhq/rein/display"
	"github.com/reinhq/rein/guard"
	"github.com/reinhq/rein/llm/catalog"
	"github.com/reinhq/rein/mcp"
	"github.com/reinhq/rein/store"
	"github.com/reinhq/rein/store/jsonl"
	"github.com/reinhq/rein/tool"
	"github.com/reinhq/rein/trust"
)

// mcpProjectFile is Claude Code's project file of MCP servers.
const mcpProjectFile = ".mcp.json"

// mcpServer is a configured server and where it comes from.
type mcpServer struct {
	cfg mcp.ServerConfig
	// project: from the workspace (its .rein/config.toml or .mcp.json),
	// so applied only when the workspace is trusted.
	project bool
	// held says why a project server is not applied ("" when it is).
	held string
}

// mcpServers lists the MCP servers configured for a session in dir: the
// [mcp_servers] of the config files, then the workspace's .mcp.json (a
// config.toml server of the same name wins). A workspace's own servers
// (its .rein/config.toml and .mcp.json) are held unless the workspace is
// trusted; held ones are listed with the reason.
func (a *app) mcpServers(ctx context.Context, dir string) ([]mcpServer, error) {
	// A run has applied what trust allows (trustWorkspace); rein mcp
	// list and get decide here.
	if slices.ContainsFunc(a.cfg.Held(), func(h config.Held) bool { return strings.HasPrefix(h.Key, "mcp_servers.") }) && a.trusted(ctx, a.root) {
		a.cfg.ApplyHeld()
	}
	root := a.workspaceRoot(dir)
	var out []mcpServer
	for _, s := range a.cfg.MCPServers {
		ms := mcpServer{project: s.Project, cfg: mcpConfig(s)}
		if !s.Project && a.cwdInWorkspace(ms.cfg, root) && !a.trusted(ctx, root) {
			ms.held = "its cwd is inside this workspace, which would choose its code, and the workspace is not trusted (rein trust, or --trust for one run)"
		}
		out = append(out, ms)
	}
	taken := func(name string) bool {
		return slices.ContainsFunc(out, func(o mcpServer) bool { return o.cfg.Name == name })
	}
	const untrusted = "the workspace is not trusted, so its own MCP servers do not start (rein trust, or --trust for one run)"
	for _, s := range a.cfg.HeldMCPServers() {
		if !taken(s.Name) {
			out = append(out, mcpServer{project: true, held: untrusted, cfg: mcpConfig(s)})
		}
	}
	servers, warnings, err := mcp.LoadProjectFile(filepath.Join(root, mcpProjectFile))
	if err != nil {
		// A repository's broken file must not stop rein: say so, go on.
		fmt.Fprintf(a.stderr, "rein: warning: MCP servers of the workspace skipped: %v\n", err)
	}
	for _, w := range warnings {
		fmt.Fprintf(a.stderr, "rein: warning: %s\n", w)
	}
	if len(servers) == 0 {
		return out, nil
	}
	held := ""
	if !a.trusted(ctx, root) {
		held = untrusted
	}
	for _, s := range servers {
		if !taken(s.Name) {
			out = append(out, mcpServer{cfg: s, project: true, held: held})
		}
	}
	for i, s := range out {
		if s.project && s.cfg.Cwd == "" {
			// A workspace's own server runs in the workspace, as Claude
			// Code runs .mcp.json's: its command may name the
			// repository's files, and trusting it trusted that.
			out[i].cfg.Cwd = "."
		}
	}
	return out, nil
}

// cwdInWorkspace reports whether a server the user configured would run
// with its working directory (its cwd, expanded, relative to the
// workspace) inside the workspace root: the workspace would then choose
// the server's code (npx, python -m and node resolve from there).
func (a *app) cwdInWorkspace(s mcp.ServerConfig, root string) bool {
	if s.Cwd == "" || s.Disabled || s.Transport() != mcp.Stdio {
		return false
	}
	x, err := s.Expand(a.mcpLookup)
	return err == nil && within(root, x.WorkDir(root))
}

// userMCPItems describes, for root's trust decision, the user's own MCP
// servers whose cwd is inside root: they run only once root is trusted.
// The value is the cwd as configured, so it does not depend on where in
// the workspace rein runs.
func (a *app) userMCPItems(cfg *config.Config, root string) []trust.Item {
	var out []trust.Item
	for _, s := range cfg.MCPServers {
		if !s.Project && a.cwdInWorkspace(mcpConfig(s), root) {
			out = append(out, trust.Item{Kind: trust.KindMCPCwd, Key: "mcp_servers." + s.Name + ".cwd", Value: s.Cwd, Origin: s.Origin})
		}
	}
	return out
}

// mcpServerDir is where stdio MCP servers without a cwd run for a session
// in dir: the user's home directory, or the root directory when home is
// unknown or inside the session's workspace (rein run in ~): never a
// directory whose files the workspace chooses.
func (a *app) mcpServerDir(dir string) string {
	home := a.getenv("HOME")
	if home == "" || !isDir(home) || within(a.workspaceRoot(dir), home) {
		return string(filepath.Separator)
	}
	return home
}

// mcpConfig is a [mcp_servers] table as package mcp takes it.
func mcpConfig(s config.MCPServer) mcp.ServerConfig {
	return mcp.ServerConfig{
		Name: s.Name, Type: mcp.Transport(s.Type), Command: s.Command, Args: s.Args, Env: s.Env, Cwd: s.Cwd,
		URL: s.URL, Headers: s.Headers, BearerTokenEnv: s.BearerTokenEnv, Disabled: s.Disabled(),
		StartupTimeout: s.StartupTimeout, ToolTimeout: s.ToolTimeout, Origin: s.Origin,
	}
}

// mcpCanonical is a server's trust value: config.MCPServer.Canonical, the
// same for a .mcp.json server as for a [mcp_servers] table.
func mcpCanonical(s mcp.ServerConfig) string {
	return config.MCPServer{Type: string(s.Type), Command: s.Command, Args: s.Args, Env: s.Env, Cwd: s.Cwd,
		URL: s.URL, Headers: s.Headers, BearerTokenEnv: s.BearerTokenEnv}.Canonical()
}

// trusted reports whether root's own settings apply in this run: the
// decision the run already made (trustWorkspace), else one made now
// without asking.
func (a *app) trusted(ctx context.Context, root string) bool {
	if d, ok := a.decision(trust.Key(root)); ok {
		return d.Apply
	}
	items, err := a.projectItems(root)
	if err != nil {
		a.log.Warn("workspace trust", "err", err)
		return false
	}
	return a.decide(ctx, root, items, false).Apply
}

// mcpFileItems describes root's .mcp.json servers for the trust decision,
// but for those a server of the same name in cfg's files shadows: they
// would not start, trusted or not (mcpServers).
func mcpFileItems(cfg *config.Config, root string) []trust.Item {
	servers, _, err := mcp.LoadProjectFile(filepath.Join(root, mcpProjectFile))
	if err != nil {
		// An unreadable file is reported where the servers are started.
		return nil
	}
	shadows := slices.Concat(cfg.MCPServers, cfg.HeldMCPServers())
	var out []trust.Item
	for _, s := range servers {
		if slices.ContainsFunc(shadows, func(c config.MCPServer) bool { return c.Name == s.Name }) {
			continue
		}
		out = append(out, trust.Item{Kind: trust.KindMCP, Key: "mcpServers." + s.Name, Value: mcpCanonical(s), Origin: mcpProjectFile})
	}
	return out
}

// mcpLookup resolves ${VAR} in server configurations and bearer tokens
// from rein's environment, except what the environment policy keeps from
// configured programs (rein's own keys, [env] drop).
func (a *app) mcpLookup(name string) (string, bool) {
	v, ok := os.LookupEnv(name)
	if !ok || len(a.envPolicy().Environ([]string{name + "=" + v}, tool.ForConfigured)) == 0 {
		return "", false
	}
	return v, true
}

// mcpEnviron is the environment stdio servers start from: the same policy
// as hooks get (programs the user configured): rein's keys and [env] drop
// removed.
func (a *app) mcpEnviron() []string {
	return a.envPolicy().Environ(os.Environ(), tool.ForConfigured)
}

// mcpLogPath is where session id's MCP server stderr goes: ID.mcp.log
// beside the session file of a JSONL store, else under the local data
// directory (mcp-logs/ID.mcp.log), which it creates; "" when there is no
// such place.
func mcpLogPath(st store.Store, id string) string {
	p := mcpLogFile(st, id)
	if p == "" || os.MkdirAll(filepath.Dir(p), 0o700) != nil {
		return ""
	}
	return p
}

// mcpLogFile is mcpLogPath without creating anything: what 'sessions rm'
// removes with the session.
func mcpLogFile(st store.Store, id string) string {
	if js, ok := st.(*jsonl.Store); ok {
		return strings.TrimSuffix(js.Path(id), ".jsonl") + ".mcp.log"
	}
	root, err := jsonl.DefaultRoot()
	if err != nil {
		return ""
	}
	return filepath.Join(root, "mcp-logs", id+".mcp.log")
}

// mcpSession is the MCP servers of one agent.
type mcpSession struct {
	m   *mcp.Manager
	log *os.File
	// kinds classifies the session's MCP tools for its permission
	// policy (guard.Policy.Classify).
	kinds func(string) (guard.Kind, bool)
}

// startMCP starts the MCP servers for a session in dir (with extra ones,
// e.g. an ACP client's) and wires them into cfg: their tools join
// cfg.Tools at each step boundary (a BeforeStep hook, first in the chain)
// and their instructions join the system prompt within what is left of the
// instructions budget; the caller gives the session's permission policy
// the returned session's kinds. Their stderr goes to logPath. It returns nil when
// no server is configured. The caller closes it after the agent.
func (a *app) startMCP(ctx context.Context, dir, logPath string, model catalog.Model, cfg *agent.Config, extra []mcp.ServerConfig) (*mcpSession, error) {
	servers, err := a.mcpServers(ctx, dir)
	if err != nil {
		return nil, err
	}
	var configs []mcp.ServerConfig
	for _, s := range servers {
		if s.held == "" {
			configs = append(configs, s.cfg)
		}
	}
	configs = append(configs, extra...)
	if len(configs) == 0 || cfg.Tools == nil {
		return nil, nil
	}
	ms := &mcpSession{}
	if logPath != "" {
		if f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600); err == nil {
			ms.log = f
		} else {
			a.log.Warn("MCP server log", "err", err)
		}
	}
	left := a.cfg.InstructionsBudget
	for _, s := range cfg.System {
		if s.Name != "rein" && s.Name != "environment" {
			left -= len(s.Text)
		}
	}
	if left <= 0 {
		left = -1
	}
	opts := mcp.Options{Servers: configs, Registry: cfg.Tools, Environ: a.mcpEnviron(), Dir: a.workspaceRoot(dir), ServerDir: a.mcpServerDir(dir), Images: model.Images,
		InstructionsBudget: left, Lookup: a.mcpLookup, Version: version(), Logger: a.log,
		CheckCommand: a.checkCommand(dir)}
	if ms.log != nil {
		opts.Log = ms.log
	}
	ms.m = mcp.Start(opts)
	ms.kinds = mcpKinds(cfg.Tools)
	cfg.Hooks.BeforeStep = append([]agent.Hook[agent.StepInfo, []agent.AdditionalContext]{mcpSyncHook(ms.m, a)}, cfg.Hooks.BeforeStep...)
	cfg.System = append(cfg.System, agent.Section{Name: "mcp", Dynamic: ms.m.Instructions})
	return ms, nil
}

// Close stops the servers; call it after the agent has closed.
func (ms *mcpSession) Close() error {
	if ms == nil {
		return nil
	}
	err := ms.m.Close()
	if ms.log != nil {
		ms.log.Close()
	}
	return err
}

// mcpSyncHook publishes the servers' tool changes at each step boundary;
// the first waits for servers still starting (each at most its
// startup_timeout). A failure to publish is logged: the step runs with the
// tools it had.
func mcpSyncHook(m *mcp.Manager, a *app) agent.Hook[agent.StepInfo, []agent.AdditionalContext] {
	return func(ctx context.Context, in agent.StepInfo, next func(context.Context, agent.StepInfo) ([]agent.AdditionalContext, error)) ([]agent.AdditionalContext, error) {
		if err := m.Sync(ctx); err != nil {
			a.log.Warn("MCP tools not updated", "err", err)
		}
		return next(ctx, in)
	}
}

// mcpKinds tells the permission policy which MCP tools of reg their
// servers annotate read-only (allowed like reads); the others are asked
// about outside full-access (guard.KindExternal).
func mcpKinds(reg *tool.Registry) func(string) (guard.Kind, bool) {
	return func(name string) (guard.Kind, bool) {
		if !strings.HasPrefix(name, mcp.Prefix) {
			return 0, false
		}
		if t, ok := reg.Lookup(name); ok && t.Mode() == tool.Parallel {
			return guard.KindSafe, true
		}
		return guard.KindExternal, true
	}
}

// classify is the permission policy's Classify: MCP tools as mcpKinds says.
func (a *app) classify(name string) (guard.Kind, bool) {
	if a.mcpKinds == nil {
		return 0, false
	}
	return a.mcpKinds(name)
}

func (a *app) mcpCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "mcp",
		Short: "Manage MCP servers (add, list, get, remove)",
		Long: `MCP (Model Context Protocol) servers give the model more tools: a server's
tool TOOL appears as mcp__SERVER__TOOL.

Servers come from [mcp_servers.NAME] tables in the user's config.toml (which
'rein mcp add' and 'rein mcp remove' edit), the workspace's .rein/config.toml,
and the workspace's .mcp.json (Claude Code's format). A workspace's own
servers start only when the workspace is trusted.

Each session starts its servers in parallel; the first model request waits
for them at most their startup_timeout (default 10s), slower ones join at a
later step. Server stderr goes to the session's log file next to the
session (ID.mcp.log), never to the terminal. See docs/mcp.md.`,
	}
	cmd.AddCommand(a.mcpListCmd(), a.mcpGetCmd(), a.mcpAddCmd(), a.mcpRemoveCmd())
	return cmd
}

// probe starts the configured servers (those that would start in a
// session here), waits for them as a session would, and returns their
// status, held ones included, in configuration order.
func (a *app) probe(ctx context.Context, only string) ([]mcp.Status, []mcpServer, error) {
	servers, err := a.mcpServers(ctx, a.dir)
	if err != nil {
		return nil, nil, err
	}
	if only != "" {
		servers = slices.DeleteFunc(servers, func(s mcpServer) bool { return s.cfg.Name != only })
		if len(servers) == 0 {
			return nil, nil, fmt.Errorf("no MCP server %q is configured (see 'rein mcp list')", only)
		}
	}
	var run []mcp.ServerConfig
	for _, s := range servers {
		if s.held == "" {
			run = append(run, s.cfg)
		}
	}
	reg, _ := tool.NewRegistry()
	m := mcp.Start(mcp.Options{Servers: run, Registry: reg, Environ: a.mcpEnviron(), Dir: a.root, ServerDir: a.mcpServerDir(a.dir), Lookup: a.mcpLookup, Version: version(), Logger: a.log,
		CheckCommand: a.checkCommand(a.dir)})
	m.Wait(ctx)
	st := m.Status()
	if err := m.Close(); err != nil {
		return nil, nil, err
	}
	// Close marks running servers stopped: report what they were.
	live := map[string]mcp.Status{}
	for _, s := range st {
		live[s.Name] = s
	}
	var out []mcp.Status
	for _, s := range servers {
		if s.held != "" {
			out = append(out, mcp.Status{Name: s.cfg.Name, Origin: s.cfg.Origin, Transport: s.cfg.Transport(), Target: s.cfg.Target(),
				State: "held", Error: s.held, Tools: []mcp.ToolInfo{}})
			continue
		}
		st := live[s.cfg.Name]
		if st.State == mcp.Starting {
			st.Error = fmt.Sprintf("no answer within its startup_timeout (%s); a session would go on without it and add its tools when it is ready (a first npx download can take longer: raise startup_timeout)",
				orDefault(s.cfg.StartupTimeout, mcp.DefaultStartupTimeout))
		}
		out = append(out, st)
	}
	return out, servers, nil
}

func (a *app) mcpListCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "list",
		Short: "Start every configured MCP server and show its state and tool count",
		Long: `List starts each configured server as a session would (in parallel, waiting
at most its startup_timeout), prints its state and number of tools, and stops
it again. States: ready, starting (no answer within startup_timeout), failed
(the reason follows the table), disabled (enabled = false), held (a workspace's
server in an untrusted workspace).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			st, _, err := a.probe(cmd.Context(), "")
			if err != nil {
				return err
			}
			if asJSON {
				return printJSON(a.stdout, st)
			}
			if len(st) == 0 {
				fmt.Fprintln(a.stdout, "No MCP servers are configured. Add one with 'rein mcp add NAME -- COMMAND [ARGS...]' or 'rein mcp add NAME --url URL'.")
				return nil
			}
			tw := tabwriter.NewWriter(a.stdout, 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "NAME\tSTATE\tTOOLS\tTARGET\tFROM")
			for _, s := range st {
				tools := "-"
				if s.State == mcp.Ready {
					tools = fmt.Sprint(len(s.Tools))
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", s.Name, s.State, tools, shorten(display.Quote(s.Target), 50), display.Quote(a.shortPath(s.Origin)))
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			for _, s := range st {
				if s.Error != "" {
					fmt.Fprintf(a.stdout, "\n%s: %s\n", s.Name, indentRest(s.Error))
				}
				for _, sk := range s.Skipped {
					fmt.Fprintf(a.stdout, "\n%s: tool %q not offered: %s\n", s.Name, sk.Tool, sk.Note)
				}
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func (a *app) mcpGetCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "get NAME",
		Short: "Start one MCP server and show its configuration, state and tools",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			st, servers, err := a.probe(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			s, cfg := st[0], servers[0].cfg
			if asJSON {
				return printJSON(a.stdout, s)
			}
			w := a.stdout
			fmt.Fprintf(w, "%s\n  from:       %s\n  transport:  %s\n  target:     %s\n", s.Name, a.shortPath(s.Origin), s.Transport, s.Target)
			if len(cfg.Env) > 0 {
				fmt.Fprintf(w, "  env:        %s\n", strings.Join(slices.Sorted(maps.Keys(cfg.Env)), ", "))
			}
			if len(cfg.Headers) > 0 {
				fmt.Fprintf(w, "  headers:    %s\n", strings.Join(slices.Sorted(maps.Keys(cfg.Headers)), ", "))
			}
			if cfg.BearerTokenEnv != "" {
				fmt.Fprintf(w, "  bearer token from: $%s\n", cfg.BearerTokenEnv)
			}
			fmt.Fprintf(w, "  timeouts:   startup %s, tool %s\n", orDefault(cfg.StartupTimeout, mcp.DefaultStartupTimeout), orDefault(cfg.ToolTimeout, mcp.DefaultToolTimeout))
			fmt.Fprintf(w, "  state:      %s\n", s.State)
			if s.Server != "" {
				fmt.Fprintf(w, "  server:     %s\n", s.Server)
			}
			if s.Error != "" {
				fmt.Fprintf(w, "  error:      %s\n", indentRest(s.Error))
			}
			if s.Instructions > 0 {
				fmt.Fprintf(w, "  instructions: %d bytes (in the system prompt)\n", s.Instructions)
			}
			if len(s.Tools) > 0 {
				fmt.Fprintf(w, "  tools (%d):\n", len(s.Tools))
				for _, t := range s.Tools {
					mark := "asks"
					if t.ReadOnly {
						mark = "read-only"
					}
					line := fmt.Sprintf("    %s  [%s]", t.Name, mark)
					if t.Note != "" {
						line += "  (" + t.Note + ")"
					}
					fmt.Fprintln(w, line)
				}
			}
			for _, sk := range s.Skipped {
				fmt.Fprintf(w, "  not offered: %s: %s\n", sk.Tool, sk.Note)
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func (a *app) mcpAddCmd() *cobra.Command {
	var (
		url, transport, cwd, bearer string
		env, headers                []string
		startup, toolTimeout        time.Duration
		disabled                    bool
	)
	cmd := &cobra.Command{
		Use:   "add NAME [flags] [-- COMMAND [ARGS...]]",
		Short: "Add an MCP server to the user config",
		Long: `Add writes a [mcp_servers.NAME] table to the user's config.toml
($XDG_CONFIG_HOME/rein/config.toml, else ~/.config/rein/config.toml), leaving the
rest of the file as it is. A stdio server is the command after --; an HTTP
server is --url (Streamable HTTP, or --transport sse for the older HTTP+SSE).

Values may refer to environment variables as ${VAR} or ${VAR:-default}; they
are read when a session starts the server (rein's own API keys are never
handed out).`,
		Example: `  rein mcp add github --env 'GITHUB_PERSONAL_ACCESS_TOKEN=${GITHUB_TOKEN}' -- npx -y @modelcontextprotocol/server-github
  rein mcp add fs -- npx -y @modelcontextprotocol/server-filesystem ~/notes
  rein mcp add docs --url https://docs.example.com/mcp --bearer-token-env DOCS_TOKEN`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			name := args[0]
			if !mcp.ValidName(name) {
				return usagef("server name %q: use letters, digits, _ and - (no __, at most 48)", name)
			}
			s := config.MCPServer{Name: name, Type: transport, Cwd: cwd, URL: url, BearerTokenEnv: bearer, StartupTimeout: startup, ToolTimeout: toolTimeout}
			if dash := cmd.ArgsLenAtDash(); dash >= 0 {
				if dash != 1 {
					return usagef("give the name before --, the command after it")
				}
				if len(args) < 2 {
					return usagef("no command after --")
				}
				s.Command, s.Args = args[1], args[2:]
			} else if len(args) > 1 {
				return usagef("put the server's command after --: rein mcp add %s -- %s", name, strings.Join(args[1:], " "))
			}
			var err error
			if s.Env, err = keyValues("--env", env); err != nil {
				return err
			}
			if s.Headers, err = keyValues("--header", headers); err != nil {
				return err
			}
			if disabled {
				f := false
				s.Enabled = &f
			}
			check := mcp.ServerConfig{Name: name, Type: mcp.Transport(transport), Command: s.Command, Args: s.Args, Env: s.Env, Cwd: cwd,
				URL: url, Headers: s.Headers, BearerTokenEnv: bearer, StartupTimeout: startup, ToolTimeout: toolTimeout}
			if err := check.Validate(); err != nil {
				return exitWith(ExitUsage, err)
			}
			path := config.UserFile(a.getenv)
			if path == "" {
				return fmt.Errorf("no user config file: set HOME or XDG_CONFIG_HOME")
			}
			if err := config.AddMCPServer(path, s); err != nil {
				return err
			}
			fmt.Fprintf(a.stdout, "Added MCP server %s to %s (its tools: mcp__%s__*). Check it with 'rein mcp get %s'.\n", name, path, name, name)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&url, "url", "", "the server's URL (an HTTP server)")
	f.StringVar(&transport, "transport", "", "stdio, http or sse (default: stdio with a command, http with --url)")
	f.StringArrayVarP(&env, "env", "e", nil, "set `NAME=VALUE` in a stdio server's environment (repeatable)")
	f.StringArrayVar(&headers, "header", nil, "send `NAME=VALUE` with every request to an HTTP server (repeatable)")
	f.StringVar(&bearer, "bearer-token-env", "", "send the bearer token in environment variable `VAR` to an HTTP server")
	f.StringVar(&cwd, "server-cwd", "", "working directory of a stdio server (default: the session's)")
	f.DurationVar(&startup, "startup-timeout", 0, "how long the first request waits for the server (default 10s)")
	f.DurationVar(&toolTimeout, "tool-timeout", 0, "how long one call may go without an answer (default 60s)")
	f.BoolVar(&disabled, "disabled", false, "add it with enabled = false")
	return cmd
}

func (a *app) mcpRemoveCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "remove NAME",
		Short: "Remove an MCP server from the user config",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			path := config.UserFile(a.getenv)
			if err := config.RemoveMCPServer(path, args[0]); err != nil {
				return err
			}
			fmt.Fprintf(a.stdout, "Removed MCP server %s from %s.\n", args[0], path)
			return nil
		},
	}
}

// keyValues parses NAME=VALUE flags.
func keyValues(flag string, list []string) (map[string]string, error) {
	if len(list) == 0 {
		return nil, nil
	}
	out := map[string]string{}
	for _, kv := range list {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, usagef("%s %q: want NAME=VALUE", flag, kv)
		}
		out[k] = v
	}
	return out, nil
}

func orDefault(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}

func shorten(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}

// indentRest indents every line of s but the first, under a list entry.
func indentRest(s string) string { return strings.ReplaceAll(s, "\n", "\n    ") }

// shortPath shows a path under the home directory as ~/….
func (a *app) shortPath(p string) string {
	if home := a.getenv("HOME"); home != "" {
		if rest, ok := strings.CutPrefix(p, home+string(filepath.Separator)); ok {
			return "~/" + rest
		}
	}
	return p
}

// acpMCPServers converts the MCP servers an ACP client sends with
// session/new or session/load (stdio, http, sse; servers over the ACP
// channel itself, which rein does not advertise, are skipped) into server
// configurations.
func acpMCPServers(list []acpsdk.McpServer) []mcp.ServerConfig {
	var out []mcp.ServerConfig
	name := func(n string) string {
		if mcp.ValidName(n) {
			return n
		}
		return mcp.SanitizeName(n)
	}
	headers := func(hs []acpsdk.HttpHeader) map[string]string {
		if len(hs) == 0 {
			return nil
		}
		m := map[string]string{}
		for _, h := range hs {
			m[h.Name] = h.Value
		}
		return m
	}
	for _, s := range list {
		switch {
		case s.Stdio != nil:
			c := mcp.ServerConfig{Name: name(s.Stdio.Name), Command: s.Stdio.Command, Args: s.Stdio.Args, Origin: "acp"}
			if len(s.Stdio.Env) > 0 {
				c.Env = map[string]string{}
				for _, e := range s.Stdio.Env {
					c.Env[e.Name] = e.Value
				}
			}
			out = append(out, c)
		case s.Http != nil:
			out = append(out, mcp.ServerConfig{Name: name(s.Http.Name), Type: mcp.HTTP, URL: s.Http.Url, Headers: headers(s.Http.Headers), Origin: "acp"})
		case s.Sse != nil:
			out = append(out, mcp.ServerConfig{Name: name(s.Sse.Name), Type: mcp.SSE, URL: s.Sse.Url, Headers: headers(s.Sse.Headers), Origin: "acp"})
		}
	}
	return out
}
