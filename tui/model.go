package tui

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"charm.land/bubbles/v2/key"
	"charm.land/bubbles/v2/textarea"
	tea "charm.land/bubbletea/v2"
	"charm.land/lipgloss/v2"
	"github.com/charmbracelet/x/ansi"

	"github.com/reinhq/rein/agent"
	"github.com/reinhq/rein/llm"
	"github.com/reinhq/rein/session"
	"github.com/reinhq/rein/transcript"
)

// Model is the terminal UI's Bubble Tea model. It is exported for tests
// and benchmarks that drive the update function directly; Run is the way
// to use it.
type Model struct {
	cfg  Config
	ctx  context.Context
	send func(tea.Msg)
	now  func() time.Time

	w, h     int
	th       theme
	themeSet bool
	md       markdown

	// The open session (nil while opening); gen tells its messages from
	// those of a session closed before.
	sess    *Session
	gen     int
	opening bool
	conv    *conv
	d       drawer
	feed    *feed
	visible []string

	// What the agent does, from its live events.
	running  bool
	since    time.Time
	queued   []agent.Message
	steering []agent.Message
	parked   bool   // a cancel kept queued prompts waiting
	retry    *retry // a failed request the agent sends again
	spin     int
	ticking  bool // a tick is on its way

	base, inc stats // the background scan and what followed it
	scanned   bool
	title     string

	in      textarea.Model
	dialogs []dialog
	comp    *completion
	// compCache holds the sessions listed for completion.
	compCache []pickItem
	hist      history
	escAt     time.Time
	quitAt    time.Time
	status    string // a transient line for the person
	sent      bool   // Config.Prompt was sent
	// forkPending opens the /fork picker once the scan is done.
	forkPending bool
	// back reopens the session a switch closed, should the switch fail.
	back *OpenRequest
	// model is the model /model chose: the sessions opened after it use
	// it too.
	model string
	// carry is a notice for the session being opened (why a switch
	// failed, shown in the session reopened instead).
	carry string
}

// completion offers session ids for an @session: word.
type completion struct {
	prefix string
	items  []pickItem
	sel    int
}

// history recalls earlier prompts.
type history struct {
	pos   int // index into the list while recalling; len(list) when not
	draft string
}

// NewModel returns the model of a terminal UI; Run uses it.
func NewModel(ctx context.Context, cfg Config) *Model {
	m := &Model{cfg: cfg, ctx: ctx, now: cfg.Now, w: 80, h: 24}
	if m.now == nil {
		m.now = time.Now
	}
	if cfg.Theme == "" {
		m.cfg.Theme = "auto"
	}
	m.setTheme("dark")
	m.send = func(tea.Msg) {}
	in := textarea.New()
	in.ShowLineNumbers = false
	in.Prompt = "› "
	in.Placeholder = "Ask rein… (/help for keys and commands)"
	in.DynamicHeight = true
	in.MinHeight = 1
	in.MaxHeight = 8
	in.CharLimit = 0
	in.SetVirtualCursor(false)
	km := textarea.DefaultKeyMap()
	km.InsertNewline = key.NewBinding(key.WithKeys("alt+enter", "ctrl+j", "shift+enter"))
	km.PageUp = key.NewBinding(key.WithDisabled())
	km.PageDown = key.NewBinding(key.WithDisabled())
	km.LinePrevious = key.NewBinding(key.WithKeys("up"))
	km.LineNext = key.NewBinding(key.WithKeys("down"))
	km.SelectAll = key.NewBinding(key.WithDisabled())
	in.KeyMap = km
	st := in.Styles()
	st.Focused.CursorLine = lipgloss.NewStyle()
	st.Focused.Placeholder = m.th.dim
	st.Blurred.Placeholder = m.th.dim
	in.SetStyles(st)
	in.Focus()
	m.in = in
	m.d.expanded = map[string]bool{}
	m.hist.pos = -1
	return m
}

func (m *Model) setTheme(name string) {
	if m.cfg.Theme != "auto" {
		name = m.cfg.Theme
	}
	m.th = newTheme(name)
	m.md = markdown{style: m.th.name}
	m.d.rc.th, m.d.rc.md = m.th, &m.md
	if m.conv != nil {
		m.conv.invalidate()
	}
}

