package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/reinhq/rein/config"
	"github.com/reinhq/rein/display"
	"github.com/reinhq/rein/guard"
	"github.com/reinhq/rein/redact"
	"github.com/reinhq/rein/sandbox"
	"github.com/reinhq/rein/store"
	"github.com/reinhq/rein/trust"
)

// app is one invocation of rein: its streams, global flags and the state the
// commands share.
type app struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	// ttyErr is stderr without the control-character escaping of a
	// terminal, for rein's own progress line (the spinner); nothing else
	// writes to it.
	ttyErr io.Writer
	getenv func(string) string

	// Global flags.
	model          string
	cwd            string
	permissionMode string
	yes            bool
	verbose        bool
	allow, deny    []string
	networkAccess  bool
	trustOnce      bool
	storeSpec      string
	// flagSets apply the flags given to a configuration (loadConfig):
	// the global ones, and those of the command (rein run's knobs).
	flagSets []func(*config.Config) error

	log *slog.Logger
	cfg *config.Config
	// red masks the keys rein uses in everything it prints or logs;
	// stdout, stderr and log write through it.
	red *redact.Redactor
	// dir is the absolute working directory (--cwd or the process's).
	dir string
	// root is the workspace root of dir (see trust.Root).
	root string
	// sandboxes are the OS sandboxes built for session directories.
	sandboxes map[string]*sandbox.Sandbox
	// mcpKinds classifies the MCP tools of the session being run for the
	// permission policy (set once its servers start).
	mcpKinds  func(string) (guard.Kind, bool)
	noDumpErr error
	// trustAsker, when set, asks the trust question instead of the
	// terminal (rein acp sets it to the editor's session).
	trustAsker trust.Asker
	// proc is what every workspace view of this process shares
	// (inWorkspace).
	proc *procState

	// The store, once openStore opened it: its name for messages, and how
	// to close it when the command ends.
	st         store.Store
	storeName  string
	closeStore func()
}

// procState is the state of the rein process that every workspace view
// of the app shares: the trust decisions made (by workspace key) and the
// messages said once.
type procState struct {
	mu        sync.Mutex
	decisions map[string]trust.Decision
	said      map[string]bool
}

// inWorkspace returns a view of a for sessions in the workspace root: the
// same process (streams, flags, store, redactor, trust decisions) with the
// configuration of that workspace, loaded for it (loadConfig), and its own
// sandboxes. rein acp opens one per workspace root, so one workspace's
// trusted settings never apply to another's sessions.
func (a *app) inWorkspace(root string) (*app, error) {
	cfg, err := a.loadConfig(root)
	if err != nil {
		return nil, err
	}
	v := *a
	v.cfg, v.root = cfg, root
	v.sandboxes, v.mcpKinds, v.trustAsker = nil, nil, nil
	return &v, nil
}

// Main runs rein with args and returns the exit code.
func Main(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == sandbox.ExecArg {
		// The sandbox launcher: restrict this process, exec the command.
		return sandbox.Main(args[1:], stderr)
	}
	// No core dumps, and other processes of this user (not root) cannot
	// read rein's memory or environment through /proc or ptrace; see
	// docs/security.md.
	noDumpErr := sandbox.NoDump()
	// Descriptors rein inherited reach none of the commands, hooks and
	// servers it starts. It fails only without close_range and /proc,
	// where the sandbox launcher's own pass is all there is.
	_ = sandbox.CloseInherited()
	red := redact.New()
	// On a terminal, nothing rein prints from the model, tools, hooks or a
	// repository's files can send it control sequences (see package
	// display); rein's own spinner draws on the raw stderr. Text sent to a
	// pipe or a file stays as it is.
	ttyErr := stderr
	stdout, flushOut := terminalSafe(stdout)
	stderr, flushErr := terminalSafe(stderr)
	defer flushOut()
	defer flushErr()
	stdout, stderr = red.Writer(stdout), red.Writer(stderr)
	a := &app{stdin: stdin, stdout: stdout, stderr: stderr, ttyErr: ttyErr, getenv: os.Getenv, red: red, proc: &procState{}}
	a.noDumpErr = noDumpErr
	cmd := a.rootCmd()
	cmd.SetArgs(args)
	cmd.SetIn(stdin)
	cmd.SetOut(stdout)
	cmd.SetErr(stderr)
	ran, err := cmd.ExecuteContextC(context.Background())
	if a.closeStore != nil {
		a.closeStore()
	}
	if err == nil {
		return ExitOK
	}
	var ee *exitError
	if errors.As(err, &ee) {
		if ee.err != nil {
			fmt.Fprintf(stderr, "rein: %v\n", ee.err)
		}
		if ee.code == ExitUsage {
			// The help of the command that refused: its flags and
			// arguments are what was wrong.
			path := "rein"
			if ran != nil {
				path = ran.CommandPath()
			}
			fmt.Fprintf(stderr, "Run '%s --help' for usage.\n", path)
		}
		return ee.code
	}
	fmt.Fprintf(stderr, "rein: %v\n", err)
	return ExitError
}

