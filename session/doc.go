// Package session owns rein's session log: the event types and their wire
// form (docs/format.md), the in-memory Log, the session invariant (Check
// and the incremental Checker), the incremental projection from the log
// to model messages (with compaction's surface replace), crash repair
// (Repair), salvage of a damaged log (Log.Salvage, tombstones), the fork
// rule (ForkPoint, Spans, StablePoint) and a Validator that checks lines
// without keeping them (from the start, or going on from a loaded Log).
//
// Every line is validated in full on every path. The fast path of reading
// lines (the JSON scanner, payload plans, rein's envelope and chunk lines)
// is session/internal/wire; the general decoder (general.go: encoding/json
// and the UTF-8 rule) is its fallback and, in the fuzz tests, its oracle.
//
// Nothing here does I/O, and only Log.AppendLines starts goroutines (its
// parsing workers, which end before it returns); a Log is not safe for
// concurrent use (the agent's owner goroutine holds it). The package imports
// only llm (for the message vocabulary) and its internal wire package, and
// must not import store, agent or anything above them.
package session
