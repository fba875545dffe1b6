package session

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/reinhq/rein/llm"
	"github.com/reinhq/rein/session/internal/wire"
)

// Type is an event's wire type, e.g. "user/message".
type Type string

// The event types of docs/format.md.
const (
	TypeTurnStart        Type = "turn/start"
	TypeTurnEnd          Type = "turn/end"
	TypeStepStart        Type = "step/start"
	TypeStepEnd          Type = "step/end"
	TypeUserMessage      Type = "user/message"
	TypeSteeringMessage  Type = "steering/message"
	TypeRequestHeader    Type = "request/header"
	TypeAssistantChunk   Type = "assistant/chunk"
	TypeAssistantMessage Type = "assistant/message"
	TypeToolCall         Type = "tool/call"
	TypeToolApproval     Type = "tool/approval"
	TypeToolResult       Type = "tool/result"
	TypeHookResult       Type = "hook/result"
	TypeCompactionStart  Type = "compaction/start"
	TypeCompactionEnd    Type = "compaction/end"
	TypeSessionTitle     Type = "session/title"
)

// Types lists every known event type.
var Types = []Type{
	TypeTurnStart, TypeTurnEnd, TypeStepStart, TypeStepEnd, TypeUserMessage,
	TypeSteeringMessage, TypeRequestHeader, TypeAssistantChunk, TypeAssistantMessage,
	TypeToolCall, TypeToolApproval, TypeToolResult, TypeHookResult,
	TypeCompactionStart, TypeCompactionEnd, TypeSessionTitle,
}

// Known reports whether t is a type this version of rein understands.
func (t Type) Known() bool { return typeIdx(string(t)) >= 0 }

// internType returns the canonical constant for s without allocating, or ""
// when s is not a known type.
func internType(s string) Type {
	if i := typeIdx(s); i >= 0 {
		return Types[i]
	}
	return ""
}

// typeIdx returns the index of s in Types, or -1: a switch on the length
// and one byte, then one comparison (a string switch costs a binary search
// of comparisons, and this runs once per loaded line).
func typeIdx(s string) int {
	i := -1
	switch len(s) {
	case 8: // turn/end step/end
		i = pick(s[0] == 't', 1, 3)
	case 9:
		i = 9 // tool/call
	case 10: // turn/start step/start
		i = pick(s[0] == 't', 0, 2)
	case 11: // tool/result hook/result
		i = pick(s[0] == 't', 11, 12)
	case 12:
		i = 4 // user/message
	case 13: // tool/approval session/title
		i = pick(s[0] == 't', 10, 15)
	case 14: // request/header compaction/end
		i = pick(s[0] == 'r', 6, 14)
	case 15:
		i = 7 // assistant/chunk
	case 16: // steering/message compaction/start
		i = pick(s[0] == 's', 5, 13)
	case 17:
		i = 8 // assistant/message
	default:
		return -1
	}
	if string(Types[i]) != s {
		return -1
	}
	return i
}

func pick(c bool, a, b int) int {
	if c {
		return a
	}
	return b
}

// Source says who produced a message. Kind "user" means a human typed it,
// and nothing else means that.
type Source struct {
	Kind string `json:"kind"`
	Name string `json:"name,omitempty"`
}

// Source kinds named by docs/format.md; new kinds may appear and are shown by name.
const (
	SourceUser        = "user"
	SourceHook        = "hook"
	SourcePlugin      = "plugin"
	SourceTool        = "tool"
	SourceSessionRef  = "session-ref"
	SourceSystem      = "system"
	SourceUserContext = "user-context"
)

// IsUser reports whether a human wrote the message.
func (s Source) IsUser() bool { return s.Kind == SourceUser }

func (s Source) String() string {
	if s.Name == "" {
		return s.Kind
	}
	return s.Kind + ":" + s.Name
}

// Payload is the typed data of one event type.
type Payload interface {
	EventType() Type
}

// UserMessage is a user-role input: a prompt, an injected context, a hook's
// context, or a compaction summary (Replaces set).
type UserMessage struct {
	ID       string     `json:"id"`
	Content  []llm.Part `json:"content"`
	Source   Source     `json:"source"`
	Replaces *Replaces  `json:"replaces,omitempty"`
}

// Replaces is a compaction summary's shadowed range of surface events.
type Replaces struct {
	Start int64   `json:"start"`
	End   int64   `json:"end"`
	Seqs  []int64 `json:"seqs"`
}