// Init starts opening the first session.
func (m *Model) Init() tea.Cmd {
	m.ticking = true
	cmds := []tea.Cmd{m.open(OpenRequest{SessionID: m.cfg.SessionID}), tick()}
	if m.cfg.Theme == "auto" {
		cmds = append(cmds, tea.RequestBackgroundColor)
	}
	return tea.Batch(cmds...)
}

func tick() tea.Cmd {
	return tea.Tick(100*time.Millisecond, func(time.Time) tea.Msg { return tickMsg{} })
}

// open starts opening a session (Config.Open runs on its own goroutine:
// it may ask the trust question).
func (m *Model) open(req OpenRequest) tea.Cmd {
	m.gen++
	gen := m.gen
	m.opening = true
	if req.Model == "" {
		req.Model = m.model
	}
	req.Ask = &asker{send: m.sendFn()}
	req.Approver = &approver{send: m.sendFn()}
	open := m.cfg.Open
	ctx := m.ctx
	return func() tea.Msg {
		s, err := open(ctx, req)
		return openedMsg{gen: gen, sess: s, err: err, req: req}
	}
}

// sendFn returns a function that sends through whatever m.send is when
// called (the program is set after the model is made).
func (m *Model) sendFn() func(tea.Msg) { return func(msg tea.Msg) { m.send(msg) } }

// cwd is the session's working directory.
func (m *Model) cwd() string {
	if m.sess != nil && m.sess.Cwd != "" {
		return m.sess.Cwd
	}
	return m.cfg.Cwd
}

// Update handles one message.
func (m *Model) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	cmd := m.update(msg)
	m.layout()
	if t := m.wakeTicks(); t != nil {
		cmd = tea.Batch(cmd, t)
	}
	return m, cmd
}

// busy reports whether something moves on the screen by itself.
func (m *Model) busy() bool { return m.running || m.opening || m.retry != nil }

// wakeTicks restarts the ticks when something started moving.
func (m *Model) wakeTicks() tea.Cmd {
	if m.ticking || !m.busy() {
		return nil
	}
	m.ticking = true
	return tick()
}

func (m *Model) update(msg tea.Msg) tea.Cmd {
	switch msg := msg.(type) {
	case tea.WindowSizeMsg:
		if msg.Width != m.w && m.conv != nil {
			m.conv.invalidate()
		}
		m.w, m.h = msg.Width, msg.Height
		return nil
	case tea.BackgroundColorMsg:
		if !m.themeSet {
			m.themeSet = true
			if !msg.IsDark() {
				m.setTheme("light")
			}
		}
		return nil
	case tea.KeyPressMsg:
		return m.key(msg)
	case tea.PasteMsg:
		if len(m.dialogs) > 0 {
			return nil
		}
		var cmd tea.Cmd
		m.in, cmd = m.in.Update(msg)
		return cmd
	case tickMsg:
		// The spinner, the elapsed time and a retry's countdown move;
		// idle, nothing does and the ticks stop.
		m.spin++
		if m.busy() {
			return tick()
		}
		m.ticking = false
		return nil
	case openedMsg:
		return m.opened(msg)
	case feedMsg:
		if msg.gen != m.gen || m.feed == nil {
			return nil
		}
		m.take(msg)
		if msg.done {
			return nil
		}
		return m.feed.wait(m.gen)
	case statsMsg:
		if msg.gen == m.gen {
			m.base, m.scanned = msg.st, true
			if m.title == "" {
				m.title = msg.st.title
			}
			if m.forkPending {
				m.forkPending = false
				m.status = ""
				return m.fork("")
			}
		}
		return nil
	case approvalMsg:
		grace := m.cfg.ApprovalGrace
		if grace == 0 {
			grace = defaultApprovalGrace
		}
		d := &approvalDialog{req: msg.req, reply: msg.reply, cwd: m.cwd(), ready: time.Now().Add(max(grace, 0))}
		if m.sess != nil && m.sess.Rules != nil {
			if r, ok := m.sess.Rules.Rule(m.cwd(), msg.req); ok {
				d.rule, d.rules = r, m.sess.Rules
			}
		}
		m.dialogs = append(m.dialogs, d)
		return nil
	case approvalGoneMsg:
		m.dropDialog(func(d dialog) bool { a, ok := d.(*approvalDialog); return ok && a.reply == msg.reply })
		return nil
	case trustMsg:
		m.dialogs = append(m.dialogs, &trustDialog{q: msg.q, reply: msg.reply})
		return nil
	case trustGoneMsg:
		m.dropDialog(func(d dialog) bool { a, ok := d.(*trustDialog); return ok && a.reply == msg.reply })
		return nil
	case noticeMsg:
		m.local(msg.text, msg.warn)
		return nil
	case doneMsg:
		if msg.status != "" && m.status == msg.status {
			m.status = ""
		}
		if msg.text != "" {
			m.local(msg.text, msg.warn)
		}
		return nil
	case sessionsMsg:
		return m.sessions(msg)
	case refsMsg:
		if msg.gen != m.gen || m.sess == nil {
			return nil
		}
		if msg.err != nil {
			m.local("@session: "+msg.err.Error(), true)
			return nil
		}
		m.deliver(msg.text, msg.steer, msg.ctxs)
		return nil
	}
	return nil
}

