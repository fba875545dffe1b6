package tui

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	tea "charm.land/bubbletea/v2"

	"github.com/reinhq/rein/agent"
	"github.com/reinhq/rein/llm"
	"github.com/reinhq/rein/session"
)

// escAgain is how soon a second esc also drops the queue.
const escAgain = 2 * time.Second

// key handles a key press.
func (m *Model) key(k tea.KeyPressMsg) tea.Cmd {
	if n := len(m.dialogs); n > 0 {
		d := m.dialogs[n-1]
		cmd, done := d.key(m, k)
		if done {
			m.dropDialog(func(x dialog) bool { return x == d })
		}
		return cmd
	}
	s := k.String()
	if m.comp != nil {
		switch s {
		case "tab", "enter":
			m.complete()
			return nil
		case "up", "ctrl+p":
			m.comp.sel = max(m.comp.sel-1, 0)
			return nil
		case "down", "ctrl+n":
			m.comp.sel = min(m.comp.sel+1, len(m.comp.items)-1)
			return nil
		case "esc":
			m.comp = nil
			return nil
		}
	}
	m.status = ""
	switch s {
	case "ctrl+c":
		if m.in.Value() != "" {
			m.in.Reset()
			m.comp = nil
			return nil
		}
		if m.running && m.now().Sub(m.quitAt) > escAgain {
			m.quitAt = m.now()
			m.status = "ctrl+c again quits (the turn is cancelled and saved)"
			return nil
		}
		return tea.Quit
	case "ctrl+d":
		if m.in.Value() == "" {
			return tea.Quit
		}
	case "esc":
		return m.escape()
	case "enter":
		return m.enter(false)
	case "ctrl+s":
		return m.enter(true)
	case "ctrl+x":
		text := strings.TrimSpace(m.in.Value())
		if text == "" {
			m.status = "ctrl+x gives the input as context: type or paste it first"
			return nil
		}
		if m.inject(text) {
			m.in.Reset()
		}
		return nil
	case "pgup":
		m.scroll(-max(m.viewHeight()-2, 1))
		return nil
	case "pgdown":
		m.scroll(max(m.viewHeight()-2, 1))
		return nil
	case "ctrl+up", "alt+up":
		m.selectItem(-1)
		return nil
	case "ctrl+down", "alt+down":
		m.selectItem(1)
		return nil
	case "tab":
		if m.d.sel != nil {
			m.toggle(m.d.sel)
			return nil
		}
	case "ctrl+o":
		m.d.all = !m.d.all
		if m.conv != nil {
			m.conv.invalidate()
		}
		return nil
	case "ctrl+l":
		if m.conv != nil {
			m.conv.invalidate()
		}
		return nil
	case "up":
		if m.in.Line() == 0 && m.recall(-1) {
			return nil
		}
	case "down":
		if m.in.Line() == m.in.LineCount()-1 && m.recall(1) {
			return nil
		}
	}
	var cmd tea.Cmd
	m.in, cmd = m.in.Update(k)
	return tea.Batch(cmd, m.completion())
}

// escape cancels: the turn first (queued prompts wait), the queue on a
// second press.
func (m *Model) escape() tea.Cmd {
	if m.d.sel != nil {
		m.deselect()
		return nil
	}
	if m.sess == nil {
		return nil
	}
	ag := m.sess.Agent
	again := m.now().Sub(m.escAt) < escAgain
	switch {
	case m.running && !again:
		m.escAt = m.now()
		ag.Cancel(session.CauseUser, agent.CancelOptions{KeepInbox: true})
		m.parked = len(m.queued) > 0 || len(m.steering) > 0
		if m.parked {
			m.status = "cancelling; esc again also drops the queue"
		} else {
			m.status = "cancelling"
		}
	case len(m.queued) > 0 || len(m.steering) > 0 || m.running:
		m.escAt = time.Time{}
		ag.Cancel(session.CauseUser, agent.CancelOptions{})
		m.parked = false
	}
	return nil
}

