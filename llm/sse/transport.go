package sse

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/reinhq/rein/llm"
	"github.com/reinhq/rein/llm/wire"
	"github.com/reinhq/rein/redact"
)

// DefaultIdleTimeout is the idle-stream watchdog used when a caller gives
// none: a response that sends no byte for this long is abandoned.
const DefaultIdleTimeout = 90 * time.Second

// maxErrorBody bounds how much of a non-2xx response body is read.
const maxErrorBody = 64 << 10

// Watchdog cancels a request when neither headers nor body bytes arrive for
// its idle duration. Every successful read through Body re-arms it.
type Watchdog struct {
	idle  time.Duration
	timer *time.Timer
	fired atomic.Bool
}

// NewWatchdog arms a watchdog that calls cancel after idle without
// progress. idle <= 0 means DefaultIdleTimeout.
func NewWatchdog(idle time.Duration, cancel context.CancelFunc) *Watchdog {
	if idle <= 0 {
		idle = DefaultIdleTimeout
	}
	w := &Watchdog{idle: idle}
	w.timer = time.AfterFunc(idle, func() {
		w.fired.Store(true)
		cancel()
	})
	return w
}

// Fired reports whether the watchdog gave up on the stream.
func (w *Watchdog) Fired() bool { return w.fired.Load() }

// Stop disarms the watchdog.
func (w *Watchdog) Stop() { w.timer.Stop() }

// Idle is the watchdog's idle duration.
func (w *Watchdog) Idle() time.Duration { return w.idle }

// Body wraps rc so that each read that returns data re-arms the watchdog.
func (w *Watchdog) Body(rc io.ReadCloser) io.ReadCloser { return &watchedBody{rc, w} }

type watchedBody struct {
	io.ReadCloser
	w *Watchdog
}

func (b *watchedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if n > 0 && !b.w.fired.Load() {
		b.w.timer.Reset(b.w.idle)
	}
	return n, err
}

// Stream is an open event-stream response.
type Stream struct {
	*Reader
	parent context.Context
	cancel context.CancelFunc
	wd     *Watchdog
	body   io.ReadCloser
	// Header is the response header.
	Header http.Header
}

// Open sends req (whose context is replaced by one derived from ctx) and
// returns its event stream when the status is 2xx. Any other status, and any
// failure to get a response, is returned as a normalised *llm.Error; the
// stream is then nil. The caller must Close a returned Stream.
func Open(ctx context.Context, client *http.Client, req *http.Request, idle time.Duration) (*Stream, *llm.Error) {
	if client == nil {
		client = http.DefaultClient
	}
	rctx, cancel := context.WithCancel(ctx)
	wd := NewWatchdog(idle, cancel)
	resp, err := client.Do(req.WithContext(rctx))
	if err != nil {
		wd.Stop()
		cancel()
		return nil, transportError(ctx, wd, err)
	}
	body := wd.Body(resp.Body)
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		data, rerr := io.ReadAll(io.LimitReader(body, maxErrorBody))
		body.Close()
		wd.Stop()
		cancel()
		if rerr != nil && len(data) == 0 && (wd.Fired() || ctx.Err() != nil) {
			return nil, transportError(ctx, wd, rerr)
		}
		return nil, HTTPError(resp.StatusCode, data, resp.Header, time.Now())
	}
	return &Stream{Reader: NewReader(body), parent: ctx, cancel: cancel, wd: wd, body: body, Header: resp.Header}, nil
}

// Post sends body as a JSON POST to url asking for an event stream, with
// the extra headers (an API key, a version), and opens its stream as Open
// does. A request that cannot be built is an invalid-request error.
//
// The body is written segment by segment, with its length known up front,
// never joined into one buffer; net/http re-reads it from its start
// (GetBody) when it must resend the request on a new connection.
func Post(ctx context.Context, client *http.Client, url string, body wire.Body, headers map[string]string, idle time.Duration) (*Stream, *llm.Error) {
	req, err := http.NewRequest(http.MethodPost, url, nil)
	if err != nil {
		return nil, &llm.Error{Code: llm.CodeInvalidRequest, Message: err.Error()}
	}
	req.ContentLength = body.Len()
	req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(body.Reader()), nil }
	req.Body, _ = req.GetBody()
	if req.ContentLength == 0 {
		req.Body, req.GetBody = http.NoBody, func() (io.ReadCloser, error) { return http.NoBody, nil }
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	st, e := Open(ctx, client, req, idle)
	if e != nil {
		// A server (or a proxy) may echo the credential it refused.
		e.Message = redact.New(credentials(headers)...).String(e.Message)
	}
	return st, e
}

// credentials returns the secret values among request headers: the token
// of Authorization and the values of headers named like a key or token.
func credentials(headers map[string]string) []string {
	var out []string
	for k, v := range headers {
		lk := strings.ToLower(k)
		switch {
		case lk == "authorization":
			if _, tok, ok := strings.Cut(v, " "); ok {
				v = tok
			}
			out = append(out, v)
		case strings.Contains(lk, "key"), strings.Contains(lk, "token"), strings.Contains(lk, "secret"):
			out = append(out, v)
		}
	}
	return out
}

