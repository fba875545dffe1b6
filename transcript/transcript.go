// Package transcript is rein's one translator from durable session events to
// what a human sees: direct user messages, injected context labelled by its
// source, steering, assistant text, tool calls and results in summary, turn
// boundaries and their outcomes, compaction and errors. `rein sessions show`,
// the TUI and ACP replay all read a session through it, so a direct message and
// an injected context are told apart in one place, by source and by nothing
// else.
//
// A transcript shows the original events: a compaction summary appears as its
// own entry and never hides the events it replaces (only the model's projection
// uses the replacement).
//
// Concurrency: a Builder is not safe for concurrent use; Build, Render and Text
// are pure functions.
//
// This package imports only session and llm (and the standard library); it
// must not import agent, store or any face.
package transcript

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/reinhq/rein/llm"
	"github.com/reinhq/rein/session"
)

// Kind classifies an Entry.
type Kind string

// Entry kinds.
const (
	// User is a message a human typed (source kind "user").
	User Kind = "user"
	// Context is a user-role message from any other source: an inject,
	// a hook's or tool's additional context, a session reference.
	Context Kind = "context"
	// Summary is a compaction summary (a user/message that replaces a range).
	Summary Kind = "summary"
	// Steering is a steering message that redirected the open turn.
	Steering Kind = "steering"
	// Assistant is the model's text of one step.
	Assistant Kind = "assistant"
	// Reasoning is the model's reasoning text of one step.
	Reasoning Kind = "reasoning"
	// ToolCall is a call the model asked for.
	ToolCall Kind = "tool-call"
	// ToolResult is the answer to a call.
	ToolResult Kind = "tool-result"
	// Approval is a permission decision about a call.
	Approval Kind = "approval"
	// TurnStart and TurnEnd bound a turn.
	TurnStart Kind = "turn-start"
	TurnEnd   Kind = "turn-end"
	// Compaction marks the start or end of a compaction.
	Compaction Kind = "compaction"
	// Hook is a hook run record.
	Hook Kind = "hook"
	// Title is a session title change.
	Title Kind = "title"
	// Model records the model of the requests that follow (request/header).
	Model Kind = "model"
	// Unknown is an ignorable event type this version does not know.
	Unknown Kind = "unknown"
)

// Entry is one thing a human sees. Which fields are set depends on Kind.
type Entry struct {
	Seq  int64 `json:"seq"`
	Kind Kind  `json:"kind"`
	// Turn and Step locate the entry (0 outside a turn or step).
	Turn int `json:"turn,omitempty"`
	Step int `json:"step,omitempty"`
	// ID is the message id of user, context, summary and steering entries.
	ID string `json:"id,omitempty"`
	// Source says who produced a user, context, summary or steering entry.
	Source *session.Source `json:"source,omitempty"`
	// Text is the entry's text: message text, assistant text, a result's
	// content, a compaction's reason, a title, a model name.
	Text string `json:"text,omitempty"`
	// Tool describes tool-call, tool-result and approval entries.
	Tool *Tool `json:"tool,omitempty"`
	// Reason is the outcome of a turn-end entry.
	Reason *session.Reason `json:"reason,omitempty"`
	// Usage is the token usage of an assistant entry.
	Usage *llm.Usage `json:"usage,omitempty"`
	// Interrupted marks an assistant entry whose stream was cut off.
	Interrupted bool `json:"interrupted,omitempty"`
	// Error carries a compaction's error or a hook's decision detail.
	Error string `json:"error,omitempty"`
	// Replaces is the shadowed range of a summary entry.
	Replaces *session.Replaces `json:"replaces,omitempty"`
}

// Tool describes a tool call, its result or its approval.
type Tool struct {
	CallID string `json:"callID"`
	Name   string `json:"name,omitempty"`
	// Arguments is the raw JSON text of the call.
	Arguments string `json:"arguments,omitempty"`
	IsError   bool   `json:"isError,omitempty"`
	Code      string `json:"code,omitempty"`
	// Decision and By describe an approval; Decision also holds a hook's
	// decision.
	Decision string `json:"decision,omitempty"`
	By       string `json:"by,omitempty"`
}

// Builder turns events into entries incrementally. The zero value is ready.
type Builder struct {
	names map[string]string // call id -> tool name
}

// ErrDecode reports an event whose payload does not decode.
var ErrDecode = errors.New("transcript: event does not decode")

