package sse

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	"github.com/reinhq/rein/llm"
	"github.com/reinhq/rein/llm/wire"
)

func readAll(t *testing.T, r io.Reader) ([]Event, error) {
	t.Helper()
	rd := NewReader(r)
	var evs []Event
	for {
		ev, err := rd.Next()
		if err != nil {
			if err == io.EOF {
				return evs, nil
			}
			return evs, err
		}
		evs = append(evs, ev)
	}
}

func TestReaderFraming(t *testing.T) {
	in := ": comment\n" +
		"event: message_start\ndata: {\"a\":1}\n\n" +
		"data: line1\r\ndata:line2\r\n\r\n" + // CRLF, no space after colon
		"data: cr\r\r" + // lone CR
		"id: 7\nevent: x\n\n" + // no data: not dispatched
		"data\n\n" + // field with no colon: empty data
		"data: [DONE]\n\n"
	evs, err := readAll(t, iotest.OneByteReader(strings.NewReader(in)))
	if err != nil {
		t.Fatal(err)
	}
	want := []Event{
		{Type: "message_start", Data: `{"a":1}`},
		{Data: "line1\nline2"},
		{Data: "cr"},
		{Data: "", ID: "7"},
		{Data: "[DONE]", ID: "7"},
	}
	if len(evs) != len(want) {
		t.Fatalf("got %d events %q, want %d", len(evs), evs, len(want))
	}
	for i := range want {
		if evs[i] != want[i] {
			t.Errorf("event %d = %+v, want %+v", i, evs[i], want[i])
		}
	}
}

func TestReaderCutInsideEvent(t *testing.T) {
	evs, err := readAll(t, strings.NewReader("data: a\n\ndata: {\"choi"))
	if !errors.Is(err, io.ErrUnexpectedEOF) || len(evs) != 1 {
		t.Fatalf("got %v, %v; want one event and ErrUnexpectedEOF", evs, err)
	}
	// A trailing comment is not a cut event.
	if _, err := readAll(t, strings.NewReader("data: a\n\n: keepalive\n")); err != nil {
		t.Fatalf("trailing comment: %v", err)
	}
}

func TestReaderTooLarge(t *testing.T) {
	big := "data: " + strings.Repeat("x", MaxEventSize+10) + "\n\n"
	_, err := readAll(t, strings.NewReader(big))
	if !errors.Is(err, ErrEventTooLarge) {
		t.Fatalf("err = %v, want ErrEventTooLarge", err)
	}
}

func TestRetryAfter(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	cases := []struct {
		h    http.Header
		want time.Duration
	}{
		{http.Header{"Retry-After": {"3"}}, 3 * time.Second},
		{http.Header{"Retry-After": {"1.5"}}, 1500 * time.Millisecond},
		{http.Header{"Retry-After": {now.Add(7 * time.Second).Format(http.TimeFormat)}}, 7 * time.Second},
		{http.Header{"Retry-After": {"soon"}}, 0},
		{http.Header{"Retry-After": {"-4"}}, 0},
		{http.Header{"Retry-After-Ms": {"250"}, "Retry-After": {"1"}}, 250 * time.Millisecond},
		{nil, 0},
	}
	for _, c := range cases {
		if got := RetryAfter(c.h, now); got != c.want {
			t.Errorf("RetryAfter(%v) = %v, want %v", c.h, got, c.want)
		}
	}
	h := http.Header{
		"X-Ratelimit-Reset-Requests":         {"1s"},
		"X-Ratelimit-Reset-Tokens":           {"6m0s"},
		"Anthropic-Ratelimit-Requests-Reset": {now.Add(20 * time.Second).Format(time.RFC3339)},
	}
	if got := RateLimitReset(h, now); got != 6*time.Minute {
		t.Errorf("RateLimitReset = %v, want 6m", got)
	}
	// The reset headers are a fallback for 429 only.
	if e := HTTPError(500, nil, h, now); e.RetryAfter != 0 {
		t.Errorf("500 RetryAfter = %v, want 0", e.RetryAfter)
	}
	if e := HTTPError(429, nil, h, now); e.RetryAfter != 6*time.Minute {
		t.Errorf("429 RetryAfter = %v, want 6m", e.RetryAfter)
	}
}

