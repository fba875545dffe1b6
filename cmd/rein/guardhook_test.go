package main

import (
	"context"
	"strings"
	"testing"

	"github.com/reinhq/rein/agent"
	"github.com/reinhq/rein/guard"
	"github.com/reinhq/rein/llm"
	"github.com/reinhq/rein/llm/scripted"
	"github.com/reinhq/rein/llm/scripted/scriptedtest"
	"github.com/reinhq/rein/session"
	"github.com/reinhq/rein/store"
	"github.com/reinhq/rein/store/memstore"
	"github.com/reinhq/rein/tool/builtin"
)

// A turn cancelled while a person is asked about a call (an editor's
// session/cancel while its permission request waits) settles the call as
// not run: nobody denied it, and the model must not read that somebody did.
func TestCancelWhileAskedIsNotRun(t *testing.T) {
	dir := t.TempDir()
	p, err := guard.Settings{Mode: "workspace-write", Ask: []string{"Bash(touch:*)"}}.Policy(dir)
	if err != nil {
		t.Fatal(err)
	}
	asked := make(chan struct{})
	ap := guard.ApproverFunc(func(ctx context.Context, req guard.Request) (guard.Approval, error) {
		close(asked)
		<-ctx.Done()
		return guard.Approval{}, ctx.Err()
	})
	tools, err := builtin.Registry(builtin.Options{})
	if err != nil {
		t.Fatal(err)
	}
	model := scriptedtest.New(t, scripted.Call{Reply: scripted.Reply{ToolCalls: []scripted.ToolCall{{ID: "c1", Name: "bash", Arguments: `{"command":"touch x"}`}}}})
	st := memstore.New(memstore.Options{})
	ag, err := agent.New(context.Background(), agent.Config{Store: st, Provider: model, Model: "scripted:test", Tools: tools, Cwd: dir,
		Hooks: agent.Hooks{ToolPre: []agent.Hook[agent.ToolCallInfo, agent.ToolDecision]{guardHook(func() *guard.Policy { return p }, ap)}}})
	if err != nil {
		t.Fatal(err)
	}
	defer ag.Close(context.Background())
	if _, err := ag.Send(agent.Message{Content: llm.Text("go")}); err != nil {
		t.Fatal(err)
	}
	<-asked
	ag.Cancel(session.CauseUser, agent.CancelOptions{})
	if err := ag.WhenIdle(context.Background()); err != nil {
		t.Fatal(err)
	}
	var result, approval string
	for e, err := range ag.Events(context.Background(), 0) {
		if err != nil {
			t.Fatal(err)
		}
		switch e.Type {
		case session.TypeToolResult:
			result = string(e.Data)
		case session.TypeToolApproval:
			approval = string(e.Data)
		}
		if e.Type == session.TypeTurnEnd {
			break
		}
	}
	if !strings.Contains(result, `"code":"not-run"`) || approval != "" {
		t.Errorf("the cancelled call: result %s, approval %s", result, approval)
	}
	if err := ag.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	ld, err := st.Load(context.Background(), ag.ID(), store.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if vs := session.Check(ld.Log.Events(0)); len(vs) > 0 {
		t.Errorf("the session breaks the invariant: %v", vs)
	}
}
