package tui

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	tea "charm.land/bubbletea/v2"

	"github.com/reinhq/rein/agent"
	"github.com/reinhq/rein/display"
	"github.com/reinhq/rein/llm"
	"github.com/reinhq/rein/llm/scripted"
	"github.com/reinhq/rein/session"
	"github.com/reinhq/rein/store"
	"github.com/reinhq/rein/trust"
)

// gate blocks a scripted call until the test opens it.
func gate() (chan struct{}, func(context.Context, int)) {
	ch := make(chan struct{})
	return ch, func(ctx context.Context, i int) {
		if i == 0 {
			select {
			case <-ch:
			case <-ctx.Done():
			}
		}
	}
}

func wantMessages(t *testing.T, evs []session.Event, want ...string) {
	t.Helper()
	got := messages(evs)
	if !slices.Equal(got, want) {
		t.Errorf("messages in the log:\n  %s\nwant:\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
}

// TestPromptAndAnswer: Enter sends; the answer is drawn as markdown; the
// status line counts tokens; the prompt is in the log as the person's.
func TestPromptAndAnswer(t *testing.T) {
	e := newEnv(t, scripted.Call{
		Expect: &scripted.Expect{LastUser: "hello there"},
		Reply:  scripted.Reply{Reasoning: []string{"Greet them."}, Text: []string{"Hello, **world**!\n\n- one\n- two\n"}, Usage: &llm.Usage{Input: 1200, Output: 34, CacheRead: 600}},
	})
	d := newDriver(t, Config{Open: e.open}, 80, 20)
	ag := d.opened()
	d.typ("hello there")
	d.press("enter")
	d.idle()
	for _, want := range []string{"› hello there", "∴ thinking · 1 line", "Hello, world!", "• one", "↑1.2k ↓34", "cache 50%", "ctx 12%", "workspace-write"} {
		if !d.shows(want) {
			t.Errorf("screen lacks %q:\n%s", want, d.screen())
		}
	}
	if d.m.in.Value() != "" {
		t.Errorf("input not cleared: %q", d.m.in.Value())
	}
	wantMessages(t, e.logOf(ag.ID()), "user/message user: hello there")
}

// TestQueueSteerAndInject: while a turn runs, Enter queues (with a count),
// ctrl+s steers, ctrl+x and /inject add context; each lands where the
// runtime says.
func TestQueueSteerAndInject(t *testing.T) {
	open, wait := gate()
	e := newEnv(t,
		scripted.Call{Reply: scripted.Reply{ToolCalls: []scripted.ToolCall{{Name: "bash", Arguments: `{"command":"echo hi"}`}}}, BeforeChunk: wait},
		scripted.Call{Expect: &scripted.Expect{Contains: []string{"only the unit tests", "CI is red"}}, Reply: scripted.Reply{Text: []string{"Done."}}},
		scripted.Call{Expect: &scripted.Expect{LastUser: "and then docs"}, Reply: scripted.Reply{Text: []string{"Docs too."}}},
	)
	d := newDriver(t, Config{Open: e.open}, 100, 24)
	ag := d.opened()
	d.typ("run the tests")
	d.press("enter")
	d.until("the turn to run", func() bool { return d.m.running })
	d.typ("and then docs")
	d.press("enter")
	d.waitFor("⧗ queued (1): and then docs")
	if !d.shows("1 queued") {
		t.Errorf("the status line lacks the queued count:\n%s", d.screen())
	}
	d.typ("only the unit tests")
	d.press("ctrl+s")
	d.waitFor("↪ steering (1): only the unit tests")
	d.typ("CI is red")
	d.press("ctrl+x")
	d.settle()
	if !strings.Contains(d.m.status, "context staged") {
		t.Errorf("status = %q", d.m.status)
	}
	close(open)
	d.waitFor("Docs too.")
	d.idle()
	for _, want := range []string{"↪ steering: only the unit tests", "⊕ context · user-context tui", "✓ bash: echo hi", "› and then docs"} {
		if !d.shows(want) {
			t.Errorf("screen lacks %q:\n%s", want, d.screen())
		}
	}
	if d.shows("queued (") || d.shows("steering (") {
		t.Errorf("the queue panel stayed:\n%s", d.screen())
	}
	d.typ("/inject between turns")
	d.press("enter")
	d.settle()
	wantMessages(t, e.logOf(ag.ID()),
		"user/message user: run the tests",
		"steering/message user: only the unit tests",
		"user/message user-context:tui: CI is red",
		"user/message user: and then docs",
		"user/message user-context:tui: between turns")
}

// TestEscape: esc cancels the turn and keeps the queue waiting; enter on
// an empty input lets it run; a second esc drops it.
func TestEscape(t *testing.T) {
	e := newEnv(t,
		scripted.Call{Reply: scripted.Reply{Text: []string{"working…"}}, Hang: true},
		scripted.Call{Expect: &scripted.Expect{LastUser: "second"}, Reply: scripted.Reply{Text: []string{"Second done."}}},
		scripted.Call{Reply: scripted.Reply{Text: []string{"again…"}}, Hang: true},
	)
	d := newDriver(t, Config{Open: e.open}, 100, 24)
	ag := d.opened()
	d.typ("first")
	d.press("enter")
	d.waitFor("working…")
	d.typ("second")
	d.press("enter")
	d.waitFor("queued (1)")
	d.press("esc")
	d.waitFor("turn 1 ended: aborted (user)")
	d.until("the agent to idle", func() bool { return !d.m.running })
	d.waitFor("paused: enter runs them")
	d.press("enter") // empty input: the parked queue goes on
	d.waitFor("Second done.")
	d.idle()

	// Twice: the queue is dropped too.
	d.typ("third")
	d.press("enter")
	d.waitFor("again…")
	d.typ("fourth")
	d.press("enter")
	d.waitFor("queued (1)")
	d.press("esc")
	d.press("esc")
	d.waitFor("dropped 1 queued prompt")
	d.idle()
	if d.shows("queued (") {
		t.Errorf("the queue stayed:\n%s", d.screen())
	}
	wantMessages(t, e.logOf(ag.ID()), "user/message user: first", "user/message user: second", "user/message user: third")
}

// bash is a scripted call of the bash tool.
func bash(id, cmd string) scripted.ToolCall {
	return scripted.ToolCall{ID: id, Name: "bash", Arguments: fmt.Sprintf(`{"command":%q}`, cmd)}
}

// TestApprovals: an "ask" shows the call inline; y allows once, A allows
// always (the rule is saved), n denies.
func TestApprovals(t *testing.T) {
	e := newEnv(t,
		scripted.Call{Reply: scripted.Reply{ToolCalls: []scripted.ToolCall{bash("c1", "echo one"), bash("c2", "echo two"), bash("c3", "rm -rf build")}}},
		scripted.Call{Reply: scripted.Reply{Text: []string{"Two ran, one did not."}}},
	)
	e.hooks.ToolPre = []agent.Hook[agent.ToolCallInfo, agent.ToolDecision]{
		func(ctx context.Context, in agent.ToolCallInfo, next func(context.Context, agent.ToolCallInfo) (agent.ToolDecision, error)) (agent.ToolDecision, error) {
			return agent.ToolDecision{Kind: agent.Ask, Reason: "commands need approval"}, nil
		}}
	d := newDriver(t, Config{Open: e.open}, 100, 24)
	ag := d.opened()
	d.typ("clean up")
	d.press("enter")
	d.waitFor("? allow bash: echo one")
	for _, want := range []string{"rein asks because: commands need approval", "$ echo one", "[y] allow once", "[A] always allow bash(*)", "[n] deny"} {
		if !d.shows(want) {
			t.Errorf("dialog lacks %q:\n%s", want, d.screen())
		}
	}
	d.press("y")
	d.waitFor("? allow bash: echo two")
	d.press("A")
	d.waitFor("? allow bash: rm -rf build")
	d.press("n")
	d.waitFor("Two ran, one did not.")
	d.idle()
	if !slices.Equal(e.rules.saved, []string{"bash(*)"}) {
		t.Errorf("rules saved: %v", e.rules.saved)
	}
	for _, want := range []string{"✓ bash: echo one", "✓ bash: echo two", "✗ bash: rm -rf build", "bash deny by user: denied by the user", "allowed always in this workspace: bash(*)"} {
		if !d.shows(want) {
			t.Errorf("screen lacks %q:\n%s", want, d.screen())
		}
	}
	var decisions []string
	for _, ev := range e.logOf(ag.ID()) {
		if p, err := ev.Decode(); err == nil {
			if a, ok := p.(*session.ToolApproval); ok {
				decisions = append(decisions, a.CallID+" "+a.Decision+" "+a.By)
			}
		}
	}
	if want := []string{"c1 allow user", "c2 allow user", "c3 deny user"}; !slices.Equal(decisions, want) {
		t.Errorf("approvals in the log: %v, want %v", decisions, want)
	}
}

// TestTrustQuestion: the workspace trust question is asked in the UI
// before the session opens.
func TestTrustQuestion(t *testing.T) {
	for _, c := range []struct {
		key  string
		want trust.Answer
	}{{"y", trust.Always}, {"o", trust.Once}, {"n", trust.No}, {"esc", trust.No}} {
		t.Run(c.key, func(t *testing.T) {
			e := newEnv(t)
			e.asked = make(chan trust.Answer, 1)
			d := newDriver(t, Config{Open: e.open}, 100, 30)
			d.waitFor("? trust the workspace " + e.dir + "?")
			for _, want := range []string{"run these commands (hooks)", "hooks.PreToolUse = make lint", "[y] trust, remember", "[o] only this time"} {
				if !d.shows(want) {
					t.Errorf("dialog lacks %q:\n%s", want, d.screen())
				}
			}
			d.press(c.key)
			d.opened()
			if got := <-e.asked; got != c.want {
				t.Errorf("answer %v, want %v", got, c.want)
			}
		})
	}
}

// TestTrustQuestionWraps: a long setting wraps under its own line, its
// continuations indented past it, never back at the dialog's margin.
func TestTrustQuestionWraps(t *testing.T) {
	e := newEnv(t)
	e.asked = make(chan trust.Answer, 1)
	e.items = []trust.Item{{Kind: trust.KindMCP, Key: "mcpServers.proj_srv", Origin: ".mcp.json",
		Value: `{"args":["/srv/qa-user2/mcp/srv.py","--verbose","--log","/srv/qa-user2/mcp/log.txt"],"command":"python3","env":{"SRVLOG":"/srv/qa-user2/mcp/srv.log"}}`}}
	d := newDriver(t, Config{Open: e.open}, 60, 30)
	d.waitFor("? trust the workspace")
	lines := strings.Split(d.screen(), "\n")
	at := slices.IndexFunc(lines, func(l string) bool { return strings.HasPrefix(l, "      mcpServers.proj_srv = ") })
	if at < 0 {
		t.Fatalf("the setting is not shown indented:\n%s", d.screen())
	}
	n := 0
	for _, l := range lines[at+1:] {
		if strings.Contains(l, "Trust it only if") {
			break
		}
		n++
		if !strings.HasPrefix(l, "        ") {
			t.Errorf("a continuation without its indent: %q\n%s", l, d.screen())
		}
	}
	if n < 2 {
		t.Errorf("the setting did not wrap (%d rows):\n%s", n, d.screen())
	}
	d.press("n")
	d.opened()
	<-e.asked
}

// TestBlockedPrompt: a prompt that admission blocks is shown with the
// reason and never enters the log.
func TestBlockedPrompt(t *testing.T) {
	e := newEnv(t, scripted.Answer("fine"))
	e.hooks.PromptAdmission = []agent.Hook[agent.Prompt, agent.Admission]{
		func(ctx context.Context, p agent.Prompt, next func(context.Context, agent.Prompt) (agent.Admission, error)) (agent.Admission, error) {
			if strings.Contains(llm.PlainText(p.Message.Content), "rm") {
				return agent.Admission{Block: true, Reason: "no destructive commands"}, nil
			}
			return next(ctx, p)
		}}
	d := newDriver(t, Config{Open: e.open}, 100, 24)
	ag := d.opened()
	d.typ("please rm everything")
	d.press("enter")
	d.waitFor("⊘ prompt blocked: no destructive commands")
	d.waitFor("› please rm everything")
	d.idle()
	d.typ("say fine")
	d.press("enter")
	d.waitFor("fine")
	d.idle()
	wantMessages(t, e.logOf(ag.ID()), "user/message user: say fine")
}

// TestCompact: /compact summarizes; the transcript keeps the originals
// and shows the summary.
func TestCompact(t *testing.T) {
	e := newEnv(t,
		scripted.Answer("one"), scripted.Answer("two"), scripted.Answer("three"),
		scripted.Call{Expect: &scripted.Expect{Contains: []string{"keep it short"}}, Reply: scripted.Reply{Text: []string{"They said one, two."}}},
	)
	d := newDriver(t, Config{Open: e.open}, 100, 30)
	ag := d.opened()
	for _, p := range []string{"a", "b", "c"} {
		d.typ(p)
		d.press("enter")
		d.idle()
	}
	d.typ("/compact keep it short")
	d.press("enter")
	if !d.shows("compacting…") {
		t.Errorf("no status while compacting:\n%s", d.screen())
	}
	d.waitFor("≡ compaction summary · replaces")
	d.idle()
	// The status it set goes when it finished, without a key press.
	d.until("the compacting status to go", func() bool { return !d.shows("compacting…") })
	for _, want := range []string{"They said one, two.", "› a", "one", "three"} {
		if !d.shows(want) {
			t.Errorf("screen lacks %q:\n%s", want, d.screen())
		}
	}
	// Resumed, the compacted session shows the summary and the originals.
	if _, err := d.m.shutdown(); err != nil {
		t.Fatal(err)
	}
	d2 := newDriver(t, Config{Open: e.open, SessionID: ag.ID()}, 100, 30)
	d2.opened()
	d2.settle()
	for _, want := range []string{"≡ compaction summary · replaces", "They said one, two.", "› a", "one", "› c", "three"} {
		if !d2.shows(want) {
			t.Errorf("resumed: screen lacks %q:\n%s", want, d2.screen())
		}
	}
}

// TestHistory: ↑ and ↓ on the input's first and last lines recall
// earlier prompts, the draft coming back at the end.
func TestHistory(t *testing.T) {
	e := newEnv(t, scripted.Answer("1"), scripted.Answer("2"))
	d := newDriver(t, Config{Open: e.open}, 100, 24)
	d.opened()
	for _, p := range []string{"first prompt", "second prompt"} {
		d.typ(p)
		d.press("enter")
		d.idle()
	}
	d.typ("draft")
	steps := []struct{ key, want string }{{"up", "second prompt"}, {"up", "first prompt"}, {"up", "first prompt"}, {"down", "second prompt"}, {"down", "draft"}}
	for _, s := range steps {
		d.press(s.key)
		if got := d.m.in.Value(); got != s.want {
			t.Fatalf("after %s: input %q, want %q", s.key, got, s.want)
		}
	}
}

// TestCardsAndFolding: tool cards are collapsed with their outcome (exit
// code, diff size); ctrl+↑ selects, tab unfolds one, ctrl+o unfolds all;
// reasoning is folded until unfolded.
func TestCardsAndFolding(t *testing.T) {
	e := newEnv(t)
	file := filepath.Join(e.dir, "a.go")
	if err := os.WriteFile(file, []byte("package a\n\nvar x = 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	e.model.Append(
		scripted.Call{Reply: scripted.Reply{Reasoning: []string{"Look at a.go first.\nThen fix it."}, ToolCalls: []scripted.ToolCall{
			{ID: "r", Name: "read", Arguments: `{"file_path":"a.go"}`},
		}}},
		scripted.Call{Reply: scripted.Reply{ToolCalls: []scripted.ToolCall{
			{ID: "e", Name: "edit", Arguments: `{"file_path":"a.go","old_string":"var x = 1","new_string":"var x = 2"}`},
			{ID: "b", Name: "bash", Arguments: `{"command":"echo checking; exit 2"}`},
		}}},
		scripted.Answer("Done."),
	)
	d := newDriver(t, Config{Open: e.open}, 100, 40)
	d.opened()
	d.typ("fix a.go")
	d.press("enter")
	d.waitFor("Done.")
	d.idle()
	for _, want := range []string{"∴ thinking · 2 lines", "✓ read a.go", "✓ edit a.go  +1 −1", "✗ bash: echo checking; exit 2  exit 2 · 2 lines", "└ [exit code: 2]"} {
		if !d.shows(want) {
			t.Errorf("screen lacks %q:\n%s", want, d.screen())
		}
	}
	if d.shows("+var x = 2") || d.shows("Then fix it.") {
		t.Fatalf("folded items are unfolded:\n%s", d.screen())
	}
	d.press("ctrl+up") // the bash card
	d.press("ctrl+up") // the edit card
	if d.m.d.sel == nil || d.m.d.sel.card == nil || d.m.d.sel.card.name != "edit" {
		t.Fatalf("selected %+v", d.m.d.sel)
	}
	d.press("tab")
	for _, want := range []string{"-var x = 1", "+var x = 2", "@@"} {
		if !d.shows(want) {
			t.Errorf("unfolded edit lacks %q:\n%s", want, d.screen())
		}
	}
	if d.shows("$ echo checking") {
		t.Errorf("the bash card unfolded with the edit card")
	}
	d.press("esc") // deselect
	if d.m.d.sel != nil {
		t.Errorf("esc kept the selection")
	}
	d.press("ctrl+o")
	for _, want := range []string{"$ echo checking; exit 2", "│ checking", "Look at a.go first.", "Then fix it."} {
		if !d.shows(want) {
			t.Errorf("ctrl+o: screen lacks %q:\n%s", want, d.screen())
		}
	}
}

// TestCardLineCounts: a card counts the lines of its result, the same
// lines its unfolded body leaves out, however many rows a long one wraps
// to; the bash tool's placeholder for no output is not a line.
func TestCardLineCounts(t *testing.T) {
	e := newEnv(t,
		scripted.Call{Reply: scripted.Reply{ToolCalls: []scripted.ToolCall{
			bash("quiet", "true"),
			bash("long", "seq 1 59; printf 'x%.0s' $(seq 1 300); echo"),
		}}},
		scripted.Answer("Done."),
	)
	d := newDriver(t, Config{Open: e.open}, 100, 60)
	d.opened()
	d.typ("run them")
	d.press("enter")
	d.waitFor("Done.")
	d.idle()
	for _, want := range []string{"✓ bash: true  exit 0 · no output", "✓ bash: seq 1 59; printf 'x%.0s' $(seq 1 300); echo  exit 0 · 60 lines"} {
		if !d.shows(want) {
			t.Errorf("screen lacks %q:\n%s", want, d.screen())
		}
	}
	d.press("ctrl+o")
	for _, want := range []string{"│ (no output)", "│ 40\n", "… 20 more lines"} {
		if !d.shows(want) {
			t.Errorf("unfolded: screen lacks %q:\n%s", want, d.screen())
		}
	}
	if d.shows("│ 41") {
		t.Errorf("more than 40 lines shown:\n%s", d.screen())
	}
}

// TestScrollLongSession: a long stored session opens showing its end,
// building only the blocks the viewport needs; pgup reaches earlier
// turns, pgdown returns to the end; far blocks are dropped again.
func TestScrollLongSession(t *testing.T) {
	e := newEnv(t)
	id := writeSession(t, e, 300)
	d := newDriver(t, Config{Open: e.open, SessionID: id}, 80, 20)
	d.opened()
	d.settle()
	if !d.shows("answer 300") {
		t.Fatalf("the end is not shown:\n%s", d.screen())
	}
	c := d.m.conv
	if n := builtBlocks(c); n > 10 {
		t.Errorf("%d blocks built to show one screen", n)
	}
	for range 200 {
		d.press("pgup")
	}
	if !d.shows("prompt 1\n") && !d.shows("› prompt 1") {
		t.Fatalf("pgup did not reach the first turn:\n%s", d.screen())
	}
	if n := builtBlocks(c); n > 4*24+10 {
		t.Errorf("%d blocks still built after scrolling", n)
	}
	for range 300 {
		d.press("pgdown")
	}
	if !d.shows("answer 300") || !c.follow {
		t.Fatalf("pgdown did not return to the end:\n%s", d.screen())
	}
}

func builtBlocks(c *conv) int {
	n := 0
	for _, b := range c.blocks {
		if b.items != nil {
			n++
		}
	}
	return n
}

// writeSession stores a session of n turns (prompt i, answer i).
func writeSession(t *testing.T, e *env, n int) string {
	t.Helper()
	ctx := context.Background()
	id := "long"
	w, err := e.st.Create(ctx, session.Header{ID: id, Cwd: e.dir, CreatedAt: time.Unix(1_700_000_000, 0)})
	if err != nil {
		t.Fatal(err)
	}
	l := session.NewLog(session.Header{ID: id})
	at := time.Unix(1_700_000_000, 0)
	add := func(p session.Payload) {
		t.Helper()
		if _, err := l.Append(at, p); err != nil {
			t.Fatalf("%T: %v", p, err)
		}
	}
	for i := 1; i <= n; i++ {
		mid := fmt.Sprintf("m%d", i)
		add(&session.TurnStart{Turn: i, Trigger: session.Trigger{Kind: session.TriggerSend, MessageID: mid}})
		add(&session.UserMessage{ID: mid, Content: llm.Text(fmt.Sprintf("prompt %d", i)), Source: session.Source{Kind: session.SourceUser}})
		add(&session.StepStart{Turn: i, Step: 1})
		add(&session.AssistantMessage{Turn: i, Step: 1, Content: llm.Text(fmt.Sprintf("answer %d", i)), Finish: llm.FinishStop, Usage: llm.Usage{Input: 100, Output: 10}})
		add(&session.StepEnd{Turn: i, Step: 1})
		add(&session.TurnEnd{Turn: i, Reason: session.Reason{Kind: session.ReasonCompleted}})
		if i%10 == 0 {
			add(&session.UserMessage{ID: fmt.Sprintf("c%d", i), Content: llm.Text("ci ok"), Source: session.Source{Kind: session.SourcePlugin, Name: "ci"}})
		}
	}
	if err := w.Append(ctx, l.Events(0)); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return id
}

// TestSwitchSessions: /new, /resume (a picker of this directory's
// sessions), /fork after a chosen turn, /model.
func TestSwitchSessions(t *testing.T) {
	e := newEnv(t, scripted.Answer("one"), scripted.Answer("two"))
	d := newDriver(t, Config{Open: e.open, Sessions: func(ctx context.Context) ([]store.Info, error) { return e.st.List(ctx) }}, 100, 30)
	first := d.opened()
	d.typ("first")
	d.press("enter")
	d.idle()
	d.typ("second")
	d.press("enter")
	d.idle()
	d.typ("/new")
	d.press("enter")
	d.until("a new session", func() bool { return d.m.sess != nil && d.m.sess.Agent != first })
	if d.shows("› first") {
		t.Errorf("/new shows the old session:\n%s", d.screen())
	}

	d.typ("/resume")
	d.press("enter")
	d.waitFor("resume a session of " + e.dir)
	d.press("enter")
	d.until("the old session", func() bool { return d.m.sess != nil && d.m.sess.Agent.ID() == first.ID() })
	d.waitFor("› second")

	d.typ("/fork")
	d.press("enter")
	d.waitFor("fork after")
	if !d.shows("after turn 2") || !d.shows("after turn 1") {
		t.Fatalf("fork picker:\n%s", d.screen())
	}
	d.press("down")
	d.press("enter")
	d.until("the fork", func() bool { return d.m.sess != nil && d.m.sess.Agent.ID() != first.ID() })
	d.waitFor("› first")
	if d.shows("› second") {
		t.Errorf("the fork after turn 1 shows turn 2:\n%s", d.screen())
	}
	last := e.opened[len(e.opened)-1]
	if last.ForkOf != first.ID() || last.ForkAt <= 0 {
		t.Errorf("fork request %+v", last)
	}

	d.typ("/model other:model")
	d.press("enter")
	d.waitFor("other:model")
	if last := e.opened[len(e.opened)-1]; last.Model != "other:model" || last.SessionID == "" {
		t.Errorf("model request %+v", last)
	}
}

// TestPickerHintsAndStatusID: /sessions counts one turn as one; the
// /fork picker shows the prompt of a turn that ran after the session
// opened; the status line shows the whole session id when it has room,
// its start when not; /help names rein once.
func TestPickerHintsAndStatusID(t *testing.T) {
	e := newEnv(t, scripted.Answer("one"))
	const id = "01M8SCEGAKYMQ6W1T4Z9XV3RJN"
	seq := agent.SequentialIDs()
	e.ids = func(kind string) string {
		if kind == "s" {
			return id
		}
		return seq(kind)
	}
	d := newDriver(t, Config{Open: e.open, Version: "rein v1.2.3 go1.26.8 linux/amd64",
		Sessions: func(ctx context.Context) ([]store.Info, error) { return e.st.List(ctx) }}, 140, 30)
	d.opened()
	d.typ("hello there")
	d.press("enter")
	d.idle()
	status := func() string { lines := strings.Split(d.screen(), "\n"); return lines[len(lines)-1] }
	if !strings.HasSuffix(status(), " · "+id) {
		t.Errorf("at 140 columns the status line lacks the whole id: %q", status())
	}
	d.do(tea.WindowSizeMsg{Width: 95, Height: 30})
	if !strings.HasSuffix(status(), " · 01M8SCEGAKYM…") {
		t.Errorf("at 95 columns the status line lacks the id's start: %q", status())
	}
	d.do(tea.WindowSizeMsg{Width: 140, Height: 30})

	d.typ("/fork")
	d.press("enter")
	d.waitFor("fork after")
	if !d.shows("after turn 1  hello there") {
		t.Errorf("the fork picker lacks the turn's prompt:\n%s", d.screen())
	}
	d.press("esc")

	d.typ("/sessions")
	d.press("enter")
	d.waitFor("sessions  (type to filter")
	if !d.shows(" · 1 turn · ") {
		t.Errorf("the session list does not say 1 turn:\n%s", d.screen())
	}
	d.press("esc")

	d.typ("/help")
	d.press("enter")
	d.waitFor("rein v1.2.3 go1.26.8 linux/amd64 — keys")
	if d.shows("rein rein") {
		t.Errorf("/help names rein twice:\n%s", d.screen())
	}
}

// A /model that cannot be opened (a model that does not resolve) leaves
// the person in the session they were in, not without one; the sessions
// opened next use the model that worked, and a /model that worked sticks.
func TestFailedModelSwitchReopensTheSession(t *testing.T) {
	e := newEnv(t, scripted.Answer("one"))
	open := func(ctx context.Context, req OpenRequest) (*Session, error) {
		if strings.HasPrefix(req.Model, "nope:") {
			e.mu.Lock()
			e.opened = append(e.opened, req)
			e.mu.Unlock()
			return nil, errors.New(`unknown provider "nope"`)
		}
		return e.open(ctx, req)
	}
	opened := func() (int, OpenRequest) {
		e.mu.Lock()
		defer e.mu.Unlock()
		return len(e.opened), e.opened[len(e.opened)-1]
	}
	d := newDriver(t, Config{Open: open}, 100, 30)
	first := d.opened()
	d.typ("first")
	d.press("enter")
	d.idle()
	d.typ("/model nope:x")
	d.press("enter")
	d.waitFor("cannot switch to nope:x")
	d.until("the session reopened", func() bool { return d.m.sess != nil && d.m.sess.Agent.ID() == first.ID() })
	d.waitFor("› first")
	d.settle()
	if !d.shows("cannot switch to nope:x") || !d.shows("back in the session you were in") {
		t.Errorf("the reopened session does not say why:\n%s", d.screen())
	}
	if _, last := opened(); last.Model != "" || last.SessionID != first.ID() {
		t.Errorf("reopened with %+v", last)
	}
	d.typ("/new")
	d.press("enter")
	d.until("a new session", func() bool { return d.m.sess != nil && d.m.sess.Agent.ID() != first.ID() })
	if _, last := opened(); last.Model != "" {
		t.Errorf("/new after a failed /model asked for %q", last.Model)
	}
	d.typ("/model other:model")
	d.press("enter")
	d.waitFor("other:model")
	d.typ("/new")
	d.press("enter")
	d.until("another session", func() bool { n, _ := opened(); return n >= 6 && d.m.sess != nil && !d.m.opening })
	if _, last := opened(); last.Model != "other:model" {
		t.Errorf("/new after /model other:model asked for %q", last.Model)
	}
}

// Keys typed for the prompt do not answer an approval that takes their
// place: nothing counts during the grace after it appeared, and after it
// only the keys shown do (a, enter and digits are typing, not answers).
func TestApprovalIgnoresTypeAhead(t *testing.T) {
	e := newEnv(t,
		scripted.Call{Reply: scripted.Reply{ToolCalls: []scripted.ToolCall{bash("c1", "touch approved")}}},
		scripted.Answer("done"),
	)
	e.hooks.ToolPre = []agent.Hook[agent.ToolCallInfo, agent.ToolDecision]{
		func(ctx context.Context, in agent.ToolCallInfo, next func(context.Context, agent.ToolCallInfo) (agent.ToolDecision, error)) (agent.ToolDecision, error) {
			return agent.ToolDecision{Kind: agent.Ask, Reason: "commands need approval"}, nil
		}}
	const grace = 300 * time.Millisecond
	d := newDriver(t, Config{Open: e.open, ApprovalGrace: grace}, 100, 24)
	d.opened()
	d.typ("go")
	d.press("enter")
	d.waitFor("? allow bash: touch approved")
	for _, k := range []string{"y", "a", "enter", "A"} {
		d.press(k)
	}
	time.Sleep(grace)
	for _, k := range []string{"a", "enter", "1", "2"} {
		d.press(k)
	}
	if !d.shows("? allow bash: touch approved") {
		t.Fatalf("the approval was answered by typing:\n%s", d.screen())
	}
	d.press("y")
	d.waitFor("done")
	d.idle()
	if !d.shows("✓ bash: touch approved") {
		t.Errorf("y did not allow the call:\n%s", d.screen())
	}
}

// A command refused while a turn runs says so in the status line, beside
// the spinner, instead of vanishing.
func TestRefusalsShowWhileATurnRuns(t *testing.T) {
	open, wait := gate()
	e := newEnv(t, scripted.Call{Reply: scripted.Reply{Text: []string{"done"}}, BeforeChunk: wait})
	d := newDriver(t, Config{Open: e.open}, 100, 24)
	d.opened()
	d.typ("go")
	d.press("enter")
	d.until("the turn to run", func() bool { return d.m.running })
	d.typ("/new")
	d.press("enter")
	d.waitFor("a turn is running: esc cancels it first")
	if !d.shows("working") {
		t.Errorf("the spinner went:\n%s", d.screen())
	}
	close(open)
	d.idle()
}

// TestSessionCompletion: @session: offers the stored sessions; tab puts
// the id in.
func TestSessionCompletion(t *testing.T) {
	e := newEnv(t, scripted.Answer("one"))
	d := newDriver(t, Config{Open: e.open, Sessions: func(ctx context.Context) ([]store.Info, error) { return e.st.List(ctx) }}, 100, 24)
	first := d.opened()
	d.typ("x")
	d.press("enter")
	d.idle()
	d.typ("/new")
	d.press("enter")
	d.until("a new session", func() bool { return d.m.sess != nil && d.m.sess.Agent != first })
	d.typ("look at @session:")
	d.waitFor("› @session:" + first.ID())
	d.press("tab")
	if got := d.m.in.Value(); got != "look at @session:"+first.ID()+" " {
		t.Errorf("input %q", got)
	}
}

// TestCtrlC: ctrl+c clears the input, then quits.
func TestCtrlC(t *testing.T) {
	e := newEnv(t)
	d := newDriver(t, Config{Open: e.open}, 80, 20)
	d.opened()
	d.typ("half a thought")
	d.press("ctrl+c")
	if d.m.in.Value() != "" || d.quit {
		t.Fatalf("ctrl+c with input: %q quit=%v", d.m.in.Value(), d.quit)
	}
	_, cmd := d.m.Update(keyPress("ctrl+c"))
	if cmd == nil {
		t.Fatal("ctrl+c on an empty input did nothing")
	}
	if _, ok := cmd().(tea.QuitMsg); !ok {
		t.Fatal("ctrl+c on an empty input did not quit")
	}
}

// TestResumeRepairedAndCompacted: a session a crash left open opens with
// the repair notice; a compacted one shows the summary and every original
// event.
func TestResumeRepairedAndCompacted(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	w, err := e.st.Create(ctx, session.Header{ID: "crashed", Cwd: e.dir})
	if err != nil {
		t.Fatal(err)
	}
	l := session.NewLog(session.Header{ID: "crashed"})
	at := time.Unix(1_700_000_000, 0)
	for _, p := range []session.Payload{
		&session.TurnStart{Turn: 1, Trigger: session.Trigger{Kind: session.TriggerSend, MessageID: "m1"}},
		&session.UserMessage{ID: "m1", Content: llm.Text("build it"), Source: session.Source{Kind: session.SourceUser}},
		&session.StepStart{Turn: 1, Step: 1},
		&session.AssistantMessage{Turn: 1, Step: 1, ToolCalls: []llm.ToolCall{{ID: "c1", Name: "bash", Arguments: `{"command":"make"}`}}, Finish: llm.FinishToolCalls},
		&session.ToolCall{Turn: 1, Step: 1, CallID: "c1", Name: "bash", Arguments: `{"command":"make"}`},
	} {
		if _, err := l.Append(at, p); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Append(ctx, l.Events(0)); err != nil {
		t.Fatal(err)
	}
	w.Close()
	d := newDriver(t, Config{Open: e.open, SessionID: "crashed"}, 100, 24)
	d.opened()
	d.waitFor("⚠ recovered: turn 1 was interrupted")
	for _, want := range []string{"› build it", "✗ bash: make", "outcome-unknown"} {
		if !d.shows(want) {
			t.Errorf("screen lacks %q:\n%s", want, d.screen())
		}
	}
}

// TestRetryNotice: a failed request that the agent retries shows in the
// status line with its wait; what the failed attempt streamed goes away.
func TestRetryNotice(t *testing.T) {
	release := make(chan struct{})
	e := newEnv(t,
		scripted.Call{Reply: scripted.Reply{Text: []string{"Partial answer that"}}, Err: &scripted.ErrorReply{Code: llm.CodeRateLimit, Message: "slow down", Status: 429}},
		scripted.Call{Reply: scripted.Reply{Text: []string{"The whole answer."}}, BeforeChunk: func(ctx context.Context, i int) {
			if i == 0 {
				<-release
			}
		}},
	)
	e.hooks.RequestError = []agent.Hook[agent.RequestErrorInfo, agent.Retry]{agent.RetryWith(func(attempt int, err *llm.Error) (time.Duration, bool) {
		return 1500 * time.Millisecond, attempt == 1
	})}
	d := newDriver(t, Config{Open: e.open, Now: time.Now}, 100, 24)
	d.opened()
	d.typ("go")
	d.press("enter")
	d.waitFor("⟳ rate limited (429), retrying in 2 s (attempt 2)")
	if d.shows("Partial answer") {
		t.Errorf("the failed attempt's text stays:\n%s", d.screen())
	}
	d.until("the wait to pass", func() bool { return d.shows("retrying (attempt 2)") || d.shows("retrying in 1 s") })
	close(release)
	d.waitFor("The whole answer.")
	d.idle()
	if d.shows("⟳") || d.shows("Partial answer") {
		t.Errorf("after the retry:\n%s", d.screen())
	}
}

// TestOtherKeysCommandsAndEvents: new lines, paste, //text, /help,
// /sessions, /trust, an unknown command, and the live events that only
// show as notices.
func TestOtherKeysCommandsAndEvents(t *testing.T) {
	e := newEnv(t, scripted.Answer("two lines seen"), scripted.Answer("slash seen"))
	asked := make(chan trust.Answer, 1)
	cfg := Config{Open: e.open,
		Sessions: func(ctx context.Context) ([]store.Info, error) { return e.st.List(ctx) },
		Trust: func(ctx context.Context, ask trust.Asker) (string, error) {
			ans, err := ask.AskTrust(ctx, trust.Question{Decision: trust.Decision{Root: "/w", Items: []trust.Item{{Kind: trust.KindHook, Key: "hooks.Stop", Value: "notify"}}}})
			asked <- ans
			return fmt.Sprintf("answered %d", ans), err
		}}
	d := newDriver(t, cfg, 100, 40)
	ag := d.opened()

	d.typ("first line")
	d.press("alt+enter")
	d.typ("second line")
	if got := d.m.in.Value(); got != "first line\nsecond line" {
		t.Fatalf("input %q", got)
	}
	d.press("enter")
	d.waitFor("two lines seen")
	d.idle()
	d.do(tea.PasteMsg{Content: "//slash"})
	if got := d.m.in.Value(); got != "//slash" {
		t.Fatalf("pasted %q", got)
	}
	d.press("enter")
	d.waitFor("slash seen")
	d.idle()
	wantMessages(t, e.logOf(ag.ID()), "user/message user: first line\nsecond line", "user/message user: /slash")

	d.typ("/help")
	d.press("enter")
	d.waitFor("ctrl+s       steer the running turn")
	d.typ("/frobnicate")
	d.press("enter")
	if !strings.Contains(d.m.status, "unknown command /frobnicate") {
		t.Errorf("status %q", d.m.status)
	}
	d.typ("/inject")
	d.press("enter")
	if !strings.Contains(d.m.status, "/inject TEXT") {
		t.Errorf("status %q", d.m.status)
	}

	d.typ("/sessions")
	d.press("enter")
	d.waitFor("sessions  (type to filter")
	d.typ("zzz")
	d.waitFor("(nothing matches)")
	d.press("esc")
	if len(d.m.dialogs) != 0 {
		t.Fatal("esc kept the list")
	}

	d.typ("/trust")
	d.press("enter")
	d.waitFor("? trust the workspace /w?")
	d.press("o")
	if got := <-asked; got != trust.Once {
		t.Errorf("trust answer %v", got)
	}
	d.waitFor(fmt.Sprintf("answered %d", trust.Once))

	d.do(feedMsg{gen: d.m.gen, lives: []agent.Live{
		{Type: agent.LiveFlushError, Err: errors.New("disk full")},
		{Type: agent.LiveError, Err: errors.New("context-overflow: too long")},
	}})
	d.do(noticeMsg{text: "rein: hook: lint passed"})
	for _, want := range []string{"· the session could not be saved yet (rein retries): disk full", "model request failed: context-overflow: too long", "· rein: hook: lint passed"} {
		if !d.shows(want) {
			t.Errorf("screen lacks %q:\n%s", want, d.screen())
		}
	}
	d.press("ctrl+l")
	if !d.shows("two lines seen") {
		t.Errorf("ctrl+l lost the conversation:\n%s", d.screen())
	}
}

// TestLockedSession: a session another writer holds is not opened; the UI
// says so and offers a way on.
func TestLockedSession(t *testing.T) {
	e := newEnv(t)
	id := writeSession(t, e, 1)
	w, _, err := e.st.Open(context.Background(), id) // another process, say
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	d := newDriver(t, Config{Open: e.open, SessionID: id}, 100, 24)
	d.waitFor("cannot open the session: session long is open in another rein process")
	d.waitFor("/new starts a new one")
	if d.m.sess != nil {
		t.Fatal("a locked session opened")
	}
}

// TestUntrustedTextIsEscaped: what the model, a tool, a hook or a stored
// session wrote reaches the terminal with its control characters escaped
// as the CLI escapes them (package display): the frame holds no escape
// sequence but the UI's own styling (SGR), no other control character and
// no bidi override, and shows the escapes instead.
func TestUntrustedTextIsEscaped(t *testing.T) {
	e := newEnv(t,
		scripted.Call{Reply: scripted.Reply{
			Reasoning: []string{"plan\x1b[2J"},
			Text:      []string{"Running \x1b]52;c;ZXZpbA==\x07"},
			ToolCalls: []scripted.ToolCall{
				{ID: "b", Name: "bash", Arguments: `{"command":"echo \u001b]0;title\u0007ok; printf 'x\\033[8mhidden\\r\\n'"}`},
				{ID: "x", Name: "no\u202etool", Arguments: `{"why":"\u001b[31mred"}`},
			}}},
		scripted.Answer("done \u202eevil\x1b[1A"),
	)
	e.hooks.ToolPre = []agent.Hook[agent.ToolCallInfo, agent.ToolDecision]{
		func(ctx context.Context, in agent.ToolCallInfo, next func(context.Context, agent.ToolCallInfo) (agent.ToolDecision, error)) (agent.ToolDecision, error) {
			if in.Name != "bash" {
				return next(ctx, in)
			}
			return agent.ToolDecision{Kind: agent.Ask, Reason: "a hook\x1b[2K says so"}, nil
		}}
	d := newDriver(t, Config{Open: e.open, Sessions: func(ctx context.Context) ([]store.Info, error) { return e.st.List(ctx) }}, 120, 60)
	ag := d.opened()
	clean := func(when string) {
		t.Helper()
		frame := d.m.View().Content
		for i := 0; i < len(frame); {
			r, n := utf8.DecodeRuneInString(frame[i:])
			if r == 0x1b { // only SGR: ESC [ params m
				j := i + 2
				for j < len(frame) && frame[i+1] == '[' && strings.IndexByte("0123456789;:", frame[j]) >= 0 {
					j++
				}
				if frame[i+1] != '[' || j >= len(frame) || frame[j] != 'm' {
					t.Errorf("%s: escape sequence %q in the frame:\n%s", when, frame[i:min(i+12, len(frame))], d.screen())
					return
				}
				i = j + 1
				continue
			}
			if r != '\n' && display.Unsafe(r) {
				t.Errorf("%s: control character %U in the frame:\n%s", when, r, d.screen())
				return
			}
			i += n
		}
	}
	d.typ("go")
	d.press("enter")
	d.waitFor("? allow bash")
	clean("the approval")
	for _, want := range []string{`echo \u001b]0;title\u0007ok`, `a hook\u001b[2K says so`} {
		if !d.shows(want) {
			t.Errorf("the approval lacks %q:\n%s", want, d.screen())
		}
	}
	d.press("y")
	d.waitFor("done")
	d.idle()
	if err := ag.SetTitle("title\x1b[2J"); err != nil {
		t.Fatal(err)
	}
	d.do(noticeMsg{text: "rein: hook: \x1b]0;pwned\x07"})
	d.press("ctrl+o") // every card, reasoning and hook run unfolded
	clean("the conversation")
	for _, want := range []string{`Running \u001b]52;c;ZXZpbA==\u0007`, `done \u202eevil\u001b[1A`, `plan\u001b[2J`,
		"│ x\\u001b[8mhidden\n", `no\u202etool`, `rein: hook: \u001b]0;pwned\u0007`} {
		if !d.shows(want) {
			t.Errorf("the conversation lacks %q:\n%s", want, d.screen())
		}
	}
	d.typ("/sessions")
	d.press("enter")
	d.waitFor("sessions  (type to filter")
	clean("the session list")
	if !d.shows(`title\u001b[2J`) {
		t.Errorf("the session list lacks the escaped title:\n%s", d.screen())
	}
}
