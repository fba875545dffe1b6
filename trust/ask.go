package trust

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/reinhq/rein/display"
)

// Answer is a person's answer to a Question.
type Answer int

// Answers.
const (
	// No: do not trust; the settings are ignored in this run.
	No Answer = iota
	// Once: apply the settings in this run only.
	Once
	// Always: trust the workspace with these settings from now on.
	Always
)

// Question asks a person whether to trust a workspace. Terminal, TUI and
// ACP front ends each render it their own way; Text is the plain form.
type Question struct {
	Decision Decision
}

// Asker asks a person a Question: a terminal prompt (Prompter), a TUI
// dialog, an ACP permission request. An error (no one to ask, the person
// went away) counts as No.
type Asker interface {
	AskTrust(ctx context.Context, q Question) (Answer, error)
}

// Options tune Resolve.
type Options struct {
	// Once applies the settings in this run without asking or storing
	// (the --trust flag).
	Once bool
	// Ask asks a person when the workspace is not trusted; nil never asks
	// (headless).
	Ask Asker
	// Now stamps a stored trust; default time.Now.
	Now func() time.Time
}

// Resolve decides whether root's items apply in this run: Check, then the
// Once option, then (when an Asker is given) the person's answer, an
// Always answer being stored. A store that cannot be read leaves the
// workspace untrusted and is returned as the error, along with the
// Decision; so is an answer that cannot be stored (the settings then apply
// for this run only).
func Resolve(ctx context.Context, s *Store, root string, items []Item, opts Options) (Decision, error) {
	d, err := Check(s, root, items)
	if d.Apply {
		return d, nil
	}
	if opts.Once {
		d.Apply, d.By = true, "flag --trust"
		return d, err
	}
	if opts.Ask == nil || err != nil {
		return d, err
	}
	ans, aerr := opts.Ask.AskTrust(ctx, Question{Decision: d})
	if aerr != nil {
		return d, nil
	}
	switch ans {
	case Once:
		d.Apply, d.By = true, "answer once"
	case Always:
		d.Apply, d.By = true, "answer always"
		now := time.Now
		if opts.Now != nil {
			now = opts.Now
		}
		if err := s.Trust(d.Root, d.Items, now()); err != nil {
			return d, err
		}
	}
	return d, nil
}

// heading says what items of a kind would do.
func heading(kind string) string {
	switch kind {
	case KindHook:
		return "run these commands (hooks)"
	case KindHooksOff:
		return "turn off every hook, your own included"
	case KindProvider:
		return "send model requests, with your API key, as set here"
	case KindMode:
		return "raise the permission mode"
	case KindAllow:
		return "allow tool calls without asking"
	case KindSandbox:
		return "widen the sandbox of bash and hooks"
	case KindEnvKeep:
		return "pass these environment variables to tools"
	case KindMCP:
		return "start these MCP servers"
	case KindMCPCwd:
		return "choose the code of your own MCP servers (their cwd is inside the workspace)"
	case KindPrompt:
		return "replace or extend rein's system prompt"
	case KindLimit:
		return "raise your limits"
	case KindPrices:
		return "set the prices rein reports costs with"
	}
	return kind
}

// Text is the question in plain text: what the project's settings would do,
// grouped by kind, each with its origin, ending with the question itself.
func (q Question) Text() string {
	d := q.Decision
	var b strings.Builder
	if d.Status == StatusChanged {
		fmt.Fprintf(&b, "The settings of the trusted workspace %s changed:\n", display.Quote(d.Root))
		for _, c := range d.Changes {
			fmt.Fprintf(&b, "  %s\n", describeChange(c))
		}
		b.WriteString("All its settings that need trust:\n")
	} else {
		fmt.Fprintf(&b, "The workspace %s is not trusted. Its settings would:\n", display.Quote(d.Root))
	}
	b.WriteString(Describe(d.Items))
	b.WriteString("Trust it only if you wrote or checked these settings.\n")
	return b.String()
}

