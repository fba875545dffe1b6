package main

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/reinhq/rein/config"
	"github.com/reinhq/rein/hook"
	"github.com/reinhq/rein/llm/catalog"
	"github.com/reinhq/rein/tool"
	"github.com/reinhq/rein/trust"
)

// notSecret are variables no configuration can make a key variable: a
// project that names one as its api_key_env must not strip it from every
// tool.
var notSecret = []string{"PATH", "HOME", "USER", "LOGNAME", "SHELL", "TERM", "PWD", "TMPDIR", "LANG"}

// keyEnvs are the variables rein's keys live in: every provider's standard
// variable and every api_key_env the configuration names, applied or held,
// and REIN_STORE when it holds the store's password. Tools and hooks never
// get them.
func (a *app) keyEnvs(cfg *config.Config) []string {
	names := append(catalog.KeyEnvs(), cfg.KeyEnvs()...)
	if storePassword(a.getenv("REIN_STORE")) != "" {
		names = append(names, "REIN_STORE")
	}
	slices.Sort(names)
	return slices.DeleteFunc(slices.Compact(names), func(n string) bool { return slices.Contains(notSecret, n) })
}

// keyValues are the secrets rein uses, to be masked wherever they turn up
// and kept from every tool and hook under any name: the values of the
// standard key variables and of the api_key_env variables in force (a
// workspace's held api_key_env names a variable rein does not read, so its
// value is no secret of rein's: a project naming GOPATH must not mask it
// or strip PATH), and the store's password.
func (a *app) keyValues(cfg *config.Config) []string {
	names := catalog.KeyEnvs()
	for _, p := range cfg.Providers {
		if p.APIKeyEnv != "" && !slices.Contains(notSecret, p.APIKeyEnv) {
			names = append(names, p.APIKeyEnv)
		}
	}
	var out []string
	for _, n := range names {
		if v := strings.TrimSpace(a.getenv(n)); v != "" {
			out = append(out, v)
		}
	}
	for _, spec := range []string{cfg.Store, a.getenv("REIN_STORE")} {
		if pw := storePassword(spec); pw != "" {
			out = append(out, pw)
		}
	}
	return out
}

// storePassword returns the password a postgres:// store URL holds (in
// its user info or as a password parameter), or "".
func storePassword(spec string) string {
	if !config.IsPostgresURL(spec) {
		return ""
	}
	u, err := url.Parse(spec)
	if err != nil {
		return ""
	}
	if pw, ok := u.User.Password(); ok && pw != "" {
		return pw
	}
	return u.Query().Get("password")
}

// envPolicy is the environment filter of the bash tool and of hooks: rein's
// keys never pass; [env] keep and drop decide the rest (see tool.EnvPolicy).
func (a *app) envPolicy() tool.EnvPolicy {
	return tool.EnvPolicy{
		Secrets:      a.keyEnvs(a.cfg),
		SecretValues: a.keyValues(a.cfg),
		Keep:         a.cfg.Env.Keep,
		Drop:         a.cfg.Env.Drop,
	}
}

// trustStore is the user's trust file, next to config.toml.
func (a *app) trustStore() *trust.Store {
	dir := config.UserDir(a.getenv)
	if dir == "" {
		dir = "."
	}
	return trust.NewStore(filepath.Join(dir, trust.FileName))
}

// heldKinds maps the key prefixes of held settings to their trust kinds;
// a key matching none is shown under its own first segment.
var heldKinds = []struct{ prefix, kind string }{
	{"providers.", trust.KindProvider},
	{"permission_mode", trust.KindMode},
	{"env.keep", trust.KindEnvKeep},
	{"permissions.allow", trust.KindAllow},
	{"sandbox.", trust.KindSandbox},
	{"mcp", trust.KindMCP},
	{"system_prompt", trust.KindPrompt},
	{"append_system_prompt", trust.KindPrompt},
	{"prices.", trust.KindPrices},
	{"max_steps", trust.KindLimit},
	{"max_output_tokens", trust.KindLimit},
	{"thinking_budget", trust.KindLimit},
	{"instructions_budget", trust.KindLimit},
	{"context_window", trust.KindLimit},
	{"request_timeout", trust.KindLimit},
}

// configItems describes the held settings of cfg's workspace file.
func configItems(cfg *config.Config, root string) []trust.Item {
	var out []trust.Item
	for _, h := range cfg.Held() {
		kind, _, _ := strings.Cut(h.Key, ".")
		for _, k := range heldKinds {
			if strings.HasPrefix(h.Key, k.prefix) {
				kind = k.kind
				break
			}
		}
		out = append(out, trust.Item{Kind: kind, Key: h.Key, Value: h.Value, Origin: relTo(root, h.Origin)})
	}
	return out
}

// hookItems describes the workspace's own command hooks, and its
// settings files that would turn every hook off.
func hookItems(hc *hook.Config, root string) []trust.Item {
	var out []trust.Item
	for _, h := range hc.ProjectCommands() {
		key := "hooks." + h.Event
		if h.Matcher != "" {
			key += "[" + h.Matcher + "]"
		}
		out = append(out, trust.Item{Kind: trust.KindHook, Key: key, Value: h.Command, Origin: relTo(root, h.File)})
	}
	for _, f := range hc.ProjectDisablers() {
		out = append(out, trust.Item{Kind: trust.KindHooksOff, Key: "disableAllHooks", Value: "true", Origin: relTo(root, f)})
	}
	return out
}

