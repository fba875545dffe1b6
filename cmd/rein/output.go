package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/reinhq/rein/agent"
	"github.com/reinhq/rein/llm"
	"github.com/reinhq/rein/session"
	"github.com/reinhq/rein/transcript"
)

// Output modes of rein run.
const (
	outText       = "text"
	outJSON       = "json"
	outStreamJSON = "stream-json"
)

// turnOutput follows one prompt through the log and the live events, prints
// what the output mode asks for, and works out how the prompt ended. Durable
// events arrive on one goroutine, live events on another; mu orders writes.
type turnOutput struct {
	mu       sync.Mutex
	mode     string
	stdout   io.Writer
	stderr   io.Writer
	activity bool // show tool activity on stderr
	spin     *spinner

	promptID string // set once Send returned

	turn         int // our turn, 0 until its turn/start
	reason       *session.Reason
	blocked      *string
	text         strings.Builder // assistant text of our turn
	usage        llm.Usage
	lastStep     int
	atLineStart  bool
	wrote        bool
	pendingEarly []session.Event // events before promptID was known
}

func newTurnOutput(mode string, stdout, stderr io.Writer, activity bool, spin *spinner) *turnOutput {
	return &turnOutput{mode: mode, stdout: stdout, stderr: stderr, activity: activity, spin: spin, atLineStart: true}
}

// setPrompt records the prompt's id and replays the events that arrived
// before it was known.
func (o *turnOutput) setPrompt(id string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.promptID = id
	early := o.pendingEarly
	o.pendingEarly = nil
	for _, ev := range early {
		o.track(ev)
	}
}

// event handles one durable event.
func (o *turnOutput) event(ev session.Event) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.mode == outStreamJSON {
		o.spin.clear()
		_, _ = o.stdout.Write(ev.AppendLine(nil))
	}
	if o.promptID == "" {
		o.pendingEarly = append(o.pendingEarly, ev)
		return
	}
	o.track(ev)
}

// track updates the state of our turn from ev and prints text-mode output.
func (o *turnOutput) track(ev session.Event) {
	switch ev.Type {
	case session.TypeTurnStart:
		p, err := ev.Decode()
		if err == nil && p.(*session.TurnStart).Trigger.MessageID == o.promptID {
			o.turn = p.(*session.TurnStart).Turn
			o.spin.set(fmt.Sprintf("turn %d", o.turn))
		}
		return
	}
	if o.turn == 0 {
		return
	}
	switch ev.Type {
	case session.TypeAssistantChunk:
		p, err := ev.Decode()
		if err != nil {
			return
		}
		c := p.(*session.AssistantChunk)
		if c.Turn != o.turn || c.Delta.Text == "" {
			return
		}
		if c.Step != o.lastStep && o.lastStep != 0 && o.text.Len() > 0 {
			o.text.WriteString("\n")
			o.printText("\n")
		}
		o.lastStep = c.Step
		o.text.WriteString(c.Delta.Text)
		o.printText(c.Delta.Text)
	case session.TypeAssistantMessage:
		p, err := ev.Decode()
		if err != nil {
			return
		}
		m := p.(*session.AssistantMessage)
		if m.Turn == o.turn {
			o.usage = o.usage.Add(m.Usage)
			o.spin.tokens(o.usage)
		}
	case session.TypeToolCall:
		if !o.activity {
			return
		}
		p, err := ev.Decode()
		if err == nil {
			c := p.(*session.ToolCall)
			o.note(fmt.Sprintf("→ %s %s", c.Name, transcript.Summarize(c.Arguments, 80)))
		}
	case session.TypeToolResult:
		if !o.activity {
			return
		}
		p, err := ev.Decode()
		if err == nil {
			r := p.(*session.ToolResult)
			if r.IsError {
				o.note(fmt.Sprintf("← %s: error %s", r.CallID, r.Code))
			}
		}
	case session.TypeTurnEnd:
		p, err := ev.Decode()
		if err == nil && p.(*session.TurnEnd).Turn == o.turn {
			r := p.(*session.TurnEnd).Reason
			o.reason = &r
		}
	}
}

func (o *turnOutput) printText(s string) {
	if o.mode != outText || s == "" {
		return
	}
	o.spin.clear()
	_, _ = io.WriteString(o.stdout, s)
	o.wrote = true
	o.atLineStart = strings.HasSuffix(s, "\n")
	o.spin.lineStart(o.atLineStart)
}

// note writes a line of activity on stderr, on a line of its own.
func (o *turnOutput) note(s string) {
	o.spin.clear()
	if !o.atLineStart && o.mode == outText {
		_, _ = io.WriteString(o.stdout, "\n")
		o.atLineStart = true
		o.spin.lineStart(true)
	}
	fmt.Fprintln(o.stderr, s)
}

// live handles one live agent event.
func (o *turnOutput) live(ev agent.Live) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if ev.Type == agent.LiveBlocked && ev.Message != nil && ev.Message.ID != "" {
		r := ev.Reason
		if o.promptID == "" || ev.Message.ID == o.promptID {
			o.blocked = &r
		}
	}
	if o.mode == outStreamJSON {
		o.spin.clear()
		b, _ := json.Marshal(liveJSON(ev))
		_, _ = o.stdout.Write(append(b, '\n'))
	}
}