func (m *Model) dropDialog(match func(dialog) bool) {
	for i, d := range m.dialogs {
		if match(d) {
			m.dialogs = append(m.dialogs[:i:i], m.dialogs[i+1:]...)
			return
		}
	}
}

// opened takes a session Config.Open started.
func (m *Model) opened(msg openedMsg) tea.Cmd {
	if msg.gen != m.gen {
		if msg.sess != nil { // superseded: close it
			go closeSession(msg.sess)
		}
		return nil
	}
	m.opening = false
	if msg.err != nil {
		what := msg.req.SessionID
		if msg.req.ForkOf != "" {
			what = msg.req.ForkOf
		}
		text := "cannot open the session: " + describeOpenError(what, msg.err)
		if msg.req.Model != "" {
			text = fmt.Sprintf("cannot switch to %s: %v", msg.req.Model, msg.err)
		}
		if back := m.back; back != nil && m.sess == nil {
			// Back to the session that was open before the switch; the
			// notice is shown in it once it opened.
			m.back = nil
			m.carry = text + "; you are back in the session you were in"
			return m.open(*back)
		}
		if m.sess == nil {
			text += " (/new starts a new one, /resume picks another, ctrl+c quits)"
		}
		if m.carry != "" { // the switch failed, and so did the way back
			m.local(m.carry, true)
			m.carry = ""
		}
		m.local(text, true)
		return nil
	}
	m.back = nil
	if msg.req.Model != "" {
		m.model = msg.req.Model
	}
	s := msg.sess
	m.sess = s
	m.title = s.Title
	m.running, m.queued, m.steering, m.parked, m.retry = false, nil, nil, false, nil
	m.base, m.inc, m.scanned, m.forkPending = stats{}, stats{}, false, false
	m.d.sel = nil
	m.conv = newConv(agentLog{ctx: m.ctx, ag: s.Agent}, s.Cwd)
	m.feed = startFeed(m.ctx, s.Agent, m.conv.end)
	if s.Notice != "" {
		m.local(s.Notice, true)
	}
	if m.carry != "" {
		m.local(m.carry, true)
		m.carry = ""
	}
	cmds := []tea.Cmd{m.feed.wait(m.gen), m.scan()}
	if m.cfg.Prompt != "" && !m.sent {
		m.sent = true
		cmds = append(cmds, m.submit(m.cfg.Prompt, false))
	}
	return tea.Batch(cmds...)
}

// scan starts the background scan of the log the session opened with.
func (m *Model) scan() tea.Cmd {
	gen, log, to := m.gen, m.conv.log, m.conv.end
	if to == 0 {
		m.scanned = true
		return nil
	}
	return func() tea.Msg { return statsMsg{gen: gen, st: scanStats(log, to)} }
}

// emptyLog stands for no session.
type emptyLog struct{}

func (emptyLog) Len() int64                         { return 0 }
func (emptyLog) Range(int64, int64) []session.Event { return nil }

