package tui

import (
	"context"
	"sync"

	tea "charm.land/bubbletea/v2"

	"github.com/reinhq/rein/agent"
	"github.com/reinhq/rein/llm"
	"github.com/reinhq/rein/session"
	"github.com/reinhq/rein/store"
	"github.com/reinhq/rein/trust"
)

// Messages from other goroutines and commands.
type (
	// openedMsg: Config.Open returned.
	openedMsg struct {
		gen  int
		sess *Session
		err  error
		req  OpenRequest
	}
	// feedMsg: events and live events of session gen arrived; done says
	// the agent closed and nothing more will come.
	feedMsg struct {
		gen   int
		evs   []session.Event
		lives []agent.Live
		done  bool
	}
	// approvalMsg: a tool call waits for the person's decision.
	approvalMsg struct {
		req   agent.ApprovalRequest
		reply chan agent.Approval
	}
	// approvalGoneMsg: the call no longer waits (its turn was cancelled).
	approvalGoneMsg struct{ reply chan agent.Approval }
	// trustMsg: the workspace trust question.
	trustMsg struct {
		q     trust.Question
		reply chan trust.Answer
	}
	trustGoneMsg struct{ reply chan trust.Answer }
	// noticeMsg: a line for the person (from stderr under the UI).
	noticeMsg struct {
		text string
		warn bool
	}
	// sessionsMsg: the stored sessions, for a picker or completion.
	sessionsMsg struct {
		infos   []store.Info
		err     error
		purpose string
	}
	// statsMsg: the background scan of session gen's log.
	statsMsg struct {
		gen int
		st  stats
	}
	// doneMsg: an asynchronous command finished; status is the status
	// line it set while it ran, cleared unless something replaced it.
	doneMsg struct {
		text   string
		warn   bool
		status string
	}
	// refsMsg: the @session: references of a prompt were snapshotted.
	refsMsg struct {
		gen   int
		text  string
		steer bool
		ctxs  []agent.AdditionalContext
		err   error
	}
	tickMsg struct{}
)

// feed collects what a session's follower and live subscription deliver,
// for the model to take in batches.
type feed struct {
	mu       sync.Mutex
	evs      []session.Event
	lives    []agent.Live
	done     bool
	wake     chan struct{}
	cancel   context.CancelFunc
	stopLive func()
	finished chan struct{}
}

func startFeed(ctx context.Context, ag *agent.Agent, from int64) *feed {
	ctx, cancel := context.WithCancel(ctx)
	f := &feed{wake: make(chan struct{}, 1), cancel: cancel, finished: make(chan struct{})}
	f.stopLive = ag.Subscribe(ctx, func(l agent.Live) {
		f.mu.Lock()
		f.lives = append(f.lives, l)
		f.mu.Unlock()
		f.signal()
	})
	go func() {
		defer close(f.finished)
		for ev, err := range ag.Events(ctx, from) {
			if err != nil {
				break
			}
			f.mu.Lock()
			f.evs = append(f.evs, ev)
			f.mu.Unlock()
			f.signal()
		}
		f.mu.Lock()
		f.done = true
		f.mu.Unlock()
		f.signal()
	}()
	return f
}

func (f *feed) signal() {
	select {
	case f.wake <- struct{}{}:
	default:
	}
}

// wait is the command that delivers the next batch.
func (f *feed) wait(gen int) tea.Cmd {
	return func() tea.Msg {
		<-f.wake
		f.mu.Lock()
		defer f.mu.Unlock()
		m := feedMsg{gen: gen, evs: f.evs, lives: f.lives, done: f.done}
		f.evs, f.lives = nil, nil
		return m
	}
}

// stop ends the follower and the subscription.
func (f *feed) stop() {
	f.cancel()
	f.stopLive()
	<-f.finished
}

// approver asks tool approvals in the UI.
type approver struct {
	send func(tea.Msg)
}

// Approve implements agent.Approver: the call waits until the person
// answers in the UI or its turn is cancelled.
func (a *approver) Approve(ctx context.Context, req agent.ApprovalRequest) (agent.Approval, error) {
	reply := make(chan agent.Approval, 1)
	a.send(approvalMsg{req: req, reply: reply})
	select {
	case ap := <-reply:
		return ap, nil
	case <-ctx.Done():
		go a.send(approvalGoneMsg{reply: reply})
		return agent.Approval{}, ctx.Err()
	}
}

// asker asks the workspace trust question in the UI.
type asker struct {
	send func(tea.Msg)
}

// AskTrust implements trust.Asker.
func (a *asker) AskTrust(ctx context.Context, q trust.Question) (trust.Answer, error) {
	reply := make(chan trust.Answer, 1)
	a.send(trustMsg{q: q, reply: reply})
	select {
	case ans := <-reply:
		return ans, nil
	case <-ctx.Done():
		go a.send(trustGoneMsg{reply: reply})
		return trust.No, ctx.Err()
	}
}

// stats is what the status line, history and /fork need from the whole
// log; a background scan gathers it after the first frame, the follower
// keeps it current.
type stats struct {
	usage   llm.Usage // summed over every response
	last    llm.Usage // the last response's
	prompts []string  // the person's prompts, oldest first
	turns   []turnInfo
	title   string
}

// turnInfo is a finished turn: where it ended (a fork point) and what
// started it.
type turnInfo struct {
	turn   int
	end    int64
	prompt string
}

func (s *stats) addUsage(u llm.Usage) {
	s.usage.Input += u.Input
	s.usage.Output += u.Output
	s.usage.CacheRead += u.CacheRead
	s.usage.CacheWrite += u.CacheWrite
	s.last = u
}

// scanStats reads the log up to seq to, in batches.
func scanStats(log logReader, to int64) stats {
	var st stats
	prompt := ""
	const batch = 8192
	for from := int64(0); from < to; from += batch {
		for _, ev := range log.Range(from, min(from+batch, to)) {
			switch ev.Type {
			case session.TypeTurnStart:
				prompt = ""
			case session.TypeUserMessage:
				p, err := ev.Decode()
				if um, ok := p.(*session.UserMessage); err == nil && ok && um.Source.IsUser() && um.Replaces == nil {
					t := llm.PlainText(um.Content)
					st.prompts = append(st.prompts, t)
					if prompt == "" {
						prompt = t
					}
				}
			case session.TypeAssistantMessage:
				p, err := ev.Decode()
				if am, ok := p.(*session.AssistantMessage); err == nil && ok {
					st.addUsage(am.Usage)
				}
			case session.TypeTurnEnd:
				p, err := ev.Decode()
				if te, ok := p.(*session.TurnEnd); err == nil && ok {
					st.turns = append(st.turns, turnInfo{turn: te.Turn, end: ev.Seq, prompt: prompt})
				}
			case session.TypeCompactionEnd:
				st.last = llm.Usage{} // a summary replaced the history
			case session.TypeSessionTitle:
				p, err := ev.Decode()
				if t, ok := p.(*session.SessionTitle); err == nil && ok {
					st.title = t.Title
				}
			}
		}
	}
	return st
}
