package tui

import (
	"context"
	"strings"

	"github.com/reinhq/rein/agent"
	"github.com/reinhq/rein/session"
	"github.com/reinhq/rein/transcript"
)

// logReader reads a session's durable log: the agent's, in the UI.
type logReader interface {
	// Len is the number of events now.
	Len() int64
	// Range returns the events [from, to), to ≤ Len.
	Range(from, to int64) []session.Event
}

// agentLog reads an agent's log through Agent.Events.
type agentLog struct {
	ctx context.Context
	ag  *agent.Agent
}

func (l agentLog) Len() int64 { return l.ag.Len() }

func (l agentLog) Range(from, to int64) []session.Event {
	if from >= to {
		return nil
	}
	ctx, cancel := context.WithCancel(l.ctx)
	defer cancel()
	out := make([]session.Event, 0, to-from)
	for ev, err := range l.ag.Events(ctx, from) {
		if err != nil {
			break
		}
		out = append(out, ev)
		if ev.Seq+1 >= to {
			break
		}
	}
	return out
}

// itemKind says how an item is drawn.
type itemKind int

const (
	itemEntry  itemKind = iota // one transcript entry
	itemCard                   // a tool call and what became of it
	itemStream                 // text or reasoning streaming in (live)
	itemLocal                  // a notice of the UI's own, not in the log
)

// item is one thing drawn in the conversation.
type item struct {
	kind itemKind
	e    transcript.Entry
	card *card
	text strings.Builder // itemStream
	warn bool            // itemLocal
	key  string          // what its folding is remembered by ("" when it has none)

	lines []string // drawn at width w (nil: to draw)
	w     int
}

// block is a stretch of the log that can be built on its own: one turn
// (turn/start .. turn/end), or events between turns (each independent).
// Blocks are built (their items made from the log) and drawn only when the
// viewport needs them.
type block struct {
	start, end int64 // seqs [start, end)
	turn       bool
	live       bool // fed by the follower; rebuilt from the log only once closed
	closed     bool // a live turn that ended (or any non-live block)
	local      bool // only notices of the UI: never rebuilt, never evicted

	items  []*item // nil until built
	cards  map[string]*card
	stream map[transcript.Kind]*item
	last   *card // the card of the last tool result (a plan follows it)

	lines []string // the items drawn, concatenated (nil: to draw)
	w     int
}

func (b *block) built() bool { return b.items != nil || b.local || b.live }

// add folds an entry into the block's items; it reports whether anything
// shows differently.
func (b *block) add(e transcript.Entry) bool {
	if b.cards == nil {
		b.cards = map[string]*card{}
	}
	b.lines = nil
	switch e.Kind {
	case transcript.ToolCall:
		c := newCard(e.Tool)
		b.cards[e.Tool.CallID] = c
		b.items = append(b.items, &item{kind: itemCard, e: e, card: c, key: "call:" + e.Tool.CallID})
	case transcript.ToolStarted, transcript.ToolResult:
		c := b.cards[e.Tool.CallID]
		if c == nil {
			c = newCard(e.Tool)
			b.cards[e.Tool.CallID] = c
			b.items = append(b.items, &item{kind: itemCard, e: e, card: c, key: "call:" + e.Tool.CallID})
		} else {
			c.update(e.Tool)
		}
		if e.Kind == transcript.ToolResult {
			c.result, c.isError, c.code = e.Text, e.Tool.IsError, e.Tool.Code
			c.exit, c.signal, c.timedOut = e.Tool.ExitCode, e.Tool.Signal, e.Tool.TimedOut
			b.last = c
		}
		b.dirtyCard(c)
	case transcript.Approval:
		if c := b.cards[e.Tool.CallID]; c != nil {
			c.approvals = append(c.approvals, e)
			b.dirtyCard(c)
		} else {
			b.items = append(b.items, &item{e: e})
		}
	case transcript.Plan:
		if b.last != nil && b.last.name == "todo" {
			b.last.plan = e.Plan
			b.dirtyCard(b.last)
		} else {
			b.items = append(b.items, &item{e: e})
		}
	case transcript.AssistantDelta, transcript.ReasoningDelta:
		if b.stream == nil {
			b.stream = map[transcript.Kind]*item{}
		}
		it := b.stream[e.Kind]
		if it == nil {
			it = &item{kind: itemStream, e: e}
			b.stream[e.Kind] = it
			b.items = append(b.items, it)
		}
		it.text.WriteString(e.Text)
		it.lines = nil
	case transcript.Assistant, transcript.Reasoning:
		delta := transcript.AssistantDelta
		if e.Kind == transcript.Reasoning {
			delta = transcript.ReasoningDelta
		}
		it := &item{e: e}
		if e.Kind == transcript.Reasoning {
			it.key = "seq:" + itoa(e.Seq) + ":reasoning"
		}
		if s := b.stream[delta]; s != nil {
			// The whole message replaces what streamed (a retried
			// request's chunks are not part of it).
			*s = item{e: e, key: it.key}
			delete(b.stream, delta)
		} else {
			b.items = append(b.items, it)
		}
	case transcript.Title, transcript.Model:
		return false
	case transcript.Context, transcript.Summary:
		b.items = append(b.items, &item{e: e, key: "seq:" + itoa(e.Seq)})
	default:
		b.items = append(b.items, &item{e: e})
	}
	return true
}

