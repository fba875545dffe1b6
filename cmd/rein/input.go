package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/reinhq/rein/agent"
	"github.com/reinhq/rein/llm"
	"github.com/reinhq/rein/session"
)

// maxInputLine bounds one line of --input stream-json (images travel
// inline as base64).
const maxInputLine = 32 << 20

// inputRequest is one line of --input stream-json: a call on the Agent API.
//
//	{"type":"send",   "content": TEXT | [PART...], "id"?: ID}  -> Agent.Send
//	{"type":"steer",  "content": ..., "id"?: ID}               -> Agent.Steer
//	{"type":"inject", "content": ..., "source"?: {kind, name}} -> Agent.Inject
//	{"type":"cancel", "keepInbox"?: bool}                      -> Agent.Cancel(user)
type inputRequest struct {
	Type      string
	Content   json.RawMessage
	ID        string
	Source    *session.Source
	KeepInbox *bool // nil when the line has none
}

// decodeRequest reads one input line. The line must be a JSON object with
// only the fields of inputRequest, each of its type; whatever it fails on,
// the request holds the type and id the line gave (when they are strings),
// so that the error line can echo them. The messages speak of the line, not
// of Go types.
func decodeRequest(data []byte) (inputRequest, error) {
	var req inputRequest
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(data, &fields); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return req, fmt.Errorf("want a JSON object, not %s", jsonKind(te.Value))
		}
		return req, err // a syntax error: its message says where
	}
	if fields == nil {
		return req, errors.New("want a JSON object, not null")
	}
	// What can be echoed first, whatever else is wrong with the line.
	_ = json.Unmarshal(fields["type"], &req.Type)
	_ = json.Unmarshal(fields["id"], &req.ID)
	var unknown []string
	for k := range fields {
		switch k {
		case "type", "content", "id", "source", "keepInbox":
		default:
			unknown = append(unknown, k)
		}
	}
	if len(unknown) > 0 {
		slices.Sort(unknown)
		return req, fmt.Errorf("unknown field %q (want type, content, id, source or keepInbox)", unknown[0])
	}
	req.Content = fields["content"]
	for _, f := range []struct {
		name, want string
		into       any
	}{
		{"type", "a string", &req.Type},
		{"id", "a string", &req.ID},
		{"source", `an object {"kind":K,"name":N}`, &req.Source},
		{"keepInbox", "true or false", &req.KeepInbox},
	} {
		raw, ok := fields[f.name]
		if !ok {
			continue
		}
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.DisallowUnknownFields()
		if err := dec.Decode(f.into); err != nil {
			return req, fmt.Errorf("%s: want %s", f.name, f.want)
		}
	}
	return req, nil
}

// jsonKind names the kind of JSON value json.UnmarshalTypeError.Value
// reports, with its article.
func jsonKind(v string) string {
	switch v {
	case "array", "object":
		return "an " + v
	case "bool":
		return "true or false"
	}
	return "a " + v
}

// Error codes of the error lines.
const (
	inputInvalidJSON    = "invalid-json"
	inputInvalidRequest = "invalid-request"
	inputRejected       = "rejected"
	inputTooLong        = "line-too-long"
)

// inputError is the line written for a stdin line that could not be
// carried out.
type inputError struct {
	Type    string `json:"type"` // "error"
	Line    int    `json:"line"`
	Code    string `json:"code"`
	Request string `json:"request,omitempty"`
	ID      string `json:"id,omitempty"`
	Message string `json:"message"`
}

// serveInput reads JSON lines from stdin and carries each out on ag until
// stdin ends (then it waits until ag is idle) or interrupted is closed.
// Every prompt's result line is printed when it settles.
func (a *app) serveInput(ctx context.Context, ag *agent.Agent, out *printer, interrupted <-chan struct{}) error {
	type line struct {
		n    int
		data []byte
		err  error // errLineTooLong, or why reading failed
	}
	lines := make(chan line)
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		defer close(lines)
		r := bufio.NewReaderSize(a.stdin, 64<<10)
		for n := 1; ; n++ {
			data, err := readLine(r, maxInputLine)
			if err == io.EOF && len(data) == 0 {
				return
			}
			if err != nil && !errors.Is(err, errLineTooLong) && err != io.EOF {
				select {
				case lines <- line{n: n, err: err}:
				case <-stop:
				}
				return
			}
			select {
			case lines <- line{n: n, data: data, err: errOnly(err, errLineTooLong)}:
			case <-stop:
				return
			}
			if err == io.EOF {
				return
			}
		}
	}()
	fail := func(n int, code string, req *inputRequest, format string, args ...any) {
		e := inputError{Type: "error", Line: n, Code: code, Message: fmt.Sprintf(format, args...)}
		if req != nil {
			e.Request, e.ID = req.Type, req.ID
		}
		out.mu.Lock()
		out.line(e)
		out.mu.Unlock()
	}
	for {
		var l line
		var ok bool
		select {
		case l, ok = <-lines:
		case <-interrupted:
			return nil
		}
		if !ok {
			// End of input: what was asked runs to its end.
			select {
			case <-interrupted:
				return nil
			default:
			}
			return ag.WhenIdle(ctx)
		}
		if isClose(l.data) {
			// As the end of input, for a client that cannot close stdin:
			// the lines after it are not read.
			return ag.WhenIdle(ctx)
		}
		switch {
		case errors.Is(l.err, errLineTooLong):
			fail(l.n, inputTooLong, nil, "line longer than %d bytes; skipped", maxInputLine)
			continue
		case l.err != nil:
			return fmt.Errorf("reading stdin: %w", l.err)
		case len(bytes.TrimSpace(l.data)) == 0:
			continue
		}
		req, err := decodeRequest(l.data)
		if err != nil {
			fail(l.n, inputInvalidJSON, &req, "%v", err)
			continue
		}
		given := req // carryOut mints an id when none was given
		if err := a.carryOut(ag, out, &req, func(r runResult) { out.line(r) }); err != nil {
			var re *requestError
			errors.As(err, &re)
			fail(l.n, re.code, &given, "%v", re.err)
		}
	}
}

