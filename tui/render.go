package tui

import (
	"encoding/json"
	"fmt"
	"image/color"
	"path/filepath"
	"strings"

	"charm.land/glamour/v2"
	"charm.land/lipgloss/v2"
	"github.com/aymanbagabas/go-udiff"
	"github.com/charmbracelet/x/ansi"

	"github.com/reinhq/rein/display"
	"github.com/reinhq/rein/session"
	"github.com/reinhq/rein/transcript"
)

// safe returns text rein did not write (the model's, a tool's, a hook's, a
// repository's, a stored session's) with its control characters and bidi
// overrides escaped as the CLI escapes them on a terminal (display.Escape),
// "\r\n" line ends made "\n": nothing in it reaches the terminal as an
// escape sequence or moves the cursor. Every such text passes through it
// before it is styled; the styling is the only escape sequence in a frame.
func safe(s string) string {
	if strings.IndexFunc(s, display.Unsafe) < 0 {
		return s
	}
	return display.Escape(strings.ReplaceAll(s, "\r\n", "\n"))
}

// theme holds the styles of one colour scheme. The plain theme has none,
// so golden frames do not depend on colours.
type theme struct {
	name                                  string // glamour's standard style
	dim, accent, user, ctx, warn, bad, ok lipgloss.Style
	add, del, hunk, sel, bold, status     lipgloss.Style
}

func newTheme(name string) theme {
	if name == "plain" {
		s := lipgloss.NewStyle()
		// glamour's dark layout; the program strips every colour.
		return theme{name: "dark", dim: s, accent: s, user: s, ctx: s, warn: s, bad: s, ok: s, add: s, del: s, hunk: s, sel: s, bold: s, status: s}
	}
	ld := lipgloss.LightDark(name != "light")
	c := func(light, dark string) color.Color { return ld(lipgloss.Color(light), lipgloss.Color(dark)) }
	st := func(fg color.Color) lipgloss.Style { return lipgloss.NewStyle().Foreground(fg) }
	gname := "dark"
	if name == "light" {
		gname = "light"
	}
	return theme{
		name:   gname,
		dim:    st(c("#8a8a8a", "#6c6c6c")),
		accent: st(c("#5f00d7", "#af87ff")).Bold(true),
		user:   st(c("#005f87", "#87d7ff")).Bold(true),
		ctx:    st(c("#875f00", "#d7af5f")),
		warn:   st(c("#af5f00", "#ffaf00")),
		bad:    st(c("#af0000", "#ff5f5f")),
		ok:     st(c("#008700", "#87d787")),
		add:    st(c("#008700", "#87d787")),
		del:    st(c("#af0000", "#ff8787")),
		hunk:   st(c("#0087af", "#5fafd7")),
		sel:    lipgloss.NewStyle().Reverse(true),
		bold:   lipgloss.NewStyle().Bold(true),
		status: st(c("#585858", "#a8a8a8")),
	}
}

// markdown renders assistant text with glamour, one renderer per width.
type markdown struct {
	style string
	rs    map[int]*glamour.TermRenderer
}

func (md *markdown) render(text string, width int) []string {
	if md.rs == nil {
		md.rs = map[int]*glamour.TermRenderer{}
	}
	r := md.rs[width]
	if r == nil {
		var err error
		r, err = glamour.NewTermRenderer(glamour.WithStandardStyle(md.style), glamour.WithWordWrap(width))
		if err != nil {
			return wrap(text, width)
		}
		md.rs[width] = r
	}
	text = safe(text)
	out, err := r.Render(strings.ReplaceAll(text, "\t", "    "))
	if err != nil {
		return wrap(text, width)
	}
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	// glamour frames a document with blank lines and a margin of two.
	for len(lines) > 0 && strings.TrimSpace(ansi.Strip(lines[0])) == "" {
		lines = lines[1:]
	}
	for i, l := range lines {
		lines[i] = strings.TrimRight(cutMargin(l, 2), " ")
	}
	return lines
}