// Close releases the response and disarms the watchdog. It is idempotent.
func (s *Stream) Close() {
	s.wd.Stop()
	s.cancel()
	s.body.Close()
}

// Fail classifies an error returned by Next: cancellation of the caller's
// context, the watchdog, an oversized event, a cut stream.
func (s *Stream) Fail(err error) *llm.Error { return transportError(s.parent, s.wd, err) }

// transportError classifies a failure to talk to the provider.
func transportError(ctx context.Context, wd *Watchdog, err error) *llm.Error {
	switch {
	case wd != nil && wd.Fired():
		return &llm.Error{Code: llm.CodeTimeout, Message: fmt.Sprintf("no data from the provider for %s", wd.idle)}
	case ctx.Err() != nil:
		e := llm.AsError(ctx.Err())
		return e
	case errors.Is(err, ErrEventTooLarge):
		return &llm.Error{Code: llm.CodeMalformedStream, Message: err.Error()}
	case errors.Is(err, io.ErrUnexpectedEOF):
		return &llm.Error{Code: llm.CodeNetwork, Message: "stream ended inside an event"}
	}
	return &llm.Error{Code: llm.CodeNetwork, Message: err.Error()}
}

// ErrorBody is the error object both OpenAI-compatible servers and Anthropic
// put in a failed response or an in-stream error event:
// {"error":{"type","code","message"}}. Some servers (Ollama) send
// {"error":"text"}; UnmarshalJSON accepts that too.
type ErrorBody struct {
	Type    string
	Code    string
	Message string
	Param   string
}

// UnmarshalJSON accepts an object with type/code/message or a bare string.
func (e *ErrorBody) UnmarshalJSON(b []byte) error {
	var s string
	if json.Unmarshal(b, &s) == nil {
		e.Message = s
		return nil
	}
	var o struct {
		Type    string          `json:"type"`
		Code    json.RawMessage `json:"code"`
		Message string          `json:"message"`
		Param   string          `json:"param"`
	}
	if err := json.Unmarshal(b, &o); err != nil {
		return err
	}
	e.Type, e.Message, e.Param = o.Type, o.Message, o.Param
	if len(o.Code) > 0 && string(o.Code) != "null" {
		var cs string
		if json.Unmarshal(o.Code, &cs) == nil {
			e.Code = cs
		} else {
			e.Code = string(o.Code)
		}
	}
	return nil
}

// parseErrorBody extracts the error object from a response body.
func parseErrorBody(body []byte) ErrorBody {
	var env struct {
		Error   *ErrorBody `json:"error"`
		Message string     `json:"message"`
		Detail  string     `json:"detail"`
	}
	if json.Unmarshal(body, &env) == nil {
		if env.Error != nil && (env.Error.Message != "" || env.Error.Type != "" || env.Error.Code != "") {
			return *env.Error
		}
		if env.Message != "" {
			return ErrorBody{Message: env.Message}
		}
		if env.Detail != "" {
			return ErrorBody{Message: env.Detail}
		}
	}
	text := strings.TrimSpace(string(body))
	if len(text) > 500 {
		text = text[:500] + "…"
	}
	return ErrorBody{Message: text}
}

// HTTPError normalises a non-2xx response: 401/403/402 are auth, 429 is
// rate-limit (insufficient quota is auth: waiting does not help), 413 and a
// 4xx whose message says the context or prompt is too long are
// context-overflow, 408 is timeout, other 4xx invalid-request, 503 and 529
// overloaded, other 5xx server. RetryAfter is parsed from the headers at now.
func HTTPError(status int, body []byte, h http.Header, now time.Time) *llm.Error {
	eb := parseErrorBody(body)
	msg := eb.Message
	if msg == "" {
		msg = http.StatusText(status)
	}
	if msg == "" {
		msg = fmt.Sprintf("HTTP status %d", status)
	}
	if eb.Type != "" && !strings.Contains(msg, eb.Type) {
		msg = eb.Type + ": " + msg
	}
	e := &llm.Error{Message: msg, Status: status, RetryAfter: RetryAfter(h, now)}
	if e.RetryAfter == 0 && status == http.StatusTooManyRequests {
		e.RetryAfter = RateLimitReset(h, now)
	}
	e.Code = classify(status, eb)
	return e
}

// StreamError normalises an error object received inside a 200 stream
// (Anthropic's "error" event, an OpenAI-compatible chunk with "error").
func StreamError(eb ErrorBody) *llm.Error {
	msg := eb.Message
	if eb.Type != "" && !strings.Contains(msg, eb.Type) {
		msg = eb.Type + ": " + msg
	}
	code := classify(0, eb)
	if code == llm.CodeUnknown {
		code = llm.CodeServer
	}
	return &llm.Error{Code: code, Message: msg}
}

