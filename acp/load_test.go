package acp_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	sdk "github.com/coder/acp-go-sdk"

	"github.com/reinhq/rein/agent"
	"github.com/reinhq/rein/llm"
	"github.com/reinhq/rein/llm/scripted"
	"github.com/reinhq/rein/llm/scripted/scriptedtest"
	"github.com/reinhq/rein/session"
	"github.com/reinhq/rein/store"
	"github.com/reinhq/rein/store/memstore"
)

// goAway closes the client's end, as an editor that quits, and waits for
// the server to close its sessions.
func (h *harness) goAway() {
	h.t.Helper()
	h.toSrv.Close()
	select {
	case err := <-h.served:
		if err != nil {
			h.t.Fatalf("Serve: %v", err)
		}
		h.served <- nil // for the cleanup
	case <-time.After(10 * time.Second):
		h.t.Fatal("Serve did not return")
	}
}

// shown returns the updates the client got for session sid from the
// n-th on, each as a short line.
func (h *harness) shown(sid sdk.SessionId, n int) []string {
	h.client.mu.Lock()
	defer h.client.mu.Unlock()
	var out []string
	for _, u := range h.client.updates[n:] {
		if u.SessionId == sid {
			out = append(out, describe(u.Update))
		}
	}
	return out
}

func (h *harness) count() int {
	h.client.mu.Lock()
	defer h.client.mu.Unlock()
	return len(h.client.updates)
}

// describe is an update as a short line: its kind and what a person
// reads in it.
func describe(u sdk.SessionUpdate) string {
	switch {
	case u.UserMessageChunk != nil:
		return "user: " + u.UserMessageChunk.Content.Text.Text
	case u.AgentMessageChunk != nil:
		return "agent: " + u.AgentMessageChunk.Content.Text.Text
	case u.AgentThoughtChunk != nil:
		return "thought: " + u.AgentThoughtChunk.Content.Text.Text
	case u.ToolCall != nil:
		return fmt.Sprintf("call %s %s: %s", u.ToolCall.ToolCallId, u.ToolCall.Status, u.ToolCall.Title)
	case u.ToolCallUpdate != nil:
		st := ""
		if u.ToolCallUpdate.Status != nil {
			st = string(*u.ToolCallUpdate.Status)
		}
		return fmt.Sprintf("update %s %s", u.ToolCallUpdate.ToolCallId, st)
	case u.SessionInfoUpdate != nil:
		return "info"
	case u.AvailableCommandsUpdate != nil:
		return "commands"
	case u.Plan != nil:
		return "plan"
	}
	return "other"
}

// prompt and load give up after 10 s: what hangs fails.
func (h *harness) prompt(sid sdk.SessionId, s string) (sdk.PromptResponse, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return h.conn.Prompt(ctx, sdk.PromptRequest{SessionId: sid, Prompt: text(s)})
}

func (h *harness) load(sid sdk.SessionId) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := h.conn.LoadSession(ctx, sdk.LoadSessionRequest{SessionId: sid, Cwd: h.dir, McpServers: []sdk.McpServer{}})
	return err
}

// oneTurn makes a stored session with one completed turn, through a
// server that then goes away, and returns its id.
func oneTurn(t *testing.T, st *memstore.Store, dir string) sdk.SessionId {
	t.Helper()
	h := serveOn(t, st, dir, scriptedtest.New(t, scripted.Call{Expect: &scripted.Expect{LastUser: "first"},
		Reply: scripted.Reply{Reasoning: []string{"hm"}, Text: []string{"first ", "answer"}}}), nil)
	sid := h.newSession()
	if r, err := h.prompt(sid, "first"); err != nil || r.StopReason != sdk.StopReasonEndTurn {
		t.Fatalf("prompt: %v %v", r.StopReason, err)
	}
	h.goAway()
	return sid
}

func sameLines(t *testing.T, what string, got, want []string) {
	t.Helper()
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("%s:\n got: %q\nwant: %q", what, got, want)
	}
}