// dirtyCard makes the card's item be drawn again.
func (b *block) dirtyCard(c *card) {
	for _, it := range b.items {
		if it.card == c {
			it.lines = nil
		}
	}
	b.lines = nil
}

// conv is the conversation: the blocks of the log known so far, the live
// tail, and where the viewport is.
type conv struct {
	log    logReader
	cwd    string
	blocks []*block
	// top is the first seq the blocks cover: blocks above it are found
	// (discover) when the viewport reaches it.
	top int64
	// end is the seq after the last event the follower delivered.
	end int64
	// live translates the followed events (with deltas); open is the
	// block they go to.
	live transcript.Builder
	open *block
	// retryFrom: chunks before it belong to a failed attempt (agent/retry
	// said so) and are not shown.
	retryFrom int64

	// The viewport: follow keeps the last line at the bottom; otherwise
	// line off of block anchor is the top line.
	follow bool
	anchor int
	off    int
}

func newConv(log logReader, cwd string) *conv {
	n := log.Len()
	c := &conv{log: log, cwd: cwd, top: n, end: n, follow: true}
	c.live = transcript.Builder{Stream: true, Cwd: cwd}
	return c
}

// discoverWindow is how many events discover reads first; it doubles
// until it holds a whole turn.
const discoverWindow = 2048

// betweenMax caps a block of between-turn events.
const betweenMax = 64

// discover finds the blocks just above top, reading the log backwards in
// growing windows, and prepends them. It returns how many it added (0 at
// the start of the log).
func (c *conv) discover() int {
	if c.top <= 0 {
		return 0
	}
	for k := int64(discoverWindow); ; k *= 2 {
		from := max(0, c.top-k)
		evs := c.log.Range(from, c.top)
		found := splitBlocks(evs, from == 0)
		if len(found) == 0 && from > 0 {
			continue // a turn longer than the window
		}
		if len(found) == 0 {
			// The start of the log and no block: events that fit no rule
			// (a log this version cannot split); show them as one block.
			found = []*block{{start: 0, end: c.top, closed: true}}
		}
		c.blocks = append(found, c.blocks...)
		c.anchor += len(found)
		c.top = found[0].start
		return len(found)
	}
}

// splitBlocks cuts events ending at a between-turn boundary into blocks,
// walking back from the end: a turn/end back to its turn/start, other
// events in runs of between-turn events. A turn whose start is before the
// window stops the walk (the blocks found so far are returned); whole
// says the window starts the log.
func splitBlocks(evs []session.Event, whole bool) []*block {
	var out []*block
	j := len(evs) - 1
	for j >= 0 {
		if evs[j].Type == session.TypeTurnEnd {
			s := j
			for s >= 0 && evs[s].Type != session.TypeTurnStart {
				s--
			}
			if s < 0 {
				if whole { // a log that starts inside a turn
					out = append(out, &block{start: evs[0].Seq, end: evs[j].Seq + 1, turn: true, closed: true})
				}
				break
			}
			out = append(out, &block{start: evs[s].Seq, end: evs[j].Seq + 1, turn: true, closed: true})
			j = s - 1
			continue
		}
		e := j
		for j >= 0 && evs[j].Type != session.TypeTurnEnd && e-j < betweenMax {
			j--
		}
		out = append(out, &block{start: evs[j+1].Seq, end: evs[e].Seq + 1, closed: true})
	}
	// Reverse into seq order.
	for i, k := 0, len(out)-1; i < k; i, k = i+1, k-1 {
		out[i], out[k] = out[k], out[i]
	}
	return out
}