// take applies a batch from the feed.
func (m *Model) take(msg feedMsg) {
	lives := msg.lives
	for _, ev := range msg.evs {
		// A retry comes before the next attempt's events.
		for i := 0; i < len(lives); i++ {
			if l := lives[i]; l.Type == agent.LiveRetry && l.Seq <= ev.Seq {
				m.live(l)
				lives = append(lives[:i:i], lives[i+1:]...)
				i--
			}
		}
		for _, e := range m.conv.followEvent(ev) {
			m.follow(e)
		}
	}
	for _, l := range lives {
		m.live(l)
	}
}

// follow updates the status from a followed entry.
func (m *Model) follow(e transcript.Entry) {
	switch e.Kind {
	case transcript.Assistant:
		if e.Usage != nil {
			m.inc.addUsage(*e.Usage)
		}
		m.retry = nil
	case transcript.AssistantDelta, transcript.ReasoningDelta:
		m.retry = nil // the next attempt streams
	case transcript.User:
		m.inc.prompts = append(m.inc.prompts, e.Text)
		if n := len(m.inc.turns); n == 0 || m.inc.turns[n-1].end >= 0 {
			m.inc.turns = append(m.inc.turns, turnInfo{turn: e.Turn, end: -1, prompt: e.Text})
		} else if m.inc.turns[n-1].prompt == "" { // the turn started first
			m.inc.turns[n-1].prompt = e.Text
		}
	case transcript.TurnStart:
		m.inc.turns = append(m.inc.turns, turnInfo{turn: e.Turn, end: -1})
	case transcript.TurnEnd:
		if n := len(m.inc.turns); n > 0 && m.inc.turns[n-1].end < 0 {
			m.inc.turns[n-1].end, m.inc.turns[n-1].turn = e.Seq, e.Turn
		} else {
			m.inc.turns = append(m.inc.turns, turnInfo{turn: e.Turn, end: e.Seq})
		}
	case transcript.Title:
		m.title = e.Text
	case transcript.Compaction:
		if strings.HasPrefix(e.Text, "ended") {
			m.inc.last = llm.Usage{}
		}
	}
}