// relTo shortens an origin inside root to a relative one.
func relTo(root, origin string) string {
	if rest, ok := strings.CutPrefix(origin, root+string(filepath.Separator)); ok {
		return rest
	}
	return origin
}

// loadHooks reads the user's and root's command hooks.
func (a *app) loadHooks(root string) (*hook.Config, error) {
	hc, err := hook.Load(hook.LoadOptions{ProjectDir: root, UserConfigDir: a.userConfigDir(), Home: a.userHome()})
	if err != nil {
		return nil, err
	}
	for _, w := range hc.Warnings {
		fmt.Fprintf(a.stderr, "rein: warning: %s\n", w)
	}
	return hc, nil
}

// trustWorkspace decides whether the trust-relevant settings of the
// workspaces this run uses apply: the configuration's (from the current
// workspace) and the hooks' (from dir's, the session's directory). In a
// terminal it asks; headless it prints one line naming what it ignores.
// It applies what is trusted to a.cfg and returns the hooks to run.
func (a *app) trustWorkspace(ctx context.Context, dir string) (*hook.Config, error) {
	hookRoot := a.workspaceRoot(dir)
	hc, err := a.loadHooks(hookRoot)
	if err != nil {
		return nil, err
	}
	items := map[string][]trust.Item{}
	roots := []string{a.root}
	items[a.root] = configItems(a.cfg, a.root)
	if hookRoot != a.root {
		roots = append(roots, hookRoot)
	}
	items[hookRoot] = append(items[hookRoot], hookItems(hc, hookRoot)...)
	items[hookRoot] = append(items[hookRoot], mcpFileItems(a.cfg, hookRoot)...)
	items[hookRoot] = append(items[hookRoot], a.userMCPItems(a.cfg, hookRoot)...)
	for _, root := range roots {
		d := a.decide(ctx, root, items[root], true)
		if !d.Apply {
			if root == hookRoot {
				hc = hc.WithoutProject()
			}
			continue
		}
		if root == a.root {
			a.cfg.ApplyHeld()
			// A trusted api_key_env is now a key rein uses.
			a.red.Add(a.keyValues(a.cfg)...)
		}
	}
	return hc, nil
}

// decide resolves the trust of root once per run (asking when ask and a
// person is there) and reports what it ignores.
func (a *app) decide(ctx context.Context, root string, items []trust.Item, ask bool) trust.Decision {
	key := trust.Key(root)
	if d, ok := a.decision(key); ok {
		return d
	}
	opts := trust.Options{Once: a.trustOnce}
	switch {
	case ask && a.trustAsker != nil: // a face asks (rein acp: the editor)
		opts.Ask = a.trustAsker
	case ask && a.interactive():
		opts.Ask = trust.Prompter{In: a.stdin, Out: a.stderr}
	}
	d, err := trust.Resolve(ctx, a.trustStore(), root, items, opts)
	if err != nil {
		fmt.Fprintf(a.stderr, "rein: %v\n", err)
	}
	if ask {
		if n := d.Notice(); n != "" {
			fmt.Fprintln(a.stderr, "rein: "+n)
		}
		a.log.Debug("trust", "root", d.Root, "status", d.Status, "apply", d.Apply, "by", d.By, "items", len(d.Items))
	}
	a.remember(key, d)
	return d
}

// remember makes d this process's trust decision for the workspace whose
// key is key.
func (a *app) remember(key string, d trust.Decision) {
	a.proc.mu.Lock()
	defer a.proc.mu.Unlock()
	if a.proc.decisions == nil {
		a.proc.decisions = map[string]trust.Decision{}
	}
	a.proc.decisions[key] = d
}

// decision returns the trust decision this process made for the
// workspace whose key is key, if it made one.
func (a *app) decision(key string) (trust.Decision, bool) {
	a.proc.mu.Lock()
	defer a.proc.mu.Unlock()
	d, ok := a.proc.decisions[key]
	return d, ok
}

// projectItems reads root's workspace settings that need trust, as a run
// would see them (the user's settings may ask for .claude hooks).
func (a *app) projectItems(root string) ([]trust.Item, error) {
	cfg, err := config.Load(config.UserFile(a.getenv), config.ProjectFile(root), a.getenv)
	if err != nil {
		return nil, err
	}
	hc, err := hook.Load(hook.LoadOptions{ProjectDir: root, UserConfigDir: a.userConfigDir(), Home: a.userHome()})
	if err != nil {
		return nil, err
	}
	return slices.Concat(configItems(cfg, root), hookItems(hc, root), mcpFileItems(cfg, root), a.userMCPItems(cfg, root)), nil
}

