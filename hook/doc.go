// Package hook runs command hooks written for Claude Code's hook contract
// and turns them into rein's extension-point functions (agent.Hooks), so
// that existing hook scripts work unchanged.
//
// It owns: loading the `hooks` section of the settings files (Load), the
// Claude Code matcher rules, the stdin payload of each event, running hook
// processes (parallel per event, deduplicated by command, per-hook timeout,
// process-group kill, capped output), decoding their exit codes and JSON
// output, merging several hooks' results, and mapping them onto
// PromptAdmission, ToolPre, ToolPost, TurnStopping and SessionStart. It also
// offers PreCompact for the compaction code to call, and SessionEnd and
// Notification for the program that runs the agent. Every hook run is
// recorded as a log-only hook/result event through the agent.
//
// Events and their mapping (docs/notes/2026-11-30-claude-code-hooks.md has
// the decisions in full):
//
//	SessionStart     -> agent.Hooks.SessionStart   contexts
//	UserPromptSubmit -> agent.Hooks.PromptAdmission block or contexts (user prompts only)
//	PreToolUse       -> agent.Hooks.ToolPre         allow / deny / ask, updatedInput
//	PostToolUse      -> agent.Hooks.ToolPost        block with feedback, contexts
//	Stop             -> agent.Hooks.TurnStopping    a block steers the turn on
//	PreCompact       -> Config.PreCompact           block the compaction
//	SessionEnd       -> Config.SessionEnd           before the session closes (cannot block)
//	Notification     -> Config.Notification         a message for the person (cannot block)
//
// A hook failure (non-zero exit other than 2, a missing command, malformed
// output, a timeout) is never a Go error: it is a non-blocking outcome,
// reported through Runtime.Notify and recorded in the log.
//
// Concurrency: a Config is immutable after Load and safe for concurrent use;
// the functions it returns may run concurrently (e.g. for different
// agents). Each event's matching hooks run as parallel processes; the
// function returns after every one of them has exited or been killed.
//
// Package hook imports agent, session and llm (for types), sandbox,
// levenshtein (to suggest a misspelt event name) and the standard library;
// it must not import a store backend, a provider adapter or a UI.
package hook
