// Package tui is rein's terminal UI: a Bubble Tea program that shows one
// session's conversation from its log and drives its agent.
//
// What it shows comes from the durable log through the one translator,
// package transcript: a person's prompts, context labelled by its source,
// steering, markdown answers, folded reasoning, tool cards (collapsed, with
// diffs and exit codes when expanded), hook outcomes, compaction summaries,
// turn outcomes and crash-repair notices. What exists only live — a prompt
// queued behind the running turn or staged as steering, a prompt that
// admission blocked, a retry — comes from the agent's live events. The
// conversation is virtual: it is cut into blocks at turn boundaries,
// discovered backwards from the end of the log and built and rendered only
// where the viewport needs them, so opening a session of a million events
// costs about what reading its tail does.
//
// The package never opens a store or a provider. The caller (cmd/rein)
// wires those: Config.Open starts a session's agent (new, resumed or
// forked) after asking the workspace trust question through the TUI, and
// the other callbacks list sessions, snapshot session references and
// persist "allow always" rules. Approvals are asked inline (Approver) and
// the trust question as a dialog (trust.Asker).
//
// Concurrency: the Bubble Tea program owns the model; every other
// goroutine (the log follower, live events, an approval waiting in a tool
// call) talks to it only through messages. The agent's own methods are
// called from the model's update function; they return at once.
//
// Keys, commands and the live-session socket are documented in
// docs/tui.md.
//
// Text rein did not write (the model's, tools', hooks', a stored
// session's) is escaped with package display before it is styled, so no
// escape sequence of its own reaches the terminal.
//
// This package imports agent, transcript, session, llm, store (for session
// summaries), trust (the question) and display, and the Charm libraries;
// never a concrete store, provider or the CLI.
package tui

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/colorprofile"

	"github.com/reinhq/rein/agent"
	"github.com/reinhq/rein/store"
	"github.com/reinhq/rein/trust"
)

// Config configures the terminal UI. Open is required.
type Config struct {
	// Open starts the agent of a session: a new one (req.SessionID
	// empty), the stored session req.SessionID resumed (crash-repaired),
	// or a fork of req.ForkOf at req.ForkAt. It asks the workspace trust
	// question through req.Ask and gives the agent req.Approver for its
	// approvals. Errors wrapping store.ErrLocked and store.ErrNotFound are
	// shown as such.
	Open func(ctx context.Context, req OpenRequest) (*Session, error)
	// SessionID is the session to open first ("" for a new one).
	SessionID string
	// Prompt, when set, is sent once the session is open (rein "…").
	Prompt string
	// Sessions lists stored sessions, newest first (for /resume,
	// /sessions and @session: completion). It must not read whole
	// sessions: the JSONL store answers from its sidecars.
	Sessions func(ctx context.Context) ([]store.Info, error)
	// Refs returns the contexts a prompt's @session:ID references stand
	// for (snapshots of those sessions' transcripts), injected before the
	// prompt; nil injects none.
	Refs func(ctx context.Context, sessionID, prompt string) ([]agent.AdditionalContext, error)
	// Models are the model specs /model offers.
	Models []string
	// Trust shows and changes the workspace's trust (/trust): it returns
	// what to tell the person; ask asks them when there is a question.
	Trust func(ctx context.Context, ask trust.Asker) (string, error)
	// Theme is "auto" (default: the terminal's background decides), "dark",
	// "light" or "plain" (no colours, plain markdown; golden tests).
	Theme string
	// Cwd is the working directory (shown, and given to the transcript for
	// paths).
	Cwd string
	// Now is the clock (default time.Now).
	Now func() time.Time
	// ApprovalGrace is how long an approval ignores the keys pressed
	// after it appeared (default 600 ms; negative: none): it takes the
	// keys from the input, and what was being typed must not answer it.
	ApprovalGrace time.Duration
	// Version is shown in /help.
	Version string
}

// OpenRequest is what the TUI asks Config.Open for.
type OpenRequest struct {
	// SessionID is the session to resume; "" creates a new one (unless
	// ForkOf is set).
	SessionID string
	// ForkOf and ForkAt fork session ForkOf at seq ForkAt (a stable
	// point) into a new session, which is opened.
	ForkOf string
	ForkAt int64
	// Model overrides the configured model ("" keeps it).
	Model string
	// Ask asks the workspace trust question in the TUI.
	Ask trust.Asker
	// Approver asks tool approvals in the TUI.
	Approver agent.Approver
}

