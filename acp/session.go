package acp

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	sdk "github.com/coder/acp-go-sdk"

	"github.com/reinhq/rein/agent"
	"github.com/reinhq/rein/llm"
	"github.com/reinhq/rein/session"
	"github.com/reinhq/rein/store"
	"github.com/reinhq/rein/transcript"
)

// session is one open ACP session: its agent, the follower that turns the
// agent's log into updates, and the prompts waiting for their turns.
type sess struct {
	srv *Server
	id  string
	cwd string
	// ag and op are set once the agent started: at session/resume, or at
	// first use (ensure) of a new or loaded session, from pending.
	ag      *agent.Agent
	op      *Opened
	pending *OpenRequest
	mode    string // the permission mode in force (or to apply at start)
	startMu sync.Mutex
	// replayed is where a loaded session's replay stopped: the follower
	// starts there once the agent runs. last is the last event it showed,
	// to tell the log the agent loads from one changed meanwhile; stale
	// is set once it was.
	replayed int64
	last     eventMark
	stale    error

	// sem admits one prompt at a time.
	sem chan struct{}

	// b is the follower's translator: replay runs it first (no deltas),
	// then the follower goroutine owns it (Stream), and with it the
	// slices emit reuses for every event.
	b       transcript.Builder
	entries []transcript.Entry
	updates []sdk.SessionUpdate

	mu        sync.Mutex
	cond      *sync.Cond
	m         mapper
	pos       int64            // next seq the follower emits
	openTurn  int              // the open turn (0: none), as emitted
	calls     map[string]bool  // tool calls shown and not yet answered
	waiters   map[string]*wait // by prompt message id
	finished  []*wait          // turns ended, released after their updates are written
	cancelled bool             // session/cancel arrived for the running prompt
	always    map[string]bool  // rules allowed "always" in this session
	announced bool             // available_commands_update sent
	stopLive  func()
	stopped   chan struct{} // the follower ended
	cancelF   context.CancelFunc
}

// wait is a prompt waiting for its turn's end.
type wait struct {
	id      string
	turn    int
	done    chan struct{}
	reason  *session.Reason // the turn's outcome
	blocked *string         // admission blocked it (the reason)
	dropped bool            // discarded before admission (cancel)
}

func newSession(srv *Server, cwd string) *sess {
	s := &sess{srv: srv, cwd: cwd, sem: make(chan struct{}, 1), calls: map[string]bool{},
		waiters: map[string]*wait{}, always: map[string]bool{}, stopped: make(chan struct{})}
	s.cond = sync.NewCond(&s.mu)
	s.m.echo = map[string]bool{}
	s.b.Cwd = cwd
	s.mode = srv.cfg.Mode
	return s
}

func (s *sess) opened(op *Opened) {
	s.mu.Lock()
	s.op, s.ag = op, op.Agent
	s.mu.Unlock()
}

// ensure starts a new session's agent at its first use, applying a mode
// the client chose meanwhile. It returns at once when the agent runs.
func (s *sess) ensure(ctx context.Context) error {
	s.startMu.Lock()
	defer s.startMu.Unlock()
	if s.ag != nil {
		return nil
	}
	if s.pending == nil {
		return sdk.NewInternalError(map[string]any{"error": "the session has no agent"})
	}
	if s.stale != nil {
		return s.stale
	}
	if err := s.openAgent(ctx, *s.pending); err != nil {
		return err
	}
	if err := s.continues(ctx); err != nil {
		// Not this session's history: release it untouched by this
		// connection, and say so from now on.
		_ = s.ag.Close(context.Background())
		if s.op.Close != nil {
			_ = s.op.Close()
		}
		s.mu.Lock()
		s.ag, s.op, s.stale = nil, nil, err
		s.mu.Unlock()
		return err
	}
	s.pending = nil
	s.mu.Lock()
	mode := s.mode
	s.mu.Unlock()
	switch {
	case mode != s.srv.cfg.Mode && s.op.SetMode != nil: // the client chose one meanwhile
		if err := s.op.SetMode(mode); err != nil {
			return sdk.NewInternalError(map[string]any{"error": err.Error()})
		}
	case s.op.Mode != "" && s.op.Mode != mode: // the workspace says another
		s.mu.Lock()
		s.mode = s.op.Mode
		s.mu.Unlock()
		u := sdk.SessionUpdate{CurrentModeUpdate: &sdk.SessionCurrentModeUpdate{CurrentModeId: sdk.SessionModeId(s.op.Mode), SessionUpdate: "current_mode_update"}}
		s.write(appendNotification(nil, s.id, &u))
	}
	s.start(s.replayed)
	return nil
}

