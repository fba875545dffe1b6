package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"sync"

	"github.com/spf13/cobra"

	"github.com/reinhq/rein/agent"
	"github.com/reinhq/rein/llm"
	"github.com/reinhq/rein/llm/scripted"
	"github.com/reinhq/rein/session"
	"github.com/reinhq/rein/transcript"
)

type runFlags struct {
	session      string
	cont         bool
	output       string
	contexts     []string
	contextFiles []string
	source       string
	refs         []string
}

func (a *app) runCmd() *cobra.Command {
	var f runFlags
	cmd := &cobra.Command{
		Use:   "run [flags] [prompt]",
		Short: "Run one turn headless",
		Long: `Run sends one prompt and runs one turn without a UI. The prompt is the
arguments joined by spaces, or stdin when there are none.

A new session is created unless --session ID or --continue (the latest session
whose directory is this one) names one to resume. The assistant's text streams
to stdout.

Context given with --context or --context-file is injected before the prompt is
sent, as its own message with source user-context:cli (or --source). A prompt
that mentions @session:ID, and every --ref ID, injects a snapshot of that
session's visible transcript (source session-ref:ID@SEQ) first as well.

--output text (default) streams the assistant's text; json prints one object
when the turn ends (session, turn, outcome, text, usage, exitCode);
stream-json prints every durable event as its log line and every live agent
event as {"type":"agent/...","live":true,...}, one JSON object per line.

While a turn runs in a terminal, stderr shows a spinner with token counts and
tool activity; when stderr is not a terminal it stays quiet unless -v.

Ctrl-C (SIGINT) cancels the turn cleanly (it ends aborted and is saved); a
second Ctrl-C exits at once.

Exit codes: 0 the turn completed; 1 error (rein failed, or the turn ended
with an error, max-tokens or interrupted); 2 usage; 3 the prompt was blocked
by admission (no turn ran); 4 the session is locked by another process;
130 the turn was aborted.`,
		Example: `  rein run "why does the build fail?"
  git diff | rein run --context-file - "review this change"
  rein run --continue "now fix it"
  rein run --model scripted:script.json --output stream-json "hello"`,
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.run(cmd.Context(), f, args)
		},
	}
	fl := cmd.Flags()
	fl.StringVarP(&f.session, "session", "s", "", "resume session `ID`")
	fl.BoolVarP(&f.cont, "continue", "c", false, "resume the latest session whose directory is the working directory")
	fl.StringVarP(&f.output, "output", "o", outText, "output format: text, json or stream-json")
	fl.StringArrayVar(&f.contexts, "context", nil, "inject `TEXT` as context before the prompt (repeatable)")
	fl.StringArrayVar(&f.contextFiles, "context-file", nil, "inject the contents of `FILE` as context before the prompt (- reads stdin; repeatable)")
	fl.StringVar(&f.source, "source", "", "source of --context: NAME (kind user-context) or KIND:NAME (default user-context:cli)")
	fl.StringArrayVar(&f.refs, "ref", nil, "inject a snapshot of session `ID`'s transcript before the prompt (repeatable)")
	cmd.MarkFlagsMutuallyExclusive("session", "continue")
	return cmd
}

// parseSource reads --source: "NAME" is {user-context, NAME}, "KIND:NAME" sets
// both. Kind user is refused: what a person types is a prompt, not context.
func parseSource(s, def string) (session.Source, error) {
	if s == "" {
		s = def
	}
	src := session.Source{Kind: session.SourceUserContext, Name: s}
	if k, n, ok := strings.Cut(s, ":"); ok {
		src = session.Source{Kind: k, Name: n}
	}
	if src.Kind == "" || src.Kind == session.SourceUser {
		return src, usagef("--source %q: the kind must be another than user (e.g. user-context:NAME, plugin:NAME)", s)
	}
	return src, nil
}

