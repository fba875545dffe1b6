package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
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

// Outcomes of a prompt that are not turn/end reasons.
const (
	outcomeBlocked = "blocked"
	outcomeError   = "error"
)

// printer renders one agent's run on stdout and stderr for an output mode,
// and works out how each prompt it was told about ended.
//
// It is fed from three goroutines: accepted events (Agent.Events: the log
// as it grows, for streaming text and live deltas), durable events
// (Agent.DurableEvents: what stream-json prints as log lines) and live
// events (Agent.Subscribe). mu orders them.
//
// A prompt's outcome is followed on the durable stream in stream-json
// mode (its result line then comes after its durable turn/end) and on the
// accepted stream otherwise.
type printer struct {
	mu       sync.Mutex
	mode     string
	stdout   io.Writer
	stderr   io.Writer
	stream   bool // text mode streaming chunks (stdout is a terminal)
	activity bool // tool activity on stderr
	spin     *spinner
	session  string
	stored   func() bool // whether the session exists yet (nil: it does)
	cost     func(llm.Usage) *float64
	now      func() time.Time

	prompts map[string]*prompt // by message id, until settled
	byTurn  map[int]*prompt
	last    *prompt   // the last prompt settled
	total   llm.Usage // of every prompt settled
	closed  chan struct{}

	// next is the seq after the last accepted event handled; retries wait
	// in marks until the accepted stream reaches their seq.
	next  int64
	marks []agent.Live

	// Text mode.
	atLineStart bool
	wrote       bool // stdout got text
	partial     bool // this attempt's text was streamed (stream only)
	lastStep    [2]int
}

// prompt is one message sent (or steered while idle) that should get a
// turn of its own.
type prompt struct {
	id       string
	start    time.Time
	turn     int
	reason   *session.Reason
	blocked  *string
	text     strings.Builder
	usage    llm.Usage
	settled  bool
	result   runResult
	onSettle func(runResult)
}

func newPrinter(mode string, stdout, stderr io.Writer, stream, activity bool, spin *spinner) *printer {
	return &printer{mode: mode, stdout: stdout, stderr: stderr, stream: stream, activity: activity, spin: spin,
		now: time.Now, prompts: map[string]*prompt{}, byTurn: map[int]*prompt{}, closed: make(chan struct{}), atLineStart: true}
}

// expect registers a prompt before it is sent, so nothing about it can
// arrive first. onSettle (may be nil) is called once, under the printer's
// lock, when it settles. It reports false when a prompt with this id is
// still open.
func (o *printer) expect(id string, onSettle func(runResult)) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.prompts[id] != nil {
		return false
	}
	o.prompts[id] = &prompt{id: id, start: o.now(), onSettle: onSettle}
	return true
}

// forget drops a prompt the agent refused.
func (o *printer) forget(id string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	delete(o.prompts, id)
}

// accepted handles an event as it enters the log.
func (o *printer) accepted(ev session.Event) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.next = ev.Seq + 1
	if ev.Type == session.TypeAssistantChunk {
		c, ok := decode[*session.AssistantChunk](ev)
		if ok && o.mode == outStreamJSON {
			o.line(deltaLine{Type: "agent/delta", Live: true, Seq: ev.Seq, Turn: c.Turn, Step: c.Step, Delta: c.Delta})
		}
		if ok && o.stream && c.Delta.Text != "" && o.byTurn[c.Turn] != nil {
			if o.wrote && o.lastStep != [2]int{c.Turn, c.Step} {
				o.printText("\n")
			}
			o.lastStep = [2]int{c.Turn, c.Step}
			o.partial = true
			o.printText(c.Delta.Text)
		}
	}
	if o.mode != outStreamJSON {
		o.track(ev)
	}
	o.activityOf(ev)
	o.applyMarks()
}

// durable handles an event once it is durable: stream-json prints it as
// its log line.
func (o *printer) durable(ev session.Event) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.spin.clear()
	_, _ = o.stdout.Write(ev.AppendLine(nil))
	o.track(ev)
}

// live handles a live agent event.
func (o *printer) live(ev agent.Live) {
	o.mu.Lock()
	defer o.mu.Unlock()
	switch ev.Type {
	case agent.LiveRetry:
		o.marks = append(o.marks, ev)
		o.applyMarks()
		return
	case agent.LiveQueued:
		// A steer staged into a running turn has no turn of its own.
		if ev.Placement == agent.PlacementSteering && ev.Message != nil {
			delete(o.prompts, ev.Message.ID)
		}
	case agent.LiveBlocked:
		if ev.Message != nil {
			if p := o.prompts[ev.Message.ID]; p != nil && p.turn == 0 {
				r := ev.Reason
				p.blocked = &r
			}
		}
	}
	if o.mode == outStreamJSON {
		o.line(liveJSON(ev))
	}
	switch ev.Type {
	case agent.LiveBlocked:
		if ev.Message != nil {
			if p := o.prompts[ev.Message.ID]; p != nil && p.blocked != nil {
				o.settle(p)
			}
		}
	case agent.LiveDiscarded:
		for _, m := range ev.Messages {
			if p := o.prompts[m.ID]; p != nil && p.turn == 0 {
				o.settle(p)
			}
		}
	case agent.LiveClosed:
		close(o.closed)
	}
}