// build makes a block's items from the log.
func (c *conv) build(b *block) {
	if b.built() {
		return
	}
	bd := transcript.Builder{Cwd: c.cwd}
	b.items = []*item{}
	for _, ev := range c.log.Range(b.start, b.end) {
		es, err := bd.Add(ev)
		if err != nil {
			b.items = append(b.items, &item{kind: itemLocal, warn: true, e: transcript.Entry{Text: "event not shown: " + err.Error()}})
			continue
		}
		for _, e := range es {
			b.add(e)
		}
	}
}

// evict drops a block's items and drawing (it is rebuilt when needed).
func (b *block) evict() {
	if b.local || (b.live && !b.closed) {
		return
	}
	b.live = false // rebuilt from the log from now on
	b.items, b.cards, b.stream, b.last, b.lines = nil, nil, nil, nil, nil
}

// follow adds one event delivered live and returns the entries it made.
func (c *conv) followEvent(ev session.Event) []transcript.Entry {
	es, err := c.live.Add(ev)
	if err != nil {
		es = []transcript.Entry{{Seq: ev.Seq, Kind: transcript.Unknown, Text: string(ev.Type) + ": " + err.Error()}}
	}
	switch {
	case ev.Type == session.TypeTurnStart:
		c.open = &block{start: ev.Seq, turn: true, live: true, items: []*item{}}
		c.blocks = append(c.blocks, c.open)
	case c.open == nil || c.open.local:
		c.open = &block{start: ev.Seq, live: true, closed: true, items: []*item{}}
		c.blocks = append(c.blocks, c.open)
	}
	b := c.open
	b.end = ev.Seq + 1
	if ev.Type == session.TypeAssistantChunk && ev.Seq < c.retryFrom {
		es = nil // a failed attempt's, delivered after the retry
	}
	for _, e := range es {
		b.add(e)
	}
	if ev.Type == session.TypeTurnEnd {
		b.closed = true
		c.open = nil
	}
	c.end = ev.Seq + 1
	return es
}

// addLocal shows a notice of the UI's own (or a live-only entry, such as
// a blocked prompt) after what is shown now.
func (c *conv) addLocal(it *item) {
	b := c.open
	if b == nil {
		if n := len(c.blocks); n > 0 && c.blocks[n-1].local {
			b = c.blocks[n-1]
		} else {
			b = &block{start: c.end, end: c.end, local: true, closed: true}
			c.blocks = append(c.blocks, b)
		}
	}
	b.items = append(b.items, it)
	b.lines = nil
}

// invalidate forgets every drawing (the width, theme or folding changed).
func (c *conv) invalidate() {
	for _, b := range c.blocks {
		b.lines = nil
		for _, it := range b.items {
			it.lines = nil
		}
	}
}

// drawer draws items.
type drawer struct {
	rc       renderCtx
	expanded map[string]bool
	all      bool // ctrl+o: everything unfolded
	sel      *item
}

// lines returns block i drawn, building it when needed.
func (c *conv) lines(i int, d *drawer) []string {
	b := c.blocks[i]
	if b.lines != nil && b.w == d.rc.width {
		return b.lines
	}
	c.build(b)
	out := []string{}
	for _, it := range b.items {
		if it.lines == nil || it.w != d.rc.width {
			rc := d.rc
			rc.verbose = d.all
			rc.expanded = d.all || (it.key != "" && d.expanded[it.key])
			rc.selected = it == d.sel
			it.lines = it.render(rc)
			it.w = d.rc.width
		}
		out = append(out, it.lines...)
	}
	b.lines, b.w = out, d.rc.width
	return out
}