func (a *app) run(ctx context.Context, f runFlags, args []string) (err error) {
	switch f.output {
	case outText, outJSON, outStreamJSON:
	default:
		return usagef("--output %q: want text, json or stream-json", f.output)
	}
	stdinUsed := false
	for _, cf := range f.contextFiles {
		if cf == "-" {
			stdinUsed = true
		}
	}
	var prompt string
	if stdinUsed && len(args) == 0 {
		return usagef("--context-file - reads stdin, so the prompt must be an argument")
	}
	if prompt, err = a.readInput(args, "prompt"); err != nil {
		return err
	}
	src, err := parseSource(f.source, "cli")
	if err != nil {
		return err
	}
	var contexts []agent.AdditionalContext
	for _, c := range f.contexts {
		contexts = append(contexts, agent.AdditionalContext{Content: llm.Text(c), Source: src})
	}
	for _, cf := range f.contextFiles {
		var b []byte
		if cf == "-" {
			b, err = readAll(a.stdin)
		} else {
			b, err = os.ReadFile(cf)
		}
		if err != nil {
			return usagef("--context-file: %v", err)
		}
		contexts = append(contexts, agent.AdditionalContext{Content: llm.Text(string(b)), Source: src})
	}

	st, err := a.openStore()
	if err != nil {
		return err
	}
	id := f.session
	if f.cont {
		if id, err = latestIn(ctx, st, a.dir); err != nil {
			return err
		}
	}
	// Snapshot referenced sessions before this one is opened.
	refs, err := a.snapshotRefs(ctx, st, id, append(sessionRefs(prompt), f.refs...))
	if err != nil {
		return err
	}

	dir := a.dir
	var start int64
	if id != "" {
		loaded, err := a.load(ctx, st, id)
		if err != nil {
			return err
		}
		start = loaded.Log.Len()
		dir = a.sessionDir(loaded.Log.Header().Cwd)
	}
	prov, model, hooks, err := a.wire(ctx, dir, st)
	if err != nil {
		return err
	}
	if id == "" {
		hooks.PromptAdmission = append([]agent.Hook[agent.Prompt, agent.Admission]{titleHook()}, hooks.PromptAdmission...)
	}
	tools, err := a.tools(dir)
	if err != nil {
		return err
	}
	cfg := agent.Config{
		Store:    st,
		Provider: prov,
		Model:    model.Spec(),
		Tools:    tools,
		System:   systemSections(dir, a.workspaceRoot(dir), a.cfg.InstructionsBudget),
		Cwd:      dir,
		Hooks:    hooks,
		Approver: agentApprover{a.approver()},
		Logger:   a.log,
		Redactor: a.red,
	}
	a.configureCompaction(&cfg, model.ContextWindow)
	sid := id
	if sid == "" {
		sid = agent.NewULID("s")
		cfg.SessionID = sid
	}
	servers, err := a.startMCP(ctx, dir, mcpLogPath(st, sid), model, &cfg, nil)
	if err != nil {
		return err
	}
	defer servers.Close()
	if servers != nil {
		a.mcpKinds = servers.kinds
	}

	var ag *agent.Agent
	if id == "" {
		ag, err = agent.New(ctx, cfg)
	} else {
		ag, err = agent.Resume(ctx, st, id, cfg)
		err = lockedError(id, err)
	}
	if err != nil {
		return err
	}
	a.log.Debug("session", "id", ag.ID(), "resumed", id != "", "from", start)

	var spin *spinner
	if f.output == outText && isTerminal(a.stderr) && !a.verbose {
		spin = newSpinner(a.stderr)
	}
	activity := f.output == outText && (isTerminal(a.stderr) || a.verbose)
	out := newTurnOutput(f.output, a.stdout, a.stderr, activity, spin)
	// agent/closed is the last live event: once it arrived, every live
	// event (agent/blocked above all) has been seen.
	liveDone := make(chan struct{})
	stopLive := ag.Subscribe(context.WithoutCancel(ctx), func(l agent.Live) {
		out.live(l)
		if l.Type == agent.LiveClosed {
			close(liveDone)
		}
	})
	defer stopLive()

	evctx, cancelEvents := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelEvents()
	var readers sync.WaitGroup
	readers.Add(1)
	go func() {
		defer readers.Done()
		for ev, err := range ag.Events(evctx, start) {
			if err != nil {
				return
			}
			out.event(ev)
		}
	}()

	// SIGINT: the first cancels the turn, the second exits.
	sigc := make(chan os.Signal, 2)
	signal.Notify(sigc, os.Interrupt)
	defer func() { signal.Stop(sigc); close(sigc) }()
	go func() {
		if _, ok := <-sigc; !ok {
			return
		}
		fmt.Fprintln(a.stderr, "\nrein: cancelling the turn (Ctrl-C again to quit)")
		ag.Cancel(session.CauseUser, agent.CancelOptions{})
		if _, ok := <-sigc; ok {
			os.Exit(ExitAborted)
		}
	}()

	sendErr := func() error {
		for _, r := range refs {
			if err := ag.Inject(r); err != nil {
				return err
			}
		}
		for _, c := range contexts {
			if err := ag.Inject(c); err != nil {
				return err
			}
		}
		pid, err := ag.Send(agent.Message{Content: llm.Text(prompt)})
		if err != nil {
			return err
		}
		out.setPrompt(pid)
		return ag.WhenIdle(ctx)
	}()
	closeErr := ag.Close(context.WithoutCancel(ctx))
	readers.Wait()
	<-liveDone
	if sendErr != nil {
		return sendErr
	}
	if closeErr != nil {
		return closeErr
	}
	res := out.result(ag.ID())
	if !ag.Stored() {
		// Nothing durable happened (a prompt blocked in a new session):
		// there is no session to name.
		res.Session = ""
	}
	if isTerminal(a.stderr) && f.output == outText {
		fmt.Fprintf(a.stderr, "session %s · %s in · %s out\n", ag.ID(), kilo(res.Usage.Input), kilo(res.Usage.Output))
	}
	if sm, ok := prov.(*scripted.Model); ok {
		// A scripted run must use its whole script: a call never made is
		// a failure of whoever wrote the script or the code under test.
		if verr := sm.Verify(); verr != nil {
			fmt.Fprintf(a.stderr, "rein: scripted model: %v\n", verr)
			if res.ExitCode == ExitOK {
				res.ExitCode = ExitError
				defer func() { err = exitWith(ExitError, nil) }()
			}
		}
	}
	switch f.output {
	case outJSON:
		b, _ := json.Marshal(res)
		fmt.Fprintln(a.stdout, string(b))
	}
	switch res.Outcome {
	case session.ReasonCompleted:
		return nil
	case "blocked":
		if res.Session == "" {
			return exitWith(res.ExitCode, fmt.Errorf("prompt blocked: %s (nothing was saved)", res.Blocked))
		}
		return exitWith(res.ExitCode, fmt.Errorf("prompt blocked: %s (session %s)", res.Blocked, res.Session))
	case session.ReasonAborted:
		return exitWith(res.ExitCode, fmt.Errorf("turn aborted (session %s)", res.Session))
	default:
		why := res.Outcome
		if res.Reason != nil {
			why = transcript.ReasonText(*res.Reason)
		}
		return exitWith(res.ExitCode, fmt.Errorf("turn %d ended: %s (session %s)", res.Turn, why, res.Session))
	}
}
