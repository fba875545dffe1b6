package transcript

import (
	"fmt"
	"io"
	"strings"

	"github.com/reinhq/rein/session"
)

// Options tune Render.
type Options struct {
	// Verbose also shows reasoning, model changes, usage, approvals that
	// allowed a call and every hook run (by default only hooks that blocked
	// or denied are shown).
	Verbose bool
	// MaxResult caps the lines of a tool result shown (default 6; negative
	// shows none but the summary line).
	MaxResult int
	// Seqs prefixes every entry with its event seq ("#12"), for commands
	// that take a seq (fork --at).
	Seqs bool
}

// Render writes entries as plain text, one block per entry:
//
//	── turn 1 ──
//	user: why?
//	context (plugin ci-watch): CI is red on main
//	assistant: Let me look.
//	  → read ci.log
//	  ← read: FAIL TestX
//	── turn 1 completed ──
//
// Multi-line text is indented under its label. The output is stable (no
// times, no colours), so it serves golden tests and session references.
func Render(w io.Writer, entries []Entry, opts Options) error {
	if opts.MaxResult == 0 {
		opts.MaxResult = 6
	}
	var b strings.Builder
	for _, e := range entries {
		line := renderEntry(e, opts)
		if line == "" {
			continue
		}
		if opts.Seqs {
			fmt.Fprintf(&b, "#%-4d ", e.Seq)
			line = strings.ReplaceAll(line, "\n", "\n      ")
		}
		b.WriteString(line)
		b.WriteByte('\n')
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// Text renders events as Render does with default options: the visible
// transcript of a log, as a session reference snapshots it.
func Text(events []session.Event) (string, error) {
	es, err := Build(events)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	_ = Render(&b, es, Options{})
	return b.String(), nil
}

func renderEntry(e Entry, opts Options) string {
	switch e.Kind {
	case TurnStart:
		return fmt.Sprintf("── turn %d ──", e.Turn)
	case TurnEnd:
		return fmt.Sprintf("── turn %d %s ──", e.Turn, ReasonText(*e.Reason))
	case User:
		return block("user", e.Text)
	case Context:
		return block("context ("+Label(*e.Source)+")", e.Text)
	case Steering:
		lbl := "steering"
		if !e.Source.IsUser() {
			lbl += " (" + Label(*e.Source) + ")"
		}
		return block(lbl, e.Text)
	case Summary:
		return block(fmt.Sprintf("summary (%s, replaces #%d–#%d)", Label(*e.Source), e.Replaces.Start, e.Replaces.End), e.Text)
	case Reasoning:
		if !opts.Verbose {
			return ""
		}
		return block("reasoning", e.Text)
	case Assistant:
		if e.Text == "" && !e.Interrupted && !opts.Verbose {
			return ""
		}
		lbl := "assistant"
		if e.Interrupted {
			lbl += " (interrupted)"
		}
		s := block(lbl, e.Text)
		if opts.Verbose && e.Usage != nil {
			s += fmt.Sprintf("\n  [tokens: %d in, %d out]", e.Usage.Input, e.Usage.Output)
		}
		return s
	case ToolCall:
		return strings.TrimRight("  → "+e.Tool.Name+" "+Summarize(e.Tool.Arguments, 100), " ")
	case ToolStarted:
		if !e.Tool.Rewritten {
			return "" // the assistant entry showed the call
		}
		return strings.TrimRight("  → "+e.Tool.Name+" "+Summarize(e.Tool.Arguments, 100), " ") + " (input rewritten by a hook)"
	case Plan:
		if !opts.Verbose {
			return "" // the todo tool's result shows the list
		}
		var b strings.Builder
		b.WriteString("plan:")
		for _, it := range e.Plan {
			mark := "[ ]"
			switch it.Status {
			case "completed":
				mark = "[x]"
			case "in_progress":
				mark = "[>]"
			}
			b.WriteString("\n  " + mark + " " + oneLine(it.Content))
		}
		return b.String()
	case Repair:
		return "repaired: " + e.Text
	case Blocked:
		return block("blocked ("+e.Error+")", e.Text)
	case AssistantDelta, ReasoningDelta:
		return "" // Render shows whole messages
	case ToolResult:
		return toolResult(e, opts)
	case Approval:
		if e.Tool.Decision == "allow" && !opts.Verbose {
			return ""
		}
		s := fmt.Sprintf("  ! %s %s by %s", e.Tool.Name, e.Tool.Decision, e.Tool.By)
		if e.Text != "" {
			s += ": " + oneLine(e.Text)
		}
		return s
	case Hook:
		switch e.Tool.Decision {
		case "block", "deny":
		default:
			if !opts.Verbose {
				return ""
			}
		}
		s := fmt.Sprintf("hook %s (%s): %s", e.Text, e.Tool.Name, e.Tool.Decision)
		if e.Error != "" {
			s += ": " + oneLine(e.Error)
		}
		return s
	case Compaction:
		s := "compaction " + e.Text
		if e.Error != "" {
			s += ": error: " + e.Error
		}
		return s
	case Title:
		return "title: " + e.Text
	case Model:
		if !opts.Verbose {
			return ""
		}
		return "model: " + e.Text
	default:
		return "(unknown event " + e.Text + ")"
	}
}

func toolResult(e Entry, opts Options) string {
	lbl := "  ← " + e.Tool.Name
	if e.Tool.Name == "" {
		lbl = "  ← " + e.Tool.CallID
	}
	if e.Tool.IsError {
		lbl += " [error"
		if e.Tool.Code != "" {
			lbl += " " + e.Tool.Code
		}
		lbl += "]"
	}
	body := strings.TrimRight(e.Text, "\n")
	if body == "" {
		return lbl
	}
	lines := strings.Split(body, "\n")
	if opts.MaxResult < 0 {
		return fmt.Sprintf("%s: %s", lbl, cut(lines[0], 100)) + more(len(lines)-1)
	}
	if len(lines) == 1 {
		return lbl + ": " + lines[0]
	}
	shown := lines
	if len(shown) > opts.MaxResult {
		shown = shown[:opts.MaxResult]
	}
	var b strings.Builder
	b.WriteString(lbl + ":")
	for _, l := range shown {
		b.WriteString("\n      " + l)
	}
	b.WriteString(more(len(lines) - len(shown)))
	return b.String()
}

func more(n int) string {
	if n <= 0 {
		return ""
	}
	if n == 1 {
		return "\n      … 1 more line"
	}
	return fmt.Sprintf("\n      … %d more lines", n)
}

// block renders label: text, indenting continuation lines.
func block(label, text string) string {
	text = strings.TrimRight(text, "\n")
	if text == "" {
		return label + ":"
	}
	if !strings.Contains(text, "\n") {
		return label + ": " + text
	}
	return label + ":\n  " + strings.ReplaceAll(text, "\n", "\n  ")
}

// ReasonText describes a turn's outcome: "completed", "aborted (user)",
// "error (context-overflow: prompt too long)", "interrupted".
func ReasonText(r session.Reason) string {
	switch r.Kind {
	case session.ReasonAborted:
		if r.Cause != "" {
			return "aborted (" + r.Cause + ")"
		}
	case session.ReasonError:
		detail := r.Code
		if r.Message != "" {
			if detail != "" {
				detail += ": "
			}
			detail += r.Message
		}
		if detail != "" {
			return "error (" + detail + ")"
		}
	}
	return r.Kind
}
