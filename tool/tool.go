// Package tool defines what a tool is to rein: the Tool interface (name,
// description, JSON Schema parameters, execution mode, a body run with a
// context), a Registry, and tool results as data.
//
// A tool failure is a Result with IsError set, never a Go error: the model
// sees it. Run returns a Go error only when the tool could not produce a
// result at all; the agent turns that into an error result too.
//
// Built-in tools live in sub-packages (tool/fs, tool/shell, ...). This
// package imports only llm.
package tool

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/reinhq/rein/llm"
)

// Mode is how a tool may be scheduled within a batch.
type Mode string

const (
	// Parallel tools are read-only and may overlap with other parallel
	// calls of the same batch, in a bounded pool.
	Parallel Mode = "parallel"
	// Exclusive tools are barriers: nothing else of the batch runs while
	// they do.
	Exclusive Mode = "exclusive"
)

// Result codes that the runtime writes; tools may use others.
const (
	CodeDenied           = "denied"
	CodeNotRun           = "not-run"
	CodeOutcomeUnknown   = "outcome-unknown"
	CodeTimeout          = "timeout"
	CodeInvalidArguments = "invalid-arguments"
	CodeUnknownTool      = "unknown-tool"
	CodeAborted          = "aborted"
	CodeFailed           = "failed"
)

// Result is what a call produced, as the model will see it.
type Result struct {
	Content []llm.Part
	IsError bool
	// Code classifies an error result ("denied", "timeout", ...).
	Code string
	// Meta is structured detail for humans and UIs (exit code, diff, ...).
	// It is logged but never shown to the model.
	Meta json.RawMessage
}

// Errorf returns an error result with the given code and message.
func Errorf(code, format string, args ...any) Result {
	return Result{Content: llm.Text(fmt.Sprintf(format, args...)), IsError: true, Code: code}
}

// TextResult returns a successful text result.
func TextResult(s string) Result { return Result{Content: llm.Text(s)} }

// Call is one invocation handed to a tool body.
type Call struct {
	ID string
	// Arguments is the JSON text the call runs with (already validated as
	// JSON; possibly rewritten by a ToolPre hook).
	Arguments json.RawMessage
	// Env carries per-session services (working directory, the agent's
	// context sink, ...). It is opaque to this package.
	Env Env
}

// Env is the per-session environment a tool body runs in.
type Env struct {
	// SessionID is the session the call belongs to.
	SessionID string
	// Dir is the session's working directory.
	Dir string
	// ScratchDir is a directory for files that belong to the session but
	// not to its log (a tool's spilled output), removed with the session;
	// it may not exist yet. Empty when the store keeps none: a tool then
	// uses the system's temporary directory.
	ScratchDir string
	// State is per-session, per-tool scratch space (e.g. the set of files
	// read so far). It is safe for concurrent use.
	State *State
	// AddContext stages an additional context produced by the tool body;
	// it lands after the call's result, in model order. May be nil.
	AddContext func(content []llm.Part)
}

// State is a small concurrency-safe key/value store shared by the tools of
// one session.
type State struct {
	mu sync.Mutex
	m  map[string]any
}

// Get returns the value for key, creating it with mk when absent.
func (s *State) Get(key string, mk func() any) any {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = map[string]any{}
	}
	v, ok := s.m[key]
	if !ok {
		v = mk()
		s.m[key] = v
	}
	return v
}

// Tool is one capability the model can call.
type Tool interface {
	// Spec is the tool's name, description and JSON Schema parameters as
	// sent to the model. It must not change while the tool is registered.
	Spec() llm.ToolSpec
	// Mode is the tool's execution mode.
	Mode() Mode
	// Run executes one call. It must honour ctx: on cancellation it stops
	// and returns a result (usually CodeAborted) promptly.
	Run(ctx context.Context, call Call) (Result, error)
}

// Func adapts a function to Tool.
type Func struct {
	ToolSpec llm.ToolSpec
	ToolMode Mode
	Body     func(ctx context.Context, call Call) (Result, error)
}

