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
	"github.com/spf13/pflag"

	"github.com/reinhq/rein/agent"
	"github.com/reinhq/rein/config"
	"github.com/reinhq/rein/llm"
	"github.com/reinhq/rein/session"
	"github.com/reinhq/rein/transcript"
)

// Input modes of rein run.
const (
	inText       = "text"
	inStreamJSON = "stream-json"
)

type runFlags struct {
	session      string
	cont         bool
	output       string
	input        string
	quiet        bool
	contexts     []string
	contextFiles []string
	source       string
	refs         []string
	// Knobs that are also config keys; applied with config.Set.
	maxSteps, maxOutputTokens, thinkingBudget         int
	reasoningEffort, systemPrompt, appendSystemPrompt string
	systemPromptFile, appendSystemPromptFile          string
	streamIdleTimeout, requestTimeout                 string
}

// knobFlags maps run's flags to the config keys they set.
var knobFlags = map[string]string{
	"max-steps":            "max_steps",
	"max-output-tokens":    "max_output_tokens",
	"reasoning-effort":     "reasoning_effort",
	"thinking-budget":      "thinking_budget",
	"system-prompt":        "system_prompt",
	"append-system-prompt": "append_system_prompt",
	"stream-idle-timeout":  "stream_idle_timeout",
	"request-timeout":      "request_timeout",
}