// enter sends the input (steer: as steering), or runs a command.
func (m *Model) enter(steer bool) tea.Cmd {
	text := strings.TrimSpace(m.in.Value())
	if text == "" {
		if m.parked && m.sess != nil && !m.running {
			m.sess.Agent.Wake()
			m.parked = false
		}
		return nil
	}
	m.in.Reset()
	m.hist = history{pos: -1}
	m.comp = nil
	if strings.HasPrefix(text, "/") && !strings.HasPrefix(text, "//") {
		return m.command(text)
	}
	text = strings.TrimPrefix(text, "/") // "//x" sends "/x"
	return m.submit(text, steer)
}

// submit sends a prompt: its @session: references first become context.
func (m *Model) submit(text string, steer bool) tea.Cmd {
	if m.sess == nil {
		m.local("no session is open yet", true)
		return nil
	}
	if m.cfg.Refs != nil && strings.Contains(text, "@session:") {
		gen, id, refs := m.gen, m.sess.Agent.ID(), m.cfg.Refs
		ctx := m.ctx
		return func() tea.Msg {
			ctxs, err := refs(ctx, id, text)
			return refsMsg{gen: gen, text: text, steer: steer, ctxs: ctxs, err: err}
		}
	}
	m.deliver(text, steer, nil)
	return nil
}

// deliver injects contexts, then sends or steers the prompt.
func (m *Model) deliver(text string, steer bool, ctxs []agent.AdditionalContext) {
	ag := m.sess.Agent
	for _, c := range ctxs {
		if err := ag.Inject(c); err != nil {
			m.local("context not added: "+err.Error(), true)
			return
		}
	}
	msg := agent.Message{Content: llm.Text(text)}
	var err error
	if steer {
		_, err = ag.Steer(msg)
	} else {
		_, err = ag.Send(msg)
	}
	if err != nil {
		m.local("not sent: "+err.Error(), true)
		return
	}
	m.conv.follow = true
}

// tuiSource is the source of context given in the UI.
var tuiSource = session.Source{Kind: session.SourceUserContext, Name: "tui"}

// inject adds text as context (source user-context:tui).
func (m *Model) inject(text string) bool {
	if m.sess == nil {
		m.local("no session is open yet", true)
		return false
	}
	if err := m.sess.Agent.Inject(agent.AdditionalContext{Content: llm.Text(text), Source: tuiSource}); err != nil {
		m.local("context not added: "+err.Error(), true)
		return false
	}
	if m.running {
		m.status = "context staged: the running turn sees it at its next step"
	}
	m.conv.follow = true
	return true
}

