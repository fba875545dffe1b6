// Package agent is rein's runtime: the Agent API (Send, Steer, Inject,
// Cancel, WhenIdle, Close), the prompt queue and the outbox, the turn/step
// driver, tool batches, and the extension points of docs/semantics.md.
//
// Concurrency: one owner goroutine per agent holds all of its state (the
// session log, queue, outbox, phase) and never blocks on I/O. Public
// methods send it a closure and return when it has run, so they answer
// at once. Work that takes time runs elsewhere: the turn driver (one
// goroutine at a time, running admission, hooks, model streams and tool
// batches) and the persister's writes. They change state only by asking
// the owner. Events are appended to the log (and handed to the persister)
// before any effect of the state change starts, and the log is flushed
// durably before every model request and tool body, at every turn/end,
// and asynchronously after an idle Inject.
//
// Readers follow the log by seq (Events, or DurableEvents for only what is
// durable) and never block the owner; live
// notifications (Subscribe) are delivered on the subscriber's own
// goroutine, so a subscriber may call back into the agent.
//
// The agent imports session, llm, store and tool; never a concrete
// backend, provider adapter or UI.
package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/reinhq/rein/llm"
	"github.com/reinhq/rein/session"
	"github.com/reinhq/rein/store"
	"github.com/reinhq/rein/tool"
)

// Errors returned by the API. They are returned synchronously and leave the
// agent unchanged.
var (
	// ErrClosed: the agent was closed.
	ErrClosed = errors.New("agent: closed")
	// ErrEmpty: a message or context without content.
	ErrEmpty = errors.New("agent: empty content")
	// ErrDuplicateID: a message id already used in this session.
	ErrDuplicateID = errors.New("agent: duplicate message id")
	// ErrNoSource: an AdditionalContext without a source kind.
	ErrNoSource = errors.New("agent: additional context without source")
)

// Status is idle or running.
type Status string

const (
	Idle    Status = "idle"
	Running Status = "running"
)

// CancelOptions tune Cancel.
type CancelOptions struct {
	// KeepInbox keeps queued prompts and staged steering. They are parked:
	// they run when the next Send or Steer arrives.
	KeepInbox bool
}

// Agent runs one session. Create it with New or Resume; dispose it with
// Close.
type Agent struct {
	cfg   Config
	id    string
	w     store.Writer
	p     *persister
	state tool.State

	ops  chan func()
	quit chan struct{}
	done chan struct{}
	busy sync.WaitGroup // driver and idle flushes
	subs subscribers

	// Owner state: touched only by closures run on the owner goroutine
	// (and read-only after it exits).
	log         *session.Log
	closed      bool
	status      Status
	queue       []queued
	outbox      []staged
	window      bool // admission running or turn open
	driving     bool
	parked      bool
	act         *activity
	startSource string // pending SessionStart source
	idleFlushes int
	idleWaiters []chan struct{}
	pendingIDs  map[string]struct{}
	notify      chan struct{}
	startCancel context.CancelCauseFunc // the running SessionStart (only Close cancels it)
	batchOpen   bool                    // a tool batch is running
	settledCh   chan struct{}           // closed when Close has settled
	closeErr    error                   // Close's result, set before settledCh closes
	hdr         *session.RequestHeader  // the last one this agent recorded
	hdrReason   string                  // of the first header: initial or resume
	sent        sentRequest             // the previous request, for the prefix record
	lastTokens  int                     // input+output of the last response (compaction pressure)

	// system is cfg.System assembled, when no section is dynamic (the
	// configuration never changes); dynamic: some section is.
	system  string
	dynamic bool
	// wire keeps the adapter's encodings of the history between requests.
	// Only the turn driver touches it, one request at a time.
	wire llm.Cache
}

type queued struct {
	msg   Message
	steer bool
}

type staged struct {
	steering bool
	msg      Message // steering
	ctx      AdditionalContext
}

// activity is the current admission, turn, or session start.
type activity struct {
	cancel    context.CancelCauseFunc
	cause     string
	cancelled bool
}