// live handles a live agent event.
func (m *Model) live(l agent.Live) {
	switch l.Type {
	case agent.LiveStatus:
		was := m.running
		m.running = l.Status == agent.Running
		if m.running && !was {
			m.since = m.now()
			m.parked = false
		}
		if !m.running {
			m.retry = nil
		}
	case agent.LiveQueued:
		if l.Message == nil {
			return
		}
		if l.Placement == agent.PlacementSteering {
			m.steering = append(m.steering, *l.Message)
		} else {
			m.queued = append(m.queued, *l.Message)
		}
	case agent.LiveDequeued:
		if l.Message != nil {
			m.unqueue(l.Message.ID)
			m.parked = false
		}
	case agent.LiveDiscarded:
		for _, msg := range l.Messages {
			m.unqueue(msg.ID)
		}
		if n := len(l.Messages); n > 0 {
			m.local(fmt.Sprintf("dropped %d queued %s", n, plural(n, "prompt", "prompts")), false)
		}
		m.parked = false
	case agent.LiveBlocked:
		if l.Message == nil {
			return
		}
		m.unqueue(l.Message.ID)
		e := transcript.BlockedEntry(l.Message.ID, l.Message.Content, l.Message.Source, l.Reason)
		m.conv.addLocal(&item{e: e})
	case agent.LiveError:
		if l.Err != nil {
			m.status = "model request failed: " + l.Err.Error()
		}
	case agent.LiveFlushError:
		m.local("the session could not be saved yet (rein retries): "+errString(l.Err), true)
	case agent.LiveRetry:
		m.retry = newRetry(l, m.now())
		m.conv.retried(l.Seq)
	case agent.LiveClosed:
		m.running = false
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func (m *Model) unqueue(id string) {
	drop := func(list []agent.Message) []agent.Message {
		for i, x := range list {
			if x.ID == id {
				return append(list[:i:i], list[i+1:]...)
			}
		}
		return list
	}
	m.queued = drop(m.queued)
	m.steering = drop(m.steering)
}

// local shows a notice of the UI's own.
func (m *Model) local(text string, warn bool) {
	if m.conv == nil {
		m.conv = newConv(emptyLog{}, m.cfg.Cwd)
	}
	m.conv.addLocal(&item{kind: itemLocal, warn: warn, e: transcript.Entry{Text: text}})
	m.conv.follow = true
}

// layout draws what changed and settles what the viewport shows.
func (m *Model) layout() {
	m.in.SetWidth(max(m.w-1, 10))
	if m.running {
		m.in.Placeholder = "enter queues · ctrl+s steers the running turn · esc cancels it"
	} else {
		m.in.Placeholder = "Ask rein… (/help for keys and commands)"
	}
	if m.conv == nil {
		m.visible = nil
		return
	}
	m.d.rc.width = max(m.w-2, 20)
	m.visible = m.conv.layout(m.viewHeight(), &m.d)
	m.conv.evictFar(24)
}

// bottomLines draws what is below the conversation: the queue, the
// completion list, a dialog or the input, and the status line.
func (m *Model) bottomLines() (lines []string, inputTop int) {
	w := m.w
	th := m.th
	var out []string
	out = append(out, m.queueLines(w)...)
	if m.comp != nil {
		for i, it := range m.comp.items {
			if i >= 6 {
				break
			}
			l := "  @session:" + safe(it.value) + th.dim.Render("  "+safe(it.hint))
			if i == m.comp.sel {
				l = th.sel.Render("› @session:"+safe(it.value)) + th.dim.Render("  "+safe(it.hint))
			}
			out = append(out, ansi.Truncate(l, w, "…"))
		}
	}
	out = append(out, th.dim.Render(strings.Repeat("─", max(w, 1))))
	inputTop = -1
	if n := len(m.dialogs); n > 0 {
		out = append(out, m.dialogs[n-1].view(m, w, max(m.h/2, 6))...)
	} else {
		inputTop = len(out)
		out = append(out, strings.Split(m.in.View(), "\n")...)
	}
	out = append(out, m.statusLine(w))
	return out, inputTop
}

func (m *Model) queueLines(w int) []string {
	th := m.th
	var out []string
	add := func(mark string, st lipgloss.Style, list []agent.Message) {
		for i, q := range list {
			if i == 2 && len(list) > 3 {
				out = append(out, th.dim.Render(fmt.Sprintf("  … %d more", len(list)-2)))
				break
			}
			out = append(out, ansi.Truncate(st.Render(mark)+" "+safe(firstLine(llm.PlainText(q.Content))), w, "…"))
		}
	}
	if len(m.steering) > 0 {
		add(fmt.Sprintf("↪ steering (%d):", len(m.steering)), th.accent, m.steering)
	}
	if len(m.queued) > 0 {
		mark := fmt.Sprintf("⧗ queued (%d):", len(m.queued))
		if m.parked && !m.running {
			mark = fmt.Sprintf("⧗ queued (%d, paused: enter runs them, esc drops them):", len(m.queued))
		}
		add(mark, th.ctx, m.queued)
	}
	return out
}

// viewHeight is the conversation's share of the screen.
func (m *Model) viewHeight() int {
	b, _ := m.bottomLines()
	return max(m.h-len(b), 1)
}

// View draws the screen.
func (m *Model) View() tea.View {
	bottom, inputTop := m.bottomLines()
	vh := max(m.h-len(bottom), 0)
	var b strings.Builder
	vis := m.visible
	if len(vis) > vh {
		vis = vis[len(vis)-vh:]
	}
	for i := len(vis); i < vh; i++ {
		b.WriteByte('\n')
	}
	for _, l := range vis {
		b.WriteString(l)
		b.WriteByte('\n')
	}
	b.WriteString(strings.Join(bottom, "\n"))
	v := tea.NewView(b.String())
	v.AltScreen = true
	v.WindowTitle = "rein"
	if m.title != "" {
		v.WindowTitle = "rein · " + m.title
	}
	if inputTop >= 0 {
		if c := m.in.Cursor(); c != nil {
			c.Y += vh + inputTop
			v.Cursor = c
		}
	}
	return v
}

// statusLine shows the model, tokens, cache, context, session, mode,
// queue and activity.
func (m *Model) statusLine(w int) string {
	th := m.th
	var left string
	switch {
	case m.opening:
		left = th.accent.Render(spinner(m.spin)) + " opening…"
	case m.retry != nil:
		left = th.warn.Render("⟳ " + safe(m.retry.text(m.now())))
	case m.running:
		left = th.accent.Render(spinner(m.spin)) + " working " + elapsed(m.now().Sub(m.since))
		if m.status != "" { // a refusal or a note while the turn runs
			left += " · " + th.warn.Render(safe(m.status))
		}
	case m.status != "":
		left = th.warn.Render(safe(m.status))
	default:
		left = "rein"
	}
	var parts []string
	if s := m.sess; s != nil {
		parts = append(parts, s.Model)
		u := m.usage()
		parts = append(parts, "↑"+kilo(u.Input)+" ↓"+kilo(u.Output))
		if u.Input > 0 {
			parts = append(parts, fmt.Sprintf("cache %d%%", u.CacheRead*100/u.Input))
		}
		if last := m.lastUsage(); s.ContextWindow > 0 {
			parts = append(parts, fmt.Sprintf("ctx %d%%", (last.Input+last.Output)*100/s.ContextWindow))
		}
		if s.Mode != "" {
			parts = append(parts, s.Mode)
		}
		if n := len(m.queued); n > 0 {
			parts = append(parts, fmt.Sprintf("%d queued", n))
		}
		parts = append(parts, s.Agent.ID())
	}
	line := left + th.status.Render(" · "+safe(strings.Join(parts, " · ")))
	if ansi.StringWidth(line) > w && len(parts) > 0 {
		// No room for the whole id: its start tells sessions apart.
		parts[len(parts)-1] = shortID(parts[len(parts)-1])
		line = left + th.status.Render(" · "+safe(strings.Join(parts, " · ")))
	}
	return ansi.Truncate(line, w, "…")
}

func (m *Model) usage() llm.Usage {
	u := m.base.usage
	u.Input += m.inc.usage.Input
	u.Output += m.inc.usage.Output
	u.CacheRead += m.inc.usage.CacheRead
	u.CacheWrite += m.inc.usage.CacheWrite
	return u
}

// lastUsage is the last response's usage: the context in use.
func (m *Model) lastUsage() llm.Usage {
	if m.inc.last != (llm.Usage{}) || len(m.inc.turns) > 0 {
		return m.inc.last
	}
	return m.base.last
}

func shortID(id string) string {
	if len(id) > 12 {
		return id[:12] + "…"
	}
	return id
}

func spinner(i int) string {
	frames := []string{"⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"}
	return frames[i%len(frames)]
}

func elapsed(d time.Duration) string {
	s := int(d.Seconds())
	if s < 60 {
		return fmt.Sprintf("%ds", s)
	}
	return fmt.Sprintf("%dm%02ds", s/60, s%60)
}

func kilo(n int) string {
	switch {
	case n >= 1_000_000:
		return fmt.Sprintf("%.1fM", float64(n)/1e6)
	case n >= 1000:
		return fmt.Sprintf("%.1fk", float64(n)/1e3)
	}
	return fmt.Sprint(n)
}

// shutdown closes the open session after the program ended: a running
// turn is cancelled (cause "closed") and the log flushed. It returns the
// session's id, "" when nothing was stored.
func (m *Model) shutdown() (string, error) {
	for _, d := range m.dialogs {
		d.cancel()
	}
	m.dialogs = nil
	if m.sess == nil {
		return "", nil
	}
	s := m.sess
	m.sess = nil
	if m.feed != nil {
		defer m.feed.stop()
	}
	err := closeSession(s)
	if errors.Is(err, agent.ErrClosed) {
		err = nil
	}
	if !s.Agent.Stored() {
		return "", err
	}
	return s.Agent.ID(), err
}

func closeSession(s *Session) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if s.BeforeClose != nil {
		s.BeforeClose(ctx)
	}
	err := s.Agent.Close(ctx)
	if s.Close != nil {
		s.Close()
	}
	return err
}