// terminalSafe returns w escaping control characters (display.Writer) when
// w is a terminal, else w; and a function that writes what the escaper
// holds back.
func terminalSafe(w io.Writer) (io.Writer, func()) {
	if !isTerminal(w) {
		return w, func() {}
	}
	e := display.Writer(w)
	return e, func() { _ = e.Flush() }
}

// usageErrors makes every argument and flag error of the tree below cmd a
// usage error (exit 2), through cobra's own hooks: the flag error function,
// each command's argument validator, and, for commands that only group
// others, a RunE that refuses an unknown subcommand.
func usageErrors(cmd *cobra.Command) {
	cmd.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return exitWith(ExitUsage, err) })
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if c.HasSubCommands() && c.RunE == nil && c.Run == nil {
			c.Args = cobra.ArbitraryArgs
			c.RunE = func(c *cobra.Command, args []string) error {
				if len(args) == 0 {
					return c.Help()
				}
				msg := fmt.Sprintf("unknown command %q for %q", args[0], c.CommandPath())
				c.SuggestionsMinimumDistance = 2
				if s := c.SuggestionsFor(args[0]); len(s) > 0 {
					msg += fmt.Sprintf(" (did you mean %q?)", s[0])
				}
				return usagef("%s", msg)
			}
		} else if valid := c.Args; valid != nil {
			c.Args = func(c *cobra.Command, args []string) error {
				if err := valid(c, args); err != nil {
					return exitWith(ExitUsage, err)
				}
				return nil
			}
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(cmd)
}

func (a *app) rootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:   "rein",
		Short: "rein is a coding agent harness with an append-only session log",
		Long: `rein runs a coding agent. Every session is an append-only log of events
(stored as JSONL under $REIN_HOME, else $XDG_DATA_HOME/rein); what the model sees
and what you see are both derived from it.

Start without an API key:

  rein demo

Open the terminal UI in the current directory (a new session, or the latest
one here with --continue, or --session ID), optionally with a first prompt:

  rein
  rein --continue
  rein "why does the build fail?"

Run one turn headless (text streams to stdout):

  rein run "explain the build"
  rein run --model scripted:script.json "hello"

Configuration comes from ~/.config/rein/config.toml, then .rein/config.toml in
the workspace, then REIN_* environment variables, then flags (a later layer
wins); 'rein config show' prints the result and where each value came from.
A workspace's own hooks, provider URLs and key variables, wider permission mode,
allow rules, writable roots, network access, [env] keep, MCP servers, system
prompt, looser limits and prices apply only once you trust it ('rein trust',
or --trust for one run).

Exit codes: 0 ok (for run: the turn completed), 1 error, 2 usage,
3 prompt blocked, 4 session locked by another process, 130 aborted.`,
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			if cmd.HasSubCommands() {
				return nil // help, or an unknown command: no setup needed
			}
			return a.setup(cmd)
		},
	}
	var tf tuiFlags
	root.Args = cobra.ArbitraryArgs
	root.SuggestionsMinimumDistance = 2 // SuggestionsFor does not default it
	root.RunE = func(cmd *cobra.Command, args []string) error { return a.tuiRun(cmd, tf, args) }
	root.Flags().StringVarP(&tf.session, "session", "s", "", "open session `ID` in the terminal UI")
	root.Flags().BoolVarP(&tf.cont, "continue", "c", false, "open the latest session of the working directory in the terminal UI")
	root.MarkFlagsMutuallyExclusive("session", "continue")
	root.CompletionOptions.DisableDefaultCmd = true
	root.Version = version()
	root.SetVersionTemplate("{{.Version}}\n")
	f := root.PersistentFlags()
	f.StringVar(&a.model, "model", "", "model as provider:model, e.g. deepseek:deepseek-chat, or scripted:FILE for the keyless scripted model (default from config: "+config.DefaultModel+")")
	f.StringVar(&a.cwd, "cwd", "", "working directory of the session (default: the current directory)")
	f.StringVar(&a.permissionMode, "permission-mode", "", "what tools may do: read-only, workspace-write (default) or full-access")
	f.BoolVar(&a.yes, "yes", false, "approve every tool call the permission policy would ask about")
	f.StringArrayVar(&a.allow, "allow", nil, "allow tool calls matching `RULE`, e.g. 'Bash(git status:*)' or 'Edit(docs/**)' (repeatable; adds to [permissions] allow)")
	f.StringArrayVar(&a.deny, "deny", nil, "deny tool calls matching `RULE`, e.g. 'Bash(rm -rf*)' or 'Read(~/.ssh/**)' (repeatable; adds to [permissions] deny)")
	f.BoolVar(&a.networkAccess, "network-access", false, "let bash and hooks use the network in the read-only and workspace-write sandboxes (sandbox.network_access)")
	f.BoolVarP(&a.verbose, "verbose", "v", false, "debug logging (slog) to stderr")
	f.BoolVar(&a.trustOnce, "trust", false, "apply this workspace's own hooks, provider URLs, allow rules, MCP servers and other trust-relevant settings for this run only (see 'rein trust')")
	f.StringVar(&a.storeSpec, "store", "", "where sessions are kept: a directory (JSONL files) or a postgres:// URL (default from config: $REIN_HOME)")
	root.AddCommand(a.runCmd(), a.injectCmd(), a.demoCmd(), a.sessionsCmd(), a.configCmd(), a.trustCmd(), a.storeCmd(), a.acpCmd(), a.mcpCmd())
	usageErrors(root)
	return root
}

