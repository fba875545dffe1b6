// Package llm is rein's provider-neutral model vocabulary: messages made of
// parts, requests, stream events, usage, finish reasons, failure codes, and
// the Provider interface every adapter implements.
//
// It owns no state and imports nothing of rein's. Adapters (llm/openai,
// llm/anthropic, llm/scripted) translate between this vocabulary and a wire
// format; the agent derives every Request from the session log.
//
// Model and transport failures are data: a Provider never returns a Go
// error from Stream. Every failure form ends the stream with exactly one
// terminal Event of type EventError whose Err carries a Code.
package llm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"strconv"
	"strings"
	"time"
)

// Role is the role of a message in a request.
type Role string

const (
	RoleUser      Role = "user"
	RoleAssistant Role = "assistant"
	RoleTool      Role = "tool"
)

// Part types.
const (
	PartText      = "text"
	PartReasoning = "reasoning"
	PartImage     = "image"
)

// Part is one piece of message content. Its JSON form is the session file's
// content part (docs/format.md, "Shared shapes").
type Part struct {
	Type      string `json:"type"`
	Text      string `json:"text,omitempty"`
	Signature string `json:"signature,omitempty"`
	MediaType string `json:"mediaType,omitempty"`
	Data      string `json:"data,omitempty"`
}

// Text returns a one-part text content.
func Text(s string) []Part { return []Part{{Type: PartText, Text: s}} }

// PlainText concatenates the text parts of content (reasoning and images are
// skipped).
func PlainText(content []Part) string {
	if len(content) == 1 && content[0].Type == PartText {
		return content[0].Text
	}
	var b strings.Builder
	for _, p := range content {
		if p.Type == PartText {
			b.WriteString(p.Text)
		}
	}
	return b.String()
}

// ToolCall is a call the model asked for. Arguments is the raw JSON text the
// model produced, kept verbatim even when it is not valid JSON.
type ToolCall struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// Message is one entry of a request's history.
//
// A user message has Content. An assistant message has Content (text and
// reasoning parts) and ToolCalls. A tool message answers ToolCallID with
// Content and IsError.
type Message struct {
	Role       Role       `json:"role"`
	Content    []Part     `json:"content,omitempty"`
	ToolCalls  []ToolCall `json:"toolCalls,omitempty"`
	ToolCallID string     `json:"toolCallID,omitempty"`
	IsError    bool       `json:"isError,omitempty"`
}

// ToolSpec describes a tool to the model. Parameters is a JSON Schema object.
type ToolSpec struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters"`
}

// Params are the model parameters of a request. Zero values mean "provider
// default" and are omitted on the wire.
type Params struct {
	MaxTokens       int      `json:"maxTokens,omitempty"`
	Temperature     *float64 `json:"temperature,omitempty"`
	TopP            *float64 `json:"topP,omitempty"`
	ReasoningEffort string   `json:"reasoningEffort,omitempty"`
	// ThinkingBudget asks providers with explicit thinking budgets
	// (Anthropic) for extended thinking of at most this many tokens.
	ThinkingBudget int `json:"thinkingBudget,omitempty"`
}

// Request is one model request. Messages are derived from the session log
// and must be treated as read-only by adapters: they may share memory with
// the agent's projection.
type Request struct {
	Model    string
	System   string
	Tools    []ToolSpec
	Messages []Message
	Params   Params
	// Cache, when set, is the conversation's encoding cache: the adapter
	// keeps each message's wire form there and encodes only what the
	// previous request through the same Cache did not have. Nil encodes
	// the whole request. It never changes what is sent.
	Cache *Cache
}

// Cache keeps one conversation's encoded messages between requests, so that
// while the history only grows a request costs the encoding of its new
// messages, not of the whole history. The adapter that fills it recognises
// a kept message by identity: the same role, tool call id and error flag
// and the same Content and ToolCalls arrays. A message that is not the very
// one encoded before (after a compaction, say) is encoded again, together
// with every message after it, so a stale encoding is never sent.
//
// The caller keeps one Cache per conversation, uses it for one request at a
// time, and must not modify the Content or ToolCalls arrays of a message
// once it was sent through it (the agent's projection never does). The
// zero value is empty and ready.
type Cache struct {
	owner any
	state any
}