// cutMargin removes up to n leading spaces of a line that may hold escape
// sequences before them.
func cutMargin(l string, n int) string {
	plain := ansi.Strip(l)
	k := 0
	for k < n && k < len(plain) && plain[k] == ' ' {
		k++
	}
	if k == 0 {
		return l
	}
	return ansi.Cut(l, k, ansi.StringWidth(l))
}

// wrap wraps plain text to width, keeping its line breaks.
func wrap(text string, width int) []string {
	if width < 4 {
		width = 4
	}
	text = strings.TrimRight(strings.ReplaceAll(safe(text), "\t", "    "), "\n")
	if text == "" {
		return nil
	}
	return strings.Split(ansi.Wrap(text, width, ""), "\n")
}

// indent prefixes the first line with first and the others with rest,
// wrapping the text to width minus the prefix.
func indent(text string, width int, first, rest string, st lipgloss.Style) []string {
	w := width - ansi.StringWidth(rest)
	lines := wrap(text, w)
	for i, l := range lines {
		p := rest
		if i == 0 {
			p = first
		}
		lines[i] = p + st.Render(l)
	}
	return lines
}

// hanging wraps each line of text to width after prefix, keeping the
// line's own indentation and indenting its continuations two more: a
// long value of an indented list stays under its item.
func hanging(text string, width int, prefix string, st lipgloss.Style) []string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		body := strings.TrimLeft(l, " ")
		lead := prefix + strings.Repeat(" ", len(l)-len(body))
		rows := indent(body, width, lead, lead+"  ", st)
		if len(rows) == 0 {
			rows = []string{prefix}
		}
		out = append(out, rows...)
	}
	return out
}