// applyMarks handles the retries whose failed attempts the accepted stream
// has passed: stream-json prints the marker line; a terminal that got the
// failed attempt's text is told it is discarded.
func (o *printer) applyMarks() {
	for len(o.marks) > 0 && o.marks[0].Seq <= o.next {
		m := o.marks[0]
		o.marks = o.marks[1:]
		if o.mode == outStreamJSON {
			o.line(liveJSON(m))
		}
		if o.partial {
			o.partial = false
			o.spin.clear()
			if !o.atLineStart {
				_, _ = io.WriteString(o.stdout, "\n")
				o.atLineStart = true
				o.spin.lineStart(true)
			}
			fmt.Fprintln(o.stderr, "rein: the answer above was cut off; the model answers again")
		}
	}
}

// track follows the prompts' turns: their number, text, usage and end.
func (o *printer) track(ev session.Event) {
	switch ev.Type {
	case session.TypeTurnStart:
		ts, ok := decode[*session.TurnStart](ev)
		if p := o.prompts[ts.Trigger.MessageID]; ok && p != nil {
			p.turn = ts.Turn
			o.byTurn[ts.Turn] = p
			o.spin.set(fmt.Sprintf("turn %d", ts.Turn))
		}
	case session.TypeAssistantMessage:
		m, ok := decode[*session.AssistantMessage](ev)
		p := o.byTurn[m.Turn]
		if !ok || p == nil {
			return
		}
		p.usage = p.usage.Add(m.Usage)
		o.spin.tokens(p.usage)
		text := llm.PlainText(m.Content)
		if text == "" {
			return
		}
		if p.text.Len() > 0 {
			p.text.WriteString("\n")
			if !o.stream {
				o.printText("\n")
			}
		}
		p.text.WriteString(text)
		if !o.stream {
			o.printText(text)
		}
		o.partial = false
	case session.TypeTurnEnd:
		te, ok := decode[*session.TurnEnd](ev)
		if p := o.byTurn[te.Turn]; ok && p != nil {
			r := te.Reason
			p.reason = &r
			o.settle(p)
		}
	}
}

// activityOf shows tool calls and failed results on stderr.
func (o *printer) activityOf(ev session.Event) {
	if !o.activity {
		return
	}
	switch ev.Type {
	case session.TypeToolCall:
		if c, ok := decode[*session.ToolCall](ev); ok && o.byTurn[c.Turn] != nil {
			o.note(fmt.Sprintf("→ %s %s", c.Name, transcript.Summarize(c.Arguments, 80)))
		}
	case session.TypeToolResult:
		if r, ok := decode[*session.ToolResult](ev); ok && r.IsError && o.byTurn[r.Turn] != nil {
			o.note(fmt.Sprintf("← %s: error %s", r.CallID, r.Code))
		}
	}
}

func decode[T session.Payload](ev session.Event) (T, bool) {
	p, err := ev.Decode()
	if err != nil {
		var zero T
		return zero, false
	}
	t, ok := p.(T)
	return t, ok
}