// eventMark tells an event of a log from another at the same seq: its
// seq, type, time and size (a replay marks every event it shows, so the
// mark costs no pass over the data).
type eventMark struct {
	seq  int64 // -1: none
	typ  session.Type
	ms   int64
	size int
}

func markOf(ev session.Event) eventMark {
	return eventMark{seq: ev.Seq, typ: ev.Type, ms: ev.Time.UnixMilli(), size: len(ev.Data)}
}

// continues checks that the log the agent loaded continues the one a
// session/load replayed: it holds at least the events replayed, the last
// shown being the same event. Another process may have used the session
// between the replay and now; events it added are shown by the follower,
// but a log that was replaced or cut (a repair by hand, a delete and an
// import) is not the history the client shows, and the session must be
// loaded again.
func (s *sess) continues(ctx context.Context) error {
	if s.replayed == 0 {
		return nil
	}
	changed := sdk.NewInternalError(map[string]any{"error": fmt.Sprintf("session %q changed since it was loaded (its log no longer holds the events shown): load it again", s.id)})
	if s.ag.Len() < s.replayed {
		return changed
	}
	if s.last.seq < 0 {
		return nil
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for ev, err := range s.ag.Events(ctx, s.last.seq) {
		if err != nil || markOf(ev) != s.last {
			return changed
		}
		break
	}
	return nil
}

// started reports whether the agent runs.
func (s *sess) started() bool {
	s.startMu.Lock()
	defer s.startMu.Unlock()
	return s.ag != nil
}

func (s *sess) modes() *sdk.SessionModeState {
	cfg := s.srv.cfg
	if len(cfg.Modes) == 0 {
		return nil
	}
	s.mu.Lock()
	st := &sdk.SessionModeState{CurrentModeId: sdk.SessionModeId(s.mode)}
	s.mu.Unlock()
	for _, m := range cfg.Modes {
		sm := sdk.SessionMode{Id: sdk.SessionModeId(m.ID), Name: m.Name}
		if m.Description != "" {
			sm.Description = sdk.Ptr(m.Description)
		}
		st.AvailableModes = append(st.AvailableModes, sm)
	}
	return st
}

func (s *sess) setMode(id string) error {
	known := false
	for _, m := range s.srv.cfg.Modes {
		known = known || m.ID == id
	}
	if !known {
		return invalidParams("unknown mode %q", id)
	}
	s.startMu.Lock()
	defer s.startMu.Unlock()
	if s.ag != nil { // else applied when the agent starts
		if s.op.SetMode == nil {
			return sdk.NewMethodNotFound("session/set_mode")
		}
		if err := s.op.SetMode(id); err != nil {
			return sdk.NewInternalError(map[string]any{"error": err.Error()})
		}
	}
	s.mu.Lock()
	s.mode = id
	s.mu.Unlock()
	return nil
}

// write sends encoded notification lines.
func (s *sess) write(b []byte) {
	if len(b) == 0 {
		return
	}
	if _, err := s.srv.out.Write(b); err != nil {
		s.srv.log.Debug("acp: write failed", "err", err)
	}
}

// replayBatch is how many bytes of updates replay gathers per write.
const replayBatch = 64 << 10

// replay streams the stored session from the store, every line validated,
// and writes the updates of every event, the events crash repair would add
// included (nothing is written to the log: the agent writes the repair when
// it starts). Only the translator's state (the open calls, the step's text)
// is held, never the log. A session a writer holds (running in another
// process) is refused before anything is sent.
func (s *sess) replay(ctx context.Context) error {
	var buf []byte
	s.last.seq = -1
	visit := func(ev session.Event, p session.Payload) error {
		buf = s.emitDecoded(buf, ev, p)
		s.last = markOf(ev)
		if len(buf) >= replayBatch {
			s.write(buf)
			buf = buf[:0]
		}
		return nil
	}
	res, err := store.Stream(ctx, s.srv.cfg.Store, s.id, store.StreamOptions{SkipChunks: true, RefuseHeld: true}, visit)
	if err != nil {
		s.write(buf)
		return storeError(s.id, err)
	}
	for _, ev := range res.Repair {
		_ = visit(ev, nil)
	}
	s.write(buf)
	if res.Locked != nil {
		// A writer took the session while it was read: its open turn is
		// running, not interrupted.
		return storeError(s.id, res.Locked)
	}
	s.mu.Lock()
	s.replayed = res.Events + int64(len(res.Repair))
	s.pos = s.replayed
	s.mu.Unlock()
	return nil
}

// emit translates one event and appends its notifications to buf; it
// updates what waiters watch (the open turn, the calls shown) and moves the
// waiter of a turn that ended to s.finished, released once buf is written.
func (s *sess) emit(buf []byte, ev session.Event) []byte { return s.emitDecoded(buf, ev, nil) }

// emitDecoded is emit for an event whose payload p is decoded already
// (nil: not yet).
func (s *sess) emitDecoded(buf []byte, ev session.Event, p session.Payload) []byte {
	es, err := s.b.AppendEntries(s.entries[:0], ev, p)
	s.entries = es
	if err != nil {
		s.srv.log.Warn("acp: event not shown", "session", s.id, "seq", ev.Seq, "err", err)
		return buf
	}
	if len(es) == 0 {
		return buf // most events (chunks) show nothing
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range es {
		e := &es[i]
		s.updates = s.m.appendUpdates(s.updates[:0], e)
		for j := range s.updates {
			buf = appendNotification(buf, s.id, &s.updates[j])
		}
		switch e.Kind {
		case transcript.ToolCall:
			s.calls[e.Tool.CallID] = true
		case transcript.ToolResult:
			delete(s.calls, e.Tool.CallID)
		case transcript.TurnStart:
			s.openTurn = e.Turn
			if w := s.waiters[e.ID]; w != nil {
				w.turn = e.Turn
			}
		case transcript.TurnEnd:
			s.openTurn = 0
			for id, w := range s.waiters {
				if w.turn == e.Turn {
					r := *e.Reason
					w.reason = &r
					delete(s.waiters, id)
					s.finished = append(s.finished, w)
				}
			}
		}
	}
	return buf
}

// release wakes the prompts whose turns ended (their updates are written).
// s.mu held.
func (s *sess) release() {
	for _, w := range s.finished {
		close(w.done)
	}
	s.finished = nil
}

// start begins following the log live from seq from.
func (s *sess) start(from int64) {
	ctx, cancel := context.WithCancel(s.srv.ctx)
	s.cancelF = cancel
	s.b.Stream = true
	s.stopLive = s.ag.Subscribe(ctx, s.live)
	go s.follow(ctx, from)
}

// follow writes the updates of every event from seq from on, and wakes the
// prompts whose turn it has passed.
func (s *sess) follow(ctx context.Context, from int64) {
	defer close(s.stopped)
	defer func() {
		s.mu.Lock()
		s.pos = -1 // no more progress: wake every waiter
		s.cond.Broadcast()
		s.mu.Unlock()
	}()
	var buf []byte
	for ev, err := range s.ag.Events(ctx, from) {
		if err != nil {
			return
		}
		buf = s.emit(buf[:0], ev)
		s.write(buf)
		s.mu.Lock()
		s.pos = ev.Seq + 1
		s.release()
		s.cond.Broadcast()
		s.mu.Unlock()
	}
}

// caughtUp waits until the follower has written every event the log holds
// now (or stopped).
func (s *sess) caughtUp() {
	n := s.ag.Len()
	s.mu.Lock()
	defer s.mu.Unlock()
	for s.pos >= 0 && s.pos < n {
		s.cond.Wait()
	}
}

// live handles the agent's live events: a prompt blocked by admission or
// discarded before it ran never reaches the log, so its waiter is released
// here, after the follower wrote what the log holds.
func (s *sess) live(l agent.Live) {
	switch l.Type {
	case agent.LiveBlocked:
		if l.Message == nil {
			return
		}
		s.caughtUp()
		s.mu.Lock()
		w := s.waiters[l.Message.ID]
		s.mu.Unlock()
		if w == nil {
			return
		}
		e := transcript.BlockedEntry(l.Message.ID, l.Message.Content, l.Message.Source, l.Reason)
		var buf []byte
		s.mu.Lock()
		for _, u := range s.m.appendUpdates(nil, &e) {
			buf = appendNotification(buf, s.id, &u)
		}
		s.mu.Unlock()
		s.write(buf)
		s.mu.Lock()
		reason := l.Reason
		w.blocked = &reason
		delete(s.waiters, w.id)
		close(w.done)
		s.mu.Unlock()
	case agent.LiveDiscarded:
		s.mu.Lock()
		for _, m := range l.Messages {
			if w := s.waiters[m.ID]; w != nil && w.turn == 0 {
				w.dropped = true
				delete(s.waiters, w.id)
				close(w.done)
			}
		}
		s.mu.Unlock()
	}
}

// waitCall waits until the follower has shown tool call id (its card must
// exist before a permission request or a terminal refers to it).
func (s *sess) waitCall(ctx context.Context, id string) {
	stop := context.AfterFunc(ctx, func() {
		s.mu.Lock()
		s.cond.Broadcast()
		s.mu.Unlock()
	})
	defer stop()
	s.mu.Lock()
	defer s.mu.Unlock()
	for !s.calls[id] && s.pos >= 0 && ctx.Err() == nil {
		s.cond.Wait()
	}
}

// close stops following and closes the agent: a running turn is cancelled
// (cause "closed"), the log flushed and released.
func (s *sess) close(ctx context.Context) error {
	if !s.started() {
		return nil
	}
	err := s.ag.Close(ctx)
	if s.op != nil && s.op.Close != nil {
		err = errors.Join(err, s.op.Close())
	}
	if s.cancelF != nil {
		<-s.stopped // Events ends once the closed agent's log is read out
		s.cancelF()
		s.stopLive()
	}
	s.mu.Lock()
	for id, w := range s.waiters {
		w.dropped = true
		delete(s.waiters, id)
		close(w.done)
	}
	s.mu.Unlock()
	return err
}

// cancel cancels the running prompt: its turn, its admission, or its
// start (a prompt whose agent is still starting answers cancelled without
// running). It never waits for a start in progress.
func (s *sess) cancel() {
	s.mu.Lock()
	s.cancelled = true
	ag := s.ag
	s.mu.Unlock()
	if ag != nil {
		ag.Cancel(session.CauseUser, agent.CancelOptions{})
	}
}

// commands are the slash commands rein offers.
var commands = []sdk.AvailableCommand{
	{Name: "compact", Description: "Summarize the conversation so far to free the model's context (the transcript keeps everything)",
		Input: &sdk.AvailableCommandInput{Unstructured: &sdk.UnstructuredCommandInput{Hint: "optional instructions for the summary"}}},
}

// announce sends the available commands once per session.
func (s *sess) announce() {
	s.mu.Lock()
	done := s.announced
	s.announced = true
	s.mu.Unlock()
	if done {
		return
	}
	u := sdk.SessionUpdate{AvailableCommandsUpdate: &sdk.SessionAvailableCommandsUpdate{AvailableCommands: commands, SessionUpdate: "available_commands_update"}}
	s.write(appendNotification(nil, s.id, &u))
}

// command recognises a slash command in a prompt's first text block.
func command(blocks []sdk.ContentBlock) (name, input string, ok bool) {
	if len(blocks) == 0 || blocks[0].Text == nil {
		return "", "", false
	}
	t := strings.TrimSpace(blocks[0].Text.Text)
	if !strings.HasPrefix(t, "/") {
		return "", "", false
	}
	name, input, _ = strings.Cut(t[1:], " ")
	for _, c := range commands {
		if c.Name == name {
			return name, strings.TrimSpace(input), true
		}
	}
	return "", "", false
}

// prompt runs one prompt: it waits for the session's previous prompt,
// injects embedded resources as context the person attached, sends the
// prompt and answers when its turn has ended and every update of the turn
// is written.
func (s *sess) prompt(p sdk.PromptRequest) (sdk.PromptResponse, error) {
	select {
	case s.sem <- struct{}{}:
	case <-s.srv.ctx.Done():
		return sdk.PromptResponse{StopReason: sdk.StopReasonCancelled}, nil
	}
	defer func() { <-s.sem }()
	s.mu.Lock()
	s.cancelled = false // a cancel from before this prompt is not for it
	s.mu.Unlock()
	if err := s.ensure(s.srv.ctx); err != nil {
		return sdk.PromptResponse{}, err
	}
	s.announce()
	s.mu.Lock()
	cancelled := s.cancelled
	s.mu.Unlock()
	if cancelled { // while the agent started (the trust question)
		return sdk.PromptResponse{StopReason: sdk.StopReasonCancelled}, nil
	}

	if name, input, ok := command(p.Prompt); ok {
		return s.runCommand(name, input)
	}
	var words []sdk.ContentBlock
	var attached []agent.AdditionalContext
	for _, b := range p.Prompt {
		if b.Resource == nil {
			words = append(words, b)
			continue
		}
		parts, err := s.srv.parts([]sdk.ContentBlock{b})
		if err != nil {
			return sdk.PromptResponse{}, err
		}
		uri := ""
		if r := b.Resource.Resource.TextResourceContents; r != nil {
			uri = r.Uri
		}
		attached = append(attached, agent.AdditionalContext{Content: parts, Source: session.Source{Kind: session.SourceUserContext, Name: uri}})
	}
	content, err := s.srv.parts(words)
	if err != nil {
		return sdk.PromptResponse{}, err
	}
	if len(content) == 0 && len(attached) > 0 {
		// Only attachments: say so, so the turn has a prompt.
		content = llm.Text("(see the attached context)")
	}
	id := ""
	if p.MessageId != nil {
		id = *p.MessageId
	}
	if id == "" {
		id = agent.NewULID("m")
	}
	for _, c := range attached {
		if err := s.ag.Inject(c); err != nil {
			return sdk.PromptResponse{}, agentError(err)
		}
	}
	w := &wait{id: id, done: make(chan struct{})}
	s.mu.Lock()
	s.waiters[id] = w
	s.m.echo[id] = true
	s.mu.Unlock()
	if _, err := s.ag.Send(agent.Message{ID: id, Content: content}); err != nil {
		s.mu.Lock()
		delete(s.waiters, id)
		delete(s.m.echo, id)
		s.mu.Unlock()
		return sdk.PromptResponse{}, agentError(err)
	}
	select {
	case <-w.done:
	case <-s.srv.ctx.Done():
		return sdk.PromptResponse{StopReason: sdk.StopReasonCancelled}, nil
	}
	s.mu.Lock()
	cancelled = s.cancelled
	s.mu.Unlock()
	resp := sdk.PromptResponse{UserMessageId: &id}
	switch {
	case w.blocked != nil:
		resp.StopReason = sdk.StopReasonRefusal
		resp.Meta = map[string]any{"rein": map[string]any{"blocked": *w.blocked}}
		return resp, nil
	case w.dropped || w.reason == nil:
		resp.StopReason = sdk.StopReasonCancelled
		return resp, nil
	}
	resp.Meta = map[string]any{"rein": map[string]any{"turn": w.turn}}
	switch w.reason.Kind {
	case session.ReasonCompleted:
		resp.StopReason = sdk.StopReasonEndTurn
	case session.ReasonMaxTokens:
		resp.StopReason = sdk.StopReasonMaxTokens
	case session.ReasonAborted:
		resp.StopReason = sdk.StopReasonCancelled
	case reasonMaxSteps:
		resp.StopReason = sdk.StopReasonMaxTurnRequests
	case session.ReasonError:
		if cancelled {
			resp.StopReason = sdk.StopReasonCancelled
			return resp, nil
		}
		return sdk.PromptResponse{}, &sdk.RequestError{Code: -32603, Message: "Internal error",
			Data: map[string]any{"error": "the turn ended with an error: " + transcript.ReasonText(*w.reason), "turn": w.turn, "code": w.reason.Code}}
	default:
		resp.StopReason = sdk.StopReasonEndTurn
	}
	if cancelled {
		// ACP: a prompt cancelled by session/cancel answers "cancelled".
		resp.StopReason = sdk.StopReasonCancelled
	}
	return resp, nil
}

// reasonMaxSteps is the turn outcome of a step cap (written by runtimes
// that cap steps); ACP calls it max_turn_requests.
const reasonMaxSteps = "max-steps"

// runCommand runs a slash command as the prompt's work.
func (s *sess) runCommand(name, input string) (sdk.PromptResponse, error) {
	switch name {
	case "compact":
		before := s.ag.Len()
		err := s.ag.Compact(s.srv.ctx, agent.CompactOptions{Instructions: input})
		s.caughtUp()
		if err != nil && s.ag.Len() == before {
			// Refused before it started: nothing in the log says so (a
			// compaction that failed says it itself, "Compaction failed").
			title, status, text := "Nothing compacted", sdk.ToolCallStatusFailed, err.Error()
			if errors.Is(err, agent.ErrNothingToCompact) {
				title, status, text = "Nothing to compact yet", sdk.ToolCallStatusCompleted, "The conversation is too short to compact."
			}
			meta := map[string]any{"rein": map[string]any{"entry": "compaction"}}
			u := notice("rein-compaction-"+agent.NewULID(""), title, status, textContent(text), meta)
			s.write(appendNotification(nil, s.id, &u))
		}
	}
	return sdk.PromptResponse{StopReason: sdk.StopReasonEndTurn}, nil
}

// agentError turns an agent API error into a JSON-RPC error.
func agentError(err error) error {
	switch {
	case errors.Is(err, agent.ErrEmpty), errors.Is(err, agent.ErrDuplicateID), errors.Is(err, agent.ErrNoSource):
		return invalidParams("%v", err)
	}
	return sdk.NewInternalError(map[string]any{"error": err.Error()})
}

// steer serves _rein/steer.
func (s *sess) steer(p SteerRequest) (any, error) {
	if err := s.ensure(s.srv.ctx); err != nil {
		return nil, err
	}
	content, err := s.srv.parts(p.Content)
	if err != nil {
		return nil, err
	}
	m := agent.Message{ID: p.MessageID, Content: content}
	turn := 0
	if p.ExpectedTurn != nil {
		turn = *p.ExpectedTurn
	} else {
		s.mu.Lock()
		turn = s.openTurn
		s.mu.Unlock()
	}
	if turn > 0 {
		id, err := s.ag.SteerTurn(turn, m)
		switch {
		case err == nil:
			return SteerResponse{Status: Steered, MessageID: id, Turn: turn}, nil
		case !errors.Is(err, agent.ErrTurnNotRunning):
			return nil, agentError(err)
		case p.ExpectedTurn != nil:
			s.mu.Lock()
			open := s.openTurn
			s.mu.Unlock()
			return SteerResponse{Status: NotRunning, RunningTurn: open}, nil
		}
	} else if p.ExpectedTurn != nil {
		return SteerResponse{Status: NotRunning}, nil
	}
	id, err := s.ag.Steer(m)
	if err != nil {
		return nil, agentError(err)
	}
	return SteerResponse{Status: Queued, MessageID: id}, nil
}

// inject serves _rein/inject.
func (s *sess) inject(p InjectRequest) (any, error) {
	if err := s.ensure(s.srv.ctx); err != nil {
		return nil, err
	}
	content, err := s.srv.parts(p.Content)
	if err != nil {
		return nil, err
	}
	src := session.Source{Kind: session.SourceUserContext, Name: "acp"}
	if p.Source != nil {
		src = session.Source{Kind: p.Source.Kind, Name: p.Source.Name}
	}
	if src.Kind == "" || src.IsUser() {
		return nil, invalidParams("source kind %q: context needs a source other than user (what a person types is a prompt)", src.Kind)
	}
	if err := s.ag.Inject(agent.AdditionalContext{Content: content, Source: src}); err != nil {
		return nil, agentError(err)
	}
	s.caughtUp() // an idle inject is in the log: its update precedes the answer
	return InjectResponse{}, nil
}

// Approve asks the client whether a call may run
// (session/request_permission): allow once, allow always (when a rule can
// be written) or reject.
func (s *sess) Approve(ctx context.Context, req agent.ApprovalRequest) (agent.Approval, error) {
	rules := s.srv.cfg.Rules
	rule, canRule := "", false
	if rules != nil {
		rule, canRule = rules.Rule(s.cwd, req)
	}
	if canRule {
		s.mu.Lock()
		ok := s.always[rule]
		s.mu.Unlock()
		if ok {
			return agent.Approval{Allow: true, By: "rule:" + rule, Reason: "allowed always earlier in this session"}, nil
		}
	}
	s.waitCall(ctx, req.CallID)
	title, kind, paths, diff := transcript.Describe(req.Name, req.Arguments, s.cwd)
	content := diffContent(diff)
	if req.Reason != "" {
		content = append(content, textContent("rein asks because: "+req.Reason)...)
	}
	opts := []sdk.PermissionOption{{OptionId: "allow", Name: "Allow once", Kind: sdk.PermissionOptionKindAllowOnce}}
	if canRule {
		opts = append(opts, sdk.PermissionOption{OptionId: "always", Name: "Always allow " + rule, Kind: sdk.PermissionOptionKindAllowAlways})
	}
	opts = append(opts, sdk.PermissionOption{OptionId: "reject", Name: "Reject", Kind: sdk.PermissionOptionKindRejectOnce})
	resp, err := s.srv.conn.RequestPermission(ctx, sdk.RequestPermissionRequest{
		SessionId: sdk.SessionId(s.id),
		ToolCall: sdk.ToolCallUpdate{ToolCallId: sdk.ToolCallId(req.CallID), Title: &title, Kind: sdk.Ptr(toolKind(kind)),
			Status: sdk.Ptr(sdk.ToolCallStatusPending), RawInput: rawInput(req.Arguments), Locations: locations(paths), Content: content},
		Options: opts,
	})
	if err != nil {
		if ctx.Err() != nil {
			return agent.Approval{}, ctx.Err()
		}
		return agent.Approval{}, fmt.Errorf("acp: permission request: %w", err)
	}
	o := resp.Outcome
	switch {
	case o.Cancelled != nil:
		return agent.Approval{Allow: false, By: "user", Reason: "the permission request was cancelled"}, nil
	case o.Selected == nil:
		return agent.Approval{Allow: false, By: "user", Reason: "no answer to the permission request"}, nil
	}
	switch o.Selected.OptionId {
	case "allow":
		return agent.Approval{Allow: true, By: "user"}, nil
	case "always":
		if !canRule {
			break
		}
		s.mu.Lock()
		s.always[rule] = true
		s.mu.Unlock()
		if err := rules.Save(ctx, s.cwd, rule); err != nil {
			s.srv.log.Info("acp: rule not saved", "rule", rule, "err", err)
			return agent.Approval{Allow: true, By: "user", Reason: "allowed always (" + rule + "): " + err.Error()}, nil
		}
		return agent.Approval{Allow: true, By: "user", Reason: "allowed always (" + rule + ")"}, nil
	case "reject":
		return agent.Approval{Allow: false, By: "user", Reason: "rejected by the user"}, nil
	}
	return agent.Approval{Allow: false, By: "user", Reason: fmt.Sprintf("unknown permission option %q", o.Selected.OptionId)}, nil
}