// command runs a slash command.
func (m *Model) command(text string) tea.Cmd {
	name, arg, _ := strings.Cut(strings.TrimPrefix(text, "/"), " ")
	arg = strings.TrimSpace(arg)
	switch name {
	case "help", "?":
		m.local(helpText(m.cfg.Version), false)
	case "inject":
		if arg == "" {
			m.status = "/inject TEXT adds TEXT as context"
			return nil
		}
		m.inject(arg)
	case "compact":
		if m.sess == nil {
			return nil
		}
		if m.running {
			m.status = "a turn is running: /compact when it ended"
			return nil
		}
		ag, ctx := m.sess.Agent, m.ctx
		const busy = "compacting…"
		m.status = busy
		return func() tea.Msg {
			err := ag.Compact(ctx, agent.CompactOptions{Instructions: arg})
			done := doneMsg{status: busy}
			switch {
			case errors.Is(err, agent.ErrNothingToCompact):
				done.text = "nothing to compact yet: the conversation is too short"
			case errors.Is(err, agent.ErrBusy):
				done.text, done.warn = "a turn is running: /compact when it ended", true
			case err != nil:
				done.text, done.warn = "compaction failed: "+err.Error(), true
			}
			return done
		}
	case "model":
		if arg != "" {
			return m.switchTo(m.reopenReq(arg))
		}
		var items []pickItem
		cur := ""
		if m.sess != nil {
			cur = m.sess.Model
		}
		for _, spec := range m.cfg.Models {
			hint := ""
			if spec == cur {
				hint = "(current)"
			}
			items = append(items, pickItem{label: spec, hint: hint, value: spec})
		}
		if cur != "" && !slices.Contains(m.cfg.Models, cur) {
			items = append([]pickItem{{label: cur, hint: "(current)", value: cur}}, items...)
		}
		m.dialogs = append(m.dialogs, &pickerDialog{title: "model", items: items, pick: func(m *Model, it pickItem) tea.Cmd {
			return m.switchTo(m.reopenReq(it.value))
		}})
	case "resume", "sessions":
		if m.cfg.Sessions == nil {
			m.status = "listing sessions is not available"
			return nil
		}
		list, ctx := m.cfg.Sessions, m.ctx
		return func() tea.Msg {
			infos, err := list(ctx)
			return sessionsMsg{infos: infos, err: err, purpose: name}
		}
	case "new":
		return m.switchTo(OpenRequest{})
	case "fork":
		return m.fork(arg)
	case "trust":
		if m.cfg.Trust == nil {
			m.status = "trust cannot be changed here"
			return nil
		}
		t, ctx, ask := m.cfg.Trust, m.ctx, &asker{send: m.sendFn()}
		return func() tea.Msg {
			text, err := t(ctx, ask)
			if err != nil {
				return doneMsg{text: err.Error(), warn: true}
			}
			return doneMsg{text: text}
		}
	case "quit", "exit":
		return tea.Quit
	default:
		m.status = fmt.Sprintf("unknown command /%s (/help lists them; //text sends /text)", name)
	}
	return nil
}

// reopenReq reopens the current session with another model.
func (m *Model) reopenReq(model string) OpenRequest {
	req := OpenRequest{Model: model}
	if m.sess != nil && m.sess.Agent.Stored() {
		req.SessionID = m.sess.Agent.ID()
	}
	return req
}

// switchTo closes the open session and opens another. Should that fail
// (a model that does not resolve, a session another process holds), the
// session that was open is opened again (opened).
func (m *Model) switchTo(req OpenRequest) tea.Cmd {
	if m.running {
		m.status = "a turn is running: esc cancels it first"
		return nil
	}
	m.back = nil
	if old := m.sess; old != nil {
		if m.feed != nil {
			m.feed.stop()
			m.feed = nil
		}
		m.sess = nil
		if old.Agent.Stored() {
			m.back = &OpenRequest{SessionID: old.Agent.ID()}
		}
		if err := closeSession(old); err != nil && !errors.Is(err, agent.ErrClosed) {
			m.local("closing the session: "+err.Error(), true)
		}
	}
	return m.open(req)
}

// fork forks the session after a turn: the number given, or one picked.
func (m *Model) fork(arg string) tea.Cmd {
	if m.sess == nil || !m.sess.Agent.Stored() {
		m.status = "nothing to fork yet"
		return nil
	}
	if m.running {
		m.status = "a turn is running: fork when it ended"
		return nil
	}
	turns := m.turns()
	id := m.sess.Agent.ID()
	if arg != "" {
		n, err := strconv.Atoi(strings.TrimPrefix(arg, "#"))
		if err != nil {
			m.status = "/fork N forks after turn N"
			return nil
		}
		for _, t := range turns {
			if t.turn == n && t.end >= 0 {
				return m.switchTo(OpenRequest{ForkOf: id, ForkAt: t.end})
			}
		}
		m.status = fmt.Sprintf("no finished turn %d", n)
		return nil
	}
	if !m.scanned {
		m.forkPending = true // the picker opens when the scan is done
		m.status = "reading the session's turns…"
		return nil
	}
	var items []pickItem
	for i := len(turns) - 1; i >= 0; i-- {
		t := turns[i]
		if t.end < 0 {
			continue
		}
		items = append(items, pickItem{label: fmt.Sprintf("after turn %d", t.turn), hint: firstLine(t.prompt), seq: t.end})
	}
	if len(items) == 0 {
		m.status = "no finished turn to fork after"
		return nil
	}
	m.dialogs = append(m.dialogs, &pickerDialog{title: "fork after", items: items, pick: func(m *Model, it pickItem) tea.Cmd {
		return m.switchTo(OpenRequest{ForkOf: id, ForkAt: it.seq})
	}})
	return nil
}