func TestHTTPErrorCodes(t *testing.T) {
	cases := []struct {
		status int
		body   string
		want   llm.Code
	}{
		{401, `{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}`, llm.CodeAuth},
		{403, `{"error":{"message":"forbidden"}}`, llm.CodeAuth},
		{402, `{"error":{"message":"Insufficient Balance","type":"unknown_error"}}`, llm.CodeAuth},
		{429, `{"error":{"message":"Rate limit reached","type":"requests","code":"rate_limit_exceeded"}}`, llm.CodeRateLimit},
		{429, `{"error":{"message":"You exceeded your current quota","type":"insufficient_quota","code":"insufficient_quota"}}`, llm.CodeAuth},
		{400, `{"error":{"message":"This model's maximum context length is 131072 tokens. However, you requested 140000 tokens (140000 in the messages, 0 in the completion). Please reduce the length of the messages or completion.","type":"invalid_request_error","code":"invalid_request_error"}}`, llm.CodeContextOverflow},
		{400, `{"error":{"message":"too long","type":"invalid_request_error","code":"context_length_exceeded"}}`, llm.CodeContextOverflow},
		{400, `{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 208310 tokens > 200000 maximum"}}`, llm.CodeContextOverflow},
		{400, `{"type":"error","error":{"type":"invalid_request_error","message":"input length and ` + "`max_tokens`" + ` exceed context limit: 188240 + 21333 > 200000"}}`, llm.CodeContextOverflow},
		{400, `{"error":{"code":400,"message":"the request exceeds the available context size, try increasing it","type":"exceed_context_size_error"}}`, llm.CodeContextOverflow},
		{413, `{"type":"error","error":{"type":"request_too_large","message":"Request exceeds the maximum allowed number of bytes."}}`, llm.CodeContextOverflow},
		{400, `{"type":"error","error":{"type":"invalid_request_error","message":"messages: text content blocks must be non-empty"}}`, llm.CodeInvalidRequest},
		{404, `{"error":"model \"qwen9\" not found, try pulling it first"}`, llm.CodeInvalidRequest},
		{422, `not json at all`, llm.CodeInvalidRequest},
		{500, `{"type":"error","error":{"type":"api_error","message":"Internal server error"}}`, llm.CodeServer},
		{502, ``, llm.CodeServer},
		{503, `{"error":{"message":"Server overloaded"}}`, llm.CodeOverloaded},
		{529, `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`, llm.CodeOverloaded},
		{529, ``, llm.CodeOverloaded},
		{408, ``, llm.CodeTimeout},
	}
	for _, c := range cases {
		e := HTTPError(c.status, []byte(c.body), nil, time.Now())
		if e.Code != c.want || e.Status != c.status || e.Message == "" {
			t.Errorf("HTTPError(%d, %s) = %+v, want code %s", c.status, c.body, e, c.want)
		}
	}
	if e := StreamError(ErrorBody{Type: "overloaded_error", Message: "Overloaded"}); e.Code != llm.CodeOverloaded {
		t.Errorf("stream overloaded_error = %v", e)
	}
	if e := StreamError(ErrorBody{Type: "rate_limit_error", Message: "x"}); e.Code != llm.CodeRateLimit {
		t.Errorf("stream rate_limit_error = %v", e)
	}
	if e := StreamError(ErrorBody{Message: "boom"}); e.Code != llm.CodeServer {
		t.Errorf("stream untyped error = %v", e)
	}
}