// errCancel carries a cancel cause through context.Cause.
type errCancel struct{ cause string }

func (e errCancel) Error() string { return "agent: cancelled: " + e.cause }

// New starts a new session and returns its agent, idle. The SessionStart
// chain (source "startup") runs at once; its contexts land before the first
// request.
//
// The session is created in cfg.Store lazily, with its first event that is
// not a log-only record (hook/result, session/title): an agent closed
// before any message, context or turn leaves nothing in the store, so a
// prompt that admission blocked in a fresh session leaves no session and no
// title. Log-only records before that event are held in memory and written
// ahead of it, or dropped with the agent. Stored reports whether the
// session exists. A cfg.SessionID already in the store is refused at once
// with store.ErrExists.
func New(ctx context.Context, cfg Config) (*Agent, error) {
	c, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	id := c.SessionID
	if id == "" {
		id = c.NewID("s")
	} else if _, err := c.Store.Load(ctx, id, store.LoadOptions{}); err == nil {
		return nil, fmt.Errorf("agent: session %s: %w", id, store.ErrExists)
	} else if !errors.Is(err, store.ErrNotFound) {
		return nil, fmt.Errorf("agent: session %s: %w", id, err)
	}
	h := session.Header{ID: id, Cwd: c.Cwd, CreatedAt: c.Clock().UTC(), Title: c.Title, Version: session.Version}
	return start(c, newLazyWriter(c.Store, h), session.NewLog(h), session.HeaderInitial, StartStartup), nil
}

// Resume opens session id from st (taking its lock), repairs it as
// docs/semantics.md ("Persistence") says, and returns its agent, idle: a resumed agent runs nothing
// by itself. Turn numbering continues from the log. The SessionStart chain
// runs with source "resume".
func Resume(ctx context.Context, st store.Store, id string, cfg Config) (*Agent, error) {
	cfg.Store = st
	c, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	w, ld, err := st.Open(ctx, id)
	if err != nil {
		return nil, err
	}
	return start(c, w, ld.Log, session.HeaderResume, StartResume), nil
}

// Fork creates a child of session id holding its events up to seq at (see
// store.Store.Fork) and returns the child's agent, idle, with SessionStart
// source "fork". The child inherits no queue or outbox.
func Fork(ctx context.Context, st store.Store, id string, at int64, cfg Config) (*Agent, error) {
	cfg.Store = st
	c, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	child := c.SessionID
	if child == "" {
		child = c.NewID("s")
	}
	if _, err := st.Fork(ctx, id, at, session.Header{ID: child, Cwd: c.Cwd, CreatedAt: c.Clock().UTC(), Title: c.Title}); err != nil {
		return nil, err
	}
	w, ld, err := st.Open(ctx, child)
	if err != nil {
		return nil, err
	}
	return start(c, w, ld.Log, session.HeaderResume, StartFork), nil
}

func start(cfg Config, w store.Writer, log *session.Log, hdrReason, startSource string) *Agent {
	a := &Agent{
		cfg:        cfg,
		id:         log.Header().ID,
		w:          w,
		p:          newPersister(w, log.Len()),
		ops:        make(chan func()),
		quit:       make(chan struct{}),
		done:       make(chan struct{}),
		log:        log,
		status:     Idle,
		pendingIDs: map[string]struct{}{},
		notify:     make(chan struct{}),
		settledCh:  make(chan struct{}),
		hdrReason:  hdrReason,
		system:     cfg.system(),
		dynamic:    slices.ContainsFunc(cfg.System, func(s Section) bool { return s.Dynamic != nil }),
		sent:       lastSent(log),
	}
	u := log.LastUsage()
	a.lastTokens = u.Input + u.Output
	a.subs.init()
	go a.loop()
	if l, ok := w.(store.Leased); ok {
		go a.watchLease(l.Lost())
	}
	if len(cfg.Hooks.SessionStart) > 0 {
		a.do(func() {
			a.startSource = startSource
			a.driving = true
			a.busy.Add(1)
			go a.drive()
		})
	}
	return a
}

