package acp

import (
	"encoding/json"
	"fmt"
	"strings"

	sdk "github.com/coder/acp-go-sdk"

	"github.com/reinhq/rein/llm"
	"github.com/reinhq/rein/session"
	"github.com/reinhq/rein/transcript"
)

// mapper turns transcript entries into session/update values: the ACP face
// of the one translator. Replay and live updates both go through it (see
// docs/acp.md for the table).
//
// What a person typed (source kind "user") is a user_message_chunk; the
// model's text and reasoning are agent message and thought chunks; tool
// calls are tool_call and tool_call_update. Everything else a person should
// see and that ACP has no word for — context injected by a plugin, a hook
// or a tool, a session reference, steering, a compaction summary, a blocked
// prompt, a turn that failed, a crash repair — is a "notice": a tool call
// card of kind "other", already completed, whose title names what it is and
// its source, and whose _meta.rein says so for clients that know rein. It is
// never merged into the user's words or the agent's.
type mapper struct {
	// echo holds the ids of prompts this client sent: it already shows
	// them, so their user message is not echoed live.
	echo map[string]bool
}

// reinMeta is the _meta.rein object of a notice.
func reinMeta(e *transcript.Entry, entry string) map[string]any {
	m := map[string]any{"entry": entry}
	if e.Kind != transcript.Blocked { // a blocked prompt is not in the log
		m["seq"] = e.Seq
	}
	if e.Source != nil {
		src := map[string]any{"kind": e.Source.Kind}
		if e.Source.Name != "" {
			src["name"] = e.Source.Name
		}
		m["source"] = src
	}
	if e.ID != "" {
		m["messageId"] = e.ID
	}
	if e.Turn > 0 {
		m["turn"] = e.Turn
	}
	return map[string]any{"rein": m}
}

// notice is a completed (or failed) card of kind "other".
func notice(id, title string, status sdk.ToolCallStatus, content []sdk.ToolCallContent, meta map[string]any) sdk.SessionUpdate {
	return sdk.SessionUpdate{ToolCall: &sdk.SessionUpdateToolCall{
		ToolCallId: sdk.ToolCallId(id), Title: title, Kind: sdk.ToolKindOther, Status: status,
		Content: content, Meta: meta, SessionUpdate: "tool_call",
	}}
}

func noticeID(kind string, seq int64) string { return fmt.Sprintf("rein-%s-%d", kind, seq) }

func textContent(s string) []sdk.ToolCallContent {
	if s == "" {
		return nil
	}
	return []sdk.ToolCallContent{sdk.ToolContent(sdk.TextBlock(s))}
}

// partsContent turns message parts into tool content blocks.
func partsContent(parts []llm.Part) []sdk.ToolCallContent {
	var out []sdk.ToolCallContent
	for _, p := range parts {
		if b, ok := block(p); ok {
			out = append(out, sdk.ToolContent(b))
		}
	}
	return out
}

func block(p llm.Part) (sdk.ContentBlock, bool) {
	switch p.Type {
	case llm.PartText:
		if p.Text != "" {
			return sdk.TextBlock(p.Text), true
		}
	case llm.PartImage:
		return sdk.ImageBlock(p.Data, p.MediaType), true
	}
	return sdk.ContentBlock{}, false
}

var toolKinds = map[transcript.ToolKind]sdk.ToolKind{
	transcript.KindRead:    sdk.ToolKindRead,
	transcript.KindEdit:    sdk.ToolKindEdit,
	transcript.KindSearch:  sdk.ToolKindSearch,
	transcript.KindExecute: sdk.ToolKindExecute,
	transcript.KindPlan:    sdk.ToolKindThink,
	transcript.KindOther:   sdk.ToolKindOther,
}

func toolKind(k transcript.ToolKind) sdk.ToolKind {
	if v, ok := toolKinds[k]; ok {
		return v
	}
	return sdk.ToolKindOther
}

