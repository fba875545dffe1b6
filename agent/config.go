package agent

import (
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/reinhq/rein/llm"
	"github.com/reinhq/rein/redact"
	"github.com/reinhq/rein/store"
	"github.com/reinhq/rein/tool"
)

// Config configures an agent. Store and Provider are required.
type Config struct {
	Store    store.Store
	Provider llm.Provider
	// Model is recorded in request/header as "provider:model" and sent as
	// the request's model.
	Model  string
	Params llm.Params
	// Tools the model may call (nil: none).
	Tools *tool.Registry
	// System is the system prompt, assembled from sections in order.
	System []Section
	// Cwd is the session's working directory (recorded in the header and
	// given to tools).
	Cwd string
	// SessionID for New; minted when empty.
	SessionID string
	// Title for New (optional): the header's title. A title that should
	// exist only once a prompt was admitted is set with SetTitle instead.
	Title string

	Hooks    Hooks
	Approver Approver

	// MaxParallelTools bounds the parallel pool of a tool batch (default 8).
	MaxParallelTools int
	// MaxSteps caps the steps of one turn (0: no limit). A turn that
	// reached it while the model was still owed a step ends with reason
	// max-steps instead of running step MaxSteps+1; the tool results of
	// the last step are recorded, so the next turn's request is whole.
	MaxSteps int
	// MaxForcedContinuations caps consecutive continuations forced by
	// TurnStopping steering in one turn (default 8).
	MaxForcedContinuations int

	// ContextWindow is the model's context window in tokens. When set,
	// the agent compacts automatically before a step whose previous
	// response reported more than CompactAt of it (default 0.8), and once
	// per step on a context-overflow error before retrying.
	ContextWindow int
	CompactAt     float64

	// Clock and NewID make logs deterministic in tests. Defaults: time.Now
	// and ULID-like random ids.
	Clock func() time.Time
	NewID func(kind string) string

	Logger *slog.Logger

	// Redactor masks the secrets it knows (the API keys in use) in every
	// event before it enters the log, and in model errors before hooks,
	// live events and the Logger see them. Nil masks nothing.
	Redactor *redact.Redactor
}

// Section is a named part of the system prompt.
type Section struct {
	Name string
	Text string
	// Dynamic, when set, gives the section's text instead of Text each
	// time a request is derived. It runs on the owner goroutine: it must
	// return at once and must not call the agent. A change shows in the
	// next request/header like any change of the system prompt; change
	// what it returns only between steps (from a BeforeStep hook), so that
	// the retries of one step send the same prompt.
	Dynamic func() string
}

func (c *Config) withDefaults() (Config, error) {
	cfg := *c
	if cfg.Store == nil {
		return cfg, errors.New("agent: config: Store is required")
	}
	if cfg.Provider == nil {
		return cfg, errors.New("agent: config: Provider is required")
	}
	if cfg.Model == "" {
		cfg.Model = cfg.Provider.Name()
	}
	if cfg.MaxParallelTools <= 0 {
		cfg.MaxParallelTools = 8
	}
	if cfg.MaxForcedContinuations <= 0 {
		cfg.MaxForcedContinuations = 8
	}
	if cfg.CompactAt <= 0 || cfg.CompactAt >= 1 {
		cfg.CompactAt = 0.8
	}
	if cfg.Clock == nil {
		cfg.Clock = time.Now
	}
	if cfg.NewID == nil {
		cfg.NewID = NewULID
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Redactor != nil {
		cfg.Logger = slog.New(cfg.Redactor.Handler(cfg.Logger.Handler()))
	}
	return cfg, nil
}

// system assembles the system prompt from the sections.
func (c *Config) system() string {
	var b strings.Builder
	for _, s := range c.System {
		text := s.Text
		if s.Dynamic != nil {
			text = s.Dynamic()
		}
		if strings.TrimSpace(text) == "" {
			continue
		}
		if b.Len() > 0 {
			b.WriteString("\n\n")
		}
		b.WriteString(text)
	}
	return b.String()
}

// NewULID returns a time-ordered, random 26-character id (ULID layout,
// Crockford base32). kind is ignored.
func NewULID(string) string {
	const alphabet = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
	var b [16]byte
	ms := uint64(time.Now().UnixMilli())
	for i := 5; i >= 0; i-- {
		b[i] = byte(ms)
		ms >>= 8
	}
	_, _ = rand.Read(b[6:])
	// 128 bits -> 26 base32 digits, most significant first.
	var out [26]byte
	hi := uint64(b[0])<<56 | uint64(b[1])<<48 | uint64(b[2])<<40 | uint64(b[3])<<32 | uint64(b[4])<<24 | uint64(b[5])<<16 | uint64(b[6])<<8 | uint64(b[7])
	lo := uint64(b[8])<<56 | uint64(b[9])<<48 | uint64(b[10])<<40 | uint64(b[11])<<32 | uint64(b[12])<<24 | uint64(b[13])<<16 | uint64(b[14])<<8 | uint64(b[15])
	for i := 25; i >= 0; i-- {
		out[i] = alphabet[lo&31]
		lo = lo>>5 | hi<<59
		hi >>= 5
	}
	return string(out[:])
}

// SequentialIDs returns an id source that yields kind+counter ("m1",
// "m2", "s1", ...), one counter per kind, for deterministic tests.
func SequentialIDs() func(kind string) string {
	var mu sync.Mutex
	n := map[string]int{}
	return func(kind string) string {
		mu.Lock()
		defer mu.Unlock()
		n[kind]++
		return fmt.Sprintf("%s%d", kind, n[kind])
	}
}

// StepClock returns a clock that starts at start and advances by step on
// every call, for deterministic tests.
func StepClock(start time.Time, step time.Duration) func() time.Time {
	var n atomic.Int64
	return func() time.Time { return start.Add(time.Duration(n.Add(1)-1) * step) }
}