// fold keeps the first n lines and says how many are left out.
func fold(lines []string, n int, th theme) []string {
	if n <= 0 || len(lines) <= n {
		return lines
	}
	rest := len(lines) - n
	out := append(lines[:n:n], th.dim.Render(fmt.Sprintf("    … %d more %s", rest, plural(rest, "line", "lines"))))
	return out
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// renderCtx is what rendering an item needs.
type renderCtx struct {
	th       theme
	md       *markdown
	width    int
	expanded bool // the item is unfolded
	selected bool
	verbose  bool // every hook run and approval
}

// render draws one item as lines of at most width cells.
func (it *item) render(rc renderCtx) []string {
	var lines []string
	switch it.kind {
	case itemCard:
		lines = it.card.render(rc)
	case itemStream:
		st := lipgloss.NewStyle()
		if it.e.Kind == transcript.ReasoningDelta {
			st = rc.th.dim
		}
		lines = indent(it.text.String(), rc.width, "", "", st)
		if it.e.Kind == transcript.ReasoningDelta {
			lines = append([]string{rc.th.dim.Render("∴ thinking…")}, fold(lines, 3, rc.th)...)
		}
	case itemLocal:
		st := rc.th.dim
		if it.warn {
			st = rc.th.warn
		}
		lines = indent(it.e.Text, rc.width, st.Render("· "), "  ", st)
	default:
		lines = renderEntry(it.e, rc)
	}
	if rc.selected {
		for i, l := range lines {
			lines[i] = rc.th.sel.Render("▌") + l
		}
	}
	return lines
}

// selectable reports whether an item can be folded and unfolded.
func (it *item) selectable() bool {
	switch it.kind {
	case itemCard:
		return true
	case itemEntry:
		switch it.e.Kind {
		case transcript.Reasoning, transcript.Context, transcript.Summary:
			return true
		}
	}
	return false
}

func renderEntry(e transcript.Entry, rc renderCtx) []string {
	th, w := rc.th, rc.width
	switch e.Kind {
	case transcript.TurnStart:
		return []string{"", th.dim.Render(fmt.Sprintf("── turn %d ──", e.Turn))}
	case transcript.TurnEnd:
		if e.Reason == nil || e.Reason.Kind == session.ReasonCompleted {
			return nil
		}
		st := th.warn
		if e.Reason.Kind == session.ReasonError {
			st = th.bad
		}
		if e.Reason.Kind == session.ReasonInterrupted {
			return nil // the repair notice that follows says it
		}
		return indent(fmt.Sprintf("turn %d ended: %s", e.Turn, transcript.ReasonText(*e.Reason)), w, st.Render("■ "), "  ", st)
	case transcript.User:
		return indent(e.Text, w, th.user.Render("› "), "  ", th.bold)
	case transcript.Context:
		head := th.ctx.Render("⊕ context · " + safe(transcript.Label(*e.Source)))
		body := indent(e.Text, w, "  ", "  ", th.dim)
		if !rc.expanded {
			body = fold(body, 3, th)
		}
		return append([]string{head}, body...)
	case transcript.Summary:
		head := th.ctx.Render(fmt.Sprintf("≡ compaction summary · replaces #%d–#%d", e.Replaces.Start, e.Replaces.End))
		body := indent(e.Text, w, "  ", "  ", th.dim)
		if !rc.expanded {
			body = fold(body, 3, th)
		}
		return append([]string{head}, body...)
	case transcript.Steering:
		lbl := "↪ steering"
		if e.Source != nil && !e.Source.IsUser() {
			lbl += " · " + safe(transcript.Label(*e.Source))
		}
		return indent(e.Text, w, th.accent.Render(lbl+": "), "  ", lipgloss.NewStyle())
	case transcript.Reasoning:
		lines := wrap(e.Text, w-2)
		head := th.dim.Render(fmt.Sprintf("∴ thinking · %d %s", len(lines), plural(len(lines), "line", "lines")))
		if !rc.expanded {
			return []string{head}
		}
		out := []string{head}
		for _, l := range lines {
			out = append(out, "  "+th.dim.Render(l))
		}
		return out
	case transcript.Assistant:
		if strings.TrimSpace(e.Text) == "" && !e.Interrupted {
			return nil
		}
		lines := rc.md.render(e.Text, w)
		if e.Interrupted {
			lines = append(lines, th.warn.Render("(interrupted)"))
		}
		return lines
	case transcript.Plan:
		return planLines(e.Plan, th)
	case transcript.Approval:
		if e.Tool.Decision == "allow" && !rc.verbose {
			return nil
		}
		return indent(approvalText(e), w, th.warn.Render("! "), "  ", th.warn)
	case transcript.Hook:
		notable := e.Tool.Decision == "block" || e.Tool.Decision == "deny"
		if !notable && !rc.verbose && e.Error == "" {
			return nil
		}
		st := th.dim
		if notable {
			st = th.warn
		}
		s := fmt.Sprintf("hook %s (%s): %s", e.Text, e.Tool.Name, e.Tool.Decision)
		if e.Error != "" {
			s += " — " + firstLine(e.Error)
		}
		return indent(s, w, st.Render("⚑ "), "  ", st)
	case transcript.Repair:
		return indent(fmt.Sprintf("recovered: turn %d was interrupted — %s", e.Turn, e.Text), w, th.warn.Render("⚠ "), "  ", th.warn)
	case transcript.Blocked:
		out := indent("prompt blocked: "+e.Error, w, th.bad.Render("⊘ "), "  ", th.bad)
		return append(out, indent(e.Text, w, "  "+th.dim.Render("› "), "    ", th.dim)...)
	case transcript.Compaction:
		if e.Error != "" {
			return indent("compaction "+e.Text+": "+e.Error, w, th.bad.Render("✗ "), "  ", th.bad)
		}
		return []string{th.dim.Render("⋯ compaction " + safe(e.Text))}
	case transcript.Unknown:
		return []string{th.dim.Render("(unknown event " + safe(e.Text) + ")")}
	}
	return nil // titles, models, deltas: shown elsewhere
}

func approvalText(e transcript.Entry) string {
	s := fmt.Sprintf("%s %s by %s", e.Tool.Name, e.Tool.Decision, e.Tool.By)
	if e.Text != "" {
		s += ": " + firstLine(e.Text)
	}
	return s
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i] + " …"
	}
	return s
}

func planLines(items []transcript.PlanItem, th theme) []string {
	out := []string{th.accent.Render("☰ plan")}
	for _, it := range items {
		mark, st := "☐", lipgloss.NewStyle()
		switch it.Status {
		case "completed":
			mark, st = "☑", th.dim
		case "in_progress":
			mark, st = "▶", th.bold
		}
		out = append(out, "  "+mark+" "+st.Render(safe(firstLine(it.Content))))
	}
	return out
}