// turns lists the session's turns (scanned and followed).
func (m *Model) turns() []turnInfo {
	return append(slices.Clone(m.base.turns), m.inc.turns...)
}

// sessions shows a picker of stored sessions, or fills the completion.
func (m *Model) sessions(msg sessionsMsg) tea.Cmd {
	if msg.err != nil {
		m.local("listing sessions: "+msg.err.Error(), true)
		return nil
	}
	cur := ""
	if m.sess != nil {
		cur = m.sess.Agent.ID()
	}
	var items []pickItem
	for _, in := range msg.infos {
		if msg.purpose == "resume" && in.Cwd != m.cwd() {
			continue
		}
		title := in.Title
		if title == "" {
			title = "(untitled)"
		}
		hint := fmt.Sprintf("%s · %d %s · %s", in.UpdatedAt.Local().Format("Jan 2 15:04"), in.Turns, plural(in.Turns, "turn", "turns"), shortID(in.ID))
		if msg.purpose == "sessions" && in.Cwd != m.cwd() {
			hint += " · " + in.Cwd
		}
		if in.ID == cur {
			hint += " (open)"
		}
		items = append(items, pickItem{label: title, hint: hint, value: in.ID})
	}
	if msg.purpose == "complete" {
		if m.comp != nil {
			m.comp.items = m.filterComp(items, m.comp.prefix)
			if len(m.comp.items) == 0 {
				m.comp = nil
			}
		}
		m.compCache = items
		return nil
	}
	title := "resume a session of " + m.cwd()
	if msg.purpose == "sessions" {
		title = "sessions"
	}
	if len(items) == 0 {
		m.status = "no sessions to resume here (/sessions lists every directory)"
		return nil
	}
	m.dialogs = append(m.dialogs, &pickerDialog{title: title, items: items, pick: func(m *Model, it pickItem) tea.Cmd {
		if it.value == cur {
			return nil
		}
		return m.switchTo(OpenRequest{SessionID: it.value})
	}})
	return nil
}

// completion updates the @session: completion after the input changed.
func (m *Model) completion() tea.Cmd {
	word := lastWord(m.in.Value())
	prefix, ok := strings.CutPrefix(word, "@session:")
	if !ok || m.cfg.Sessions == nil {
		m.comp = nil
		return nil
	}
	if m.comp == nil {
		m.comp = &completion{}
	}
	m.comp.prefix = prefix
	m.comp.sel = 0
	if m.compCache != nil {
		m.comp.items = m.filterComp(m.compCache, prefix)
		if len(m.comp.items) == 0 {
			m.comp = nil
		}
		return nil
	}
	list, ctx := m.cfg.Sessions, m.ctx
	return func() tea.Msg {
		infos, err := list(ctx)
		return sessionsMsg{infos: infos, err: err, purpose: "complete"}
	}
}

func (m *Model) filterComp(items []pickItem, prefix string) []pickItem {
	var out []pickItem
	cur := ""
	if m.sess != nil {
		cur = m.sess.Agent.ID()
	}
	for _, it := range items {
		if it.value != cur && strings.HasPrefix(strings.ToLower(it.value), strings.ToLower(prefix)) {
			out = append(out, pickItem{value: it.value, hint: it.label})
		}
	}
	return out
}