// setup resolves the working directory, the logger and the configuration.
func (a *app) setup(cmd *cobra.Command) error {
	level := slog.LevelWarn
	if a.verbose {
		level = slog.LevelDebug
	}
	a.log = slog.New(a.red.Handler(slog.NewTextHandler(a.stderr, &slog.HandlerOptions{Level: level})))
	slog.SetDefault(a.log)

	dir := a.cwd
	if dir == "" {
		wd, err := os.Getwd()
		if err != nil {
			return err
		}
		dir = wd
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	switch fi, err := os.Stat(abs); {
	case errors.Is(err, fs.ErrNotExist):
		return usagef("--cwd %s: no such directory", dir)
	case err != nil:
		return usagef("--cwd %s: %v", dir, errors.Unwrap(err))
	case !fi.IsDir():
		return usagef("--cwd %s: not a directory", dir)
	}
	a.dir = abs
	a.root = a.workspaceRoot(abs)

	fl := cmd.Flags()
	for _, f := range []struct{ flag, key, value string }{
		{"model", "model", a.model},
		{"store", "store", a.storeSpec},
		{"permission-mode", "permission_mode", a.permissionMode},
		{"network-access", "sandbox.network_access", strconv.FormatBool(a.networkAccess)},
	} {
		if fl.Changed(f.flag) {
			a.flagSets = append(a.flagSets, func(c *config.Config) error { return c.Set(f.key, f.value, "flag --"+f.flag) })
		}
	}
	for _, l := range []struct {
		key, flag string
		rules     []string
	}{{"permissions.allow", "--allow", a.allow}, {"permissions.deny", "--deny", a.deny}} {
		for _, r := range l.rules {
			a.flagSets = append(a.flagSets, func(c *config.Config) error { return c.Add(l.key, r, "flag "+l.flag) })
		}
	}
	cfg, err := a.loadConfig(a.root)
	if err != nil {
		return err
	}
	if a.noDumpErr != nil {
		a.log.Warn("cannot make rein non-dumpable", "err", a.noDumpErr)
	}
	a.cfg = cfg
	a.log.Debug("setup", "dir", a.dir, "root", a.root, "model", cfg.Model, "permission_mode", cfg.PermissionMode)
	return nil
}

// loadConfig loads the configuration of a session in the workspace root:
// the user's file, root's .rein/config.toml (its trust-relevant settings
// held), the REIN_* variables, then every flag given (a.flagSets). Each
// workspace gets its own Config: applying one workspace's trusted settings
// never changes another's.
func (a *app) loadConfig(root string) (*config.Config, error) {
	cfg, err := config.Load(config.UserFile(a.getenv), config.ProjectFile(root), a.getenv)
	if err != nil {
		return nil, err
	}
	for _, set := range a.flagSets {
		if err := set(cfg); err != nil {
			return nil, exitWith(ExitUsage, err)
		}
	}
	// Every key rein may use is masked from here on, and kept from tools
	// and hooks (see envPolicy).
	a.red.Add(a.keyValues(cfg)...)
	return cfg, nil
}

// workspaceRoot returns the workspace root of dir: the nearest directory
// upwards holding .rein, .claude or .git, never reaching $HOME from below
// (see trust.Root).
func (a *app) workspaceRoot(dir string) string { return trust.Root(dir, a.getenv("HOME")) }

// isTerminal reports whether w (or the writer it wraps) is a terminal.
func isTerminal(w io.Writer) bool {
	for {
		u, ok := w.(interface{ Unwrap() io.Writer })
		if !ok {
			break
		}
		w = u.Unwrap()
	}
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// interactive reports whether a person can be asked: stdin and stderr are
// terminals.
func (a *app) interactive() bool {
	f, ok := a.stdin.(*os.File)
	return ok && term.IsTerminal(int(f.Fd())) && isTerminal(a.stderr)
}

// readInput returns args joined by spaces, or stdin when there are no args
// (and stdin is not a terminal). Blank input, from either, is a usage error:
// it is refused before anything is set up.
func (a *app) readInput(args []string, what string) (string, error) {
	if len(args) > 0 {
		s := strings.Join(args, " ")
		if strings.TrimSpace(s) == "" {
			return "", usagef("no %s: the argument is blank", what)
		}
		return s, nil
	}
	if f, ok := a.stdin.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		return "", usagef("no %s: give it as an argument or on stdin", what)
	}
	b, err := io.ReadAll(a.stdin)
	if err != nil {
		return "", err
	}
	s := strings.TrimRight(string(b), "\n")
	if strings.TrimSpace(s) == "" {
		return "", usagef("no %s: give it as an argument or on stdin", what)
	}
	return s, nil
}