func rawInput(args string) any {
	if args == "" {
		return nil
	}
	if json.Valid([]byte(args)) {
		return json.RawMessage(args)
	}
	return args // what the model sent, kept as text
}

func locations(paths []string) []sdk.ToolCallLocation {
	var out []sdk.ToolCallLocation
	for _, p := range paths {
		out = append(out, sdk.ToolCallLocation{Path: p})
	}
	return out
}

// diffContent is the ACP diff of d, or its unified diff as text.
func diffContent(d *transcript.Diff) []sdk.ToolCallContent {
	switch {
	case d == nil:
		return nil
	case d.New != nil:
		return []sdk.ToolCallContent{{Diff: &sdk.ToolCallContentDiff{Path: d.Path, OldText: d.Old, NewText: *d.New, Type: "diff"}}}
	case d.Unified != "":
		return textContent("```diff\n" + strings.TrimRight(d.Unified, "\n") + "\n```")
	}
	return nil
}

var toolStatus = map[transcript.Status]sdk.ToolCallStatus{
	transcript.Pending:   sdk.ToolCallStatusPending,
	transcript.Running:   sdk.ToolCallStatusInProgress,
	transcript.Completed: sdk.ToolCallStatusCompleted,
	transcript.Failed:    sdk.ToolCallStatusFailed,
}

