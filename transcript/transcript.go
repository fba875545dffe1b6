// Package transcript is rein's one translator from durable session events to
// what a person sees. It turns the log into a face-neutral model of entries
// — a person's message, context labelled by its source, steering, assistant
// text and reasoning, tool calls with their status, content and diffs, the
// plan written by the todo tool, hook outcomes, compaction summaries, turn
// outcomes and crash-repair notices — and every face renders from that
// model: `rein sessions show` (Render), ACP replay and live updates, and
// the terminal UI. A direct message and an injected context are told apart
// here, by source and by nothing else.
//
// A transcript shows the original events: a compaction summary appears as its
// own entry and never hides the events it replaces (only the model's projection
// uses the replacement).
//
// A Builder reads a log once, in order. For a face that follows a live
// session, Stream makes assistant chunks entries of their own (deltas), and
// the assistant entry that completes them says how much was streamed.
// Entries that exist only live (a prompt blocked by admission) are built with
// BlockedEntry.
//
// Concurrency: a Builder is not safe for concurrent use; Build, Render and Text
// are pure functions.
//
// This package imports only session and llm (and the standard library); it
// must not import agent, store or any face.
package transcript

import (
	"bytes"
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
	// AssistantDelta and ReasoningDelta are streamed pieces of the step's
	// text and reasoning (only with Builder.Stream).
	AssistantDelta Kind = "assistant-delta"
	ReasoningDelta Kind = "reasoning-delta"
	// ToolCall is a call the model asked for (status pending).
	ToolCall Kind = "tool-call"
	// ToolStarted says a call started: its permission check passed (or it
	// was settled without running) and its tool/call is in the log (status
	// running). Tool.Rewritten is set when a hook rewrote its input.
	ToolStarted Kind = "tool-started"
	// ToolResult is the answer to a call (status completed or failed).
	ToolResult Kind = "tool-result"
	// Plan is the plan the todo tool wrote (Plan holds it whole).
	Plan Kind = "plan"
	// Approval is a permission decision about a call.
	Approval Kind = "approval"
	// TurnStart and TurnEnd bound a turn.
	TurnStart Kind = "turn-start"
	TurnEnd   Kind = "turn-end"
	// Repair is rein's notice that crash repair closed a turn the process
	// did not live to close (it follows that turn's TurnEnd).
	Repair Kind = "repair"
	// Blocked is a prompt that admission refused: no turn ran and the
	// prompt is not in the log (built live with BlockedEntry).
	Blocked Kind = "blocked"
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

// Entry is one thing a person sees. Which fields are set depends on Kind.
type Entry struct {
	Seq  int64 `json:"seq"`
	Kind Kind  `json:"kind"`
	// Turn and Step locate the entry (0 outside a turn or step).
	Turn int `json:"turn,omitempty"`
	Step int `json:"step,omitempty"`
	// ID is the message id of user, context, summary, steering and blocked
	// entries, and the id of the message that triggered a turn-start entry.
	ID string `json:"id,omitempty"`
	// Source says who produced a user, context, summary, steering or
	// blocked entry.
	Source *session.Source `json:"source,omitempty"`
	// Text is the entry's text: message text, assistant text or a delta, a
	// result's content, a compaction's reason, a title, a model name, a
	// notice.
	Text string `json:"text,omitempty"`
	// Content is the message's parts (text and images) for user, context,
	// summary, steering and blocked entries; Text is its text.
	Content []llm.Part `json:"-"`
	// Streamed is, on an assistant or reasoning entry built with Stream,
	// how many leading bytes of Text were already given as deltas: a live
	// face shows only Text[Streamed:]. It is 0 when the deltas streamed are
	// not a prefix of the final text (a retried request).
	Streamed int `json:"streamed,omitempty"`
	// Tool describes tool-call, tool-started, tool-result and approval
	// entries.
	Tool *Tool `json:"tool,omitempty"`
	// Plan is the whole plan of a plan entry.
	Plan []PlanItem `json:"plan,omitempty"`
	// Reason is the outcome of a turn-end entry.
	Reason *session.Reason `json:"reason,omitempty"`
	// Usage is the token usage of an assistant entry.
	Usage *llm.Usage `json:"usage,omitempty"`
	// Interrupted marks an assistant entry whose stream was cut off.
	Interrupted bool `json:"interrupted,omitempty"`
	// Error carries a compaction's error, a hook's stderr or why a prompt
	// was blocked.
	Error string `json:"error,omitempty"`
	// Replaces is the shadowed range of a summary entry.
	Replaces *session.Replaces `json:"replaces,omitempty"`
}

// Tool describes a tool call, its start, its result or its approval.
type Tool struct {
	CallID string `json:"callID"`
	Name   string `json:"name,omitempty"`
	// Arguments is the raw JSON text of the call (what ran, on a started
	// call).
	Arguments string `json:"arguments,omitempty"`
	// Title, Kind and Paths describe the call for a face (see Describe).
	Title string   `json:"title,omitempty"`
	Kind  ToolKind `json:"kind,omitempty"`
	Paths []string `json:"paths,omitempty"`
	// Status is the call's state after this entry.
	Status Status `json:"status,omitempty"`
	// Diff is the change an edit or write proposes (on the call) or made
	// (on its result).
	Diff *Diff `json:"diff,omitempty"`
	// Rewritten marks a started call whose input a hook rewrote.
	Rewritten bool   `json:"rewritten,omitempty"`
	IsError   bool   `json:"isError,omitempty"`
	Code      string `json:"code,omitempty"`
	// ExitCode, Signal and TimedOut describe how a command of the bash
	// tool ended (on its result): the exit status (nil when it was killed
	// by a signal or is unknown), the signal, whether it timed out.
	ExitCode *int   `json:"exitCode,omitempty"`
	Signal   string `json:"signal,omitempty"`
	TimedOut bool   `json:"timedOut,omitempty"`
	// Decision and By describe an approval; Decision also holds a hook's
	// decision.
	Decision string `json:"decision,omitempty"`
	By       string `json:"by,omitempty"`
}

// Builder turns events into entries incrementally. The zero value is ready.
type Builder struct {
	// Stream makes assistant/chunk events entries (AssistantDelta,
	// ReasoningDelta), for faces that follow a live session.
	Stream bool
	// Cwd, when set, makes the paths of tool entries absolute.
	Cwd string

	calls     map[string]*callInfo // call id -> what the model asked
	text      strings.Builder      // streamed text of the open step
	reasoning strings.Builder      // streamed reasoning of the open step
}

type callInfo struct {
	name, args string
	diff       *Diff
}

// ErrDecode reports an event whose payload does not decode.
var ErrDecode = errors.New("transcript: event does not decode")

// Add translates one event into zero or more entries. Events must be added in
// seq order. Step boundaries produce no entry; chunks produce one only with
// Stream.
func (b *Builder) Add(ev session.Event) ([]Entry, error) { return b.AppendEntries(nil, ev, nil) }

// AppendEntries is Add appending the entries to dst, for a face that
// reuses one slice for every event; p is ev's payload when the caller has
// it decoded already (as ev.Decode does: a validating reader hands it
// on), or nil to have it decoded.
func (b *Builder) AppendEntries(dst []Entry, ev session.Event, p session.Payload) ([]Entry, error) {
	if !ev.Type.Known() {
		return append(dst, Entry{Seq: ev.Seq, Kind: Unknown, Text: string(ev.Type)}), nil
	}
	switch ev.Type {
	case session.TypeStepStart, session.TypeStepEnd:
		return dst, nil
	case session.TypeAssistantChunk:
		if !b.Stream {
			return dst, nil
		}
	case session.TypeRequestHeader:
		// Only the model is shown: read the fields up to it, not the
		// system prompt and tool schemas that follow.
		if e, ok := modelOf(ev); ok {
			return append(dst, e), nil
		}
	}
	if p == nil {
		var err error
		if p, err = ev.Decode(); err != nil {
			return dst, fmt.Errorf("%w: seq %d: %w", ErrDecode, ev.Seq, err)
		}
	}
	e := Entry{Seq: ev.Seq}
	switch p := p.(type) {
	case *session.TurnStart:
		e.Kind, e.Turn, e.ID = TurnStart, p.Turn, p.Trigger.MessageID
	case *session.TurnEnd:
		r := p.Reason
		e.Kind, e.Turn, e.Reason = TurnEnd, p.Turn, &r
		if r.Kind == session.ReasonInterrupted {
			return append(dst, e, Entry{Seq: ev.Seq, Kind: Repair, Turn: p.Turn,
				Text: fmt.Sprintf("rein stopped before turn %d ended; the turn was closed when the session was next opened (calls left open were settled as outcome-unknown or not-run)", p.Turn)}), nil
		}
	case *session.UserMessage:
		src := p.Source
		e.ID, e.Source, e.Content, e.Text = p.ID, &src, p.Content, text(p.Content)
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
		e.Kind, e.Turn, e.ID, e.Source, e.Content, e.Text = Steering, p.Turn, p.ID, &src, p.Content, text(p.Content)
	case *session.AssistantChunk:
		switch {
		case p.Delta.Text != "":
			b.text.WriteString(p.Delta.Text)
			e.Kind, e.Text = AssistantDelta, p.Delta.Text
		case p.Delta.Reasoning != "":
			b.reasoning.WriteString(p.Delta.Reasoning)
			e.Kind, e.Text = ReasoningDelta, p.Delta.Reasoning
		default:
			return dst, nil
		}
		e.Turn, e.Step = p.Turn, p.Step
	case *session.AssistantMessage:
		return b.assistant(dst, ev.Seq, p), nil
	case *session.ToolCall:
		c := b.call(p.CallID)
		e.Kind, e.Turn, e.Step = ToolStarted, p.Turn, p.Step
		if c.name == "" || p.OriginalArguments != "" {
			// Not shown by an assistant entry, or its input changed:
			// describe what runs.
			c.name = p.Name
			e.Tool = b.tool(p.CallID, p.Name, p.Arguments)
		} else {
			e.Tool = &Tool{CallID: p.CallID, Name: p.Name, Arguments: p.Arguments}
		}
		e.Tool.Status = Running
		if p.OriginalArguments != "" {
			e.Tool.Rewritten = true
			c.args = p.Arguments
			_, _, _, c.diff = Describe(p.Name, p.Arguments, b.Cwd)
		}
	case *session.ToolResult:
		c := b.call(p.CallID)
		e.Kind, e.Turn, e.Step, e.Text = ToolResult, p.Turn, p.Step, text(p.Content)
		e.Tool = &Tool{CallID: p.CallID, Name: c.name, IsError: p.IsError, Code: p.Code, Status: Completed}
		if p.IsError {
			e.Tool.Status = Failed
		} else {
			e.Tool.Diff = resultDiff(c.name, p.Meta, c.diff)
		}
		if c.name == "bash" {
			e.Tool.ExitCode, e.Tool.Signal, e.Tool.TimedOut = exitOf(p.Meta)
		}
		dst = append(dst, e)
		if c.name == "todo" && !p.IsError {
			if items, ok := planOf(p.Meta); ok {
				dst = append(dst, Entry{Seq: ev.Seq, Kind: Plan, Turn: p.Turn, Step: p.Step, Plan: items})
			}
		}
		delete(b.calls, p.CallID)
		return dst, nil
	case *session.ToolApproval:
		e.Kind, e.Turn, e.Step, e.Text = Approval, p.Turn, p.Step, p.Reason
		e.Tool = &Tool{CallID: p.CallID, Name: b.call(p.CallID).name, Decision: p.Decision, By: p.By}
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
	return append(dst, e), nil
}

func (b *Builder) call(id string) *callInfo {
	if b.calls == nil {
		b.calls = map[string]*callInfo{}
	}
	c := b.calls[id]
	if c == nil {
		c = &callInfo{}
		b.calls[id] = c
	}
	return c
}

// tool describes a call from its name and arguments.
func (b *Builder) tool(id, name, args string) *Tool {
	title, kind, paths, diff := Describe(name, args, b.Cwd)
	return &Tool{CallID: id, Name: name, Arguments: args, Title: title, Kind: kind, Paths: paths, Diff: diff}
}

func (b *Builder) assistant(out []Entry, seq int64, p *session.AssistantMessage) []Entry {
	reasoning, txt := joinText(p.Content, llm.PartReasoning), joinText(p.Content, llm.PartText)
	streamed := func(sb *strings.Builder, final string) int {
		s := sb.String()
		sb.Reset()
		if strings.HasPrefix(final, s) {
			return len(s)
		}
		return 0
	}
	rs, ts := streamed(&b.reasoning, reasoning), streamed(&b.text, txt)
	if reasoning != "" {
		out = append(out, Entry{Seq: seq, Kind: Reasoning, Turn: p.Turn, Step: p.Step, Text: reasoning, Streamed: rs})
	}
	u := p.Usage
	out = append(out, Entry{Seq: seq, Kind: Assistant, Turn: p.Turn, Step: p.Step, Text: txt,
		Streamed: ts, Usage: &u, Interrupted: p.Interrupted})
	for _, c := range p.ToolCalls {
		t := b.tool(c.ID, c.Name, c.Arguments)
		t.Status = Pending
		ci := b.call(c.ID)
		ci.name, ci.args, ci.diff = c.Name, c.Arguments, t.Diff
		out = append(out, Entry{Seq: seq, Kind: ToolCall, Turn: p.Turn, Step: p.Step, Tool: t})
	}
	return out
}

// joinText is the text of the parts of type t, concatenated (the part's
// own string when there is one: most messages have one part of a kind).
func joinText(parts []llm.Part, t string) string {
	one, n := "", 0
	for _, p := range parts {
		if p.Type == t && p.Text != "" {
			one = p.Text
			n++
		}
	}
	if n < 2 {
		return one
	}
	var sb strings.Builder
	for _, p := range parts {
		if p.Type == t {
			sb.WriteString(p.Text)
		}
	}
	return sb.String()
}

// modelOf reads turn, step and model from a request/header's leading
// fields (rein writes them first); false when they are not there.
func modelOf(ev session.Event) (Entry, bool) {
	d := json.NewDecoder(bytes.NewReader(ev.Data))
	if t, err := d.Token(); err != nil || t != json.Delim('{') {
		return Entry{}, false
	}
	e := Entry{Seq: ev.Seq, Kind: Model}
	for d.More() {
		k, err := d.Token()
		if err != nil {
			return Entry{}, false
		}
		switch k {
		case "turn", "step":
			var n int
			if d.Decode(&n) != nil {
				return Entry{}, false
			}
			if k == "turn" {
				e.Turn = n
			} else {
				e.Step = n
			}
		case "reason":
			var s string
			if d.Decode(&s) != nil {
				return Entry{}, false
			}
		case "model":
			if d.Decode(&e.Text) != nil {
				return Entry{}, false
			}
			return e, true
		default:
			return Entry{}, false
		}
	}
	return Entry{}, false
}

// BlockedEntry is the entry of a prompt that admission blocked, for faces
// that saw it live (agent/blocked): the prompt never entered the log.
func BlockedEntry(id string, content []llm.Part, src session.Source, reason string) Entry {
	return Entry{Kind: Blocked, ID: id, Source: &src, Content: content, Text: text(content), Error: reason}
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
	if len(content) == 1 && content[0].Type == llm.PartText {
		return content[0].Text
	}
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