// card is a tool call and everything known about it: the call, its start,
// its approvals, its result.
type card struct {
	id, name, title string
	kind            transcript.ToolKind
	args            string
	status          transcript.Status
	rewritten       bool
	diff            *transcript.Diff
	result          string
	isError         bool
	code            string
	exit            *int
	signal          string
	timedOut        bool
	approvals       []transcript.Entry
	plan            []transcript.PlanItem
}

func newCard(t *transcript.Tool) *card {
	c := &card{id: t.CallID}
	c.update(t)
	return c
}

// update folds a later entry's tool description into the card.
func (c *card) update(t *transcript.Tool) {
	if t.Name != "" {
		c.name = t.Name
	}
	if t.Title != "" {
		c.title = t.Title
	}
	if t.Kind != "" {
		c.kind = t.Kind
	}
	if t.Arguments != "" {
		c.args = t.Arguments
	}
	if t.Status != "" {
		c.status = t.Status
	}
	if t.Diff != nil {
		c.diff = t.Diff
	}
	c.rewritten = c.rewritten || t.Rewritten
}

func (c *card) icon(th theme) string {
	switch c.status {
	case transcript.Pending:
		return th.dim.Render("○")
	case transcript.Running:
		return th.accent.Render("◐")
	case transcript.Failed:
		return th.bad.Render("✗")
	}
	return th.ok.Render("✓")
}

// summary is the collapsed card's tail: how the call ended.
func (c *card) summary() string {
	var parts []string
	switch {
	case c.status == transcript.Pending:
		parts = append(parts, "waiting")
	case c.status == transcript.Running:
		parts = append(parts, "running")
	}
	if c.exit != nil {
		parts = append(parts, fmt.Sprintf("exit %d", *c.exit))
	} else if c.signal != "" {
		parts = append(parts, "killed by "+c.signal)
	}
	if c.timedOut {
		parts = append(parts, "timed out")
	}
	if c.isError && c.code != "" && c.code != "exit" {
		parts = append(parts, c.code)
	}
	if c.diff != nil && c.status == transcript.Completed {
		a, d := diffStat(c.diffText())
		parts = append(parts, fmt.Sprintf("+%d −%d", a, d))
	} else if c.result != "" && c.status != transcript.Pending {
		if n := len(c.resultLines()); n == 0 {
			parts = append(parts, "no output")
		} else {
			parts = append(parts, fmt.Sprintf("%d %s", n, plural(n, "line", "lines")))
		}
	}
	return strings.Join(parts, " · ")
}

func (c *card) render(rc renderCtx) []string {
	th, w := rc.th, rc.width
	title := c.title
	if title == "" {
		title = c.name
	}
	if c.rewritten {
		title += " (input rewritten by a hook)"
	}
	head := c.icon(th) + " " + th.bold.Render(ansi.Truncate(safe(title), max(w-30, 10), "…"))
	if s := safe(c.summary()); s != "" {
		head += th.dim.Render("  " + s)
	}
	out := []string{head}
	for _, a := range c.approvals {
		if a.Tool.Decision == "allow" && !rc.verbose && !rc.expanded {
			continue
		}
		out = append(out, indent(approvalText(a), w, "  "+th.warn.Render("! "), "    ", th.warn)...)
	}
	if len(c.plan) > 0 {
		for _, l := range planLines(c.plan, th)[1:] {
			out = append(out, "  "+l)
		}
	}
	if !rc.expanded {
		// A failure says why even folded.
		if c.isError && c.result != "" {
			out = append(out, indent(lastLine(c.result), w, "  "+th.bad.Render("└ "), "    ", th.bad)...)
		}
		return out
	}
	if c.kind == transcript.KindExecute {
		if cmd := command(c.args); cmd != "" {
			out = append(out, indent(cmd, w, "  "+th.dim.Render("$ "), "    ", lipgloss.NewStyle())...)
		}
	}
	if c.diff != nil {
		out = append(out, diffLines(c.diffText(), w, th)...)
	} else if c.kind != transcript.KindExecute && c.args != "" && c.kind != transcript.KindRead {
		out = append(out, indent(transcript.Summarize(c.args, 0), w, "  "+th.dim.Render("⟨ "), "    ", th.dim)...)
	}
	if c.result != "" && (c.diff == nil || c.isError) {
		out = append(out, c.body(w, 40, th)...)
	}
	return out
}