// Add translates one event into zero or more entries. Events must be added in
// seq order. Chunks, step boundaries and tool/call records (already shown by
// the assistant entry that asked for the call) produce no entry.
func (b *Builder) Add(ev session.Event) ([]Entry, error) {
	if !ev.Type.Known() {
		return []Entry{{Seq: ev.Seq, Kind: Unknown, Text: string(ev.Type)}}, nil
	}
	switch ev.Type {
	case session.TypeAssistantChunk, session.TypeStepStart, session.TypeStepEnd:
		return nil, nil
	}
	p, err := ev.Decode()
	if err != nil {
		return nil, fmt.Errorf("%w: seq %d: %w", ErrDecode, ev.Seq, err)
	}
	e := Entry{Seq: ev.Seq}
	switch p := p.(type) {
	case *session.TurnStart:
		e.Kind, e.Turn = TurnStart, p.Turn
	case *session.TurnEnd:
		r := p.Reason
		e.Kind, e.Turn, e.Reason = TurnEnd, p.Turn, &r
	case *session.UserMessage:
		src := p.Source
		e.ID, e.Source, e.Text = p.ID, &src, text(p.Content)
		switch {
		case p.Replaces != nil:
			r := *p.Replaces
			e.Kind, e.Replaces = Summary, &r
		case src.IsUser():
			e.Kind = User
		default:
			e.Kind = Context
		}
	case *session.SteeringMessage:
		src := p.Source
		e.Kind, e.Turn, e.ID, e.Source, e.Text = Steering, p.Turn, p.ID, &src, text(p.Content)
	case *session.AssistantMessage:
		return b.assistant(ev.Seq, p), nil
	case *session.ToolCall:
		if b.names == nil {
			b.names = map[string]string{}
		}
		if _, ok := b.names[p.CallID]; ok && p.OriginalArguments == "" {
			return nil, nil
		}
		// A call the assistant entry did not show, or whose input a hook
		// rewrote: show what ran.
		b.names[p.CallID] = p.Name
		e.Kind, e.Turn, e.Step = ToolCall, p.Turn, p.Step
		e.Tool = &Tool{CallID: p.CallID, Name: p.Name, Arguments: p.Arguments}
		if p.OriginalArguments != "" {
			e.Text = "input rewritten by a hook"
		}
	case *session.ToolResult:
		e.Kind, e.Turn, e.Step, e.Text = ToolResult, p.Turn, p.Step, text(p.Content)
		e.Tool = &Tool{CallID: p.CallID, Name: b.names[p.CallID], IsError: p.IsError, Code: p.Code}
	case *session.ToolApproval:
		e.Kind, e.Turn, e.Step, e.Text = Approval, p.Turn, p.Step, p.Reason
		e.Tool = &Tool{CallID: p.CallID, Name: b.names[p.CallID], Decision: p.Decision, By: p.By}
	case *session.HookResult:
		e.Kind, e.Text = Hook, p.Hook
		if p.Turn != nil {
			e.Turn = *p.Turn
		}
		e.Tool = &Tool{Name: p.Point, Decision: p.Decision}
		e.Error = p.Stderr
	case *session.CompactionStart:
		e.Kind, e.Text = Compaction, "started ("+p.Reason+")"
		if p.Turn != nil {
			e.Turn = *p.Turn
		}
	case *session.CompactionEnd:
		e.Kind, e.Text, e.Error = Compaction, "ended ("+p.Reason+")", p.Error
		if p.Turn != nil {
			e.Turn = *p.Turn
		}
	case *session.SessionTitle:
		e.Kind, e.Text = Title, p.Title
	case *session.RequestHeader:
		e.Kind, e.Turn, e.Step, e.Text = Model, p.Turn, p.Step, p.Model
	default:
		e.Kind, e.Text = Unknown, string(ev.Type)
	}
	return []Entry{e}, nil
}

func (b *Builder) assistant(seq int64, p *session.AssistantMessage) []Entry {
	var out []Entry
	var reasoning, txt strings.Builder
	for _, part := range p.Content {
		switch part.Type {
		case llm.PartReasoning:
			reasoning.WriteString(part.Text)
		case llm.PartText:
			txt.WriteString(part.Text)
		}
	}
	if reasoning.Len() > 0 {
		out = append(out, Entry{Seq: seq, Kind: Reasoning, Turn: p.Turn, Step: p.Step, Text: reasoning.String()})
	}
	u := p.Usage
	out = append(out, Entry{Seq: seq, Kind: Assistant, Turn: p.Turn, Step: p.Step, Text: txt.String(),
		Usage: &u, Interrupted: p.Interrupted})
	if b.names == nil {
		b.names = map[string]string{}
	}
	for _, c := range p.ToolCalls {
		b.names[c.ID] = c.Name
		out = append(out, Entry{Seq: seq, Kind: ToolCall, Turn: p.Turn, Step: p.Step,
			Tool: &Tool{CallID: c.ID, Name: c.Name, Arguments: c.Arguments}})
	}
	return out
}

// Build translates a whole log.
func Build(events []session.Event) ([]Entry, error) {
	var b Builder
	var out []Entry
	for _, ev := range events {
		es, err := b.Add(ev)
		if err != nil {
			return out, err
		}
		out = append(out, es...)
	}
	return out, nil
}

// text concatenates the text parts of content; other parts are named.
func text(content []llm.Part) string {
	var b strings.Builder
	for _, p := range content {
		switch p.Type {
		case llm.PartText:
			b.WriteString(p.Text)
		case llm.PartImage:
			fmt.Fprintf(&b, "[image %s]", p.MediaType)
		}
	}
	return b.String()
}

// Label names who produced a message, for humans: "user" for a person's
// message, otherwise the source kind and name ("plugin ci-watch",
// "session-ref 01J…@41"). Unknown kinds are shown by name.
func Label(s session.Source) string {
	if s.Name == "" {
		return s.Kind
	}
	return s.Kind + " " + s.Name
}

// Summarize returns a one-line summary of a tool call's arguments: the
// value of a path-like or command-like argument when there is one, else the
// compact JSON, cut to max runes.
func Summarize(arguments string, max int) string {
	var m map[string]any
	if json.Unmarshal([]byte(arguments), &m) == nil {
		for _, k := range []string{"command", "file_path", "path", "pattern", "query", "url"} {
			if v, ok := m[k].(string); ok && v != "" {
				return cut(oneLine(v), max)
			}
		}
	}
	return cut(oneLine(arguments), max)
}

func oneLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i] + " …"
	}
	return s
}

func cut(s string, max int) string {
	if max <= 0 {
		return s
	}
	r := []rune(s)
	if len(r) <= max {
		return s
	}
	return string(r[:max-1]) + "…"
}