// lastSent reconstructs from a resumed log the last request's shape and
// the messages it shared with what the projection holds now: those that
// come from events before the request's response (or, when it has none,
// before its header). A compaction summary placed among them since shadows
// the rest: the next request's prefix broke at the summary.
func lastSent(log *session.Log) sentRequest {
	h := log.RequestHeader()
	if h == nil {
		return sentRequest{}
	}
	s := sentRequest{known: true, model: h.Model, system: h.System, tools: h.Tools}
	at := log.Len() - 1
	for ; at >= 0; at-- {
		if t := log.Event(at).Type; t == session.TypeAssistantMessage || t == session.TypeRequestHeader {
			break
		}
	}
	msgs, seqs := log.Messages(), log.Projection().Seqs()
	j := 0
	for j < len(seqs) && seqs[j] < at {
		j++
	}
	s.msgs, s.n = msgs[:j], j
	if j < len(seqs) {
		if p, err := log.Event(seqs[j]).Decode(); err == nil {
			if u, ok := p.(*session.UserMessage); ok && u.Replaces != nil {
				s.n, s.compacted = j+1, true
			}
		}
	}
	return s
}

func (a *Agent) loop() {
	defer close(a.done)
	for {
		select {
		case fn := <-a.ops:
			fn()
		case <-a.quit:
			return
		}
	}
}

// exec runs fn on the owner goroutine and waits for it. It returns
// ErrClosed when the owner has exited.
func (a *Agent) exec(fn func()) error {
	ran := make(chan struct{})
	select {
	case a.ops <- func() { fn(); close(ran) }:
		<-ran
		return nil
	case <-a.done:
		return ErrClosed
	}
}

// do is exec for the driver and workers, which only run while the owner
// does.
func (a *Agent) do(fn func()) { _ = a.exec(fn) }

// ID returns the session id.
func (a *Agent) ID() string { return a.id }

// Stored reports whether the session exists in the store: always for a
// resumed or forked session; for a new one, from its first event that is
// not a log-only record (see New).
func (a *Agent) Stored() bool {
	if lw, ok := a.w.(*lazyWriter); ok {
		return lw.created()
	}
	return true
}

// Status reports idle or running.
func (a *Agent) Status() Status {
	s := Idle
	if a.exec(func() { s = a.status }) != nil {
		return Idle
	}
	return s
}

// Send queues a prompt: one Send is at most one turn. When the agent is
// idle, admission starts at once. It returns the message id (minted when
// m.ID is empty).
func (a *Agent) Send(m Message) (string, error) { return a.submit(m, false) }

// Steer redirects the running turn at its next safe step boundary. With no
// admission running and no turn open it behaves as Send.
func (a *Agent) Steer(m Message) (string, error) { return a.submit(m, true) }

// ErrTurnNotRunning: SteerTurn's turn is not the open turn.
var ErrTurnNotRunning = errors.New("agent: turn not running")

// SteerTurn steers turn like Steer, but only while that turn is open: it
// never queues the message as a turn of its own. When turn is not the open
// turn (it ended, or has not started) it returns an error wrapping
// ErrTurnNotRunning that names the open turn, and changes nothing.
func (a *Agent) SteerTurn(turn int, m Message) (string, error) {
	return a.submitIf(m, func() error {
		cur, open := a.log.Turn()
		switch {
		case open && cur == turn:
			return nil
		case open:
			return fmt.Errorf("%w: turn %d is not open (turn %d is)", ErrTurnNotRunning, turn, cur)
		}
		return fmt.Errorf("%w: turn %d is not open (no turn is; the last was %d)", ErrTurnNotRunning, turn, cur)
	})
}

// Len returns the number of events in the session's log now.
func (a *Agent) Len() int64 {
	var n int64
	if a.exec(func() { n = a.log.Len() }) != nil {
		return a.log.Len() // the owner has exited; the log no longer changes
	}
	return n
}

func validContent(c []llm.Part) bool {
	for _, p := range c {
		if p.Text != "" || p.Data != "" {
			return true
		}
	}
	return false
}