// noOutput is what the bash tool answers for a command that wrote nothing.
const noOutput = "(no output)"

// resultLines are the lines of the call's result, none for a command
// that wrote nothing (the tool's placeholder is not output).
func (c *card) resultLines() []string {
	r := strings.TrimRight(strings.ReplaceAll(c.result, "\r\n", "\n"), "\n")
	if r == "" || c.name == "bash" && r == noOutput {
		return nil
	}
	return strings.Split(r, "\n")
}

// body draws the result, at most n rows of it, and says how many of its
// lines are left out: the same lines the folded card counts, however
// many rows a long one wraps to.
func (c *card) body(w, n int, th theme) []string {
	bar := "  " + th.dim.Render("│ ")
	lines := c.resultLines()
	if lines == nil {
		return indent(c.result, w, bar, bar, th.dim)
	}
	var out []string
	for i, l := range lines {
		rows := indent(l, w, bar, bar, th.dim)
		if len(rows) == 0 {
			rows = []string{bar}
		}
		if len(out)+len(rows) > n {
			if i == 0 { // one line longer than the rows shown: its start
				out = rows[:n]
			}
			rest := len(lines) - i
			return append(out, th.dim.Render(fmt.Sprintf("    … %d more %s", rest, plural(rest, "line", "lines"))))
		}
		out = append(out, rows...)
	}
	return out
}

func lastLine(s string) string {
	s = strings.TrimRight(s, "\n")
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		return s[i+1:]
	}
	return s
}

// command is a bash call's command line.
func command(args string) string {
	var a struct {
		Command string `json:"command"`
	}
	_ = json.Unmarshal([]byte(args), &a)
	return a.Command
}

// diffText is the card's change as a unified diff.
func (c *card) diffText() string {
	d := c.diff
	label := func(side string) string {
		if filepath.IsAbs(d.Path) {
			return d.Path
		}
		return side + d.Path
	}
	// Strings proposed by an edit need not end a line: compare them as
	// lines, without "no newline" markers.
	lines := func(s string) string {
		if s != "" && !strings.HasSuffix(s, "\n") {
			return s + "\n"
		}
		return s
	}
	switch {
	case d.Unified != "":
		return d.Unified
	case d.Old != nil && d.New != nil:
		return udiff.Unified(label("a/"), label("b/"), lines(*d.Old), lines(*d.New))
	case d.New != nil:
		return udiff.Unified("/dev/null", label("b/"), "", lines(*d.New))
	}
	return ""
}

func diffStat(u string) (add, del int) {
	for _, l := range strings.Split(u, "\n") {
		switch {
		case strings.HasPrefix(l, "+++"), strings.HasPrefix(l, "---"):
		case strings.HasPrefix(l, "+"):
			add++
		case strings.HasPrefix(l, "-"):
			del++
		}
	}
	return add, del
}

func diffLines(u string, w int, th theme) []string {
	var out []string
	for _, l := range strings.Split(strings.TrimRight(safe(u), "\n"), "\n") {
		st := th.dim
		switch {
		case strings.HasPrefix(l, "+++"), strings.HasPrefix(l, "---"):
			st = th.bold
		case strings.HasPrefix(l, "@@"):
			st = th.hunk
		case strings.HasPrefix(l, "+"):
			st = th.add
		case strings.HasPrefix(l, "-"):
			st = th.del
		}
		out = append(out, "  "+st.Render(ansi.Truncate(strings.ReplaceAll(l, "\t", "    "), w-2, "…")))
	}
	if len(out) > 80 {
		n := len(out) - 80
		out = append(out[:80], th.dim.Render(fmt.Sprintf("    … %d more %s", n, plural(n, "line", "lines"))))
	}
	return out
}