// requestError is why a request was not carried out: code inputRejected
// (the agent refused it) or inputInvalidRequest (it is malformed).
type requestError struct {
	code string
	err  error
}

func (e *requestError) Error() string { return e.err.Error() }

// carryOut maps one request onto the Agent API.
func (a *app) carryOut(ag *agent.Agent, out *printer, req *inputRequest, onSettle func(runResult)) error {
	bad := func(format string, args ...any) error {
		return &requestError{inputInvalidRequest, fmt.Errorf(format, args...)}
	}
	rejected := func(err error) error { return &requestError{inputRejected, err} }
	switch req.Type {
	case "send", "steer", "inject":
		if req.KeepInbox != nil {
			return bad("%s takes no keepInbox (only cancel does)", req.Type)
		}
	}
	switch req.Type {
	case "send", "steer":
		if req.Source != nil {
			return bad("%s takes no source: what it carries is the user's own words (use inject)", req.Type)
		}
		content, err := parseContent(req.Content)
		if err != nil {
			return bad("%v", err)
		}
		if req.ID == "" {
			req.ID = agent.NewULID("m")
		}
		if !out.expect(req.ID, onSettle) {
			return rejected(fmt.Errorf("%w: %q", agent.ErrDuplicateID, req.ID))
		}
		m := agent.Message{ID: req.ID, Content: content}
		if req.Type == "send" {
			_, err = ag.Send(m)
		} else {
			_, err = ag.Steer(m)
		}
		if err != nil {
			out.forget(req.ID)
			return rejected(err)
		}
	case "inject":
		if req.ID != "" {
			return bad("inject takes no id")
		}
		content, err := parseContent(req.Content)
		if err != nil {
			return bad("%v", err)
		}
		src := session.Source{Kind: session.SourceUserContext, Name: "stdin"}
		if req.Source != nil {
			src = *req.Source
		}
		if src.Kind == session.SourceUser {
			return bad(`source kind "user" is for prompts: use send or steer`)
		}
		if err := ag.Inject(agent.AdditionalContext{Content: content, Source: src}); err != nil {
			return rejected(err)
		}
	case "cancel":
		if len(req.Content) > 0 || req.ID != "" || req.Source != nil {
			return bad("cancel takes only keepInbox")
		}
		ag.Cancel(session.CauseUser, agent.CancelOptions{KeepInbox: req.KeepInbox != nil && *req.KeepInbox})
	case "close":
		return bad("close takes nothing else")
	case "":
		return bad(`missing "type" (send, steer, inject, cancel or close)`)
	default:
		return bad("unknown type %q (want send, steer, inject, cancel or close)", req.Type)
	}
	return nil
}

// isClose reports whether an input line is exactly a close request,
// {"type":"close"} (a close with other fields is an invalid request).
func isClose(data []byte) bool {
	var req map[string]json.RawMessage
	if json.Unmarshal(data, &req) != nil || len(req) != 1 {
		return false
	}
	return string(bytes.TrimSpace(req["type"])) == `"close"`
}

// parseContent reads a request's content: a string, or a list of parts as
// in the session format ({"type":"text","text":...},
// {"type":"image","mediaType":...,"data":...}).
func parseContent(raw json.RawMessage) ([]llm.Part, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return nil, errors.New(`missing "content"`)
	}
	if raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, fmt.Errorf("content: %v", err)
		}
		return llm.Text(s), nil
	}
	var parts []llm.Part
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&parts); err != nil {
		return nil, fmt.Errorf("content: want a string or a list of parts: %v", err)
	}
	for i, p := range parts {
		switch p.Type {
		case llm.PartText:
		case llm.PartImage:
			if p.MediaType == "" || p.Data == "" {
				return nil, fmt.Errorf("content[%d]: an image needs mediaType and data (base64)", i)
			}
		default:
			return nil, fmt.Errorf("content[%d]: unknown part type %q (want text or image)", i, p.Type)
		}
	}
	return parts, nil
}

// readLine reads one line (without its newline) of at most max bytes. A
// longer line is read to its end and discarded: it returns errLineTooLong. At
// the end of input it returns the last line (if any) with io.EOF.
func readLine(r *bufio.Reader, max int) ([]byte, error) {
	var buf []byte
	long := false
	for {
		chunk, err := r.ReadSlice('\n')
		if !long {
			if len(buf)+len(chunk) > max+1 {
				long, buf = true, nil
			} else {
				buf = append(buf, chunk...)
			}
		}
		switch {
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case err != nil && long:
			return nil, errLineTooLong
		case err != nil:
			return buf, err
		case long:
			return nil, errLineTooLong
		}
		return bytes.TrimSuffix(buf, []byte("\n")), nil
	}
}

// errLineTooLong reports a stdin line longer than maxInputLine.
var errLineTooLong = errors.New("line too long")

// errOnly returns err when it is target, else nil.
func errOnly(err, target error) error {
	if errors.Is(err, target) {
		return err
	}
	return nil
}