// SteeringMessage redirects the open turn.
type SteeringMessage struct {
	Turn    int        `json:"turn"`
	ID      string     `json:"id"`
	Content []llm.Part `json:"content"`
	Source  Source     `json:"source"`
}

// Trigger kinds.
const (
	TriggerSend  = "send"
	TriggerSteer = "steer"
	TriggerRetry = "retry"
)

// Trigger says what opened a turn.
type Trigger struct {
	Kind      string `json:"kind"`
	MessageID string `json:"messageID,omitempty"`
}

// TurnStart opens turn Turn.
type TurnStart struct {
	Turn    int     `json:"turn"`
	Trigger Trigger `json:"trigger"`
}

// Reason kinds of turn/end.
const (
	ReasonCompleted = "completed"
	ReasonMaxTokens = "max-tokens"
	// ReasonMaxSteps: the turn reached the agent's step limit while the
	// model was still owed a step (it had called tools, or was steered).
	ReasonMaxSteps    = "max-steps"
	ReasonError       = "error"
	ReasonAborted     = "aborted"
	ReasonInterrupted = "interrupted"
)

// Cancel causes of an aborted turn.
const (
	CauseUser   = "user"
	CauseClosed = "closed"
	CauseHook   = "hook"
	CauseParent = "parent"
)

// Reason is why a turn ended.
type Reason struct {
	Kind    string `json:"kind"`
	Code    string `json:"code,omitempty"`
	Message string `json:"message,omitempty"`
	Cause   string `json:"cause,omitempty"`
}

func (r Reason) String() string {
	switch {
	case r.Cause != "":
		return r.Kind + "{" + r.Cause + "}"
	case r.Code != "":
		return r.Kind + "{" + r.Code + "}"
	}
	return r.Kind
}

// TurnEnd closes turn Turn.
type TurnEnd struct {
	Turn   int    `json:"turn"`
	Reason Reason `json:"reason"`
}

// StepStart opens step Step (from 1) of turn Turn.
type StepStart struct {
	Turn int `json:"turn"`
	Step int `json:"step"`
}

// StepEnd closes the open step.
type StepEnd struct {
	Turn int `json:"turn"`
	Step int `json:"step"`
}

// Request header reasons.
const (
	HeaderInitial = "initial"
	HeaderResume  = "resume"
	HeaderChange  = "change"
)

// RequestHeader records the non-message part of the requests that follow:
// system prompt, tools, model and params. It is written whenever one of
// them changes, so every request is a pure function of the log, and where
// the request's prompt-cache prefix broke (then Prefix says how).
type RequestHeader struct {
	Turn   int            `json:"turn"`
	Step   int            `json:"step"`
	Reason string         `json:"reason"`
	Model  string         `json:"model"`
	System string         `json:"system"`
	Tools  []llm.ToolSpec `json:"tools"`
	Params llm.Params     `json:"params"`
	// Prefix is set on a header written where the request does not
	// repeat the whole previous request ahead of its new messages.
	Prefix *Prefix `json:"prefix,omitempty"`
}

// Prefix describes a broken prompt-cache prefix: how much of the request
// still repeats the previous one (its leading messages, and their encoded
// size when the adapter measured it) and why the rest does not. Providers
// serve a repeated prefix from their prompt cache at a fraction of the
// input price; a break makes the rest full price again.
type Prefix struct {
	Messages int    `json:"messages"`
	Bytes    int64  `json:"bytes,omitempty"`
	Break    string `json:"break"`
}

// Prefix break causes, from the front of the prompt (where a change costs
// the most) back.
const (
	BreakModel      = "model"
	BreakTools      = "tools"
	BreakSystem     = "system"
	BreakCompaction = "compaction"
	BreakEdited     = "edited"
)

// AssistantChunk is one streamed increment of the step's response. A
// chunk with Lost set is a tombstone (see Salvage): its line was damaged,
// its content is in the step's assistant/message, and its delta is empty.
type AssistantChunk struct {
	Turn  int       `json:"turn"`
	Step  int       `json:"step"`
	Delta llm.Delta `json:"delta"`
	Lost  *Lost     `json:"lost,omitempty"`
}

// Lost says why a tombstone stands where an event was: the line of the
// damaged file it replaces (1-based, the header being line 1; 0 when no
// line held the event) and what was wrong with it.
type Lost struct {
	Line  int    `json:"line"`
	Error string `json:"error"`
}

