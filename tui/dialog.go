package tui

import (
	"fmt"
	"strings"
	"time"

	tea "charm.land/bubbletea/v2"
	"charm.land/lipgloss/v2"
	"github.com/charmbracelet/x/ansi"

	"github.com/reinhq/rein/agent"
	"github.com/reinhq/rein/transcript"
	"github.com/reinhq/rein/trust"
)

// dialog takes the keys while it is open and is drawn in place of the
// input.
type dialog interface {
	// key handles a key; done says the dialog closed.
	key(m *Model, k tea.KeyPressMsg) (cmd tea.Cmd, done bool)
	// view draws it at width w in at most h lines.
	view(m *Model, w, h int) []string
	// cancel closes it as esc would (the answer "no"), for shutdown.
	cancel()
}

// approvalDialog asks whether a tool call may run.
type approvalDialog struct {
	req   agent.ApprovalRequest
	reply chan agent.Approval
	rule  string // the "always" rule ("" when none can be written)
	rules Rules
	cwd   string
	// ready is when keys start to count: those pressed before were
	// typed for the input the dialog took the place of.
	ready time.Time
}

// defaultApprovalGrace is Config.ApprovalGrace's default.
const defaultApprovalGrace = 600 * time.Millisecond

func (d *approvalDialog) answer(ap agent.Approval) {
	select {
	case d.reply <- ap:
	default:
	}
}

func (d *approvalDialog) cancel() {
	d.answer(agent.Approval{Allow: false, By: "user", Reason: "the terminal UI closed"})
}

// key answers on the three keys shown (and esc, which denies): a letter
// typed in a prompt must not allow a call, so only y allows it once, A
// always, and nothing does before the grace after the dialog appeared.
func (d *approvalDialog) key(m *Model, k tea.KeyPressMsg) (tea.Cmd, bool) {
	if time.Now().Before(d.ready) && k.String() != "esc" {
		m.status = "an approval appeared: answer it with y, A or n"
		return nil, false
	}
	switch k.String() {
	case "y":
		d.answer(agent.Approval{Allow: true, By: "user"})
		return nil, true
	case "A":
		if d.rule == "" {
			return nil, false
		}
		reason := "allowed always (" + d.rule + ")"
		if err := d.rules.Save(m.ctx, d.cwd, d.rule); err != nil {
			reason += ": " + err.Error()
			m.local(err.Error(), true)
		} else {
			m.local("allowed always in this workspace: "+d.rule+" (written to your config)", false)
		}
		d.answer(agent.Approval{Allow: true, By: "user", Reason: reason})
		return nil, true
	case "n", "esc":
		d.answer(agent.Approval{Allow: false, By: "user", Reason: "denied by the user"})
		return nil, true
	}
	return nil, false
}

func (d *approvalDialog) view(m *Model, w, h int) []string {
	th := m.th
	title, _, _, diff := transcript.Describe(d.req.Name, d.req.Arguments, "")
	if title == "" {
		title = d.req.Name
	}
	out := []string{th.warn.Render("? allow ") + th.bold.Render(ansi.Truncate(safe(title), w-10, "…"))}
	if d.req.Reason != "" {
		out = append(out, indent("rein asks because: "+d.req.Reason, w, "  ", "  ", th.dim)...)
	}
	var body []string
	if diff != nil {
		c := &card{diff: diff}
		body = diffLines(c.diffText(), w, th)
	} else if cmd := command(d.req.Arguments); d.req.Name == "bash" && cmd != "" {
		body = indent(cmd, w, "  "+th.dim.Render("$ "), "    ", th.bold)
	} else {
		body = indent(transcript.Summarize(d.req.Arguments, 0), w, "  ", "  ", th.dim)
	}
	room := max(h-len(out)-1, 1)
	if len(body) > room {
		body = fold(body, max(room-1, 1), th)
	}
	out = append(out, body...)
	opts := "[y] allow once"
	if d.rule != "" {
		opts += "   [A] always allow " + safe(d.rule)
	}
	opts += "   [n] deny"
	return append(out, th.accent.Render(ansi.Truncate(opts, w, "…")))
}

// trustDialog asks whether to trust the workspace.
type trustDialog struct {
	q     trust.Question
	reply chan trust.Answer
}

func (d *trustDialog) answer(a trust.Answer) {
	select {
	case d.reply <- a:
	default:
	}
}

func (d *trustDialog) cancel() { d.answer(trust.No) }

func (d *trustDialog) key(m *Model, k tea.KeyPressMsg) (tea.Cmd, bool) {
	switch k.String() {
	case "y":
		d.answer(trust.Always)
	case "o":
		d.answer(trust.Once)
	case "n", "esc", "enter":
		d.answer(trust.No)
	default:
		return nil, false
	}
	return nil, true
}

