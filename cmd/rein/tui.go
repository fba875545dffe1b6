package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/reinhq/rein/agent"
	"github.com/reinhq/rein/llm/catalog"
	"github.com/reinhq/rein/session"
	"github.com/reinhq/rein/store"
	"github.com/reinhq/rein/store/jsonl"
	"github.com/reinhq/rein/trust"
	"github.com/reinhq/rein/tui"
)

// tuiFlags are the root command's own flags: which session the terminal
// UI opens.
type tuiFlags struct {
	session string
	cont    bool
}

// tuiRun is the root command's action: the terminal UI, in the current
// directory. Without a terminal it prints help (bare rein) or refuses
// (arguments, which would be a prompt).
func (a *app) tuiRun(cmd *cobra.Command, f tuiFlags, args []string) error {
	if len(args) == 1 && !strings.ContainsAny(args[0], " \t\n") {
		if s := cmd.SuggestionsFor(args[0]); len(s) > 0 {
			return usagef("unknown command %q for \"rein\"\n\nDid you mean this?\n\t%s", args[0], strings.Join(s, "\n\t"))
		}
	}
	if !a.tuiTerminal() {
		if len(args) == 0 && f.session == "" && !f.cont {
			fmt.Fprintln(a.stderr, "rein: the terminal UI needs a terminal (stdin and stdout); 'rein run' runs a prompt headless")
			return cmd.Help()
		}
		if len(args) == 1 && !strings.ContainsAny(args[0], " \t\n") && f.session == "" && !f.cont {
			// One word: a mistyped command as likely as a prompt.
			return usagef("unknown command %q for \"rein\" (a prompt for the terminal UI needs a terminal; 'rein run PROMPT' runs one headless)", args[0])
		}
		if len(args) > 0 && f.session == "" && !f.cont {
			return usagef("a prompt for the terminal UI needs a terminal (stdin and stdout); 'rein run PROMPT' runs one headless")
		}
		return usagef("the terminal UI needs a terminal (stdin and stdout); 'rein run --session ID PROMPT' runs a turn headless")
	}
	// The root command sets up nothing itself (help and unknown commands
	// need no configuration): the UI does it here.
	if err := a.setup(cmd); err != nil {
		return err
	}
	return a.tui(cmd.Context(), f, strings.Join(args, " "))
}

// tuiTerminal reports whether the UI can run: stdin and stdout are
// terminals.
func (a *app) tuiTerminal() bool {
	f, ok := a.stdin.(*os.File)
	return ok && term.IsTerminal(int(f.Fd())) && isTerminal(a.stdout)
}