// TestLoadThenPrompt: session/load replays the stored session, whole and
// before its answer, without starting the agent; the first prompt starts
// it, and its updates follow from where the replay stopped: the new turn
// streams, nothing replayed is sent again, nothing is missing. Turns
// another process ran between the replay and the prompt are shown before
// the prompt's own.
func TestLoadThenPrompt(t *testing.T) {
	st, dir := memstore.New(memstore.Options{}), t.TempDir()
	sid := oneTurn(t, st, dir)

	h := serveOn(t, st, dir, scriptedtest.New(t, scripted.Call{Expect: &scripted.Expect{LastUser: "third"},
		Reply: scripted.Reply{Text: []string{"third ", "answer"}}}), nil)
	if err := h.load(sid); err != nil {
		t.Fatal(err)
	}
	sameLines(t, "replay", h.shown(sid, 0), []string{"user: first", "thought: hm", "agent: first answer", "commands"})
	if n := h.opens.Load(); n != 0 {
		t.Fatalf("session/load started %d agents; the agent starts at first use", n)
	}

	// Another process runs a turn meanwhile.
	other, err := agent.Resume(context.Background(), st, string(sid), agent.Config{Store: st, Cwd: dir,
		Provider: scriptedtest.New(t, scripted.Call{Reply: scripted.Reply{Text: []string{"second answer"}}})})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := other.Send(agent.Message{Content: llm.Text("second")}); err != nil {
		t.Fatal(err)
	}
	if err := other.WhenIdle(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := other.Close(context.Background()); err != nil {
		t.Fatal(err)
	}

	before := h.count()
	if r, err := h.prompt(sid, "third"); err != nil || r.StopReason != sdk.StopReasonEndTurn {
		t.Fatalf("prompt after load: %v %v", r.StopReason, err)
	}
	sameLines(t, "after the load", h.shown(sid, before), []string{"user: second", "agent: second answer", "agent: third ", "agent: answer"})
	if n := h.opens.Load(); n != 1 {
		t.Fatalf("%d agents started, want 1", n)
	}
	if turns, _ := checkLog(t, st, string(sid)).Turn(); turns != 3 {
		t.Fatalf("%d turns, want 3", turns)
	}
}

// TestLoadChangedSession: a session whose log no longer holds what the
// replay showed (cut by hand between the load and the first use) is not
// continued: every use answers that it changed, and the store is left as
// it was found, not held.
func TestLoadChangedSession(t *testing.T) {
	st, dir := memstore.New(memstore.Options{}), t.TempDir()
	sid := oneTurn(t, st, dir)
	h := serveOn(t, st, dir, scriptedtest.New(t), nil)
	if err := h.load(sid); err != nil {
		t.Fatal(err)
	}
	file := st.File(string(sid))
	lines := bytes.SplitAfter(file, []byte("\n"))
	cut := bytes.Join(lines[:4], nil) // the header and three events
	st.PutFile(string(sid), cut)
	for range 2 {
		_, err := h.prompt(sid, "more")
		var re *sdk.RequestError
		if !errors.As(err, &re) || re.Code != -32603 || !strings.Contains(fmt.Sprint(re.Data), "changed since it was loaded") {
			t.Fatalf("prompt on a changed session: %v", err)
		}
	}
	w, _, err := st.Open(context.Background(), string(sid))
	if err != nil {
		t.Fatalf("the changed session is held: %v", err)
	}
	w.Close()
}

// TestLoadHeldSession: a session another writer holds (running in another
// process) is refused before anything is replayed, as it was when loading
// opened the agent. One that another process takes after the replay is
// refused at first use, and can be used once it is released.
func TestLoadHeldSession(t *testing.T) {
	st, dir := memstore.New(memstore.Options{}), t.TempDir()
	sid := oneTurn(t, st, dir)
	w, _, err := st.Open(context.Background(), string(sid))
	if err != nil {
		t.Fatal(err)
	}
	h := serveOn(t, st, dir, scriptedtest.New(t, scripted.Call{Expect: &scripted.Expect{LastUser: "now"}, Reply: scripted.Reply{Text: []string{"ok"}}}), nil)
	held := func(err error) bool {
		var re *sdk.RequestError
		return errors.As(err, &re) && re.Code == -32603 && strings.Contains(fmt.Sprint(re.Data), "open in another rein process")
	}
	if err := h.load(sid); !held(err) {
		t.Fatalf("load of a held session: %v", err)
	}
	if got := h.shown(sid, 0); len(got) > 0 {
		t.Fatalf("updates before the refusal: %q", got)
	}
	w.Close()
	if err := h.load(sid); err != nil {
		t.Fatal(err)
	}
	if w, _, err = st.Open(context.Background(), string(sid)); err != nil {
		t.Fatal(err)
	}
	if _, err := h.prompt(sid, "now"); !held(err) {
		t.Fatalf("prompt while another process holds the session: %v", err)
	}
	w.Close()
	if r, err := h.prompt(sid, "now"); err != nil || r.StopReason != sdk.StopReasonEndTurn {
		t.Fatalf("prompt once it is released: %v %v", r.StopReason, err)
	}
}

// TestLoadCrashedSession: a session a crash left inside a turn replays
// repaired (the calls settled, the repair notice), without anything being
// written; the first prompt repairs it durably (the same events) and its
// updates do not repeat the repair.
func TestLoadCrashedSession(t *testing.T) {
	st, dir := memstore.New(memstore.Options{}), t.TempDir()
	hdr, file, err := store.HeaderLine(session.Header{ID: "crashed", Cwd: dir, CreatedAt: time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)})
	if err != nil {
		t.Fatal(err)
	}
	l := session.NewLog(hdr)
	for _, p := range []session.Payload{
		&session.TurnStart{Turn: 1, Trigger: session.Trigger{Kind: session.TriggerSend, MessageID: "m1"}},
		&session.UserMessage{ID: "m1", Content: llm.Text("list"), Source: session.Source{Kind: session.SourceUser}},
		&session.StepStart{Turn: 1, Step: 1},
		&session.AssistantMessage{Turn: 1, Step: 1, Content: llm.Text("Listing."), Finish: llm.FinishToolCalls,
			ToolCalls: []llm.ToolCall{{ID: "c1", Name: "ls", Arguments: "{}"}, {ID: "c2", Name: "read", Arguments: `{"file_path":"a"}`}}},
		&session.ToolCall{Turn: 1, Step: 1, CallID: "c1", Name: "ls", Arguments: "{}"},
	} {
		ev, err := l.Append(hdr.CreatedAt, p)
		if err != nil {
			t.Fatal(err)
		}
		file = ev.AppendLine(file)
	}
	st.PutFile("crashed", file)

	h := serveOn(t, st, dir, scriptedtest.New(t, scripted.Call{Expect: &scripted.Expect{LastUser: "again"}, Reply: scripted.Reply{Text: []string{"done"}}}), nil)
	if err := h.load("crashed"); err != nil {
		t.Fatal(err)
	}
	sameLines(t, "replay", h.shown("crashed", 0), []string{"user: list", "agent: Listing.", "call c1 pending: ls", "call c2 pending: read a",
		"update c1 in_progress", "update c1 failed", "update c2 in_progress", "update c2 failed", "call rein-repair-9 completed: Session repaired", "commands"})
	if !bytes.Equal(st.File("crashed"), file) {
		t.Fatal("session/load wrote to the session")
	}
	before := h.count()
	if r, err := h.prompt("crashed", "again"); err != nil || r.StopReason != sdk.StopReasonEndTurn {
		t.Fatalf("prompt: %v %v", r.StopReason, err)
	}
	sameLines(t, "after the load", h.shown("crashed", before), []string{"agent: done"})
	// 5 stored events, 5 of the repair (its turn/end at seq 9), the turn.
	rl := checkLog(t, st, "crashed")
	if p, _ := rl.Event(9).Decode(); rl.Event(9).Type != session.TypeTurnEnd || p.(*session.TurnEnd).Reason.Kind != session.ReasonInterrupted {
		t.Fatalf("seq 9: %s %s, want the repair's turn/end", rl.Event(9).Type, rl.Event(9).Data)
	}
	if turns, _ := rl.Turn(); turns != 2 {
		t.Fatalf("%d turns, want 2", turns)
	}
}
