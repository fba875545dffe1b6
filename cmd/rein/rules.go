package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/reinhq/rein/agent"
	"github.com/reinhq/rein/config"
	"github.com/reinhq/rein/guard"
	"github.com/reinhq/rein/hook"
	"github.com/reinhq/rein/sandbox"
	"github.com/reinhq/rein/transcript"
	"github.com/reinhq/rein/trust"
)

// alwaysRules turns an "allow always" answer (in the editor or the
// terminal UI) into a permission rule of the session's workspace: it is
// written to the user's config file, under [workspaces."ROOT".permissions]
// allow (never to the workspace's own .rein/config.toml, which the
// repository controls and which is held until trusted), added to the
// configuration of the session's workspace view (never to the process's:
// another workspace's sessions do not get it), and every open session of
// the workspace gets a policy with it, so the policy itself allows such
// calls from then on.
type alwaysRules struct {
	a        *app       // the process: the user's config file, workspace roots
	face     string     // who answered, for the rule's origin
	mu       sync.Mutex // the views' configurations and sessions
	sessions []*sessionPolicy
}

// sessionPolicy is one session's permission mode and the policy in force
// for it. A face that switches modes (session/set_mode) changes both the
// guard's policy and, through byMode, the confinement of write and edit,
// the OS sandbox of bash and hooks, and whether bash runs in the editor's
// terminal.
type sessionPolicy struct {
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
func (ps *sessionPolicy) mode() string { return *ps.modeID.Load() }

// hookMode is the hooks' permission mode and sandbox, as the mode in force
// says (hook.Runtime.Mode).
func (ps *sessionPolicy) hookMode() (string, *sandbox.Sandbox) {
	m := ps.mode()
	return hook.ClaudePermissionMode(m), ps.byMode[m].sandbox(ps.dir)
}

// effective is the mode a session in ps.dir runs when mode is asked for: a
// workspace that may not be written (unsafeRoot) runs workspace-write as
// read-only.
func (ps *sessionPolicy) effective(mode string) string {
	if mode == config.WorkspaceWrite && ps.a.unsafeRoot(ps.dir) != "" {
		return config.ReadOnly
	}
	return mode
}

// classify is the session policy's Classify.
func (ps *sessionPolicy) classify(name string) (guard.Kind, bool) {
	if ps.mcpKinds == nil {
		return 0, false
	}
	return ps.mcpKinds(name)
}

// session starts the policy of a session in dir of workspace view w, in
// mode.
func (r *alwaysRules) session(w *app, dir, mode string) (*sessionPolicy, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	ps := &sessionPolicy{a: w, dir: dir, byMode: map[string]*app{}}
	for _, m := range permissionModes {
		ps.byMode[m.ID] = w.withMode(ps.effective(m.ID))
	}
	if err := r.applyLocked(ps, mode); err != nil {
		return nil, err
	}
	r.sessions = append(r.sessions, ps)
	return ps, nil
}

// drop forgets a session's policy (the session closed) and closes the
// sandboxes of its mode views, which only that session used.
func (r *alwaysRules) drop(ps *sessionPolicy) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, v := range ps.byMode {
		v.closeSandboxes()
	}
	for i, x := range r.sessions {
		if x == ps {
			r.sessions = append(r.sessions[:i:i], r.sessions[i+1:]...)
			return
		}
	}
}

// applyLocked puts mode (as effective says) and its policy in force: the
// rules of the session's workspace view, those the user's config keeps
// for the workspace included.
func (r *alwaysRules) applyLocked(ps *sessionPolicy, mode string) error {
	mode = ps.effective(mode)
	w := ps.byMode[mode]
	pm := ps.a.permissionsFor(ps.dir)
	p, err := guard.Settings{Mode: mode, Allow: pm.Allow, Ask: pm.Ask, Deny: pm.Deny, Writable: w.writable()}.Policy(ps.dir)
	if err != nil {
		return err
	}
	p.Classify = ps.classify
	ps.current.Store(p)
	ps.modeID.Store(&mode)
	return nil
}

func (r *alwaysRules) setMode(ps *sessionPolicy, mode string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.applyLocked(ps, mode)
}

func (r *alwaysRules) Rule(cwd string, req agent.ApprovalRequest) (string, bool) {
	return ruleFor(cwd, req.Name, req.Arguments)
}

// Save writes rule to the user's config for cwd's workspace and applies it
// to every open session of that workspace. When the file cannot be
// written, the rule still applies until rein exits and the error says so.
func (r *alwaysRules) Save(_ context.Context, cwd, rule string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	root := trust.Key(r.a.workspaceRoot(cwd))
	path := config.UserFile(r.a.getenv)
	var werr error
	if path == "" {
		werr = fmt.Errorf("the rule applies until rein exits: no user config directory (set HOME or XDG_CONFIG_HOME)")
	} else if err := config.AddWorkspaceRule(path, root, "allow", rule); err != nil {
		werr = fmt.Errorf("the rule applies until rein exits: %w", err)
	}
	origin := "allowed always in " + r.face
	if werr == nil {
		origin += " (" + path + ")"
	}
	var added []*app
	for _, ps := range r.sessions {
		if trust.Key(ps.a.workspaceRoot(ps.dir)) != root {
			continue
		}
		if !slices.Contains(added, ps.a) { // sessions of a workspace share its view
			if err := ps.a.cfg.AddFor(root, "allow", rule, origin); err != nil {
				return err
			}
			added = append(added, ps.a)
		}
		if err := r.applyLocked(ps, ps.mode()); err != nil {
			return err
		}
	}
	return werr
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
