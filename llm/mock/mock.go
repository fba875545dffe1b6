// Package mock is a fault-injecting model server for tests and manual runs.
// It speaks the OpenAI Chat Completions streaming dialect (POST
// …/chat/completions) and the Anthropic Messages streaming dialect (POST
// …/messages), and answers each request with the next Reply of a Script:
// a normal reply (reasoning, text, tool calls, split into small fragments at
// awkward places) or a fault (connection reset mid-stream, stall, malformed
// JSON, 429 with Retry-After, 500, 529, context overflow, empty response,
// 401, an in-stream error event).
//
// A Handler is safe for concurrent use; replies are handed out in request
// order. It imports only the standard library and llm, and must not import
// an adapter (tests of this package use them from outside).
package mock

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/reinhq/rein/llm"
)

// Fault is a failure the mock injects.
type Fault string

const (
	// FaultNone sends the reply normally.
	FaultNone Fault = ""
	// FaultReset sends After events, then resets the connection.
	FaultReset Fault = "reset"
	// FaultStall sends After events, then sends nothing until the client
	// goes away (so the client's idle watchdog fires) or the server closes.
	FaultStall Fault = "stall"
	// FaultMalformed sends After events, then an event with broken JSON.
	FaultMalformed Fault = "malformed"
	// FaultStreamError sends After events, then an in-stream overloaded
	// error (Anthropic "error" event, OpenAI-compatible error chunk).
	FaultStreamError Fault = "stream-error"
	// FaultRateLimit answers 429 with Retry-After and retry-after-ms.
	FaultRateLimit Fault = "rate-limit"
	// FaultServer answers 500.
	FaultServer Fault = "server"
	// FaultOverloaded answers 529 (overloaded_error).
	FaultOverloaded Fault = "overloaded"
	// FaultContextOverflow answers 400 with the dialect's documented
	// context-length message.
	FaultContextOverflow Fault = "context-overflow"
	// FaultAuth answers 401.
	FaultAuth Fault = "auth"
	// FaultEmpty answers a 200 stream that finishes with no content.
	FaultEmpty Fault = "empty"
)

// Duration is a time.Duration that reads JSON strings like "1.5s".
type Duration time.Duration

// UnmarshalJSON accepts "250ms"-style strings and numbers of milliseconds.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if json.Unmarshal(b, &s) == nil {
		v, err := time.ParseDuration(s)
		*d = Duration(v)
		return err
	}
	var ms float64
	if err := json.Unmarshal(b, &ms); err != nil {
		return fmt.Errorf("mock: duration %s: want a string like \"1s\" or milliseconds", b)
	}
	*d = Duration(ms * float64(time.Millisecond))
	return nil
}

// MarshalJSON writes the duration as a string.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

// Reply is the answer to one request.
type Reply struct {
	Fault Fault `json:"fault,omitempty"`
	// RetryAfter is sent with rate-limit and overloaded faults.
	RetryAfter Duration `json:"retryAfter,omitempty"`
	// After is how many stream events a mid-stream fault sends first;
	// 0 means half of the reply's events.
	After int `json:"after,omitempty"`

	Reasoning string `json:"reasoning,omitempty"`
	// Signature closes the reasoning (Anthropic dialect only).
	Signature string         `json:"signature,omitempty"`
	Text      string         `json:"text,omitempty"`
	ToolCalls []llm.ToolCall `json:"toolCalls,omitempty"`
	// Finish defaults to tool-calls when there are tool calls, else stop.
	Finish llm.Finish `json:"finish,omitempty"`
	Usage  llm.Usage  `json:"usage,omitempty"`
	// Split is the fragment size in bytes of streamed text, reasoning and
	// arguments; default 3, which cuts words, JSON keys and escapes.
	Split int `json:"split,omitempty"`
	// Delay is slept before each event.
	Delay Duration `json:"delay,omitempty"`
}

// Script is the mock's list of replies.
type Script struct {
	Replies []Reply `json:"replies"`
	// Loop starts over when the replies run out; otherwise an extra request
	// gets a 400 "script exhausted".
	Loop bool `json:"loop,omitempty"`
}

// LoadScript reads a JSON Script.
func LoadScript(path string) (Script, error) {
	var s Script
	b, err := os.ReadFile(path)
	if err != nil {
		return s, err
	}
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s); err != nil {
		return s, fmt.Errorf("mock: script %s: %w", path, err)
	}
	return s, nil
}

// Request is a request the mock received.
type Request struct {
	Dialect string // "openai" or "anthropic"
	Path    string
	Header  http.Header
	Body    []byte
}

// Handler serves a Script.
type Handler struct {
	mu       sync.Mutex
	script   Script
	next     int
	requests []Request
	stop     chan struct{}
	stopOnce sync.Once
}

// NewHandler returns a Handler serving script.
func NewHandler(script Script) *Handler {
	return &Handler{script: script, stop: make(chan struct{})}
}

// Requests returns the requests received so far, in order.
func (h *Handler) Requests() []Request {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]Request(nil), h.requests...)
}

// Append adds replies to the script.
func (h *Handler) Append(r ...Reply) {
	h.mu.Lock()
	h.script.Replies = append(h.script.Replies, r...)
	h.mu.Unlock()
}

// Release ends every stalled reply.
func (h *Handler) Release() { h.stopOnce.Do(func() { close(h.stop) }) }

