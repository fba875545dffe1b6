// Package anthropic is rein's adapter for the Anthropic Messages API with
// streaming: text, extended thinking (with signatures sent back), tool use
// streamed as input_json_delta, and prompt caching with cache_control
// breakpoints on the stable prefix.
//
// The wire request is built only from the llm.Request, whose slices are
// never modified. Every failure ends the stream with one llm.EventError
// carrying a code (see llm/sse for the HTTP and transport mapping).
//
// A Provider is safe for concurrent use; each Stream call is independent.
// It imports llm and llm/sse only; it must not import agent, session or
// any other adapter.
package anthropic

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

// Version is the anthropic-version header value.
const Version = "2023-06-01"

// DefaultMaxTokens is max_tokens when neither the request nor the Config
// sets it (the API requires one).
const DefaultMaxTokens = 8192

// Config configures a Provider.
type Config struct {
	// Name is the provider name. Default "anthropic".
	Name string
	// BaseURL is the API root; "/v1/messages" is appended. Default
	// "https://api.anthropic.com".
	BaseURL string
	// APIKey is sent as x-api-key.
	APIKey string
	// HTTPClient sends requests. Default http.DefaultClient.
	HTTPClient *http.Client
	// IdleTimeout abandons a response that sends nothing for this long.
	// Default sse.DefaultIdleTimeout (90s).
	IdleTimeout time.Duration
	// MaxTokens is max_tokens when the request has none. Default
	// DefaultMaxTokens.
	MaxTokens int
	// NoCache turns off cache_control breakpoints.
	NoCache bool
	// Headers are added to every request (e.g. anthropic-beta).
	Headers map[string]string
}

// Provider streams Messages API responses.
type Provider struct {
	cfg Config
}

// New returns a Provider for cfg.
func New(cfg Config) *Provider {
	if cfg.Name == "" {
		cfg.Name = "anthropic"
	}
	if cfg.BaseURL == "" {
		cfg.BaseURL = "https://api.anthropic.com"
	}
	cfg.BaseURL = strings.TrimSuffix(strings.TrimRight(cfg.BaseURL, "/"), "/v1")
	if cfg.MaxTokens <= 0 {
		cfg.MaxTokens = DefaultMaxTokens
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
		h := map[string]string{"Anthropic-Version": Version}
		if p.cfg.APIKey != "" {
			h["X-Api-Key"] = p.cfg.APIKey
		}
		for k, v := range p.cfg.Headers {
			h[k] = v
		}
		s, e := sse.Post(ctx, p.cfg.HTTPClient, p.cfg.BaseURL+"/v1/messages", body, h, p.cfg.IdleTimeout)
		if e != nil {
			yield(llm.Event{Type: llm.EventError, Err: e})
			return
		}
		defer s.Close()
		st := state{blocks: map[int]*block{}}
		for {
			ev, err := s.Next()
			if err != nil {
				fail := s.Fail(err)
				if err == io.EOF && fail.Code == llm.CodeNetwork {
					if st.stopped {
						emit(yield, st.done())
						return
					}
					if !st.content {
						fail = &llm.Error{Code: llm.CodeEmptyResponse, Message: "the stream ended without content"}
					} else {
						fail = &llm.Error{Code: llm.CodeNetwork, Message: "the stream ended before message_stop"}
					}
				}
				yield(llm.Event{Type: llm.EventError, Err: fail})
				return
			}
			var m event
			if err := json.Unmarshal([]byte(ev.Data), &m); err != nil {
				yield(llm.Event{Type: llm.EventError, Err: &llm.Error{Code: llm.CodeMalformedStream, Message: fmt.Sprintf("bad %s event %.200q: %v", ev.Type, ev.Data, err)}})
				return
			}
			if m.Type == "" {
				m.Type = ev.Type
			}
			deltas, term := st.apply(&m)
			for _, d := range deltas {
				if !yield(llm.Event{Type: llm.EventDelta, Delta: d}) {
					return
				}
			}
			if term != nil {
				emit(yield, term)
				return
			}
		}
	}
}

func emit(yield func(llm.Event) bool, evs []llm.Event) {
	for _, ev := range evs {
		if !yield(ev) {
			return
		}
	}
}

// event is one Messages stream event; fields are filled per type.
type event struct {
	Type    string `json:"type"`
	Message *struct {
		Usage usage `json:"usage"`
	} `json:"message"`
	Index        int `json:"index"`
	ContentBlock *struct {
		Type  string          `json:"type"`
		Text  string          `json:"text"`
		ID    string          `json:"id"`
		Name  string          `json:"name"`
		Input json.RawMessage `json:"input"`
	} `json:"content_block"`
	Delta *struct {
		Type        string  `json:"type"`
		Text        string  `json:"text"`
		Thinking    string  `json:"thinking"`
		Signature   string  `json:"signature"`
		PartialJSON string  `json:"partial_json"`
		StopReason  *string `json:"stop_reason"`
	} `json:"delta"`
	Usage *usage         `json:"usage"`
	Error *sse.ErrorBody `json:"error"`
}