// AssistantMessage is the step's complete (or interrupted) response.
// ChunkSeqs cites exactly the chunks of the attempt it completes.
type AssistantMessage struct {
	Turn        int            `json:"turn"`
	Step        int            `json:"step"`
	Content     []llm.Part     `json:"content"`
	ToolCalls   []llm.ToolCall `json:"toolCalls"`
	Finish      llm.Finish     `json:"finish"`
	Usage       llm.Usage      `json:"usage"`
	ChunkSeqs   []int64        `json:"chunkSeqs"`
	Interrupted bool           `json:"interrupted,omitempty"`
}

// ToolCall records that a call started (or, for synthetic not-run results,
// that it was settled without starting). Arguments is what ran;
// OriginalArguments what the model sent, when a hook rewrote it.
type ToolCall struct {
	Turn              int    `json:"turn"`
	Step              int    `json:"step"`
	CallID            string `json:"callID"`
	Name              string `json:"name"`
	Arguments         string `json:"arguments"`
	OriginalArguments string `json:"originalArguments,omitempty"`
}

// ToolApproval records a permission decision and who made it.
type ToolApproval struct {
	Turn     int    `json:"turn"`
	Step     int    `json:"step"`
	CallID   string `json:"callID"`
	Decision string `json:"decision"`
	By       string `json:"by"`
	Reason   string `json:"reason,omitempty"`
}

// ToolResult answers a call.
type ToolResult struct {
	Turn    int             `json:"turn"`
	Step    int             `json:"step"`
	CallID  string          `json:"callID"`
	Content []llm.Part      `json:"content"`
	IsError bool            `json:"isError"`
	Code    string          `json:"code,omitempty"`
	Meta    json.RawMessage `json:"meta,omitempty"`
}

// HookResult is a log-only record of one hook run.
type HookResult struct {
	Turn       *int   `json:"turn,omitempty"`
	Point      string `json:"point"`
	Hook       string `json:"hook"`
	Decision   string `json:"decision"`
	ExitCode   *int   `json:"exitCode,omitempty"`
	DurationMs int64  `json:"durationMs"`
	Stderr     string `json:"stderr,omitempty"`
}

// Compaction reasons.
const (
	CompactPressure = "pressure"
	CompactOverflow = "overflow"
	CompactManual   = "manual"
)

// CompactionStart opens a compaction; Turn is nil between turns.
// Instructions, when set, are the extra instructions the summary request
// carried (from the caller or a PreCompact hook), so that request too is
// a function of the log.
type CompactionStart struct {
	Turn         *int   `json:"turn"`
	ID           string `json:"id"`
	Reason       string `json:"reason"`
	Instructions string `json:"instructions,omitempty"`
}

// CompactionEnd closes the compaction with the same ID.
type CompactionEnd struct {
	Turn   *int   `json:"turn"`
	ID     string `json:"id"`
	Reason string `json:"reason"`
	Error  string `json:"error,omitempty"`
}

// SessionTitle names the session; the latest wins.
type SessionTitle struct {
	Title string `json:"title"`
}

func (*UserMessage) EventType() Type      { return TypeUserMessage }
func (*SteeringMessage) EventType() Type  { return TypeSteeringMessage }
func (*TurnStart) EventType() Type        { return TypeTurnStart }
func (*TurnEnd) EventType() Type          { return TypeTurnEnd }
func (*StepStart) EventType() Type        { return TypeStepStart }
func (*StepEnd) EventType() Type          { return TypeStepEnd }
func (*RequestHeader) EventType() Type    { return TypeRequestHeader }
func (*AssistantChunk) EventType() Type   { return TypeAssistantChunk }
func (*AssistantMessage) EventType() Type { return TypeAssistantMessage }
func (*ToolCall) EventType() Type         { return TypeToolCall }
func (*ToolApproval) EventType() Type     { return TypeToolApproval }
func (*ToolResult) EventType() Type       { return TypeToolResult }
func (*HookResult) EventType() Type       { return TypeHookResult }
func (*CompactionStart) EventType() Type  { return TypeCompactionStart }
func (*CompactionEnd) EventType() Type    { return TypeCompactionEnd }
func (*SessionTitle) EventType() Type     { return TypeSessionTitle }