func TestOpenWatchdogAndCancel(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/stall-headers":
		case "/stall-body":
			w.Header().Set("Content-Type", "text/event-stream")
			for i := 1; i <= 5; i++ {
				fmt.Fprintf(w, "data: %d\n\n", i)
				w.(http.Flusher).Flush()
				time.Sleep(60 * time.Millisecond)
			}
		case "/teapot":
			w.Header().Set("Retry-After", "2")
			w.WriteHeader(429)
			io.WriteString(w, `{"error":{"message":"slow down"}}`)
			return
		}
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	defer srv.Close()
	defer close(release)

	get := func(ctx context.Context, path string, idle time.Duration) (*Stream, *llm.Error) {
		req, _ := http.NewRequest("GET", srv.URL+path, nil)
		return Open(ctx, srv.Client(), req, idle)
	}

	// No headers at all within the idle time.
	if _, e := get(context.Background(), "/stall-headers", 50*time.Millisecond); e == nil || e.Code != llm.CodeTimeout {
		t.Fatalf("stalled headers: %v, want timeout", e)
	}

	// Body progress re-arms the watchdog: five events 60ms apart (300ms in
	// all) outlast a 250ms idle, then the stall fires it. The gaps leave
	// 190ms of slack for a loaded machine.
	s, e := get(context.Background(), "/stall-body", 250*time.Millisecond)
	if e != nil {
		t.Fatal(e)
	}
	var got []string
	var ferr *llm.Error
	for {
		ev, err := s.Next()
		if err != nil {
			ferr = s.Fail(err)
			break
		}
		got = append(got, ev.Data)
	}
	s.Close()
	if strings.Join(got, ",") != "1,2,3,4,5" || ferr.Code != llm.CodeTimeout {
		t.Fatalf("stall-body: got %v, %v; want 1..5 then timeout", got, ferr)
	}

	// Cancellation wins and is not a timeout.
	ctx, cancel := context.WithCancel(context.Background())
	s, e = get(ctx, "/stall-body", time.Minute)
	if e != nil {
		t.Fatal(e)
	}
	s.Next()
	cancel()
	for {
		if _, err := s.Next(); err != nil {
			ferr = s.Fail(err)
			break
		}
	}
	s.Close()
	if ferr.Code != llm.CodeCanceled {
		t.Fatalf("cancel: %v, want canceled", ferr)
	}

	if _, e := get(context.Background(), "/teapot", time.Minute); e == nil || e.Code != llm.CodeRateLimit || e.RetryAfter != 2*time.Second {
		t.Fatalf("429: %+v", e)
	}

	// Nothing listening: a network error.
	req, _ := http.NewRequest("GET", "http://127.0.0.1:1/", nil)
	if _, e := Open(context.Background(), nil, req, time.Second); e == nil || e.Code != llm.CodeNetwork {
		t.Fatalf("dial: %v, want network", e)
	}
}

// A server that echoes the refused key in its error body: the error the
// caller gets shows only the key's mask.
func TestPostMasksEchoedKey(t *testing.T) {
	const key = "sk-echoed-0123456789abcdef"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusUnauthorized)
		fmt.Fprintf(w, `{"error":{"type":"invalid_request_error","message":"Incorrect API key provided: %s; x-api-key %s"}}`,
			strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer "), r.Header.Get("X-Api-Key"))
	}))
	defer srv.Close()
	st, e := Post(context.Background(), nil, srv.URL, wire.Body{[]byte("{}")}, map[string]string{"Authorization": "Bearer " + key, "X-Api-Key": key + "2"}, time.Second)
	if st != nil || e == nil {
		t.Fatal("want an error")
	}
	if strings.Contains(e.Message, "0123456789") || !strings.Contains(e.Message, "sk-…cdef") || !strings.Contains(e.Message, "sk-…def2") || e.Code != llm.CodeAuth {
		t.Fatalf("error: %+v", e)
	}
}

// TestPostSegments: Post sends a segmented body with its length up front,
// and sends it again, whole, when net/http must resend the request (here a
// 307 redirect, which re-reads the body through GetBody).
func TestPostSegments(t *testing.T) {
	var got []string
	var lengths []int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got = append(got, string(b))
		lengths = append(lengths, r.ContentLength)
		if r.URL.Path == "/first" {
			http.Redirect(w, r, "/second", http.StatusTemporaryRedirect)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "data: ok\n\n")
	}))
	defer srv.Close()
	body := wire.Body{[]byte(`{"a":`), nil, []byte(`[1,2]`), []byte(`}`)}
	s, e := Post(context.Background(), srv.Client(), srv.URL+"/first", body, nil, time.Second)
	if e != nil {
		t.Fatal(e)
	}
	defer s.Close()
	if ev, err := s.Next(); err != nil || ev.Data != "ok" {
		t.Fatalf("event %+v, %v", ev, err)
	}
	want := `{"a":[1,2]}`
	if len(got) != 2 || got[0] != want || got[1] != want || lengths[0] != int64(len(want)) || lengths[1] != int64(len(want)) {
		t.Fatalf("server saw %q with lengths %v", got, lengths)
	}
}