func (h *Handler) take(req Request) (Reply, int, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.requests = append(h.requests, req)
	n := len(h.requests)
	if h.next >= len(h.script.Replies) {
		if !h.script.Loop || len(h.script.Replies) == 0 {
			return Reply{}, n, false
		}
		h.next = 0
	}
	r := h.script.Replies[h.next]
	h.next++
	return r, n, true
}

// ServeHTTP implements http.Handler.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var d dialect
	switch {
	case r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/chat/completions"):
		d = openaiDialect{}
	case r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/messages"):
		d = anthropicDialect{}
	default:
		http.NotFound(w, r)
		return
	}
	body, _ := io.ReadAll(r.Body)
	reply, n, ok := h.take(Request{Dialect: d.name(), Path: r.URL.Path, Header: r.Header.Clone(), Body: body})
	if !ok {
		writeError(w, d, http.StatusBadRequest, "invalid_request_error", fmt.Sprintf("mock: script exhausted at request %d", n))
		return
	}
	switch reply.Fault {
	case FaultRateLimit, FaultOverloaded:
		if ra := time.Duration(reply.RetryAfter); ra > 0 {
			w.Header().Set("Retry-After", strconv.Itoa(int((ra+time.Second-1)/time.Second)))
			w.Header().Set("Retry-After-Ms", strconv.FormatInt(ra.Milliseconds(), 10))
		}
		if reply.Fault == FaultRateLimit {
			writeError(w, d, http.StatusTooManyRequests, "rate_limit_error", "mock: rate limit reached")
		} else {
			writeError(w, d, 529, "overloaded_error", "Overloaded")
		}
		return
	case FaultServer:
		writeError(w, d, http.StatusInternalServerError, "api_error", "mock: internal server error")
		return
	case FaultAuth:
		writeError(w, d, http.StatusUnauthorized, "authentication_error", "mock: invalid api key")
		return
	case FaultContextOverflow:
		writeError(w, d, http.StatusBadRequest, "invalid_request_error", d.overflowMessage())
		return
	}

	var frames []string
	if reply.Fault == FaultEmpty {
		frames = d.empty()
	} else {
		frames = d.frames(&reply)
	}
	cut := len(frames)
	switch reply.Fault {
	case FaultReset, FaultStall, FaultMalformed, FaultStreamError:
		cut = reply.After
		if cut <= 0 {
			cut = len(frames) / 2
		}
		cut = min(cut, len(frames))
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	for _, f := range frames[:cut] {
		if !h.sleep(r, time.Duration(reply.Delay)) {
			return
		}
		io.WriteString(w, f)
		rc.Flush()
	}
	switch reply.Fault {
	case FaultReset:
		conn, _, err := rc.Hijack()
		if err != nil {
			return
		}
		if tc, ok := conn.(*net.TCPConn); ok {
			tc.SetLinger(0) // RST instead of FIN
		}
		conn.Close()
	case FaultStall:
		select {
		case <-r.Context().Done():
		case <-h.stop:
		}
	case FaultMalformed:
		io.WriteString(w, d.malformed())
		rc.Flush()
	case FaultStreamError:
		io.WriteString(w, d.streamError())
		rc.Flush()
	}
}

func (h *Handler) sleep(r *http.Request, d time.Duration) bool {
	if d <= 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-r.Context().Done():
	case <-h.stop:
	}
	return false
}

func writeError(w http.ResponseWriter, d dialect, status int, typ, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	io.WriteString(w, d.errorBody(typ, msg))
}

// Server is a Handler listening on a local port.
type Server struct {
	*Handler
	// URL is the server root, e.g. "http://127.0.0.1:41234". OpenAI
	// clients use URL+"/v1", Anthropic clients URL.
	URL string
	srv *http.Server
	ln  net.Listener
	wg  sync.WaitGroup
}

// Start serves script on 127.0.0.1 at a free port.
func Start(script Script) (*Server, error) { return Listen("127.0.0.1:0", script) }

// Listen serves script on addr in the background.
func Listen(addr string, script Script) (*Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	s := &Server{Handler: NewHandler(script), URL: "http://" + ln.Addr().String(), ln: ln}
	s.srv = &http.Server{Handler: s.Handler, ReadHeaderTimeout: 10 * time.Second}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		s.srv.Serve(ln)
	}()
	return s, nil
}

// Close releases stalled replies, closes every connection and waits for
// the server to stop.
func (s *Server) Close() error {
	s.Release()
	err := s.srv.Close()
	s.wg.Wait()
	return err
}

// ListenAndServe serves script on addr until the server fails.
func ListenAndServe(addr string, script Script) error {
	h := NewHandler(script)
	srv := &http.Server{Addr: addr, Handler: h, ReadHeaderTimeout: 10 * time.Second}
	err := srv.ListenAndServe()
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// fragments cuts s into pieces of n bytes (never inside a UTF-8 sequence).
func fragments(s string, n int) []string {
	if n <= 0 {
		n = 3
	}
	var out []string
	for len(s) > 0 {
		k := min(n, len(s))
		for k < len(s) && !utf8Start(s[k]) {
			k++
		}
		out = append(out, s[:k])
		s = s[k:]
	}
	return out
}

func utf8Start(b byte) bool { return b&0xC0 != 0x80 }

func finishOf(r *Reply) llm.Finish {
	if r.Finish != "" {
		return r.Finish
	}
	if len(r.ToolCalls) > 0 {
		return llm.FinishToolCalls
	}
	return llm.FinishStop
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}
