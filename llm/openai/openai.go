// Package openai is rein's adapter for the OpenAI-compatible Chat
// Completions API with streaming. One adapter serves DeepSeek
// (reasoning_content, prompt cache hit counts), OpenAI, and local
// OpenAI-compatible servers (Ollama, vLLM, llama.cpp) through a base URL.
//
// The wire request is built only from the llm.Request, whose slices are
// never modified. Every failure ends the stream with one llm.EventError
// carrying a code (see llm/sse for the HTTP and transport mapping).
//
// A Provider is safe for concurrent use; each Stream call is independent.
// It imports llm and llm/sse only; it must not import agent, session or
// any other adapter.
package openai

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"iter"
	"net/http"
	"strings"
	"time"

	"github.com/reinhq/rein/llm"
	"github.com/reinhq/rein/llm/sse"
	"github.com/reinhq/rein/llm/wire"
)

// Config configures a Provider.
type Config struct {
	// Name is the provider half of "provider:model" ("deepseek", "openai",
	// "ollama", …). Default "openai".
	Name string
	// BaseURL is the API root; "/chat/completions" is appended. Default
	// "https://api.openai.com/v1".
	BaseURL string
	// APIKey is sent as a bearer token when non-empty.
	APIKey string
	// HTTPClient sends requests. Default http.DefaultClient. Its Timeout
	// should be zero: streams are bounded by IdleTimeout instead.
	HTTPClient *http.Client
	// IdleTimeout abandons a response that sends nothing for this long.
	// Default sse.DefaultIdleTimeout (90s).
	IdleTimeout time.Duration
	// MaxTokensField names the output limit field: "max_tokens" (default;
	// DeepSeek, Ollama, vLLM) or "max_completion_tokens" (OpenAI).
	MaxTokensField string
	// ReasoningContent sends an assistant message's reasoning back as
	// reasoning_content. DeepSeek's thinking mode requires it on tool-call
	// turns (400 otherwise) and ignores it elsewhere; strict servers may
	// reject the unknown field, so it is off unless set.
	ReasoningContent bool
	// Headers are added to every request.
	Headers map[string]string
}

// Provider streams Chat Completions.
type Provider struct {
	cfg Config
}

// New returns a Provider for cfg.
func New(cfg Config) *Provider {
	if cfg.Name == "" {
		cfg.Name = "openai"
	}
	if cfg.BaseURL == "" {
		cfg.BaseURL = "https://api.openai.com/v1"
	}
	cfg.BaseURL = strings.TrimRight(cfg.BaseURL, "/")
	if cfg.MaxTokensField == "" {
		cfg.MaxTokensField = "max_tokens"
	}
	return &Provider{cfg: cfg}
}

// Name implements llm.Provider.
func (p *Provider) Name() string { return p.cfg.Name }

// Stream implements llm.Provider. The request is sent when iteration
// starts; stopping the iteration early closes the response.
func (p *Provider) Stream(ctx context.Context, req *llm.Request) iter.Seq[llm.Event] {
	return func(yield func(llm.Event) bool) {
		body, _, err := p.encode(req, wire.State[cache](req.Cache, p))
		if err != nil {
			yield(llm.Event{Type: llm.EventError, Err: &llm.Error{Code: llm.CodeInvalidRequest, Message: err.Error()}})
			return
		}
		h := map[string]string{}
		if p.cfg.APIKey != "" {
			h["Authorization"] = "Bearer " + p.cfg.APIKey
		}
		for k, v := range p.cfg.Headers {
			h[k] = v
		}
		s, e := sse.Post(ctx, p.cfg.HTTPClient, p.cfg.BaseURL+"/chat/completions", body, h, p.cfg.IdleTimeout)
		if e != nil {
			yield(llm.Event{Type: llm.EventError, Err: e})
			return
		}
		defer s.Close()
		var st state
		for {
			ev, err := s.Next()
			if (err == io.EOF || err == io.ErrUnexpectedEOF) && st.finished && s.Fail(err).Code == llm.CodeNetwork {
				// Some servers omit [DONE] after the finish reason.
				emit(yield, st.done())
				return
			}
			if err != nil {
				yield(st.cut(s.Fail(err), err == io.EOF))
				return
			}
			if ev.Data == "[DONE]" {
				emit(yield, st.done())
				return
			}
			var c chunk
			if err := json.Unmarshal([]byte(ev.Data), &c); err != nil {
				yield(llm.Event{Type: llm.EventError, Err: &llm.Error{Code: llm.CodeMalformedStream, Message: fmt.Sprintf("bad chunk %.200q: %v", ev.Data, err)}})
				return
			}
			if c.Error != nil {
				yield(llm.Event{Type: llm.EventError, Err: sse.StreamError(*c.Error)})
				return
			}
			for _, d := range st.apply(&c) {
				if !yield(llm.Event{Type: llm.EventDelta, Delta: d}) {
					return
				}
			}
		}
	}
}