// complete puts the chosen session id in place of the @session: word.
func (m *Model) complete() {
	c := m.comp
	m.comp = nil
	if c == nil || c.sel >= len(c.items) {
		return
	}
	v := m.in.Value()
	w := lastWord(v)
	m.in.SetValue(v[:len(v)-len(w)] + "@session:" + c.items[c.sel].value + " ")
}

func lastWord(s string) string {
	i := strings.LastIndexAny(s, " \t\n")
	return s[i+1:]
}

// recall moves through earlier prompts (dir -1: older).
func (m *Model) recall(dir int) bool {
	list := append(slices.Clone(m.base.prompts), m.inc.prompts...)
	if len(list) == 0 {
		return false
	}
	if m.hist.pos < 0 || m.hist.pos > len(list) {
		m.hist.pos = len(list)
	}
	if m.hist.pos == len(list) {
		if dir > 0 {
			return false
		}
		m.hist.draft = m.in.Value()
	}
	pos := m.hist.pos + dir
	if pos < 0 {
		return true
	}
	m.hist.pos = pos
	if pos == len(list) {
		m.in.SetValue(m.hist.draft)
	} else {
		m.in.SetValue(list[pos])
	}
	return true
}

// scroll moves the conversation.
func (m *Model) scroll(n int) {
	if m.conv != nil {
		m.conv.scroll(n, m.viewHeight(), &m.d)
	}
}

// selectItem moves the selection to the previous (-1) or next (1)
// foldable item, building blocks as needed, and scrolls to it.
func (m *Model) selectItem(dir int) {
	c := m.conv
	if c == nil {
		return
	}
	bi, ii := len(c.blocks), 0
	if m.d.sel != nil {
		bi, ii = c.find(m.d.sel)
		if bi < 0 {
			bi, ii = len(c.blocks), 0
		}
	} else if dir > 0 {
		return
	}
	for {
		if dir < 0 {
			ii--
			for ii < 0 {
				bi--
				if bi < 0 {
					n := c.discover()
					if n == 0 {
						return
					}
					bi = n - 1 // the blocks found are before the others
				}
				c.lines(bi, &m.d)
				ii = len(c.blocks[bi].items) - 1
			}
		} else {
			ii++
			for bi < len(c.blocks) && ii >= len(c.blocks[bi].items) {
				bi++
				ii = 0
				if bi < len(c.blocks) {
					c.lines(bi, &m.d)
				}
			}
			if bi >= len(c.blocks) {
				m.deselect()
				return
			}
		}
		it := c.blocks[bi].items[ii]
		if it.selectable() {
			m.setSel(it)
			m.reveal(bi, ii)
			return
		}
	}
}

func (m *Model) setSel(it *item) {
	if old := m.d.sel; old != nil {
		m.redraw(old)
	}
	m.d.sel = it
	m.redraw(it)
}

func (m *Model) deselect() {
	if old := m.d.sel; old != nil {
		m.d.sel = nil
		m.redraw(old)
	}
}

// redraw makes an item (and its block) be drawn again.
func (m *Model) redraw(it *item) {
	it.lines = nil
	if bi, _ := m.conv.find(it); bi >= 0 {
		m.conv.blocks[bi].lines = nil
	}
}

// toggle folds or unfolds an item.
func (m *Model) toggle(it *item) {
	if it.key == "" {
		return
	}
	m.d.expanded[it.key] = !m.d.expanded[it.key]
	m.redraw(it)
}

// reveal scrolls so that item ii of block bi is in view.
func (m *Model) reveal(bi, ii int) {
	c := m.conv
	vh := m.viewHeight()
	top := c.itemTop(bi, ii, &m.d)
	// Put the item a third down the viewport.
	c.follow = false
	c.anchor, c.off = bi, top
	c.scroll(-vh/3, vh, &m.d)
}