// Describe lists items grouped by kind under a line saying what they would
// do, one "key = value   (origin)" line each, indented. Keys, values and
// origins come from the project's files: each is shown with display.Quote,
// so a control character or a newline cannot make a line look like
// another.
func Describe(items []Item) string {
	items = slices.Clone(items)
	sortItems(items)
	var b strings.Builder
	kind := ""
	for i, it := range items {
		if i == 0 || it.Kind != kind {
			kind = it.Kind
			fmt.Fprintf(&b, "  %s:\n", heading(kind))
		}
		fmt.Fprintf(&b, "    %s = %s", display.Quote(it.Key), display.Quote(it.Value))
		if it.Origin != "" {
			fmt.Fprintf(&b, "   (%s)", display.Quote(it.Origin))
		}
		b.WriteByte('\n')
	}
	return b.String()
}

func describeChange(c Change) string {
	s := fmt.Sprintf("%s = %s", display.Quote(c.Item.Key), display.Quote(c.Item.Value))
	if len(c.Was) == 0 {
		return s + " (new)"
	}
	was := make([]string, len(c.Was))
	for i, w := range c.Was {
		was[i] = display.Quote(w)
	}
	return s + " (was " + strings.Join(was, ", ") + ")"
}

// Notice is the one line a headless run prints when the items do not
// apply: what was ignored and how to trust the workspace. It is empty when
// they apply.
func (d Decision) Notice() string {
	if d.Apply || len(d.Items) == 0 {
		return ""
	}
	var what []string
	if d.Status == StatusChanged {
		for _, c := range d.Changes {
			what = append(what, describeChange(c))
		}
		return fmt.Sprintf("the trust-relevant settings of %s changed since you trusted it (%s); ignoring %s; review them, then run 'rein trust %s' (or pass --trust for one run)",
			display.Quote(d.Root), strings.Join(what, "; "), count(d.Items), display.Escape(shellQuote(d.Root)))
	}
	for _, it := range d.Items {
		what = append(what, display.Quote(it.Key)+" = "+short(display.Quote(it.Value)))
	}
	return fmt.Sprintf("untrusted workspace %s: ignoring %s (%s); run 'rein trust %s' to trust it, or pass --trust for one run",
		display.Quote(d.Root), count(d.Items), strings.Join(what, "; "), display.Escape(shellQuote(d.Root)))
}

func count(items []Item) string {
	if len(items) == 1 {
		return "1 project setting"
	}
	return fmt.Sprintf("%d project settings", len(items))
}

// short cuts a value (already quoted for display) to at most 60
// characters.
func short(s string) string {
	cut := false
	if r := []rune(s); len(r) > 60 {
		s, cut = string(r[:59]), true
	}
	if cut {
		s += "…"
	}
	return s
}

func shellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("/._-+:@", r))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// ErrNoAnswer: the Prompter's input ended before an answer.
var ErrNoAnswer = errors.New("trust: no answer")

// Prompter asks on a terminal: it writes the Question's Text and a prompt
// to Out and reads one line from In ("y"/"yes": Always, "o"/"once": Once,
// anything else: No).
type Prompter struct {
	In  io.Reader
	Out io.Writer
}

// AskTrust implements Asker.
func (p Prompter) AskTrust(ctx context.Context, q Question) (Answer, error) {
	if _, err := fmt.Fprintf(p.Out, "%sTrust this workspace? [y]es, remember / [o]nce, this run only / [N]o: ", q.Text()); err != nil {
		return No, err
	}
	line, err := readLine(p.In)
	if err != nil && line == "" {
		fmt.Fprintln(p.Out)
		return No, ErrNoAnswer
	}
	switch strings.ToLower(strings.TrimSpace(line)) {
	case "y", "yes":
		return Always, nil
	case "o", "once":
		return Once, nil
	}
	return No, nil
}

// readLine reads up to a newline one byte at a time, so nothing after the
// answer is taken from In.
func readLine(r io.Reader) (string, error) {
	var b []byte
	var c [1]byte
	for len(b) < 256 {
		n, err := r.Read(c[:])
		if n == 1 {
			if c[0] == '\n' {
				return string(b), nil
			}
			b = append(b, c[0])
		}
		if err != nil {
			return string(b), err
		}
	}
	return string(b), nil
}