// chunk is one chat.completion.chunk.
type chunk struct {
	Choices []struct {
		Index int `json:"index"`
		Delta struct {
			Content          string `json:"content"`
			ReasoningContent string `json:"reasoning_content"`
			// Reasoning is the field some servers (vLLM, OpenRouter,
			// Ollama) use instead of reasoning_content.
			Reasoning string `json:"reasoning"`
			ToolCalls []struct {
				Index    *int   `json:"index"`
				ID       string `json:"id"`
				Function struct {
					Name      string `json:"name"`
					Arguments string `json:"arguments"`
				} `json:"function"`
			} `json:"tool_calls"`
		} `json:"delta"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage *usage         `json:"usage"`
	Error *sse.ErrorBody `json:"error"`
}

type usage struct {
	PromptTokens        int `json:"prompt_tokens"`
	CompletionTokens    int `json:"completion_tokens"`
	PromptTokensDetails *struct {
		CachedTokens int `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
	CompletionTokensDetails *struct {
		ReasoningTokens int `json:"reasoning_tokens"`
	} `json:"completion_tokens_details"`
	// DeepSeek reports cache hits separately.
	PromptCacheHitTokens int `json:"prompt_cache_hit_tokens"`
}

// toLLM maps usage: Input is every prompt token (cached included), as
// both OpenAI and DeepSeek count prompt_tokens.
func (u *usage) toLLM() llm.Usage {
	out := llm.Usage{Input: u.PromptTokens, Output: u.CompletionTokens, CacheRead: u.PromptCacheHitTokens}
	if u.PromptTokensDetails != nil && u.PromptTokensDetails.CachedTokens > out.CacheRead {
		out.CacheRead = u.PromptTokensDetails.CachedTokens
	}
	if u.CompletionTokensDetails != nil {
		out.Reasoning = u.CompletionTokensDetails.ReasoningTokens
	}
	return out
}

// call is one tool call of the response, in order of first appearance.
type call struct {
	wire  int // provider index
	id    string
	bytes int // argument bytes seen
}

type state struct {
	text, reasoning bool
	calls           []call
	finish          string
	finished        bool
	usage           llm.Usage
}

// apply folds one chunk into the state and returns its deltas. Only the
// first choice is read (rein never asks for n > 1).
func (st *state) apply(c *chunk) []llm.Delta {
	if c.Usage != nil {
		st.usage = c.Usage.toLLM()
	}
	var out []llm.Delta
	for _, ch := range c.Choices {
		if ch.Index != 0 {
			continue
		}
		d := ch.Delta
		if r := d.ReasoningContent + d.Reasoning; r != "" {
			st.reasoning = true
			out = append(out, llm.Delta{Reasoning: r})
		}
		if d.Content != "" {
			st.text = true
			out = append(out, llm.Delta{Text: d.Content})
		}
		for _, tc := range d.ToolCalls {
			i, first := st.callIndex(tc.Index, tc.ID)
			td := &llm.ToolCallDelta{Index: i, Name: tc.Function.Name, Arguments: tc.Function.Arguments}
			if first {
				td.ID = st.calls[i].id
			}
			st.calls[i].bytes += len(tc.Function.Arguments)
			if td.ID == "" && td.Name == "" && td.Arguments == "" {
				continue
			}
			out = append(out, llm.Delta{ToolCall: td})
		}
		if ch.FinishReason != nil && *ch.FinishReason != "" {
			st.finish = *ch.FinishReason
			st.finished = true
		}
	}
	return out
}

// callIndex maps a provider tool call (index, id) to rein's dense index.
// Providers send the id with the first fragment only and key later
// fragments by index; some servers omit the index or reuse index 0 for
// parallel calls with distinct ids, so a new id always starts a new call.
func (st *state) callIndex(wire *int, id string) (int, bool) {
	w := -1
	if wire != nil {
		w = *wire
	}
	if id != "" {
		for i, c := range st.calls {
			if c.id == id {
				return i, false
			}
		}
		// An id for a call that started without one.
		for i := len(st.calls) - 1; i >= 0; i-- {
			if st.calls[i].wire == w && st.calls[i].id == "" && w >= 0 {
				st.calls[i].id = id
				return i, true
			}
		}
	} else {
		for i := len(st.calls) - 1; i >= 0; i-- {
			if st.calls[i].wire == w {
				return i, false
			}
		}
		if w < 0 && len(st.calls) > 0 {
			return len(st.calls) - 1, false
		}
	}
	st.calls = append(st.calls, call{wire: w, id: id})
	return len(st.calls) - 1, true
}

// emit yields events until the consumer stops.
func emit(yield func(llm.Event) bool, evs []llm.Event) {
	for _, ev := range evs {
		if !yield(ev) {
			return
		}
	}
}

// done ends a stream that reached [DONE] (or a clean EOF after a finish
// reason). A tool call that streamed no argument bytes gets "{}" so the
// assembled call is valid JSON. A response with neither text nor a tool
// call is an empty response unless the output limit cut it.
func (st *state) done() []llm.Event {
	if !st.text && len(st.calls) == 0 && st.finish != "length" {
		return []llm.Event{{Type: llm.EventError, Err: &llm.Error{Code: llm.CodeEmptyResponse, Message: "the model returned no text and no tool call"}}}
	}
	var evs []llm.Event
	for i, c := range st.calls {
		if c.bytes == 0 {
			evs = append(evs, llm.Event{Type: llm.EventDelta, Delta: llm.Delta{ToolCall: &llm.ToolCallDelta{Index: i, Arguments: "{}"}}})
		}
	}
	return append(evs, st.terminal())
}

func (st *state) terminal() llm.Event {
	var f llm.Finish
	switch st.finish {
	case "tool_calls", "function_call":
		f = llm.FinishToolCalls
	case "length":
		f = llm.FinishMaxTokens
	case "stop", "":
		f = llm.FinishStop
	case "insufficient_system_resource":
		// DeepSeek: inference was cut for lack of capacity.
		return llm.Event{Type: llm.EventError, Err: &llm.Error{Code: llm.CodeOverloaded, Message: "generation interrupted: insufficient system resource"}}
	default: // content_filter and unknown reasons
		f = llm.FinishError
	}
	// Some servers (Ollama) finish a tool-calling response with "stop".
	if f == llm.FinishStop && len(st.calls) > 0 {
		f = llm.FinishToolCalls
	}
	return llm.Event{Type: llm.EventDone, Finish: f, Usage: st.usage}
}

// cut ends a stream whose body stopped before [DONE] and before a finish
// reason: at a clean event boundary with nothing received it is an empty
// response, otherwise a transport failure (classified by fail).
func (st *state) cut(fail *llm.Error, cleanEOF bool) llm.Event {
	if cleanEOF && fail.Code == llm.CodeNetwork {
		if !st.text && !st.reasoning && len(st.calls) == 0 {
			fail = &llm.Error{Code: llm.CodeEmptyResponse, Message: "the stream ended without content"}
		} else {
			fail = &llm.Error{Code: llm.CodeNetwork, Message: "the stream ended before the response finished"}
		}
	}
	return llm.Event{Type: llm.EventError, Err: fail}
}