// Session is an open session: its agent and what the status line shows.
type Session struct {
	Agent *agent.Agent
	// Model is the model spec ("deepseek:deepseek-chat"), ContextWindow
	// its context window in tokens (0: unknown).
	Model         string
	ContextWindow int
	// Mode is the permission mode.
	Mode string
	// Cwd is the session's working directory.
	Cwd string
	// Title is the session's title as stored ("" for none yet).
	Title string
	// Rules, when set, offers "allow always" in approvals.
	Rules Rules
	// Notice, when set, is shown once the session opened (the trust
	// decision's notice, a sandbox warning).
	Notice string
	// BeforeClose, when set, runs while the agent is still open, before it
	// is closed (SessionEnd hooks).
	BeforeClose func(ctx context.Context)
	// Close releases what Open set up besides the agent (the live-session
	// socket, MCP servers); called after the agent closed.
	Close func()
}

// Rules turn an "allow always" answer into a rule.
type Rules interface {
	// Rule returns the rule that would allow calls like req from now on
	// (such as "bash(go test:*)"), or false when none can be written.
	Rule(cwd string, req agent.ApprovalRequest) (string, bool)
	// Save persists rule for cwd's workspace and applies it to the
	// sessions of that workspace. An error that still applied the rule
	// for this run says so.
	Save(ctx context.Context, cwd, rule string) error
}

// ErrNoOpen: Config.Open is required.
var ErrNoOpen = errors.New("tui: config: Open is required")

// Options tune Run.
type Options struct {
	// Input and Output default to the process's terminal.
	Input  io.Reader
	Output io.Writer
	// Width and Height fix the size (tests); 0 uses the terminal's.
	Width, Height int
}

// Program is a running terminal UI.
type Program struct {
	p *tea.Program
	m *Model
}

// New prepares the terminal UI; Run starts it.
func New(ctx context.Context, cfg Config, opts Options) (*Program, error) {
	if cfg.Open == nil {
		return nil, ErrNoOpen
	}
	m := NewModel(ctx, cfg)
	var popts []tea.ProgramOption
	popts = append(popts, tea.WithContext(ctx))
	if opts.Input != nil {
		popts = append(popts, tea.WithInput(opts.Input))
	}
	if opts.Output != nil {
		popts = append(popts, tea.WithOutput(opts.Output))
	}
	if opts.Width > 0 && opts.Height > 0 {
		popts = append(popts, tea.WithWindowSize(opts.Width, opts.Height))
	}
	if cfg.Theme == "plain" {
		popts = append(popts, tea.WithColorProfile(colorprofile.NoTTY))
	}
	p := tea.NewProgram(m, popts...)
	m.send = p.Send
	return &Program{p: p, m: m}, nil
}

// Run runs the terminal UI until the person quits, then closes the open
// session (a running turn is cancelled and its log closed cleanly). It
// returns the id of the last session shown ("" when nothing was stored).
func (p *Program) Run() (string, error) {
	_, err := p.p.Run()
	id, cerr := p.m.shutdown()
	if errors.Is(err, tea.ErrProgramKilled) || errors.Is(err, context.Canceled) {
		err = nil
	}
	if err == nil {
		err = cerr
	}
	return id, err
}

// Notify shows text as a notice (a hook's message, a warning that would
// otherwise go to stderr under the UI). It may be called from any
// goroutine.
func (p *Program) Notify(text string) { p.p.Send(noticeMsg{text: text}) }

// NoticeWriter returns a writer whose lines become notices: give it to
// whatever would write to stderr while the UI owns the terminal.
func (p *Program) NoticeWriter() io.Writer { return &noticeWriter{p: p} }

type noticeWriter struct {
	p   *Program
	buf []byte
}

func (w *noticeWriter) Write(b []byte) (int, error) {
	w.buf = append(w.buf, b...)
	for {
		i := indexByte(w.buf, '\n')
		if i < 0 {
			break
		}
		line := string(w.buf[:i])
		w.buf = w.buf[i+1:]
		if line != "" {
			w.p.Notify(line)
		}
	}
	return len(b), nil
}

func indexByte(b []byte, c byte) int {
	for i, x := range b {
		if x == c {
			return i
		}
	}
	return -1
}

// describeOpenError turns Open's errors into what the person reads.
func describeOpenError(id string, err error) string {
	switch {
	case errors.Is(err, store.ErrLocked) && !strings.HasPrefix(err.Error(), "session "):
		return fmt.Sprintf("session %s is open in another rein process", id)
	case errors.Is(err, store.ErrNotFound):
		return fmt.Sprintf("no session %s", id)
	}
	return err.Error()
}