func (a *Agent) submit(m Message, steer bool) (string, error) { return a.submitAs(m, steer, nil) }

// submitIf submits m as steering when pre (run on the owner) returns nil.
func (a *Agent) submitIf(m Message, pre func() error) (string, error) {
	return a.submitAs(m, true, pre)
}

func (a *Agent) submitAs(m Message, steer bool, pre func() error) (string, error) {
	if !validContent(m.Content) {
		return "", ErrEmpty
	}
	if m.Source.Kind == "" {
		m.Source = session.Source{Kind: session.SourceUser}
	}
	m.Content = slices.Clone(m.Content)
	var err error
	if xerr := a.exec(func() {
		if a.closed {
			err = ErrClosed
			return
		}
		if pre != nil {
			if err = pre(); err != nil {
				return
			}
		}
		if m.ID == "" {
			m.ID = a.mintID()
		} else if a.idTaken(m.ID) {
			err = fmt.Errorf("%w: %q", ErrDuplicateID, m.ID)
			return
		}
		a.pendingIDs[m.ID] = struct{}{}
		if steer && a.admitting() {
			a.outbox = append(a.outbox, staged{steering: true, msg: m})
			a.emit(Live{Type: LiveQueued, Message: &m, Placement: PlacementSteering})
			return
		}
		a.queue = append(a.queue, queued{msg: m, steer: steer})
		a.emit(Live{Type: LiveQueued, Message: &m, Placement: PlacementQueued})
		a.parked = false
		a.wake()
	}); xerr != nil {
		return "", xerr
	}
	return m.ID, err
}

// Inject adds supplementary model input. With no admission running and no
// turn open it appends one user/message at once, outside any turn, and
// starts an asynchronous flush (WhenIdle and Close wait for it); it does
// not open a turn, change the status or call the model. Otherwise the
// context waits in the outbox for the next safe boundary of the turn. A
// prompt sent and not yet taken up counts as a running admission (Send
// starts it at once): context injected after it follows that prompt.
func (a *Agent) Inject(ac AdditionalContext) error {
	if !validContent(ac.Content) {
		return ErrEmpty
	}
	if ac.Source.Kind == "" {
		return ErrNoSource
	}
	ac.Content = slices.Clone(ac.Content)
	var err error
	if xerr := a.exec(func() {
		if a.closed {
			err = ErrClosed
			return
		}
		if a.admitting() {
			a.outbox = append(a.outbox, staged{ctx: ac})
			return
		}
		var ev session.Event
		if ev, err = a.appendMsg(ac); err != nil {
			return
		}
		a.flushIdle(ev.Seq + 1)
	}); xerr != nil {
		return xerr
	}
	return err
}

// Cancel aborts the running admission or turn with cause (the first cause
// wins; session.CauseUser, CauseHook, CauseParent, ...). Unless KeepInbox,
// queued prompts and staged steering are discarded; staged context is
// still committed before turn/end. A cancel while idle with nothing
// pending does nothing.
func (a *Agent) Cancel(cause string, opts CancelOptions) {
	if cause == "" {
		cause = session.CauseUser
	}
	_ = a.exec(func() { a.cancelLocked(cause, opts) })
}

func (a *Agent) cancelLocked(cause string, opts CancelOptions) {
	if a.act != nil {
		if a.act.cause == "" {
			a.act.cause = cause
		}
		a.act.cancelled = true
		a.act.cancel(errCancel{a.act.cause})
	}
	if opts.KeepInbox {
		if a.act != nil || len(a.queue) > 0 {
			a.parked = true
		}
		return
	}
	var gone []Message
	for _, q := range a.queue {
		gone = append(gone, q.msg)
	}
	a.queue = nil
	kept := a.outbox[:0:0]
	for _, s := range a.outbox {
		if s.steering {
			gone = append(gone, s.msg)
		} else {
			kept = append(kept, s)
		}
	}
	a.outbox = kept
	a.discard(gone)
	if !a.window {
		// No admission or turn will commit the context staged for the
		// prompts just dropped: it becomes history now.
		a.commitStagedContext()
	}
}