type usage struct {
	InputTokens              *int `json:"input_tokens"`
	OutputTokens             *int `json:"output_tokens"`
	CacheCreationInputTokens *int `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     *int `json:"cache_read_input_tokens"`
}

// block is a content block of the response.
type block struct {
	typ   string
	tool  int // rein tool call index for tool_use blocks
	bytes int // input_json bytes seen
}

type state struct {
	blocks  map[int]*block
	tools   int
	content bool // a text or tool_use block arrived
	stop    string
	stopped bool

	input, output, cacheRead, cacheWrite int
}

func (st *state) usage(u *usage) {
	if u == nil {
		return
	}
	// message_delta usage is cumulative; later values replace earlier ones.
	if u.InputTokens != nil {
		st.input = *u.InputTokens
	}
	if u.OutputTokens != nil {
		st.output = *u.OutputTokens
	}
	if u.CacheCreationInputTokens != nil {
		st.cacheWrite = *u.CacheCreationInputTokens
	}
	if u.CacheReadInputTokens != nil {
		st.cacheRead = *u.CacheReadInputTokens
	}
}

// apply folds one event into the state and returns its deltas and, when
// the event ends the stream, the terminal events.
func (st *state) apply(m *event) ([]llm.Delta, []llm.Event) {
	switch m.Type {
	case "message_start":
		if m.Message != nil {
			st.usage(&m.Message.Usage)
		}
	case "content_block_start":
		cb := m.ContentBlock
		if cb == nil {
			return nil, malformed("content_block_start without content_block")
		}
		b := &block{typ: cb.Type}
		st.blocks[m.Index] = b
		switch cb.Type {
		case "text":
			st.content = true
			if cb.Text != "" {
				return []llm.Delta{{Text: cb.Text}}, nil
			}
		case "tool_use":
			st.content = true
			b.tool = st.tools
			st.tools++
			return []llm.Delta{{ToolCall: &llm.ToolCallDelta{Index: b.tool, ID: cb.ID, Name: cb.Name}}}, nil
		}
	case "content_block_delta":
		d := m.Delta
		b := st.blocks[m.Index]
		if d == nil || b == nil {
			return nil, malformed(fmt.Sprintf("content_block_delta for unknown block %d", m.Index))
		}
		switch d.Type {
		case "text_delta":
			if d.Text != "" {
				return []llm.Delta{{Text: d.Text}}, nil
			}
		case "thinking_delta":
			if d.Thinking != "" {
				return []llm.Delta{{Reasoning: d.Thinking}}, nil
			}
		case "signature_delta":
			if d.Signature != "" {
				return []llm.Delta{{Signature: d.Signature}}, nil
			}
		case "input_json_delta":
			if b.typ != "tool_use" {
				return nil, malformed(fmt.Sprintf("input_json_delta for a %s block", b.typ))
			}
			if d.PartialJSON != "" {
				b.bytes += len(d.PartialJSON)
				return []llm.Delta{{ToolCall: &llm.ToolCallDelta{Index: b.tool, Arguments: d.PartialJSON}}}, nil
			}
		}
	case "content_block_stop":
		// A tool without parameters may stream no input at all.
		if b := st.blocks[m.Index]; b != nil && b.typ == "tool_use" && b.bytes == 0 {
			b.bytes = 2
			return []llm.Delta{{ToolCall: &llm.ToolCallDelta{Index: b.tool, Arguments: "{}"}}}, nil
		}
	case "message_delta":
		st.usage(m.Usage)
		if m.Delta != nil && m.Delta.StopReason != nil {
			st.stop = *m.Delta.StopReason
		}
	case "message_stop":
		st.stopped = true
		return nil, st.done()
	case "error":
		eb := sse.ErrorBody{Message: "error event"}
		if m.Error != nil {
			eb = *m.Error
		}
		return nil, []llm.Event{{Type: llm.EventError, Err: sse.StreamError(eb)}}
	}
	// ping and unknown event types are ignored, as the API's versioning
	// policy asks.
	return nil, nil
}

func malformed(msg string) []llm.Event {
	return []llm.Event{{Type: llm.EventError, Err: &llm.Error{Code: llm.CodeMalformedStream, Message: msg}}}
}

// done maps the stop reason. Usage: Input counts every prompt token,
// cache reads and writes included, so it compares with the context window;
// CacheRead and CacheWrite are parts of it.
func (st *state) done() []llm.Event {
	if !st.content && st.stop != "max_tokens" {
		return []llm.Event{{Type: llm.EventError, Err: &llm.Error{Code: llm.CodeEmptyResponse, Message: "the model returned no text and no tool call"}}}
	}
	var f llm.Finish
	switch st.stop {
	case "end_turn", "stop_sequence", "pause_turn", "":
		f = llm.FinishStop
	case "tool_use":
		f = llm.FinishToolCalls
	case "max_tokens", "model_context_window_exceeded":
		f = llm.FinishMaxTokens
	default: // refusal and unknown reasons
		f = llm.FinishError
	}
	if f == llm.FinishStop && st.tools > 0 {
		f = llm.FinishToolCalls
	}
	u := llm.Usage{
		Input:      st.input + st.cacheRead + st.cacheWrite,
		Output:     st.output,
		CacheRead:  st.cacheRead,
		CacheWrite: st.cacheWrite,
	}
	return []llm.Event{{Type: llm.EventDone, Finish: f, Usage: u}}
}
