package acp

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
	"unicode"

	sdk "github.com/coder/acp-go-sdk"
)

// paramTypes are the params of the requests rein serves, by method: a
// request whose params do not decode into its type is answered here.
var paramTypes = map[string]func() any{
	sdk.AgentMethodInitialize:     func() any { return new(sdk.InitializeRequest) },
	sdk.AgentMethodAuthenticate:   func() any { return new(sdk.AuthenticateRequest) },
	sdk.AgentMethodSessionNew:     func() any { return new(sdk.NewSessionRequest) },
	sdk.AgentMethodSessionLoad:    func() any { return new(sdk.LoadSessionRequest) },
	sdk.AgentMethodSessionResume:  func() any { return new(sdk.ResumeSessionRequest) },
	sdk.AgentMethodSessionList:    func() any { return new(sdk.ListSessionsRequest) },
	sdk.AgentMethodSessionClose:   func() any { return new(sdk.CloseSessionRequest) },
	sdk.AgentMethodSessionPrompt:  func() any { return new(sdk.PromptRequest) },
	sdk.AgentMethodSessionSetMode: func() any { return new(sdk.SetSessionModeRequest) },
}

// paramChecker passes the client's lines on, answering itself (-32602)
// the requests whose params have the wrong shape: the SDK would answer
// with the Go decoder's words ("cannot unmarshal string into Go struct
// field PromptRequest.prompt of type []acp.ContentBlock"), which name
// rein's internals, not what the client should send.
type paramChecker struct {
	br   *bufio.Reader
	out  io.Writer
	line []byte
	err  error
}

func checkParams(in io.Reader, out io.Writer) io.Reader {
	return &paramChecker{br: bufio.NewReaderSize(in, 64<<10), out: out}
}

func (p *paramChecker) Read(b []byte) (int, error) {
	for len(p.line) == 0 {
		if p.err != nil {
			return 0, p.err
		}
		p.line, p.err = p.br.ReadBytes('\n')
		if reply := badParams(p.line); reply != nil {
			if _, err := p.out.Write(reply); err != nil {
				return 0, err
			}
			p.line = nil
		}
	}
	n := copy(b, p.line)
	p.line = p.line[n:]
	return n, nil
}

// badParams returns the -32602 answer to a request whose params do not
// decode, or nil.
func badParams(line []byte) []byte {
	var m struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Params json.RawMessage `json:"params"`
	}
	if json.Unmarshal(line, &m) != nil || len(m.ID) == 0 || string(m.ID) == "null" || len(m.Params) == 0 {
		return nil
	}
	newParams := paramTypes[m.Method]
	if newParams == nil {
		return nil
	}
	if err := json.Unmarshal(m.Params, newParams()); err != nil {
		return rpcError(m.ID, -32602, "Invalid params", paramsError(err))
	}
	return nil
}

// paramsError says what is wrong with params that did not decode, in
// the protocol's words: the field and what it takes.
func paramsError(err error) string {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		what := want(te.Type)
		if te.Field == "" {
			return "params: want " + what
		}
		return fmt.Sprintf("%s: want %s, not %s", te.Field, what, article(te.Value))
	}
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return "params are not valid JSON"
	}
	// The SDK's unions (content blocks, MCP servers) say only that a
	// value matched none of their kinds.
	return "params: " + strings.TrimPrefix(err.Error(), "json: ")
}

// want describes the JSON a Go type takes: "a string", "a list of
// content blocks".
func want(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		e := t.Elem()
		for e.Kind() == reflect.Pointer {
			e = e.Elem()
		}
		switch e.Kind() {
		case reflect.Struct:
			return "a list of " + words(e.Name()) + "s"
		case reflect.String:
			return "a list of strings"
		}
		return "a list"
	case reflect.Struct:
		if t.Name() != "" {
			return "a " + words(t.Name()) + " object"
		}
	}
	return "an object"
}

// words spells a Go type name as lower-case words: ContentBlock is
// "content block".
func words(name string) string {
	var b strings.Builder
	for i, r := range name {
		if unicode.IsUpper(r) && i > 0 {
			b.WriteByte(' ')
		}
		b.WriteRune(unicode.ToLower(r))
	}
	return b.String()
}

// article puts "a" or "an" before a JSON kind ("string", "object").
func article(kind string) string {
	if kind == "" {
		return "that"
	}
	if strings.ContainsRune("aeiou", rune(kind[0])) {
		return "an " + kind
	}
	return "a " + kind
}