// liveEvent is the stream-json form of a live event: its type, "live": true,
// and the fields its type sets.
type liveEvent struct {
	Type      string        `json:"type"`
	Live      bool          `json:"live"`
	Status    string        `json:"status,omitempty"`
	Message   *liveMessage  `json:"message,omitempty"`
	Messages  []liveMessage `json:"messages,omitempty"`
	Placement string        `json:"placement,omitempty"`
	Seq       int64         `json:"seq,omitempty"`
	Turn      int           `json:"turn,omitempty"`
	Step      int           `json:"step,omitempty"`
	Reason    any           `json:"reason,omitempty"`
	Seqs      []int64       `json:"seqs,omitempty"`
	Error     string        `json:"error,omitempty"`
}

type liveMessage struct {
	ID      string         `json:"id"`
	Content []llm.Part     `json:"content"`
	Source  session.Source `json:"source"`
}

func liveJSON(ev agent.Live) liveEvent {
	m := liveEvent{Type: string(ev.Type), Live: true, Status: string(ev.Status), Placement: ev.Placement,
		Seq: ev.Seq, Turn: ev.Turn, Step: ev.Step, Seqs: ev.Seqs}
	if ev.Message != nil {
		m.Message = &liveMessage{ev.Message.ID, ev.Message.Content, ev.Message.Source}
	}
	for _, x := range ev.Messages {
		m.Messages = append(m.Messages, liveMessage{x.ID, x.Content, x.Source})
	}
	switch {
	case ev.Type == agent.LiveSettled:
		m.Reason = ev.TurnReason
	case ev.Reason != "":
		m.Reason = ev.Reason
	}
	if ev.Err != nil {
		m.Error = ev.Err.Error()
	}
	return m
}

// runResult is how a prompt ended, and the JSON that --output json prints.
type runResult struct {
	Session  string          `json:"session,omitempty"` // empty when nothing was stored
	PromptID string          `json:"promptID"`
	Turn     int             `json:"turn,omitempty"`
	Outcome  string          `json:"outcome"` // completed, blocked, aborted, error, max-tokens, interrupted
	Reason   *session.Reason `json:"reason,omitempty"`
	Blocked  string          `json:"blocked,omitempty"`
	Text     string          `json:"text"`
	Usage    llm.Usage       `json:"usage"`
	ExitCode int             `json:"exitCode"`
}

// result reports the outcome. Call it after the agent is closed (every
// event and live event delivered).
func (o *turnOutput) result(sessionID string) runResult {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.spin.stop()
	if o.mode == outText && o.wrote && !o.atLineStart {
		_, _ = io.WriteString(o.stdout, "\n")
	}
	r := runResult{Session: sessionID, PromptID: o.promptID, Turn: o.turn, Text: o.text.String(), Usage: o.usage}
	switch {
	case o.turn == 0 && o.blocked != nil:
		r.Outcome, r.Blocked, r.ExitCode = "blocked", *o.blocked, ExitBlocked
	case o.turn == 0:
		// No turn and no block seen: the prompt was discarded (cancelled
		// before admission).
		r.Outcome, r.ExitCode = session.ReasonAborted, ExitAborted
	case o.reason == nil:
		r.Outcome, r.ExitCode = "error", ExitError
	default:
		r.Reason = o.reason
		r.Outcome = o.reason.Kind
		switch o.reason.Kind {
		case session.ReasonCompleted:
			r.ExitCode = ExitOK
		case session.ReasonAborted:
			r.ExitCode = ExitAborted
		default:
			r.ExitCode = ExitError
		}
	}
	return r
}

// spinner draws a progress line on a terminal's stderr: a spinner, the turn
// and token counts. A nil spinner does nothing.
type spinner struct {
	mu        sync.Mutex
	w         io.Writer
	label     string
	usage     llm.Usage
	shown     bool
	atStart   bool
	frame     int
	done      chan struct{}
	closeOnce sync.Once
}

func newSpinner(w io.Writer) *spinner {
	s := &spinner{w: w, label: "starting", atStart: true, done: make(chan struct{})}
	go func() {
		t := time.NewTicker(120 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-s.done:
				return
			case <-t.C:
				s.draw()
			}
		}
	}()
	return s
}

var frames = []string{"⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"}

func (s *spinner) draw() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.atStart {
		return
	}
	s.frame++
	fmt.Fprintf(s.w, "\r\033[K%s %s · %s in · %s out", frames[s.frame%len(frames)], s.label, kilo(s.usage.Input), kilo(s.usage.Output))
	s.shown = true
}

func kilo(n int) string {
	if n < 1000 {
		return fmt.Sprint(n)
	}
	return fmt.Sprintf("%.1fk", float64(n)/1000)
}

func (s *spinner) clear() {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.shown {
		fmt.Fprint(s.w, "\r\033[K")
		s.shown = false
	}
}

func (s *spinner) set(label string) {
	if s == nil {
		return
	}
	s.mu.Lock()
	s.label = label
	s.mu.Unlock()
}

func (s *spinner) tokens(u llm.Usage) {
	if s == nil {
		return
	}
	s.mu.Lock()
	s.usage = u
	s.mu.Unlock()
}

func (s *spinner) lineStart(b bool) {
	if s == nil {
		return
	}
	s.mu.Lock()
	s.atStart = b
	s.mu.Unlock()
}

func (s *spinner) stop() {
	if s == nil {
		return
	}
	s.closeOnce.Do(func() { close(s.done) })
	s.clear()
}