// tui runs the terminal UI.
func (a *app) tui(ctx context.Context, f tuiFlags, prompt string) error {
	st, err := a.openStore()
	if err != nil {
		return err
	}
	id, err := a.sessionToOpen(ctx, st, f.session, f.cont)
	if err != nil {
		return err
	}
	o := &tuiOpener{a: a, st: st, rules: &alwaysRules{a: a, face: "the terminal UI"}, ws: newWorkspaces(a)}
	cfg := tui.Config{
		Open:      o.open,
		SessionID: id,
		Prompt:    prompt,
		Sessions:  st.List,
		Refs: func(ctx context.Context, self, prompt string) ([]agent.AdditionalContext, error) {
			return a.snapshotRefs(ctx, st, self, sessionRefs(prompt))
		},
		Models:  a.modelChoices(),
		Trust:   o.trust,
		Cwd:     a.dir,
		Version: version(),
	}
	if t := a.getenv("REIN_TUI_THEME"); t != "" {
		cfg.Theme = t
	}
	prog, err := tui.New(ctx, cfg, tui.Options{})
	if err != nil {
		return err
	}
	// The UI owns the terminal: what rein would print on stderr (hook
	// notices, warnings, the trust notice) becomes notices in it.
	stderr, log := a.stderr, a.log
	a.stderr = a.red.Writer(prog.NoticeWriter())
	a.log = slog.New(a.red.Handler(slog.NewTextHandler(a.stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	slog.SetDefault(a.log)
	last, err := prog.Run()
	a.stderr, a.log = stderr, log
	slog.SetDefault(log)
	if last != "" {
		fmt.Fprintf(a.stderr, "session %s · continue with: rein --session %s\n", last, last)
	}
	// A scripted run must use its whole script.
	if verr := o.ws.verify(); err == nil {
		err = verr
	}
	return err
}

// modelChoices are the models /model offers: the configured one and the
// catalog's.
func (a *app) modelChoices() []string {
	out := []string{a.cfg.Model}
	for _, m := range catalog.Known() {
		if !slices.Contains(out, m) {
			out = append(out, m)
		}
	}
	return out
}

// tuiOpener starts the sessions of one terminal UI.
type tuiOpener struct {
	a     *app
	st    store.Store
	rules *alwaysRules
	// ws is the UI's view of its workspace (the UI's sessions run in the
	// current workspace: see sessionDir), and the models its sessions
	// use.
	ws *workspaces
	mu sync.Mutex
}

// open implements tui.Config.Open: what 'rein run' wires (trust, model,
// hooks, tools, MCP servers), with the UI's approver and trust asker, and
// the session's live socket.
func (o *tuiOpener) open(ctx context.Context, req tui.OpenRequest) (*tui.Session, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	a, st := o.a, o.st
	dir, title := a.dir, ""
	switch {
	case req.ForkOf != "":
		info, err := sessionInfo(ctx, st, req.ForkOf)
		if err != nil {
			return nil, err
		}
		dir = a.sessionDir(req.ForkOf, info.Cwd)
	case req.SessionID != "":
		info, err := sessionInfo(ctx, st, req.SessionID)
		if err != nil {
			return nil, err
		}
		dir, title = a.sessionDir(req.SessionID, info.Cwd), info.Title
	}
	// Trust first: the workspace's held settings apply only once it is
	// trusted; the question is asked in the UI.
	w, hc, m, err := o.ws.open(ctx, dir, req.Ask, req.Model)
	if err != nil {
		return nil, err
	}
	// A resumed session keeps its model, as with 'rein run --session'.
	var notice string
	if req.SessionID != "" && req.Model == "" {
		m, notice = o.ws.resumed(w, m, lastRequestModel(st, req.SessionID))
	}
	ps, err := o.rules.session(w, dir, w.cfg.PermissionMode)
	if err != nil {
		return nil, err
	}
	fail := func(err error) (*tui.Session, error) {
		o.rules.drop(ps)
		return nil, err
	}
	// Retries show in the status line (agent/retry), not as lines.
	hooks, ch, err := w.hooksFor(dir, hc, st, ps.current.Load, guardApprover{req.Approver}, true)
	if err != nil {
		return fail(err)
	}
	if req.SessionID == "" && req.ForkOf == "" {
		hooks.PromptAdmission = append([]agent.Hook[agent.Prompt, agent.Admission]{titleHook(a.red)}, hooks.PromptAdmission...)
	}
	tools, err := w.tools(dir)
	if err != nil {
		return fail(err)
	}
	cfg := w.agentConfig(st, m, dir, tools, hooks, req.Approver)
	sid := req.SessionID
	if sid == "" {
		sid = agent.NewULID("s")
		cfg.SessionID = sid
	}
	servers, err := w.startMCP(ctx, dir, mcpLogPath(st, sid), m.catalog, &cfg, nil)
	if err != nil {
		return fail(err)
	}
	if servers != nil {
		ps.mcpKinds = servers.kinds
	}
	var ag *agent.Agent
	switch {
	case req.ForkOf != "":
		ag, err = a.forkAgent(ctx, st, req.ForkOf, req.ForkAt, cfg)
	case req.SessionID != "":
		ag, err = a.resumeAgent(ctx, st, req.SessionID, cfg)
	default:
		ag, err = a.newAgent(ctx, cfg)
	}
	if err != nil {
		servers.Close()
		var le *store.LockedError
		if errors.As(err, &le) { // say who holds it
			err = fmt.Errorf("session %s is %s: %w", sid, runningWhere(le), err)
		}
		return fail(err)
	}
	ch.attach(ag)
	s := &tui.Session{Agent: ag, Model: m.spec, ContextWindow: m.contextWindow, Mode: ps.mode(), Cwd: dir, Title: title, Rules: o.rules, Notice: notice}
	// The live-session socket: 'rein inject' reaches the session through
	// it while the UI holds the lock.
	var sock *tui.Socket
	if path := a.liveSocket(st, ag.ID()); path != "" {
		if sock, err = tui.ServeInject(path, ag); err != nil {
			s.Notice = strings.TrimSpace(notice + "\nrein inject cannot reach this session while it is open here: " + err.Error())
			sock = nil
		}
	}
	s.BeforeClose = func(ctx context.Context) { ch.sessionEnd(ctx) }
	s.Close = func() {
		if sock != nil {
			sock.Close()
		}
		servers.Close()
		o.rules.drop(ps)
	}
	return s, nil
}

// trust implements tui.Config.Trust (/trust): it asks about the current
// workspace again, even when this run decided already.
func (o *tuiOpener) trust(ctx context.Context, ask trust.Asker) (string, error) {
	a := o.a
	root := a.root
	items, err := a.projectItems(root)
	if err != nil {
		return "", err
	}
	d, err := trust.Resolve(ctx, a.trustStore(), root, items, trust.Options{Ask: ask})
	if err != nil {
		return "", err
	}
	// The answer is this run's decision from now on: the next session
	// opened loads the workspace's configuration afresh and applies it.
	a.remember(trust.Key(root), d)
	o.ws.forget(root)
	switch {
	case len(d.Items) == 0:
		return "the workspace " + root + " has no settings that need trust", nil
	case d.Apply && d.By == "answer always":
		return "the workspace " + root + " is trusted from now on; /resume or /new applies its settings", nil
	case d.Apply && d.By == "answer once":
		return "the workspace's settings apply to sessions opened from now on in this run (/new, /resume)", nil
	case d.Apply:
		return "the workspace " + root + " is trusted (rein trust --revoke " + root + " forgets it)", nil
	}
	return "the workspace " + root + " is not trusted: its settings are ignored", nil
}

// sessionInfo summarises one stored session without loading it.
func sessionInfo(ctx context.Context, st store.Store, id string) (store.Info, error) {
	if js, ok := st.(*jsonl.Store); ok {
		return js.Info(ctx, id)
	}
	infos, err := st.List(ctx)
	if err != nil {
		return store.Info{}, err
	}
	for _, in := range infos {
		if in.ID == id {
			return in, nil
		}
	}
	return store.Info{}, fmt.Errorf("%w: %s", store.ErrNotFound, id)
}

// liveSocket is where the UI serves session id's live-session socket:
// next to the session's file for the JSONL store, else (and when that
// path is too long for a socket) in a private directory of the user under
// $XDG_RUNTIME_DIR or the temp directory. "" when there is none.
func (a *app) liveSocket(st store.Store, id string) string {
	if js, ok := st.(*jsonl.Store); ok {
		p := filepath.Join(filepath.Dir(js.Path(id)), "."+id+".sock")
		if len(p) < 100 {
			return p
		}
	}
	dir := a.getenv("XDG_RUNTIME_DIR")
	if dir == "" {
		dir = os.TempDir()
	}
	p := filepath.Join(dir, "rein-"+strconv.Itoa(os.Getuid()), id+".sock")
	if len(p) >= 100 {
		return ""
	}
	return p
}

// injectLive adds text to session id through the socket of a UI that
// holds it. It reports false (and no error) when no UI serves it.
func (a *app) injectLive(ctx context.Context, st store.Store, id, text string, src session.Source) (bool, error) {
	path := a.liveSocket(st, id)
	if path == "" {
		return false, nil
	}
	if fi, err := os.Lstat(path); err != nil || fi.Mode()&os.ModeSocket == 0 {
		return false, nil
	}
	r, err := tui.SendInject(ctx, path, tui.InjectRequest{Text: text, Source: src})
	if errors.Is(err, tui.ErrNoLiveSession) {
		return false, nil // a socket left by a process that died
	}
	if err != nil {
		return true, fmt.Errorf("session %s (open in the terminal UI): %w", id, err)
	}
	switch r.Placement {
	case tui.Staged:
		fmt.Fprintf(a.stdout, "injected into %s (source %s); a turn is running there: it sees the context at its next step\n", id, src)
	default:
		fmt.Fprintf(a.stdout, "injected into %s (source %s)\n", id, src)
	}
	return true, nil
}