func (d *trustDialog) view(m *Model, w, h int) []string {
	th := m.th
	out := []string{th.warn.Render("? trust the workspace " + safe(d.q.Decision.Root) + "?")}
	body := hanging(strings.TrimRight(d.q.Text(), "\n"), w, "  ", lipgloss.NewStyle())
	room := max(h-len(out)-1, 1)
	if len(body) > room {
		body = fold(body, max(room-1, 1), th)
	}
	out = append(out, body...)
	return append(out, th.accent.Render("[y] trust, remember   [o] only this time   [n] don't trust (its settings are ignored)"))
}

// pickItem is one choice of a picker.
type pickItem struct {
	label string // what is shown (and filtered on)
	hint  string // dimmed after the label
	value string
	seq   int64
}

// pickerDialog lets the person choose one of a list, filtering as they
// type.
type pickerDialog struct {
	title  string
	items  []pickItem
	filter string
	sel    int
	pick   func(m *Model, it pickItem) tea.Cmd
}

func (d *pickerDialog) cancel() {}

func (d *pickerDialog) shown() []pickItem {
	if d.filter == "" {
		return d.items
	}
	var out []pickItem
	f := strings.ToLower(d.filter)
	for _, it := range d.items {
		if strings.Contains(strings.ToLower(it.label+" "+it.hint+" "+it.value), f) {
			out = append(out, it)
		}
	}
	return out
}

func (d *pickerDialog) key(m *Model, k tea.KeyPressMsg) (tea.Cmd, bool) {
	shown := d.shown()
	switch k.String() {
	case "esc", "ctrl+c":
		return nil, true
	case "up", "ctrl+p":
		d.sel = max(d.sel-1, 0)
	case "down", "ctrl+n":
		d.sel = min(d.sel+1, max(len(shown)-1, 0))
	case "pgup":
		d.sel = max(d.sel-10, 0)
	case "pgdown":
		d.sel = min(d.sel+10, max(len(shown)-1, 0))
	case "enter", "tab":
		if d.sel < len(shown) {
			return d.pick(m, shown[d.sel]), true
		}
		return nil, true
	case "backspace":
		if d.filter != "" {
			d.filter = d.filter[:len(d.filter)-len(lastRune(d.filter))]
			d.sel = 0
		}
	default:
		if k.Text != "" {
			d.filter += k.Text
			d.sel = 0
		}
	}
	return nil, false
}

func lastRune(s string) string {
	r := []rune(s)
	return string(r[len(r)-1])
}

func (d *pickerDialog) view(m *Model, w, h int) []string {
	th := m.th
	shown := d.shown()
	head := th.accent.Render(d.title)
	if d.filter != "" {
		head += th.dim.Render("  filter: ") + safe(d.filter)
	} else {
		head += th.dim.Render("  (type to filter · enter picks · esc closes)")
	}
	out := []string{head}
	room := max(h-1, 1)
	start := 0
	if d.sel >= room {
		start = d.sel - room + 1
	}
	if len(shown) == 0 {
		out = append(out, th.dim.Render("  (nothing matches)"))
	}
	for i := start; i < len(shown) && i < start+room; i++ {
		it := shown[i]
		line := "  " + safe(it.label)
		if i == d.sel {
			line = th.sel.Render("› " + safe(it.label))
		}
		if it.hint != "" {
			line += th.dim.Render("  " + safe(it.hint))
		}
		out = append(out, ansi.Truncate(line, w, "…"))
	}
	return out
}

// helpText lists keys and commands.
func helpText(version string) string {
	// Config.Version is what rein version prints ("rein v0.3.0 go1.26
	// linux/amd64"), or an embedder's bare version.
	v := "rein"
	switch {
	case strings.HasPrefix(version, "rein "):
		v = version
	case version != "":
		v += " " + version
	}
	return fmt.Sprintf(`%s — keys
  enter        send (while a turn runs: queue it; the count shows)
  ctrl+s       steer the running turn (idle: send)
  ctrl+x       give the input as context (source user-context), not as a prompt
  alt+enter    new line (also ctrl+j, shift+enter)
  esc          cancel the turn (queued prompts wait); twice: also drop the queue
  ↑ ↓          earlier prompts (on the first or last line of the input)
  pgup pgdn    scroll; ctrl+↑ ctrl+↓ select a card, tab unfolds it, ctrl+o unfolds all
  ctrl+c       clear the input; on an empty input: quit (ctrl+d too)
commands
  /inject TEXT       add TEXT as context (source user-context:tui)
  /compact [TEXT]    summarize the history for the model (TEXT: instructions)
  /fork [N]          fork the session after turn N (a picker without N)
  /resume            resume a session of this directory
  /sessions          pick any session
  /new               start a new session
  /model [MODEL]     switch the model, as provider:model (a list without it)
  /trust             show or change this workspace's trust
  /help              this text;  /quit to leave
  @session:ID        in a prompt: include that session's transcript (tab completes)`, v)
}