// Slot returns the state that owner (an adapter) stored with SetSlot, or
// nil when the cache is empty or was last filled by another owner.
func (c *Cache) Slot(owner any) any {
	if c == nil || c.owner != owner {
		return nil
	}
	return c.state
}

// SetSlot stores owner's state, replacing whatever the cache held.
func (c *Cache) SetSlot(owner, state any) { c.owner, c.state = owner, state }

// Shared is how much of a request repeats the previous request encoded
// through the same Cache: the leading messages whose encoding is the very
// one sent before, and their size on the wire. Providers bill a repeated
// prefix at their cached price; a request that shares less than the whole
// previous request broke that prefix.
type Shared struct {
	Messages int
	Bytes    int64
}

// Preparer is implemented by adapters that encode through a Cache.
// Prepare brings req.Cache up to date with req ahead of Stream (which then
// reuses every encoding) and reports what req shares with the previous
// request prepared or streamed through that Cache. An error is the one
// Stream would report as invalid-request.
type Preparer interface {
	Prepare(req *Request) (Shared, error)
}

// Usage counts tokens of one model response.
type Usage struct {
	// Input is every prompt token, cached ones included, so it compares
	// with the context window.
	Input  int `json:"input"`
	Output int `json:"output"`
	// CacheRead and CacheWrite are the parts of Input read from and
	// written to the provider's prompt cache.
	CacheRead  int `json:"cacheRead,omitempty"`
	CacheWrite int `json:"cacheWrite,omitempty"`
	// Reasoning is the part of Output spent on reasoning.
	Reasoning int `json:"reasoning,omitempty"`
}

// Add returns u+v.
func (u Usage) Add(v Usage) Usage {
	return Usage{u.Input + v.Input, u.Output + v.Output, u.CacheRead + v.CacheRead, u.CacheWrite + v.CacheWrite, u.Reasoning + v.Reasoning}
}

// Finish is why a response ended.
type Finish string

const (
	FinishStop      Finish = "stop"
	FinishToolCalls Finish = "tool-calls"
	FinishMaxTokens Finish = "max-tokens"
	FinishError     Finish = "error"
)

// ToolCallDelta is a fragment of a streamed tool call. Index identifies the
// call within the response; ID and Name usually arrive with the first
// fragment, Arguments in pieces.
type ToolCallDelta struct {
	Index     int    `json:"index"`
	ID        string `json:"id,omitempty"`
	Name      string `json:"name,omitempty"`
	Arguments string `json:"arguments,omitempty"`
}

// Delta is one streamed increment: exactly one of its fields is set.
type Delta struct {
	Text      string         `json:"text,omitempty"`
	Reasoning string         `json:"reasoning,omitempty"`
	Signature string         `json:"signature,omitempty"`
	ToolCall  *ToolCallDelta `json:"toolCall,omitempty"`
}

// EventType discriminates stream events.
type EventType uint8

const (
	// EventDelta carries Delta.
	EventDelta EventType = iota + 1
	// EventDone is terminal: the response completed with Finish and Usage.
	EventDone
	// EventError is terminal: the request failed with Err.
	EventError
)

// Event is one stream event. A stream yields zero or more EventDelta and
// then exactly one terminal event (EventDone or EventError), and nothing
// after it.
type Event struct {
	Type   EventType
	Delta  Delta
	Finish Finish
	Usage  Usage
	Err    *Error
}

// Provider streams model responses. Stream must honour ctx: when ctx is
// cancelled the stream ends promptly with an EventError of code
// CodeCanceled. Stream never panics on bad wire data; it reports
// CodeMalformedStream.
type Provider interface {
	// Name is the provider half of "provider:model", e.g. "deepseek".
	Name() string
	Stream(ctx context.Context, req *Request) iter.Seq[Event]
}

// Code classifies a model request failure.
type Code string

