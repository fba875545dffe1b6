package tui

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"

	"github.com/reinhq/rein/agent"
	"github.com/reinhq/rein/llm"
	"github.com/reinhq/rein/llm/scripted"
	"github.com/reinhq/rein/llm/scripted/scriptedtest"
	"github.com/reinhq/rein/session"
	"github.com/reinhq/rein/store"
	"github.com/reinhq/rein/store/memstore"
	"github.com/reinhq/rein/tool/builtin"
	"github.com/reinhq/rein/trust"
)

// env is a store, a scripted model and an Open that starts agents on
// them, as cmd/rein does with the real ones.
type env struct {
	t      *testing.T
	st     store.Store
	model  *scripted.Model
	dir    string
	hooks  agent.Hooks
	rules  *testRules
	asked  chan trust.Answer // when set, Open asks the trust question first
	items  []trust.Item      // what the question lists (a hook when nil)
	opened []OpenRequest
	ids    func(string) string
	mu     sync.Mutex
	ags    []*agent.Agent
}

func newEnv(t *testing.T, calls ...scripted.Call) *env {
	t.Helper()
	e := &env{t: t, st: memstore.New(memstore.Options{}), model: scriptedtest.New(t, calls...), dir: t.TempDir(), rules: &testRules{}, ids: agent.SequentialIDs()}
	t.Cleanup(func() {
		// The invariant holds in every session the test wrote.
		infos, err := e.st.List(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		for _, in := range infos {
			ld, err := e.st.Load(context.Background(), in.ID, store.LoadOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if vs := session.Check(ld.Log.Events(0)); len(vs) > 0 {
				t.Errorf("session %s breaks the invariant: %v", in.ID, vs)
			}
		}
	})
	return e
}

type testRules struct {
	mu    sync.Mutex
	saved []string
}

func (r *testRules) Rule(_ string, req agent.ApprovalRequest) (string, bool) {
	return req.Name + "(*)", true
}

func (r *testRules) Save(_ context.Context, _, rule string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.saved = append(r.saved, rule)
	return nil
}

func (e *env) open(ctx context.Context, req OpenRequest) (*Session, error) {
	e.mu.Lock()
	e.opened = append(e.opened, req)
	e.mu.Unlock()
	if e.asked != nil {
		items := e.items
		if items == nil {
			items = []trust.Item{{Kind: trust.KindHook, Key: "hooks.PreToolUse", Value: "make lint", Origin: ".rein/settings.json"}}
		}
		ans, err := req.Ask.AskTrust(ctx, trust.Question{Decision: trust.Decision{Root: e.dir, Items: items}})
		if err != nil {
			return nil, err
		}
		e.asked <- ans
	}
	tools, err := builtin.Registry(builtin.Options{})
	if err != nil {
		return nil, err
	}
	cfg := agent.Config{Store: e.st, Provider: e.model, Model: "scripted:test", Tools: tools, Cwd: e.dir,
		Hooks: e.hooks, Approver: req.Approver, NewID: e.ids, Clock: agent.StepClock(time.Unix(1_700_000_000, 0), time.Millisecond)}
	var ag *agent.Agent
	switch {
	case req.ForkOf != "":
		ag, err = agent.Fork(ctx, e.st, req.ForkOf, req.ForkAt, cfg)
	case req.SessionID != "":
		ag, err = agent.Resume(ctx, e.st, req.SessionID, cfg)
	default:
		ag, err = agent.New(ctx, cfg)
	}
	if err != nil {
		return nil, err
	}
	e.mu.Lock()
	e.ags = append(e.ags, ag)
	e.mu.Unlock()
	model := "scripted:test"
	if req.Model != "" {
		model = req.Model
	}
	return &Session{Agent: ag, Model: model, ContextWindow: 10000, Mode: "workspace-write", Cwd: e.dir, Rules: e.rules}, nil
}

// driver runs a Model the way a Bubble Tea program does, without a
// terminal: commands run on goroutines, their messages come back through
// one channel and are handled in order.
type driver struct {
	t    *testing.T
	m    *Model
	msgs chan tea.Msg
	quit bool
	stop chan struct{}
}

func newDriver(t *testing.T, cfg Config, w, h int) *driver {
	t.Helper()
	if cfg.Theme == "" {
		cfg.Theme = "plain"
	}
	if cfg.Now == nil {
		cfg.Now = func() time.Time { return time.Unix(1_700_000_000, 0) }
	}
	if cfg.ApprovalGrace == 0 {
		cfg.ApprovalGrace = -1 // tests answer at once, unless one says otherwise
	}
	d := &driver{t: t, msgs: make(chan tea.Msg, 4096), stop: make(chan struct{})}
	d.m = NewModel(context.Background(), cfg)
	d.m.send = func(msg tea.Msg) {
		select {
		case d.msgs <- msg:
		case <-d.stop:
		}
	}
	t.Cleanup(func() {
		close(d.stop)
		if _, err := d.m.shutdown(); err != nil && !errors.Is(err, agent.ErrClosed) {
			t.Errorf("shutdown: %v", err)
		}
	})
	d.do(tea.WindowSizeMsg{Width: w, Height: h})
	d.run(d.m.Init())
	return d
}

// run executes cmd as the program would.
func (d *driver) run(cmd tea.Cmd) {
	if cmd == nil {
		return
	}
	go func() {
		msg := cmd()
		switch msg := msg.(type) {
		case nil:
		case tea.BatchMsg:
			for _, c := range msg {
				d.run(c)
			}
		case tickMsg:
			// Ticks only animate; a test does not need them to repeat.
		default:
			select {
			case d.msgs <- msg:
			case <-d.stop:
			}
		}
	}()
}

// do handles msg now.
func (d *driver) do(msg tea.Msg) {
	if _, ok := msg.(tea.QuitMsg); ok {
		d.quit = true
		return
	}
	_, cmd := d.m.Update(msg)
	d.run(cmd)
}

// until handles messages until ok holds.
func (d *driver) until(what string, ok func() bool) {
	d.t.Helper()
	deadline := time.After(15 * time.Second)
	for !ok() {
		select {
		case msg := <-d.msgs:
			d.do(msg)
		case <-time.After(20 * time.Millisecond): // the screen may change with time alone
		case <-deadline:
			d.t.Fatalf("timed out waiting for %s; screen:\n%s", what, d.screen())
		}
	}
}

// settle handles messages until none came for a moment.
func (d *driver) settle() {
	for {
		select {
		case msg := <-d.msgs:
			d.do(msg)
		case <-time.After(150 * time.Millisecond):
			return
		}
	}
}

// screen is the view's text, without styles, trailing spaces cut.
func (d *driver) screen() string {
	v := d.m.View()
	lines := strings.Split(ansi.Strip(v.Content), "\n")
	for i, l := range lines {
		lines[i] = strings.TrimRight(l, " ")
	}
	return strings.Join(lines, "\n")
}

func (d *driver) shows(s string) bool { return strings.Contains(d.screen(), s) }

// waitFor waits until the screen shows s.
func (d *driver) waitFor(s string) {
	d.t.Helper()
	d.until("the screen to show "+s, func() bool { return d.shows(s) })
}

// typ types text into the input.
func (d *driver) typ(text string) {
	for _, r := range text {
		d.do(tea.KeyPressMsg{Code: r, Text: string(r)})
	}
}

// press sends a key by name: "enter", "esc", "ctrl+s", "up", "tab"…
func (d *driver) press(name string) { d.do(keyPress(name)) }

func keyPress(name string) tea.KeyPressMsg {
	k := tea.KeyPressMsg{}
	parts := strings.Split(name, "+")
	for _, p := range parts[:len(parts)-1] {
		switch p {
		case "ctrl":
			k.Mod |= tea.ModCtrl
		case "alt":
			k.Mod |= tea.ModAlt
		case "shift":
			k.Mod |= tea.ModShift
		}
	}
	switch last := parts[len(parts)-1]; last {
	case "enter":
		k.Code = tea.KeyEnter
	case "esc":
		k.Code = tea.KeyEscape
	case "up":
		k.Code = tea.KeyUp
	case "down":
		k.Code = tea.KeyDown
	case "tab":
		k.Code = tea.KeyTab
	case "pgup":
		k.Code = tea.KeyPgUp
	case "pgdown":
		k.Code = tea.KeyPgDown
	case "backspace":
		k.Code = tea.KeyBackspace
	default:
		r := []rune(last)
		k.Code = r[0]
		if k.Mod == 0 {
			k.Text = last
		}
	}
	return k
}

// ag is the agent of the open session.
func (d *driver) ag() *agent.Agent {
	d.t.Helper()
	if d.m.sess == nil {
		d.t.Fatal("no session is open")
	}
	return d.m.sess.Agent
}

// opened waits until a session is open.
func (d *driver) opened() *agent.Agent {
	d.t.Helper()
	d.until("a session to open", func() bool { return d.m.sess != nil && !d.m.opening })
	return d.m.sess.Agent
}

// idle waits until the agent is idle and the screen caught up with it.
func (d *driver) idle() {
	d.t.Helper()
	d.until("the turn to end", func() bool { return !d.m.running && d.m.sess != nil && d.m.conv.end == d.m.sess.Agent.Len() })
	d.settle()
}

// logOf returns the stored events of session id.
func (e *env) logOf(id string) []session.Event {
	e.t.Helper()
	ld, err := e.st.Load(context.Background(), id, store.LoadOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	return ld.Log.Events(0)
}

// messages lists the log's user-role messages as "type source: text".
func messages(evs []session.Event) []string {
	var out []string
	for _, ev := range evs {
		p, err := ev.Decode()
		if err != nil {
			continue
		}
		switch p := p.(type) {
		case *session.UserMessage:
			out = append(out, "user/message "+p.Source.String()+": "+llm.PlainText(p.Content))
		case *session.SteeringMessage:
			out = append(out, "steering/message "+p.Source.String()+": "+llm.PlainText(p.Content))
		}
	}
	return out
}
