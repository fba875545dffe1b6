// Package session owns rein's session log: the event types of SPEC §3 and
// their wire form (FORMAT.md), the in-memory Log, the session invariant
// (Check and the incremental Checker), the incremental projection from the
// log to model messages (with compaction's surface replace), crash repair
// (Repair) and the fork rule (ForkPoint).
//
// Nothing here does I/O, and only Log.AppendLines starts goroutines (its
// parsing workers, which end before it returns); a Log is not safe for
// concurrent use (the agent's owner goroutine holds it). The package imports
// only llm (for the message vocabulary) and must not import store, agent or
// anything above them.
package session