func (f *Func) Spec() llm.ToolSpec { return f.ToolSpec }
func (f *Func) Mode() Mode {
	if f.ToolMode == "" {
		return Exclusive
	}
	return f.ToolMode
}
func (f *Func) Run(ctx context.Context, call Call) (Result, error) { return f.Body(ctx, call) }

// Registry is an ordered set of tools by name. It is safe for concurrent
// use; the order of Specs is registration order, so requests are stable.
type Registry struct {
	mu    sync.RWMutex
	tools []Tool
	index map[string]int
}

// NewRegistry returns a registry holding tools.
func NewRegistry(tools ...Tool) (*Registry, error) {
	r := &Registry{index: map[string]int{}}
	for _, t := range tools {
		if err := r.Register(t); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// Register adds t. Names must be unique and non-empty.
func (r *Registry) Register(t Tool) error {
	name := t.Spec().Name
	if name == "" {
		return fmt.Errorf("tool: empty name")
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.index == nil {
		r.index = map[string]int{}
	}
	if _, dup := r.index[name]; dup {
		return fmt.Errorf("tool: %q registered twice", name)
	}
	r.index[name] = len(r.tools)
	r.tools = append(r.tools, t)
	return nil
}

// Sync makes the registered tools whose names start with prefix exactly
// tools, in one step: a tool whose name stays keeps its place (the new
// value replaces the old), tools no longer listed are removed, new ones are
// appended in the order given. Tools outside prefix are untouched. Every
// name in tools must start with prefix and be unique; otherwise Sync
// changes nothing and returns an error.
//
// A tool set that changes while an agent runs must change only between
// steps (a BeforeStep hook), so that the tools a step's calls run are the
// ones its request offered; the agent records the new set in the next
// request/header.
func (r *Registry) Sync(prefix string, tools []Tool) error {
	want := make(map[string]Tool, len(tools))
	for _, t := range tools {
		name := t.Spec().Name
		if !strings.HasPrefix(name, prefix) || name == "" {
			return fmt.Errorf("tool: sync %q: %q is outside the prefix", prefix, name)
		}
		if _, dup := want[name]; dup {
			return fmt.Errorf("tool: sync %q: %q listed twice", prefix, name)
		}
		want[name] = t
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	kept := r.tools[:0:0]
	for _, t := range r.tools {
		name := t.Spec().Name
		if !strings.HasPrefix(name, prefix) {
			kept = append(kept, t)
		} else if nt, ok := want[name]; ok {
			kept = append(kept, nt)
			delete(want, name)
		}
	}
	for _, t := range tools {
		if _, ok := want[t.Spec().Name]; ok {
			kept = append(kept, t)
		}
	}
	r.tools = kept
	r.index = make(map[string]int, len(kept))
	for i, t := range kept {
		r.index[t.Spec().Name] = i
	}
	return nil
}

// Lookup returns the tool called name.
func (r *Registry) Lookup(name string) (Tool, bool) {
	if r == nil {
		return nil, false
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	i, ok := r.index[name]
	if !ok {
		return nil, false
	}
	return r.tools[i], true
}

// Specs returns the specs of all tools in registration order.
func (r *Registry) Specs() []llm.ToolSpec {
	if r == nil {
		return nil
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]llm.ToolSpec, len(r.tools))
	for i, t := range r.tools {
		out[i] = t.Spec()
	}
	return out
}

// Names returns the registered names in order.
func (r *Registry) Names() []string {
	specs := r.Specs()
	names := make([]string, len(specs))
	for i, s := range specs {
		names[i] = s.Name
	}
	return slices.Clip(names)
}

// SafeName makes s usable as a part of a file name (a session or call id
// in the name of a file that holds a call's full output): characters
// other than letters, digits, "-", "_" and "." become "_", and it is cut
// to 64 bytes; "" becomes "x".
func SafeName(s string) string {
	if s == "" {
		return "x"
	}
	b := []byte(s)
	for i, ch := range b {
		if !(ch >= 'a' && ch <= 'z' || ch >= 'A' && ch <= 'Z' || ch >= '0' && ch <= '9' || ch == '-' || ch == '_' || ch == '.') {
			b[i] = '_'
		}
	}
	if len(b) > 64 {
		b = b[:64]
	}
	return string(b)
}
