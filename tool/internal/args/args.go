// Package args derives a tool's JSON Schema parameters from a Go struct and
// decodes call arguments against it.
//
// A Schema is immutable after New and safe for concurrent use. It imports
// tool, llm and github.com/google/jsonschema-go only.
package args

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/reinhq/rein/tool"
)

// Schema is the parameters schema of one tool, derived from T.
type Schema[T any] struct {
	raw json.RawMessage
	res *jsonschema.Resolved
}

// New derives the schema of T (struct fields' `json` names, `jsonschema`
// tags as descriptions, omitempty fields optional, no additional
// properties); edit, when non-nil, adjusts it (enums, bounds). New panics on
// an underivable type: schemas are static, so that is a programming error.
func New[T any](edit func(s *jsonschema.Schema)) *Schema[T] {
	s, err := jsonschema.For[T](nil)
	if err != nil {
		panic(fmt.Sprintf("args: schema of %T: %v", *new(T), err))
	}
	if edit != nil {
		edit(s)
	}
	res, err := s.Resolve(nil)
	if err != nil {
		panic(fmt.Sprintf("args: resolve schema of %T: %v", *new(T), err))
	}
	raw, err := json.Marshal(s)
	if err != nil {
		panic(fmt.Sprintf("args: marshal schema of %T: %v", *new(T), err))
	}
	return &Schema[T]{raw: raw, res: res}
}

// Parameters returns the JSON Schema text for llm.ToolSpec.Parameters.
func (s *Schema[T]) Parameters() json.RawMessage { return s.raw }

// Decode validates raw against the schema and decodes it into a T. On
// failure it returns a tool.CodeInvalidArguments result whose message says
// what is wrong, for the model to correct.
func (s *Schema[T]) Decode(raw json.RawMessage) (T, *tool.Result) {
	var zero T
	if len(bytes.TrimSpace(raw)) == 0 {
		raw = json.RawMessage("{}")
	}
	var inst any
	if err := json.Unmarshal(raw, &inst); err != nil {
		r := tool.Errorf(tool.CodeInvalidArguments, "invalid arguments: not JSON: %v", err)
		return zero, &r
	}
	if err := s.res.Validate(inst); err != nil {
		r := tool.Errorf(tool.CodeInvalidArguments, "invalid arguments: %s", clean(err))
		return zero, &r
	}
	var v T
	if err := json.Unmarshal(raw, &v); err != nil {
		r := tool.Errorf(tool.CodeInvalidArguments, "invalid arguments: %v", err)
		return zero, &r
	}
	return v, nil
}

// clean shortens jsonschema-go's messages, which nest one "validating
// <pointer>: " prefix per schema level; only the innermost is kept, as a
// property path ("todos[].status: enum: ...").
func clean(err error) string {
	msg := err.Error()
	path := ""
	for strings.HasPrefix(msg, "validating ") {
		rest := msg[len("validating "):]
		i := strings.Index(rest, ": ")
		if i < 0 {
			break
		}
		path, msg = rest[:i], rest[i+2:]
	}
	if path == "" || path == "root" || path == "/" {
		return msg
	}
	path = strings.ReplaceAll(path, "/properties/", ".")
	path = strings.ReplaceAll(path, "/items", "[]")
	return strings.TrimPrefix(path, ".") + ": " + msg
}