// appendUpdates appends the session updates of one entry (live or
// replayed) to out.
func (m *mapper) appendUpdates(out []sdk.SessionUpdate, e *transcript.Entry) []sdk.SessionUpdate {
	switch e.Kind {
	case transcript.User:
		if m.echo[e.ID] {
			delete(m.echo, e.ID)
			return out
		}
		for _, p := range e.Content {
			if b, ok := block(p); ok {
				out = append(out, sdk.SessionUpdate{UserMessageChunk: &sdk.SessionUpdateUserMessageChunk{Content: b, SessionUpdate: "user_message_chunk"}})
			}
		}
		return out
	case transcript.Context:
		title := "Context from " + transcript.Label(*e.Source)
		if e.Source.Kind == session.SourceSessionRef {
			title = "Session reference " + e.Source.Name
		}
		return append(out, notice(noticeID("context", e.Seq), title, sdk.ToolCallStatusCompleted, partsContent(e.Content), reinMeta(e, "context")))
	case transcript.Steering:
		return append(out, notice(noticeID("steering", e.Seq), "Steering from "+transcript.Label(*e.Source), sdk.ToolCallStatusCompleted, partsContent(e.Content), reinMeta(e, "steering")))
	case transcript.Summary:
		title := fmt.Sprintf("Compaction summary (replaces #%d–#%d)", e.Replaces.Start, e.Replaces.End)
		return append(out, notice(noticeID("summary", e.Seq), title, sdk.ToolCallStatusCompleted, partsContent(e.Content), reinMeta(e, "summary")))
	case transcript.Blocked:
		text := "The prompt was not run and is not part of the session: " + e.Error
		return append(out, notice("rein-blocked-"+e.ID, "Prompt blocked", sdk.ToolCallStatusFailed, textContent(text), reinMeta(e, "blocked")))
	case transcript.Reasoning, transcript.ReasoningDelta:
		if t := e.Text[e.Streamed:]; t != "" {
			return append(out, sdk.SessionUpdate{AgentThoughtChunk: &sdk.SessionUpdateAgentThoughtChunk{Content: sdk.TextBlock(t), SessionUpdate: "agent_thought_chunk"}})
		}
	case transcript.Assistant, transcript.AssistantDelta:
		if t := e.Text[e.Streamed:]; t != "" {
			return append(out, sdk.SessionUpdate{AgentMessageChunk: &sdk.SessionUpdateAgentMessageChunk{Content: sdk.TextBlock(t), SessionUpdate: "agent_message_chunk"}})
		}
	case transcript.ToolCall:
		t := e.Tool
		return append(out, sdk.SessionUpdate{ToolCall: &sdk.SessionUpdateToolCall{
			ToolCallId: sdk.ToolCallId(t.CallID), Title: t.Title, Kind: toolKind(t.Kind), Status: sdk.ToolCallStatusPending,
			RawInput: rawInput(t.Arguments), Locations: locations(t.Paths), Content: diffContent(t.Diff), SessionUpdate: "tool_call",
		}})
	case transcript.ToolStarted:
		t := e.Tool
		u := &sdk.SessionToolCallUpdate{ToolCallId: sdk.ToolCallId(t.CallID), Status: sdk.Ptr(sdk.ToolCallStatusInProgress), SessionUpdate: "tool_call_update"}
		if t.Rewritten {
			u.Title, u.RawInput, u.Content = sdk.Ptr(t.Title+" (input rewritten by a hook)"), rawInput(t.Arguments), diffContent(t.Diff)
		}
		return append(out, sdk.SessionUpdate{ToolCallUpdate: u})
	case transcript.ToolResult:
		t := e.Tool
		content := diffContent(t.Diff)
		text := e.Text
		if t.Diff != nil && t.Diff.New != nil {
			text, _, _ = strings.Cut(text, "\n") // the diff shows the change
		}
		content = append(content, textContent(text)...)
		return append(out, sdk.SessionUpdate{ToolCallUpdate: &sdk.SessionToolCallUpdate{
			ToolCallId: sdk.ToolCallId(t.CallID), Status: sdk.Ptr(toolStatus[t.Status]), Content: content, SessionUpdate: "tool_call_update",
		}})
	case transcript.Plan:
		entries := make([]sdk.PlanEntry, 0, len(e.Plan))
		for _, it := range e.Plan {
			st := sdk.PlanEntryStatus(it.Status)
			switch st {
			case sdk.PlanEntryStatusPending, sdk.PlanEntryStatusInProgress, sdk.PlanEntryStatusCompleted:
			default:
				st = sdk.PlanEntryStatusPending
			}
			entries = append(entries, sdk.PlanEntry{Content: it.Content, Priority: sdk.PlanEntryPriorityMedium, Status: st})
		}
		return append(out, sdk.SessionUpdate{Plan: &sdk.SessionUpdatePlan{Entries: entries, SessionUpdate: "plan"}})
	case transcript.Hook:
		switch e.Tool.Decision {
		case "block", "deny":
			title := fmt.Sprintf("Hook %s (%s): %s", e.Text, e.Tool.Name, e.Tool.Decision)
			return append(out, notice(noticeID("hook", e.Seq), title, sdk.ToolCallStatusFailed, textContent(e.Error), reinMeta(e, "hook")))
		}
	case transcript.Compaction:
		if e.Error != "" {
			return append(out, notice(noticeID("compaction", e.Seq), "Compaction failed", sdk.ToolCallStatusFailed, textContent(e.Error), reinMeta(e, "compaction")))
		}
	case transcript.TurnEnd:
		switch e.Reason.Kind {
		case session.ReasonCompleted, session.ReasonInterrupted: // the repair notice says it
			return out
		}
		status := sdk.ToolCallStatusCompleted
		if e.Reason.Kind == session.ReasonError {
			status = sdk.ToolCallStatusFailed
		}
		title := fmt.Sprintf("Turn %d ended: %s", e.Turn, transcript.ReasonText(*e.Reason))
		return append(out, notice(noticeID("turn", e.Seq), title, status, nil, reinMeta(e, "turn-end")))
	case transcript.Repair:
		return append(out, notice(noticeID("repair", e.Seq), "Session repaired", sdk.ToolCallStatusCompleted, textContent(e.Text), reinMeta(e, "repair")))
	case transcript.Title:
		t := e.Text
		return append(out, sdk.SessionUpdate{SessionInfoUpdate: &sdk.SessionSessionInfoUpdate{Title: &t, SessionUpdate: "session_info_update"}})
	}
	return out
}