func (a *app) runCmd() *cobra.Command {
	var f runFlags
	cmd := &cobra.Command{
		Use:   "run [flags] [prompt]",
		Short: "Run one turn headless, or drive a session over stdin",
		Long: `Run sends one prompt and runs one turn without a UI. The prompt is the
arguments joined by spaces, or stdin when there are none.

A new session is created unless --session ID or --continue (the latest session
whose directory is this one) names one to resume; a unique prefix of an id is
enough. A resumed session keeps the model of its last request unless --model
is given.

Context given with --context or --context-file is injected before the prompt is
sent, as its own message with source user-context:cli (or --source). A prompt
that mentions @session:ID, and every --ref ID, injects a snapshot of that
session's visible transcript (source session-ref:ID@SEQ) first as well.

--output text (default) prints the assistant's text: streamed when stdout is a
terminal, else each step's text once its response is complete (a response
that failed and was retried never reaches stdout). json prints one object when
the turn ends (session, turn, outcome, text, usage, costUSD, durationMs,
exitCode). stream-json prints one JSON object per line: an init line (session,
model, cwd, tools, permission mode, version), every durable event as its log
line once it is durable, live events with "live": true (agent/delta as text
streams, agent/retry between attempts, agent/status, ...), and a result line
last. docs/stream-json.md has the schema.

--input stream-json keeps rein running and reads JSON lines on stdin, each a
call on the session: {"type":"send","content":"..."}, {"type":"steer",...},
{"type":"inject","content":"...","source":{"kind":"plugin","name":"ci"}},
{"type":"cancel"}. Output is stream-json, with a result line per prompt; a bad
line gets an {"type":"error",...} line. At the end of stdin, or at a
{"type":"close"} line, rein lets the work it was given finish, then closes the
session.

stderr: one line per retried model request ("rate limited (429); retry 1/5 in
0.5 s"), and the session id with token counts at the end; --quiet drops both.
In a terminal it also shows a spinner and tool activity.

Ctrl-C (SIGINT) cancels the turn cleanly (it ends aborted and is saved); a
second Ctrl-C exits at once.

Exit codes: 0 the turn completed; 1 error (rein failed, or the turn ended
with an error, max-tokens or interrupted); 2 usage; 3 the prompt was blocked
by admission (no turn ran); 4 the session is locked by another process;
5 the turn reached --max-steps; 130 the turn was aborted.`,
		Example: `  rein run "why does the build fail?"
  git diff | rein run --context-file - "review this change"
  rein run --continue "now fix it"
  rein run --max-steps 20 --append-system-prompt "Answer in French." "explain main.go"
  rein run --model scripted:script.json --output stream-json "hello"
  printf '{"type":"send","content":"hi"}\n' | rein run --input stream-json`,
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := a.applyKnobs(cmd.Flags(), f); err != nil {
				return err
			}
			return a.run(cmd.Context(), cmd.Flags(), f, args)
		},
	}
	fl := cmd.Flags()
	fl.StringVarP(&f.session, "session", "s", "", "resume session `ID` (or a unique prefix of it)")
	fl.BoolVarP(&f.cont, "continue", "c", false, "resume the latest session whose directory is the working directory")
	fl.StringVarP(&f.output, "output", "o", outText, "output format: text, json or stream-json")
	fl.StringVar(&f.input, "input", inText, "input format: text (one prompt) or stream-json (JSON lines on stdin)")
	fl.BoolVarP(&f.quiet, "quiet", "q", false, "no retry lines and no session line on stderr")
	fl.StringArrayVar(&f.contexts, "context", nil, "inject `TEXT` as context before the prompt (repeatable)")
	fl.StringArrayVar(&f.contextFiles, "context-file", nil, "inject the contents of `FILE` as context before the prompt (- reads stdin; repeatable)")
	fl.StringVar(&f.source, "source", "", "source of --context: NAME (kind user-context) or KIND:NAME (default user-context:cli)")
	fl.StringArrayVar(&f.refs, "ref", nil, "inject a snapshot of session `ID`'s transcript before the prompt (repeatable)")
	fl.IntVar(&f.maxSteps, "max-steps", 0, "end the turn (exit 5) when it would take more than `N` steps (config max_steps; 0: no limit)")
	fl.IntVar(&f.maxOutputTokens, "max-output-tokens", 0, "output limit of each response in `TOKENS` (config max_output_tokens; 0: the model's maximum)")
	fl.StringVar(&f.reasoningEffort, "reasoning-effort", "", "minimal, low, medium or high, for models that take one (config reasoning_effort)")
	fl.IntVar(&f.thinkingBudget, "thinking-budget", 0, "extended thinking of at most `TOKENS` (≥ 1024; Anthropic) (config thinking_budget)")
	fl.StringVar(&f.systemPrompt, "system-prompt", "", "replace rein's own system prompt with `TEXT` (project instructions still follow)")
	fl.StringVar(&f.systemPromptFile, "system-prompt-file", "", "like --system-prompt, from `FILE`")
	fl.StringVar(&f.appendSystemPrompt, "append-system-prompt", "", "add `TEXT` at the end of the system prompt")
	fl.StringVar(&f.appendSystemPromptFile, "append-system-prompt-file", "", "like --append-system-prompt, from `FILE`")
	fl.StringVar(&f.streamIdleTimeout, "stream-idle-timeout", "", "abandon a response that sends nothing for `DURATION`, e.g. 2m (config stream_idle_timeout; default 90s)")
	fl.StringVar(&f.requestTimeout, "request-timeout", "", "bound each model request to `DURATION`, e.g. 10m (config request_timeout; default none)")
	return cmd
}

