package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/reinhq/rein/agent"
	"github.com/reinhq/rein/llm"
)

func (a *app) injectCmd() *cobra.Command {
	var id, source string
	cmd := &cobra.Command{
		Use:   "inject --session ID [--source NAME] [text]",
		Short: "Append context to an idle session without running a turn",
		Long: `Inject appends one user/message with a non-user source to a session: no
turn starts and no model is called. The next turn of that session sees it
before its prompt. The text is the arguments joined by spaces, or stdin.

--source NAME gives the source {kind: user-context, name: NAME}; KIND:NAME
sets both (e.g. plugin:ci-watch). The default is user-context:cli.

If the session is open in rein's terminal UI, inject hands the context to it
through the session's live socket (see docs/tui.md): written at once when the
session is idle, seen by a running turn at its next step. If another rein
process holds the session (rein run, rein acp), inject refuses with a
"locked" error and exit code 4; nothing is written.`,
		Example: `  rein inject --session 01JDX3... "CI is red on main"
  tail -n 50 build.log | rein inject --session 01JDX3... --source plugin:ci`,
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.inject(cmd.Context(), id, source, args)
		},
	}
	cmd.Flags().StringVarP(&id, "session", "s", "", "session `ID` or a unique prefix of it (required)")
	cmd.Flags().StringVar(&source, "source", "", "source: NAME (kind user-context) or KIND:NAME (default user-context:cli)")
	return cmd
}

func (a *app) inject(ctx context.Context, id, source string, args []string) error {
	src, err := parseSource(source, "cli")
	if err != nil {
		return err
	}
	text, err := a.readInput(args, "text to inject")
	if err != nil {
		return err
	}
	if id == "" {
		return usagef("--session ID is required: inject adds to an existing session")
	}
	st, err := a.openStore()
	if err != nil {
		return err
	}
	if id, err = resolveID(ctx, st, id); err != nil {
		return err
	}
	if done, err := a.injectLive(ctx, st, id, text, src); done || err != nil {
		return err
	}
	// No hooks, no tools, no model: an inject runs nothing.
	ag, err := a.resumeAgent(ctx, st, id, agent.Config{Store: st, Provider: noModel{}})
	if err != nil {
		return lockedError(id, fmt.Errorf("session %s: %w", id, err))
	}
	injErr := ag.Inject(agent.AdditionalContext{Content: llm.Text(text), Source: src})
	if err := ag.Close(context.WithoutCancel(ctx)); err != nil && injErr == nil {
		injErr = err
	}
	if injErr != nil {
		return injErr
	}
	fmt.Fprintf(a.stdout, "injected into %s (source %s)\n", id, src)
	return nil
}