const (
	CodeAuth            Code = "auth"
	CodeRateLimit       Code = "rate-limit"
	CodeOverloaded      Code = "overloaded"
	CodeContextOverflow Code = "context-overflow"
	CodeInvalidRequest  Code = "invalid-request"
	CodeNetwork         Code = "network"
	CodeTimeout         Code = "timeout"
	CodeEmptyResponse   Code = "empty-response"
	CodeMalformedStream Code = "malformed-stream"
	CodeServer          Code = "server"
	CodeCanceled        Code = "canceled"
	CodeUnknown         Code = "unknown"
)

// Retryable reports whether a failure of this code may succeed when the same
// request is sent again.
func (c Code) Retryable() bool {
	switch c {
	case CodeRateLimit, CodeOverloaded, CodeNetwork, CodeTimeout, CodeEmptyResponse, CodeMalformedStream, CodeServer:
		return true
	}
	return false
}

// Error is a normalised model request failure.
type Error struct {
	Code    Code
	Message string
	// Status is the HTTP status, when there was one.
	Status int
	// RetryAfter is the provider's requested wait, when it gave one.
	RetryAfter time.Duration
}

func (e *Error) Error() string {
	if e.Status != 0 {
		return fmt.Sprintf("%s (HTTP %d): %s", e.Code, e.Status, e.Message)
	}
	return fmt.Sprintf("%s: %s", e.Code, e.Message)
}

// Summary says what went wrong, for a person: "rate limited (429)",
// "network error: connection reset". Network errors, timeouts and codes
// without a phrase of their own add the message.
func (e *Error) Summary() string {
	var s string
	switch e.Code {
	case CodeRateLimit:
		s = "rate limited"
	case CodeOverloaded:
		s = "the provider is overloaded"
	case CodeServer:
		s = "server error"
	case CodeNetwork:
		s = withDetail("network error", e.Message)
	case CodeTimeout:
		s = withDetail("the request timed out", e.Message)
	case CodeEmptyResponse:
		s = "empty response"
	default:
		s = withDetail(string(e.Code), e.Message)
	}
	if e.Status != 0 {
		s += " (" + strconv.Itoa(e.Status) + ")"
	}
	return s
}

func withDetail(s, detail string) string {
	if detail == "" {
		return s
	}
	return s + ": " + detail
}

// AsError returns err as an *Error, classifying a context error as
// CodeCanceled or CodeTimeout and anything else as CodeUnknown.
func AsError(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	switch {
	case errors.Is(err, context.Canceled):
		return &Error{Code: CodeCanceled, Message: err.Error()}
	case errors.Is(err, context.DeadlineExceeded):
		return &Error{Code: CodeTimeout, Message: err.Error()}
	}
	return &Error{Code: CodeUnknown, Message: err.Error()}
}

// Fail returns a stream that yields one terminal error event.
func Fail(err *Error) iter.Seq[Event] {
	return func(yield func(Event) bool) { yield(Event{Type: EventError, Err: err}) }
}

// WithTimeout returns p with every stream bounded by d, from the call to
// its terminal event: a stream still running after d ends with an error of
// code CodeTimeout that names the bound. d <= 0 returns p unchanged. The
// result's Unwrap returns p.
func WithTimeout(p Provider, d time.Duration) Provider {
	if d <= 0 {
		return p
	}
	return &timeoutProvider{p, d}
}

type timeoutProvider struct {
	inner Provider
	d     time.Duration
}

func (t *timeoutProvider) Name() string { return t.inner.Name() }

// Unwrap returns the bounded provider.
func (t *timeoutProvider) Unwrap() Provider { return t.inner }

func (t *timeoutProvider) Stream(ctx context.Context, req *Request) iter.Seq[Event] {
	return func(yield func(Event) bool) {
		tctx, cancel := context.WithTimeout(ctx, t.d)
		defer cancel()
		for ev := range t.inner.Stream(tctx, req) {
			if ev.Type == EventError && ctx.Err() == nil && errors.Is(tctx.Err(), context.DeadlineExceeded) {
				ev.Err = &Error{Code: CodeTimeout, Message: fmt.Sprintf("no complete response within %s (the request timeout)", t.d)}
			}
			if !yield(ev) {
				return
			}
		}
	}
}