func (o *printer) printText(s string) {
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
func (o *printer) note(s string) {
	o.spin.clear()
	if !o.atLineStart && o.mode == outText {
		_, _ = io.WriteString(o.stdout, "\n")
		o.atLineStart = true
		o.spin.lineStart(true)
	}
	fmt.Fprintln(o.stderr, s)
}

// line writes v as one JSON line.
func (o *printer) line(v any) {
	o.spin.clear()
	b, _ := json.Marshal(v)
	_, _ = o.stdout.Write(append(b, '\n'))
}

// settle works out a prompt's result once: from its turn/end, its block,
// or (at the end) whatever was seen.
func (o *printer) settle(p *prompt) {
	if p.settled {
		return
	}
	p.settled = true
	delete(o.prompts, p.id)
	sid := o.session
	if o.stored != nil && !o.stored() {
		sid = "" // a new session not created: nothing durable happened yet
	}
	r := runResult{Type: "result", Session: sid, PromptID: p.id, Turn: p.turn, Text: p.text.String(), Usage: p.usage,
		DurationMs: o.now().Sub(p.start).Milliseconds()}
	if o.cost != nil {
		r.Cost = o.cost(p.usage)
	}
	switch {
	case p.turn == 0 && p.blocked != nil:
		r.Outcome, r.Blocked = outcomeBlocked, *p.blocked
	case p.turn == 0:
		// No turn and no block: discarded (a cancel, or the agent
		// closed, before admission).
		r.Outcome = session.ReasonAborted
	case p.reason == nil:
		r.Outcome = outcomeError
	default:
		r.Reason, r.Outcome = p.reason, p.reason.Kind
	}
	r.ExitCode = exitCodeOf(r.Outcome)
	p.result = r
	o.last = p
	o.total = o.total.Add(p.usage)
	if p.onSettle != nil {
		p.onSettle(r)
	}
}

// exitCodeOf maps a prompt's outcome to rein run's exit code.
func exitCodeOf(outcome string) int {
	switch outcome {
	case session.ReasonCompleted:
		return ExitOK
	case outcomeBlocked:
		return ExitBlocked
	case session.ReasonAborted:
		return ExitAborted
	case session.ReasonMaxSteps:
		return ExitMaxSteps
	}
	return ExitError
}

// finish settles every prompt still open (call it once every event and
// live event was handled), ends the text output and stops the spinner. It
// returns the result of the prompt that settled last, and whether there
// was one.
func (o *printer) finish() (runResult, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.spin.stop()
	open := make([]*prompt, 0, len(o.prompts))
	for _, p := range o.prompts {
		open = append(open, p)
	}
	slices.SortFunc(open, func(a, b *prompt) int { return a.start.Compare(b.start) })
	for _, p := range open {
		o.settle(p)
	}
	if o.mode == outText && o.wrote && !o.atLineStart {
		_, _ = io.WriteString(o.stdout, "\n")
	}
	if o.last == nil {
		return runResult{}, false
	}
	return o.last.result, true
}

// deltaLine is the stream-json form of an assistant/chunk as it streams:
// live, before it is durable.
type deltaLine struct {
	Type  string    `json:"type"`
	Live  bool      `json:"live"`
	Seq   int64     `json:"seq"`
	Turn  int       `json:"turn"`
	Step  int       `json:"step"`
	Delta llm.Delta `json:"delta"`
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
	Attempt   int           `json:"attempt,omitempty"`
	WaitMs    *int64        `json:"waitMs,omitempty"`
	Reason    any           `json:"reason,omitempty"`
	Seqs      []int64       `json:"seqs,omitempty"`
	Code      string        `json:"code,omitempty"`
	Error     string        `json:"error,omitempty"`
}

type liveMessage struct {
	ID      string         `json:"id"`
	Content []llm.Part     `json:"content"`
	Source  session.Source `json:"source"`
}

func liveJSON(ev agent.Live) liveEvent {
	m := liveEvent{Type: string(ev.Type), Live: true, Status: string(ev.Status), Placement: ev.Placement,
		Seq: ev.Seq, Turn: ev.Turn, Step: ev.Step, Seqs: ev.Seqs, Attempt: ev.Attempt}
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
	if ev.Type == agent.LiveRetry {
		w := ev.Wait.Milliseconds()
		m.WaitMs = &w
	}
	if ev.Err != nil {
		m.Error = ev.Err.Error()
		var le *llm.Error
		if errors.As(ev.Err, &le) {
			m.Code = string(le.Code)
		}
	}
	return m
}

// runResult is how a prompt ended: the object --output json prints and
// stream-json's result line.
type runResult struct {
	Type     string `json:"type,omitempty"`    // "result" in stream-json
	Session  string `json:"session,omitempty"` // empty when nothing was stored
	PromptID string `json:"promptID"`
	Turn     int    `json:"turn,omitempty"`
	// Outcome is completed, max-steps, max-tokens, error, aborted,
	// interrupted or blocked.
	Outcome    string          `json:"outcome"`
	Reason     *session.Reason `json:"reason,omitempty"`
	Blocked    string          `json:"blocked,omitempty"`
	Text       string          `json:"text"`
	Usage      llm.Usage       `json:"usage"`
	Cost       *float64        `json:"costUSD,omitempty"`
	DurationMs int64           `json:"durationMs"`
	ExitCode   int             `json:"exitCode"`
}

// initLine is stream-json's first line.
type initLine struct {
	Type           string   `json:"type"` // "init"
	Session        string   `json:"session"`
	Resumed        bool     `json:"resumed"`
	From           int64    `json:"from"` // the first seq this run prints
	Model          string   `json:"model"`
	Cwd            string   `json:"cwd"`
	Tools          []string `json:"tools"`
	PermissionMode string   `json:"permissionMode"`
	Version        string   `json:"version"`
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