// applyKnobs sets the config keys of the knob flags that were given (and
// keeps them among the flags every configuration loaded later gets).
func (a *app) applyKnobs(fl *pflag.FlagSet, f runFlags) error {
	set := func(key, value, origin string) error {
		a.flagSets = append(a.flagSets, func(c *config.Config) error { return c.Set(key, value, origin) })
		if err := a.cfg.Set(key, value, origin); err != nil {
			return exitWith(ExitUsage, err)
		}
		return nil
	}
	for name, key := range knobFlags {
		if !fl.Changed(name) {
			continue
		}
		if err := set(key, fl.Lookup(name).Value.String(), "flag --"+name); err != nil {
			return err
		}
	}
	for name, file := range map[string]string{"system-prompt": f.systemPromptFile, "append-system-prompt": f.appendSystemPromptFile} {
		if file == "" {
			continue
		}
		if fl.Changed(name) {
			return usagef("--%s and --%s-file: give one of them", name, name)
		}
		b, err := os.ReadFile(file)
		if err != nil {
			return usagef("--%s-file: %v", name, err)
		}
		if err := set(knobFlags[name], string(b), "flag --"+name+"-file"); err != nil {
			return err
		}
	}
	return nil
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

func (a *app) run(ctx context.Context, fl *pflag.FlagSet, f runFlags, args []string) (err error) {
	switch f.input {
	case inText:
	case inStreamJSON:
		if fl.Changed("output") && f.output != outStreamJSON {
			return usagef("--input stream-json writes stream-json: --output %s does not apply", f.output)
		}
		f.output = outStreamJSON
		if len(args) > 0 {
			return usagef("--input stream-json reads its prompts from stdin: give no prompt argument")
		}
	default:
		return usagef("--input %q: want text or stream-json", f.input)
	}
	switch f.output {
	case outText, outJSON, outStreamJSON:
	default:
		return usagef("--output %q: want text, json or stream-json", f.output)
	}
	if f.session != "" && f.cont {
		return usagef("--session and --continue: give one of them")
	}
	stdinUsed := f.input == inStreamJSON
	for _, cf := range f.contextFiles {
		if cf == "-" {
			if stdinUsed {
				return usagef("--context-file - reads stdin, which --input stream-json reads too")
			}
			stdinUsed = true
		}
	}
	var prompt string
	if f.input == inText {
		if stdinUsed && len(args) == 0 {
			return usagef("--context-file - reads stdin, so the prompt must be an argument")
		}
		if prompt, err = a.readInput(args, "prompt"); err != nil {
			return err
		}
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
	id, err := a.sessionToOpen(ctx, st, f.session, f.cont)
	if err != nil {
		return err
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
		dir = a.sessionDir(id, loaded.Log.Header().Cwd)
		if err := a.keepSessionModel(fl, id, loaded.Log); err != nil {
			return err
		}
	}
	m, hooks, ch, err := a.wire(ctx, dir, st, f.quiet)
	if err != nil {
		return err
	}
	if id == "" {
		hooks.PromptAdmission = append([]agent.Hook[agent.Prompt, agent.Admission]{titleHook(a.red)}, hooks.PromptAdmission...)
	}
	tools, err := a.tools(dir)
	if err != nil {
		return err
	}
	cfg := a.agentConfig(st, m, dir, tools, hooks, agentApprover{ch.approver(a.approver())})
	sid := id
	if sid == "" {
		sid = agent.NewULID("s")
		cfg.SessionID = sid
	}
	servers, err := a.startMCP(ctx, dir, mcpLogPath(st, sid), m.catalog, &cfg, nil)
	if err != nil {
		return err
	}
	defer servers.Close()
	if servers != nil {
		a.mcpKinds = servers.kinds
	}

	var ag *agent.Agent
	if id == "" {
		ag, err = a.newAgent(ctx, cfg)
	} else {
		ag, err = a.resumeAgent(ctx, st, id, cfg)
		err = lockedError(id, err)
	}
	if err != nil {
		return err
	}
	a.log.Debug("session", "id", ag.ID(), "resumed", id != "", "from", start)
	ch.attach(ag)

	var spin *spinner
	if f.output == outText && isTerminal(a.stderr) && !a.verbose {
		spin = newSpinner(a.ttyErr)
	}
	activity := f.output == outText && (isTerminal(a.stderr) || a.verbose)
	out := newPrinter(f.output, a.stdout, a.stderr, f.output == outText && isTerminal(a.stdout), activity, spin)
	out.session, out.stored = ag.ID(), ag.Stored
	out.cost = m.cost
	if f.output == outStreamJSON {
		out.line(initLine{Type: "init", Session: ag.ID(), Resumed: id != "", From: start, Model: m.spec, Cwd: dir,
			Tools: tools.Names(), PermissionMode: a.cfg.PermissionMode, Version: version()})
	}
	wait := a.feed(ag, start, out)

	// SIGINT: the first cancels the turn (and, reading stdin, stops), the
	// second exits.
	interrupted := make(chan struct{})
	sigc := make(chan os.Signal, 2)
	signal.Notify(sigc, os.Interrupt)
	defer func() { signal.Stop(sigc); close(sigc) }()
	go func() {
		if _, ok := <-sigc; !ok {
			return
		}
		fmt.Fprintln(a.stderr, "\nrein: cancelling the turn (Ctrl-C again to quit)")
		close(interrupted)
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
		if f.input == inStreamJSON {
			return a.serveInput(ctx, ag, out, interrupted)
		}
		pid := agent.NewULID("m")
		out.expect(pid, nil)
		if _, err := ag.Send(agent.Message{ID: pid, Content: llm.Text(prompt)}); err != nil {
			out.forget(pid)
			return err
		}
		return ag.WhenIdle(ctx)
	}()
	ch.sessionEnd(context.WithoutCancel(ctx))
	closeErr := ag.Close(context.WithoutCancel(ctx))
	wait()
	res, ok := out.finish()
	if sendErr != nil {
		return sendErr
	}
	if closeErr != nil {
		return closeErr
	}
	if !ag.Stored() {
		// Nothing durable happened (a prompt blocked in a new session):
		// there is no session to name.
		res.Session = ""
	}
	if !f.quiet && ag.Stored() {
		line := fmt.Sprintf("session %s · %s in · %s out", ag.ID(), kilo(out.total.Input), kilo(out.total.Output))
		if c := m.cost(out.total); c != nil {
			line += fmt.Sprintf(" · $%.4f", *c)
		}
		fmt.Fprintln(a.stderr, line)
	}
	if sm := m.scripted; sm != nil {
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
	if f.input == inStreamJSON {
		// Each prompt's result line is out; the exit code is the last
		// one's (0 when none was sent; 130 after SIGINT).
		select {
		case <-interrupted:
			if !ok || res.ExitCode == ExitOK {
				return exitWith(ExitAborted, nil)
			}
		default:
		}
		if ok && res.ExitCode != ExitOK {
			return exitWith(res.ExitCode, nil)
		}
		return nil
	}
	switch f.output {
	case outJSON:
		b, _ := json.Marshal(res)
		fmt.Fprintln(a.stdout, string(b))
	case outStreamJSON:
		out.mu.Lock()
		out.line(res)
		out.mu.Unlock()
	}
	switch res.Outcome {
	case session.ReasonCompleted:
		return nil
	case outcomeBlocked:
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
		if res.Outcome == session.ReasonMaxSteps {
			why = fmt.Sprintf("max-steps (the limit of %d steps)", a.cfg.MaxSteps)
		}
		return exitWith(res.ExitCode, fmt.Errorf("turn %d ended: %s (session %s)", res.Turn, why, res.Session))
	}
}

// feed hands out what ag does: accepted events from start, durable ones too
// for stream-json, and live events. The returned wait, called after Close,
// returns once everything has been handed to out.
func (a *app) feed(ag *agent.Agent, start int64, out *printer) (wait func()) {
	stopLive := ag.Subscribe(context.Background(), out.live)
	var readers sync.WaitGroup
	readers.Go(func() {
		for ev, err := range ag.Events(context.Background(), start) {
			if err != nil {
				return
			}
			out.accepted(ev)
		}
	})
	if out.mode == outStreamJSON {
		readers.Go(func() {
			for ev, err := range ag.DurableEvents(context.Background(), start) {
				if err != nil {
					return
				}
				out.durable(ev)
			}
		})
	}
	return func() {
		// Both iterators end once the agent is closed and they have
		// yielded everything; agent/closed is the last live event.
		readers.Wait()
		<-out.closed
		stopLive()
	}
}

// keepSessionModel makes a resumed session keep the model of its last
// request unless --model names another.
func (a *app) keepSessionModel(fl *pflag.FlagSet, id string, log *session.Log) error {
	if fl.Changed("model") {
		return nil
	}
	if h := log.RequestHeader(); h != nil && h.Model != "" && h.Model != a.cfg.Model {
		if err := a.cfg.Set("model", h.Model, "session "+id); err != nil {
			return err
		}
		a.log.Debug("model of the session", "model", h.Model)
	}
	return nil
}