func classify(status int, eb ErrorBody) llm.Code {
	kind := strings.ToLower(eb.Type + " " + eb.Code)
	switch {
	case strings.Contains(kind, "insufficient_quota"), strings.Contains(kind, "billing"):
		return llm.CodeAuth
	case IsContextOverflow(eb):
		return llm.CodeContextOverflow
	case strings.Contains(kind, "overloaded"):
		return llm.CodeOverloaded
	}
	switch {
	case status == 401 || status == 403 || status == 402:
		return llm.CodeAuth
	case status == 429:
		return llm.CodeRateLimit
	case status == 413:
		return llm.CodeContextOverflow
	case status == 408:
		return llm.CodeTimeout
	case status == 503 || status == 529:
		return llm.CodeOverloaded
	case status >= 400 && status < 500:
		return llm.CodeInvalidRequest
	case status >= 500 && status < 600:
		return llm.CodeServer
	}
	// In-stream errors carry no status: classify by the documented types.
	switch {
	case strings.Contains(kind, "rate_limit"):
		return llm.CodeRateLimit
	case strings.Contains(kind, "authentication"), strings.Contains(kind, "permission"):
		return llm.CodeAuth
	case strings.Contains(kind, "invalid_request"), strings.Contains(kind, "not_found"):
		return llm.CodeInvalidRequest
	case strings.Contains(kind, "api_error"), strings.Contains(kind, "server_error"):
		return llm.CodeServer
	case strings.Contains(kind, "timeout"):
		return llm.CodeTimeout
	}
	return llm.CodeUnknown
}

// overflowPhrases are the documented (or observed and stable) messages of
// context-length errors: OpenAI and vLLM "maximum context length",
// DeepSeek "reduce the length of the messages", Anthropic "prompt is too
// long" and "input length and `max_tokens` exceed context limit", the
// Responses API "exceeds the context window", llama.cpp "exceeds the
// available context size".
var overflowPhrases = []string{
	"context_length_exceeded",
	"maximum context length",
	"context length exceeded",
	"context window",
	"prompt is too long",
	"exceed context limit",
	"exceeds the available context size",
	"exceed_context_size",
	"reduce the length of the messages",
	"too many input tokens",
	"input is too long",
}

// IsContextOverflow reports whether an error object says the request is
// larger than the model's context window.
func IsContextOverflow(eb ErrorBody) bool {
	s := strings.ToLower(eb.Type + " " + eb.Code + " " + eb.Message)
	for _, p := range overflowPhrases {
		if strings.Contains(s, p) {
			return true
		}
	}
	return false
}

// RetryAfter reads the provider's requested wait: retry-after-ms (OpenAI)
// or Retry-After in seconds or as an HTTP date (RFC 9110 §10.2.3). It
// returns 0 when neither is present or parseable.
func RetryAfter(h http.Header, now time.Time) time.Duration {
	if h == nil {
		return 0
	}
	if v := strings.TrimSpace(h.Get("Retry-After-Ms")); v != "" {
		if ms, err := strconv.ParseFloat(v, 64); err == nil && ms > 0 && ms < math.MaxInt32 {
			return time.Duration(ms * float64(time.Millisecond))
		}
	}
	if v := strings.TrimSpace(h.Get("Retry-After")); v != "" {
		if s, err := strconv.ParseFloat(v, 64); err == nil {
			if s > 0 && s < math.MaxInt32 {
				return time.Duration(s * float64(time.Second))
			}
			return 0
		}
		if t, err := http.ParseTime(v); err == nil {
			if d := t.Sub(now); d > 0 {
				return d
			}
			return 0
		}
	}
	return 0
}

// RateLimitReset is the fallback for a 429 without Retry-After: the latest
// of the rate-limit reset headers (OpenAI's x-ratelimit-reset-* durations
// such as "6m0s", Anthropic's anthropic-ratelimit-*-reset RFC 3339 times).
func RateLimitReset(h http.Header, now time.Time) time.Duration {
	if h == nil {
		return 0
	}
	var best time.Duration
	for _, k := range []string{"X-Ratelimit-Reset-Requests", "X-Ratelimit-Reset-Tokens"} {
		if d, err := time.ParseDuration(strings.TrimSpace(h.Get(k))); err == nil && d > best {
			best = d
		}
	}
	for _, k := range []string{"Anthropic-Ratelimit-Requests-Reset", "Anthropic-Ratelimit-Tokens-Reset", "Anthropic-Ratelimit-Input-Tokens-Reset", "Anthropic-Ratelimit-Output-Tokens-Reset"} {
		if t, err := time.Parse(time.RFC3339, strings.TrimSpace(h.Get(k))); err == nil {
			if d := t.Sub(now); d > best {
				best = d
			}
		}
	}
	return best
}
