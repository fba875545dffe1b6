package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/reinhq/rein/agent"
	"github.com/reinhq/rein/hook"
	"github.com/reinhq/rein/session"
	"github.com/reinhq/rein/store"
)

// configureCompaction turns on automatic compaction for a model with the
// given context window (0: unknown, so only context-overflow errors compact).
func (a *app) configureCompaction(cfg *agent.Config, window int) {
	cfg.ContextWindow = window
}

// preCompactHook runs the command hooks' PreCompact before every compaction.
func preCompactHook(hc *hook.Config, rt hook.Runtime) agent.Hook[agent.CompactInfo, agent.CompactDecision] {
	return func(ctx context.Context, in agent.CompactInfo, next func(context.Context, agent.CompactInfo) (agent.CompactDecision, error)) (agent.CompactDecision, error) {
		trigger := "auto"
		if in.Reason == session.CompactManual {
			trigger = "manual"
		}
		d := hc.PreCompact(ctx, in.Agent, rt, trigger, "")
		if d.Block {
			return agent.CompactDecision{Block: true, Reason: d.Reason}, nil
		}
		return next(ctx, in)
	}
}

func (a *app) sessionsCompact() *cobra.Command {
	var keep int
	var instructions string
	cmd := &cobra.Command{
		Use:   "compact ID",
		Short: "Summarize a session's older history to free context",
		Long: `Compact asks the session's model (that of its last request, unless --model
says otherwise) to summarize the older part of the history, and records the
summary as a message that replaces that part in what the model sees from now
on. Tool calls and their results are never split, and
the transcript ('sessions show') still shows the original messages. PreCompact
hooks run first and may refuse; SessionStart hooks (source compact) run after.

The session must not be running in another process (exit 4).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			if keep < 1 {
				return usagef("--keep %d: keep at least 1 message", keep)
			}
			st, err := a.openStore()
			if err != nil {
				return err
			}
			id, err := resolveID(ctx, st, args[0])
			if err != nil {
				return err
			}
			loaded, err := a.load(ctx, st, id)
			if err != nil {
				return err
			}
			start := loaded.Log.Len()
			dir := a.sessionDir(id, loaded.Log.Header().Cwd)
			if err := a.keepSessionModel(cmd.Flags(), id, loaded.Log); err != nil {
				return err
			}
			m, hooks, ch, err := a.wire(ctx, dir, st, false)
			if err != nil {
				return err
			}
			tools, err := a.tools(dir)
			if err != nil {
				return err
			}
			ag, err := a.resumeAgent(ctx, st, id, agent.Config{
				Store: st, Provider: m.provider, Model: m.spec, Params: m.params, Tools: tools,
				System: a.systemSections(dir, a.workspaceRoot(dir)),
				Cwd:    dir, Hooks: hooks,
			})
			if err != nil {
				return lockedError(id, fmt.Errorf("session %s: %w", id, err))
			}
			ch.attach(ag)
			cerr := ag.Compact(ctx, agent.CompactOptions{Reason: session.CompactManual, Keep: keep, Instructions: instructions})
			ch.sessionEnd(context.WithoutCancel(ctx))
			if err := ag.Close(context.WithoutCancel(ctx)); err != nil && cerr == nil {
				cerr = err
			}
			if errors.Is(cerr, agent.ErrNothingToCompact) {
				fmt.Fprintf(a.stdout, "nothing to compact in %s\n", id)
				return nil
			}
			if cerr != nil {
				return fmt.Errorf("compact %s: %w", id, cerr)
			}
			after, err := st.Load(ctx, id, store.LoadOptions{})
			if err != nil {
				return err
			}
			for _, ev := range after.Log.Events(start) {
				if ev.Type != session.TypeUserMessage {
					continue
				}
				p, err := ev.Decode()
				if err != nil {
					continue
				}
				if um := p.(*session.UserMessage); um.Replaces != nil {
					fmt.Fprintf(a.stdout, "compacted %s: summary at #%d replaces %d events (#%d–#%d)\n",
						id, ev.Seq, len(um.Replaces.Seqs), um.Replaces.Start, um.Replaces.End)
					return nil
				}
			}
			fmt.Fprintf(a.stdout, "compacted %s\n", id)
			return nil
		},
	}
	cmd.Flags().IntVar(&keep, "keep", 4, "keep at least `N` (≥ 1) recent model messages verbatim")
	cmd.Flags().StringVar(&instructions, "instructions", "", "what the summary should focus on")
	return cmd
}