// admitting reports whether an admission runs or a turn is open, or a
// prompt waits for the driver to take it up: Send on an idle agent starts
// its admission at once, so what is steered or injected after it is staged
// for that prompt, as during its admission. Parked prompts wait for Wake:
// nothing is staged for them.
func (a *Agent) admitting() bool {
	return a.window || (len(a.queue) > 0 && !a.parked && !a.closed)
}

// commitStagedContext appends the context in the outbox as out-of-turn
// messages and starts their flush; steering stays staged. It is for when
// no admission or turn is open to drain it: a blocked prompt, or queued
// prompts cancelled before their admission began.
func (a *Agent) commitStagedContext() {
	var kept []staged
	upTo := int64(-1)
	for _, s := range a.outbox {
		if s.steering {
			kept = append(kept, s)
			continue
		}
		if ev, err := a.appendMsg(s.ctx); err == nil {
			upTo = ev.Seq + 1
		}
	}
	a.outbox = kept
	if upTo >= 0 {
		a.flushIdle(upTo)
	}
}

func (a *Agent) discard(msgs []Message) {
	if len(msgs) == 0 {
		return
	}
	for _, m := range msgs {
		delete(a.pendingIDs, m.ID)
	}
	a.emit(Live{Type: LiveDiscarded, Messages: msgs})
}