func (a *app) trustCmd() *cobra.Command {
	var list, asJSON bool
	var revoke string
	cmd := &cobra.Command{
		Use:   "trust [DIR]",
		Short: "Trust a workspace's own settings (hooks, provider URLs, permission mode)",
		Long: `A workspace (the directory holding .rein, .claude or .git, from DIR upwards; DIR
defaults to the current directory) is untrusted until you trust it. In an
untrusted workspace rein ignores the project settings that could run code,
send your API key elsewhere or widen permissions:

  - hooks in .rein/settings.json, .claude/settings.json and
    .claude/settings.local.json, and their "disableAllHooks" (which would
    turn your own hooks off too)
  - providers.NAME.base_url, api_key_env and headers in .rein/config.toml
  - a permission_mode more permissive than yours
  - [permissions] allow rules
  - [sandbox] writable_roots and network_access = true
  - [env] keep patterns
  - MCP servers: [mcp_servers] in .rein/config.toml, and .mcp.json (each
    server whole: command, args, env, cwd, url, headers, token variable)
  - system_prompt and append_system_prompt
  - limits looser than yours: max_steps, max_output_tokens,
    thinking_budget, instructions_budget, context_window, request_timeout
  - [prices]

Everything else (model, tighter limits, instructions files) applies either
way.
A headless run names what it ignored on stderr; in a terminal rein asks once.
--trust applies them for one run without remembering.

'rein trust DIR' shows those settings and remembers that you trust them, in
trusted.json next to your config.toml, under the workspace's real path. When
they change (a new hook command, another base URL), rein asks again; removing
a setting does not.`,
		Example: `  rein trust            # trust the current workspace
  rein trust --list
  rein trust --revoke ~/src/cloned-repo`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			switch {
			case list && (revoke != "" || len(args) > 0), revoke != "" && len(args) > 0:
				return usagef("give one of DIR, --list or --revoke DIR")
			case list:
				return a.trustList(asJSON)
			case revoke != "":
				return a.trustRevoke(revoke)
			}
			dir := a.dir
			if len(args) == 1 {
				abs, err := filepath.Abs(args[0])
				if err != nil {
					return err
				}
				if fi, err := os.Stat(abs); err != nil || !fi.IsDir() {
					return usagef("%s: not a directory", args[0])
				}
				dir = abs
			}
			return a.trustDir(dir)
		},
	}
	cmd.Flags().BoolVar(&list, "list", false, "list the trusted workspaces and whether their settings changed since")
	cmd.Flags().StringVar(&revoke, "revoke", "", "forget the trust of the workspace holding `DIR`")
	cmd.Flags().BoolVar(&asJSON, "json", false, "with --list: print JSON")
	return cmd
}

func (a *app) trustDir(dir string) error {
	root := a.workspaceRoot(dir)
	items, err := a.projectItems(root)
	if err != nil {
		return err
	}
	key := trust.Key(root)
	if err := a.trustStore().Trust(key, items, time.Now()); err != nil {
		return err
	}
	if len(items) == 0 {
		fmt.Fprintf(a.stdout, "trusted %s (it has no settings that need trust yet)\n", key)
		return nil
	}
	fmt.Fprintf(a.stdout, "trusted %s with these settings; they apply from now on:\n%s", key, trust.Describe(items))
	return nil
}

func (a *app) trustRevoke(dir string) error {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	keys := []string{trust.Key(abs)}
	if fi, err := os.Stat(abs); err == nil && fi.IsDir() {
		keys = append(keys, trust.Key(a.workspaceRoot(abs)))
	}
	// Compact clears the tail it drops: keep what it returns, so the
	// message below names a directory.
	keys = slices.Compact(keys)
	st := a.trustStore()
	for _, k := range keys {
		ok, err := st.Revoke(k)
		if err != nil {
			return err
		}
		if ok {
			fmt.Fprintf(a.stdout, "revoked %s\n", k)
			return nil
		}
	}
	return fmt.Errorf("%s is not a trusted workspace (see 'rein trust --list')", keys[len(keys)-1])
}

func (a *app) trustList(asJSON bool) error {
	entries, err := a.trustStore().List()
	if err != nil {
		return err
	}
	type row struct {
		Root      string    `json:"root"`
		TrustedAt time.Time `json:"trustedAt"`
		Settings  int       `json:"settings"`
		Status    string    `json:"status"`
	}
	rows := []row{}
	for _, e := range entries {
		status := "directory gone"
		if fi, err := os.Stat(e.Root); err == nil && fi.IsDir() {
			status = "settings unreadable"
			if items, err := a.projectItems(e.Root); err == nil {
				status = "changed since"
				if d, _ := trust.Check(a.trustStore(), e.Root, items); d.Apply {
					status = "trusted"
				}
			}
		}
		rows = append(rows, row{e.Root, e.TrustedAt, len(e.Items), status})
	}
	if asJSON {
		return printJSON(a.stdout, rows)
	}
	if len(rows) == 0 {
		fmt.Fprintln(a.stdout, "no trusted workspaces")
		return nil
	}
	tw := tabwriter.NewWriter(a.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "WORKSPACE\tTRUSTED\tSETTINGS\tSTATUS")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\n", r.Root, r.TrustedAt.Local().Format("2006-01-02 15:04"), r.Settings, r.Status)
	}
	return tw.Flush()
}