// NewPayload returns a zero payload of type t, or nil for an unknown type.
func NewPayload(t Type) Payload {
	switch t {
	case TypeUserMessage:
		return new(UserMessage)
	case TypeSteeringMessage:
		return new(SteeringMessage)
	case TypeTurnStart:
		return new(TurnStart)
	case TypeTurnEnd:
		return new(TurnEnd)
	case TypeStepStart:
		return new(StepStart)
	case TypeStepEnd:
		return new(StepEnd)
	case TypeRequestHeader:
		return new(RequestHeader)
	case TypeAssistantChunk:
		return new(AssistantChunk)
	case TypeAssistantMessage:
		return new(AssistantMessage)
	case TypeToolCall:
		return new(ToolCall)
	case TypeToolApproval:
		return new(ToolApproval)
	case TypeToolResult:
		return new(ToolResult)
	case TypeHookResult:
		return new(HookResult)
	case TypeCompactionStart:
		return new(CompactionStart)
	case TypeCompactionEnd:
		return new(CompactionEnd)
	case TypeSessionTitle:
		return new(SessionTitle)
	}
	return nil
}

// Event is one durable log entry. Data is the raw JSON of the payload; it
// may alias a larger buffer (a loaded file) and must not be modified.
type Event struct {
	Seq       int64
	Type      Type
	Time      time.Time
	Ignorable bool
	Data      json.RawMessage
}

// TimeLayout is the wire layout of event times: RFC 3339, UTC, milliseconds.
const TimeLayout = wire.TimeLayout

// NewEvent encodes p as the event of the given seq and time.
func NewEvent(seq int64, t time.Time, p Payload) (Event, error) {
	data, err := json.Marshal(p)
	if err != nil {
		return Event{}, fmt.Errorf("session: encode %s: %w", p.EventType(), err)
	}
	return Event{Seq: seq, Type: p.EventType(), Time: t.UTC().Truncate(time.Millisecond), Data: data}, nil
}

// Decode returns the typed payload of e: the fast decoders where they
// take the data, else the general decoder (encoding/json, the data being
// valid UTF-8).
func (e Event) Decode() (Payload, error) {
	if p, ok := fastDecode(e.Type, e.Data); ok {
		return p, nil
	}
	return decodeGeneral(e)
}

// MustDecode is Decode for events the caller produced itself; it panics on
// error.
func (e Event) MustDecode() Payload {
	p, err := e.Decode()
	if err != nil {
		panic(err)
	}
	return p
}

// AppendLine appends the event's JSONL line (with the trailing newline) to b.
// The field order is fixed: seq, type, time, ignorable, data.
func (e Event) AppendLine(b []byte) []byte {
	b = append(b, `{"seq":`...)
	b = strconv.AppendInt(b, e.Seq, 10)
	b = append(b, `,"type":"`...)
	b = append(b, e.Type...)
	b = append(b, `","time":"`...)
	b = e.Time.UTC().AppendFormat(b, TimeLayout)
	b = append(b, '"')
	if e.Ignorable {
		b = append(b, `,"ignorable":true`...)
	}
	b = append(b, `,"data":`...)
	if len(e.Data) == 0 {
		b = append(b, "{}"...)
	} else {
		b = append(b, e.Data...)
	}
	return append(b, "}\n"...)
}

// Errors of parsing and checking.
var (
	// ErrCorrupt reports a line or payload that does not parse.
	ErrCorrupt = errors.New("session: corrupt event")
	// ErrUnknownType reports an event type this reader does not know and
	// that is not marked ignorable.
	ErrUnknownType = errors.New("session: unknown event type")
	// ErrVersion reports an unsupported header version.
	ErrVersion = errors.New("session: unsupported format version")
	// ErrOpenTurn reports an operation refused inside an open turn (fork).
	ErrOpenTurn = errors.New("session: inside an open turn")
	// ErrInvariant reports an event that would break the session invariant.
	ErrInvariant = errors.New("session: invariant violated")
)

// ParseLine parses one event line (without the newline): the envelope,
// and data validated as one JSON value in valid UTF-8 (its payload type is
// Decode's business). Lines in rein's own field order take the fast path
// (wire.Prefix), any other the general decoder (encoding/json). Data
// aliases line.
func ParseLine(line []byte) (Event, error) {
	if e, ok := wire.Prefix(line, nil); ok && wire.Valid(e.Data) {
		return envelopeEvent(e), nil
	}
	return parseLineGeneral(line)
}

// envelopeEvent is the Event of an envelope read by wire.Prefix.
func envelopeEvent(e wire.Envelope) Event {
	typ := internType(string(e.Type))
	if typ == "" {
		typ = Type(e.Type)
	}
	return Event{Seq: e.Seq, Type: typ, Time: time.UnixMilli(e.Ms).UTC(), Ignorable: e.Ignorable, Data: e.Data}
}