// WhenIdle returns when no admission, turn, waking queued prompt, session
// start or idle-inject flush remains, or when ctx is done. A failed flush
// does not make it fail.
//
// Called from a hook or tool body with the context it was given, it
// returns ErrBusy at once: the agent cannot become idle while the caller
// holds its turn.
func (a *Agent) WhenIdle(ctx context.Context) error {
	if ctx.Value(driverKey{}) == a {
		return ErrBusy
	}
	var ch chan struct{}
	if err := a.exec(func() {
		if a.quiet() {
			return
		}
		ch = make(chan struct{})
		a.idleWaiters = append(a.idleWaiters, ch)
	}); err != nil {
		return err
	}
	if ch == nil {
		return nil
	}
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (a *Agent) quiet() bool { return !a.driving && a.idleFlushes == 0 }

func (a *Agent) checkIdle() {
	if !a.quiet() {
		return
	}
	for _, ch := range a.idleWaiters {
		close(ch)
	}
	a.idleWaiters = nil
}

// Close disposes the agent: cancel with cause "closed" (queued prompts and
// staged steering are discarded), wait until the turn, hooks, tools, model
// streams and idle flushes have settled, flush the log, and release the
// session. After Close every method returns ErrClosed; a second Close
// waits for the first to finish and returns ErrClosed (or, when the agent
// stopped itself because its session lease was lost, that
// store.ErrLeaseLost). If ctx ends first,
// Close returns its error and the agent finishes closing in the
// background.
//
// Called from a hook or tool body with the context it was given, Close
// starts closing and returns nil at once (it cannot wait for the turn that
// is running it). Subscribers get every live event emitted before Close
// finished; their goroutines end after delivering them, so a subscriber
// may call Close too.
func (a *Agent) Close(ctx context.Context) error {
	first := false
	if err := a.exec(func() {
		if a.closed {
			return
		}
		first = true
		a.closed = true
		a.cancelLocked(session.CauseClosed, CancelOptions{})
		if a.startCancel != nil {
			a.startCancel(errCancel{session.CauseClosed})
		}
	}); err != nil || !first {
		// Closed before: wait for that Close to settle.
		select {
		case <-a.closing():
		case <-ctx.Done():
			return ctx.Err()
		}
		if errors.Is(a.closeErr, store.ErrLeaseLost) {
			return a.closeErr // the agent stopped itself: say why
		}
		return ErrClosed
	}
	go func() {
		a.busy.Wait()
		var n int64
		a.do(func() { n = a.log.Len() })
		err := a.p.flush(context.Background(), n)
		if cerr := a.w.Close(); err == nil {
			err = cerr
		}
		a.do(func() { a.emit(Live{Type: LiveClosed, Err: err}) })
		close(a.quit)
		<-a.done
		a.subs.close()
		a.closeErr = err
		close(a.settledCh)
	}()
	if ctx.Value(driverKey{}) == a {
		return nil
	}
	select {
	case <-a.settledCh:
		return a.closeErr
	case <-ctx.Done():
		return ctx.Err()
	}
}

// watchLease stops the agent when its writer loses the session's lease
// (store.Leased: a store shared by several machines, where another node
// may now run the session). Nothing the agent did from then on could be
// logged, so nothing may happen: it closes itself as Close does (the turn
// is aborted, tools and streams are cancelled) and Close returns the
// writer's store.ErrLeaseLost, also when called afterwards. The new holder
// repairs the interrupted turn.
func (a *Agent) watchLease(lost <-chan struct{}) {
	select {
	case <-lost:
	case <-a.done:
		return
	}
	a.cfg.Logger.Error("agent: the session's lease was lost; stopping the agent", "session", a.id)
	_ = a.Close(context.Background())
}

// closing returns a channel closed once Close has settled.
func (a *Agent) closing() <-chan struct{} { return a.settledCh }

// wake starts the driver if it is not running. Owner only.
func (a *Agent) wake() {
	if a.closed || a.parked || len(a.queue) == 0 {
		return
	}
	a.setStatus(Running)
	if a.driving {
		return
	}
	a.driving = true
	a.busy.Add(1)
	go a.drive()
}

func (a *Agent) setStatus(s Status) {
	if a.status == s {
		return
	}
	a.status = s
	a.emit(Live{Type: LiveStatus, Status: s})
}

func (a *Agent) mintID() string {
	for {
		id := a.cfg.NewID("m")
		if !a.idTaken(id) {
			return id
		}
	}
}

func (a *Agent) idTaken(id string) bool {
	_, pending := a.pendingIDs[id]
	return pending || a.log.HasMessageID(id)
}

// append adds p, its secrets masked, to the log and hands it to the
// persister. Owner only. An error means the runtime broke the session
// invariant: a bug.
func (a *Agent) append(p session.Payload) (session.Event, error) {
	p = a.redact(p)
	ev, err := a.log.Append(a.cfg.Clock(), p)
	if err != nil {
		a.cfg.Logger.Error("agent: append refused", "session", a.id, "type", p.EventType(), "err", err)
		return ev, err
	}
	a.p.accept(ev)
	close(a.notify)
	a.notify = make(chan struct{})
	return ev, nil
}

// redact returns p with every secret the Redactor knows masked. p is
// encoded; only when the encoding holds a secret is a new payload decoded
// from the masked encoding (masks are plain text, valid inside a JSON
// string). p itself is never changed.
func (a *Agent) redact(p session.Payload) session.Payload {
	r := a.cfg.Redactor
	if !r.Active() {
		return p
	}
	data, err := json.Marshal(p)
	if err != nil || len(data) == 0 {
		return p
	}
	masked := r.Bytes(data)
	if &masked[0] == &data[0] {
		return p
	}
	q, err := session.Event{Type: p.EventType(), Data: masked}.Decode()
	if err != nil {
		a.cfg.Logger.Error("agent: cannot mask a secret in an event; logging it unmasked", "session", a.id, "type", p.EventType(), "err", err)
		return p
	}
	return q
}

// SetTitle names the session. A new session not stored yet (see New) gets
// it in the header it will be created with; otherwise a log-only
// session/title event is appended (the latest one wins over the header's
// title). It may be called from hooks and from any goroutine; a caller
// that must not title a session for a prompt admission blocks calls it
// from the outside of the PromptAdmission chain, once the rest allowed the
// prompt. An empty title is ignored. The title is masked by the Redactor
// like every event, in the header too.
func (a *Agent) SetTitle(title string) error {
	title = strings.TrimSpace(a.cfg.Redactor.String(title))
	if title == "" {
		return nil
	}
	if lw, ok := a.w.(*lazyWriter); ok && lw.retitle(title) {
		return nil
	}
	var err error
	if xerr := a.exec(func() {
		if a.closed && a.act == nil && !a.driving {
			err = ErrClosed
			return
		}
		var ev session.Event
		if ev, err = a.append(&session.SessionTitle{Title: title}); err == nil && !a.window {
			a.flushIdle(ev.Seq + 1)
		}
	}); xerr != nil {
		return xerr
	}
	return err
}

// appendMsg appends an additional context as its own user/message.
func (a *Agent) appendMsg(ac AdditionalContext) (session.Event, error) {
	return a.append(&session.UserMessage{ID: a.mintID(), Content: ac.Content, Source: ac.Source})
}

// flushIdle starts an asynchronous flush up to seq; WhenIdle and Close wait
// for it. Owner only.
func (a *Agent) flushIdle(upTo int64) {
	a.idleFlushes++
	a.busy.Add(1)
	go func() {
		defer a.busy.Done()
		err := a.p.flush(context.Background(), upTo)
		a.do(func() {
			a.idleFlushes--
			if err != nil {
				a.flushFailed(err)
			}
			a.checkIdle()
		})
	}()
}

// flushFailed reports a failed flush through slog and a live event; the
// events stay queued and the next flush retries them. Owner only.
func (a *Agent) flushFailed(err error) {
	seqs := a.p.pending()
	a.cfg.Logger.Warn("agent: session flush failed; will retry", "session", a.id, "seqs", len(seqs), "err", err)
	a.emit(Live{Type: LiveFlushError, Seqs: seqs, Err: err})
}

// drain commits the whole outbox in arrival order: steering as
// steering/message, context as user/message. It reports whether steering
// was drained. Owner only, inside turn.
func (a *Agent) drain(turn int) (steered bool) {
	items := a.outbox
	a.outbox = nil
	cancelled := a.act != nil && a.act.cancelled
	for _, it := range items {
		if it.steering && cancelled {
			// Kept (KeepInbox) for the next admitted prompt: an aborted
			// turn takes no more steering.
			a.outbox = append(a.outbox, it)
			continue
		}
		if it.steering {
			ev, err := a.append(&session.SteeringMessage{Turn: turn, ID: it.msg.ID, Content: it.msg.Content, Source: it.msg.Source})
			if err == nil {
				delete(a.pendingIDs, it.msg.ID)
				m := it.msg
				a.emit(Live{Type: LiveDequeued, Message: &m, Seq: ev.Seq})
				steered = true
			}
			continue
		}
		_, _ = a.appendMsg(it.ctx)
	}
	return steered
}

// stage adds contexts to the outbox, defaulting their source. Owner only.
func (a *Agent) stage(ctxs []AdditionalContext, def session.Source) {
	for _, c := range ctxs {
		if !validContent(c.Content) {
			continue
		}
		if c.Source.Kind == "" {
			c.Source = def
		}
		a.outbox = append(a.outbox, staged{ctx: c})
	}
}

// RecordHookResult appends a log-only hook/result event (a log-only record), e.g. by
// a command-hook bridge after each hook process ran. It may be called from
// hooks (on the driver) or from any goroutine; the event lands at once,
// between turns or inside the open turn (Turn is set from the log when
// nil and a turn is open).
func (a *Agent) RecordHookResult(r session.HookResult) error {
	var err error
	if xerr := a.exec(func() {
		if a.closed && a.act == nil && !a.driving {
			err = ErrClosed
			return
		}
		if turn, open := a.log.Turn(); open && r.Turn == nil {
			r.Turn = &turn
		}
		var ev session.Event
		if ev, err = a.append(&r); err == nil && !a.window {
			// Between turns nothing else will flush it soon.
			a.flushIdle(ev.Seq + 1)
		}
	}); xerr != nil {
		return xerr
	}
	return err
}

// Wake runs the prompts that a Cancel with KeepInbox parked, as the next
// Send or Steer would; it does nothing when none are parked. A face calls
// it when the person asks for the queue to go on without a new prompt.
func (a *Agent) Wake() {
	_ = a.exec(func() {
		if a.closed || !a.parked {
			return
		}
		a.parked = false
		a.wake()
	})
}