// layout returns the lines the viewport of height h shows, and moves the
// anchor to its top line.
func (c *conv) layout(h int, d *drawer) []string {
	if h <= 0 {
		return nil
	}
	if c.follow {
		return c.bottom(h, d)
	}
	var parts [][]string
	need := h
	i, off := c.anchor, c.off
	for i < len(c.blocks) && need > 0 {
		ls := c.lines(i, d)
		if off < len(ls) {
			ls = ls[off:]
			if len(ls) > need {
				ls = ls[:need]
			}
			parts = append(parts, ls)
			need -= len(ls)
		}
		off = 0
		i++
	}
	if need > 0 {
		// The end came first: show the bottom instead.
		c.follow = true
		return c.bottom(h, d)
	}
	return join(parts, h)
}

// bottom lays out the last h lines.
func (c *conv) bottom(h int, d *drawer) []string {
	var parts [][]string
	need := h
	i := len(c.blocks) - 1
	c.anchor, c.off = 0, 0
	for need > 0 {
		if i < 0 {
			n := c.discover()
			if n == 0 {
				break
			}
			i = n - 1
		}
		ls := c.lines(i, d)
		if len(ls) > need {
			ls = ls[len(ls)-need:]
		}
		parts = append(parts, ls)
		need -= len(ls)
		c.anchor, c.off = i, len(c.lines(i, d))-len(ls)
		i--
	}
	// parts are bottom-up.
	for a, b := 0, len(parts)-1; a < b; a, b = a+1, b-1 {
		parts[a], parts[b] = parts[b], parts[a]
	}
	return join(parts, h)
}

func join(parts [][]string, h int) []string {
	out := make([]string, 0, h)
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

// scroll moves the viewport by n lines (negative: up).
func (c *conv) scroll(n, h int, d *drawer) {
	if n == 0 || len(c.blocks) == 0 && c.top == 0 {
		return
	}
	if n < 0 {
		c.follow = false
		c.off += n
		for c.off < 0 {
			if c.anchor == 0 && c.discover() == 0 {
				c.off = 0
				break
			}
			c.anchor--
			c.off += len(c.lines(c.anchor, d))
		}
		return
	}
	if c.follow {
		return
	}
	c.off += n
	for c.anchor < len(c.blocks) && c.off >= len(c.lines(c.anchor, d)) {
		c.off -= len(c.lines(c.anchor, d))
		c.anchor++
	}
	// Within h lines of the end: follow the end again.
	rest := -c.off
	for i := c.anchor; i < len(c.blocks) && rest <= h; i++ {
		rest += len(c.lines(i, d))
	}
	if rest <= h {
		c.follow = true
	}
}

// evictFar drops the items of built blocks far from the viewport, so the
// UI holds little more than what it shows whatever the session's size.
func (c *conv) evictFar(keep int) {
	built := 0
	for _, b := range c.blocks {
		if b.items != nil && !b.local {
			built++
		}
	}
	if built <= 4*keep {
		return
	}
	for i, b := range c.blocks {
		if i < c.anchor-keep || i > c.anchor+keep {
			if c.open != b {
				b.evict()
			}
		}
	}
}

// find returns the block and index of an item (for selection), or -1.
func (c *conv) find(it *item) (int, int) {
	for i := len(c.blocks) - 1; i >= 0; i-- {
		for j, x := range c.blocks[i].items {
			if x == it {
				return i, j
			}
		}
	}
	return -1, -1
}

// itemTop returns the line of block i where item j starts (block drawn).
func (c *conv) itemTop(i, j int, d *drawer) int {
	c.lines(i, d)
	top := 0
	for _, it := range c.blocks[i].items[:j] {
		top += len(it.lines)
	}
	return top
}

func itoa(n int64) string {
	if n == 0 {
		return "0"
	}
	neg := n < 0
	if neg {
		n = -n
	}
	var b [20]byte
	i := len(b)
	for n > 0 {
		i--
		b[i] = byte('0' + n%10)
		n /= 10
	}
	if neg {
		i--
		b[i] = '-'
	}
	return string(b[i:])
}
