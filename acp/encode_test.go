package acp

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	sdk "github.com/coder/acp-go-sdk"

	"github.com/reinhq/rein/llm"
	"github.com/reinhq/rein/session"
	"github.com/reinhq/rein/transcript"
)

// sdkLine is the SDK's own encoding of a session/update notification.
func sdkLine(t testing.TB, sid string, u sdk.SessionUpdate) any {
	t.Helper()
	params, err := json.Marshal(sdk.SessionNotification{SessionId: sdk.SessionId(sid), Update: u})
	if err != nil {
		t.Fatal(err)
	}
	var v any
	if err := json.Unmarshal([]byte(`{"jsonrpc":"2.0","method":"session/update","params":`+string(params)+`}`), &v); err != nil {
		t.Fatal(err)
	}
	return v
}

func fastLine(t testing.TB, sid string, u sdk.SessionUpdate) any {
	t.Helper()
	b := appendNotification(nil, sid, &u)
	if len(b) == 0 || b[len(b)-1] != '\n' {
		t.Fatalf("not a line: %q", b)
	}
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, b)
	}
	// It must also read back through the SDK's own types.
	var n struct {
		Params sdk.SessionNotification `json:"params"`
	}
	if err := json.Unmarshal(b, &n); err != nil {
		t.Fatalf("the SDK cannot read it: %v\n%s", err, b)
	}
	return v
}

// sampleUpdates are the updates of a log that has every entry kind.
func sampleUpdates(t *testing.T) []sdk.SessionUpdate {
	l := session.NewLog(session.Header{ID: "s1", Version: session.Version})
	at := time.Unix(0, 0)
	user := session.Source{Kind: session.SourceUser}
	for _, p := range []session.Payload{
		&session.SessionTitle{Title: "Fix \"CI\" <now>"},
		&session.UserMessage{ID: "m1", Content: llm.Text("CI is red\u2028on main\x01"), Source: session.Source{Kind: "plugin", Name: "ci-watch"}},
		&session.TurnStart{Turn: 1, Trigger: session.Trigger{Kind: session.TriggerSend, MessageID: "m2"}},
		&session.UserMessage{ID: "m2", Content: []llm.Part{{Type: llm.PartText, Text: "why?\tnow"}, {Type: llm.PartImage, MediaType: "image/png", Data: "aGk="}}, Source: user},
		&session.StepStart{Turn: 1, Step: 1},
		&session.AssistantMessage{Turn: 1, Step: 1, Content: []llm.Part{{Type: llm.PartReasoning, Text: "think"}, {Type: llm.PartText, Text: "look"}},
			ToolCalls: []llm.ToolCall{{ID: "c1", Name: "edit", Arguments: `{"file_path":"a.go","old_string":"a","new_string":"b"}`}, {ID: "c2", Name: "bash", Arguments: `not json`}, {ID: "c3", Name: "todo", Arguments: `{}`}},
			Finish:    llm.FinishToolCalls},
		&session.ToolCall{Turn: 1, Step: 1, CallID: "c1", Name: "edit", Arguments: `{"file_path":"a.go","old_string":"a","new_string":"c"}`, OriginalArguments: `{"file_path":"a.go","old_string":"a","new_string":"b"}`},
		&session.ToolResult{Turn: 1, Step: 1, CallID: "c1", Content: llm.Text("edited a.go\n--- a"), Meta: json.RawMessage(`{"path":"/w/a.go","replacements":1,"diff":"--- a\n+++ b\n"}`)},
		&session.ToolCall{Turn: 1, Step: 1, CallID: "c2", Name: "bash", Arguments: `not json`},
		&session.ToolResult{Turn: 1, Step: 1, CallID: "c2", Content: llm.Text("bad"), IsError: true, Code: "invalid-arguments"},
		&session.ToolCall{Turn: 1, Step: 1, CallID: "c3", Name: "todo", Arguments: `{}`},
		&session.ToolResult{Turn: 1, Step: 1, CallID: "c3", Content: llm.Text("plan"), Meta: json.RawMessage(`{"todos":[{"content":"a","status":"in_progress"},{"content":"b","status":"weird"}]}`)},
		&session.SteeringMessage{Turn: 1, ID: "s1", Content: llm.Text("only tests"), Source: user},
		&session.StepEnd{Turn: 1, Step: 1},
		&session.TurnEnd{Turn: 1, Reason: session.Reason{Kind: session.ReasonError, Code: "rate-limit", Message: "slow"}},
		&session.HookResult{Point: "UserPromptSubmit", Hook: "h#1", Decision: "block", Stderr: "no"},
		&session.CompactionStart{ID: "k", Reason: session.CompactManual},
		&session.UserMessage{ID: "m3", Content: llm.Text("sum"), Source: session.Source{Kind: session.SourceSystem, Name: "compaction"},
			Replaces: &session.Replaces{Start: 1, End: 1, Seqs: []int64{1}}},
		&session.CompactionEnd{ID: "k", Reason: session.CompactManual, Error: "x"},
		&session.UserMessage{ID: "m4", Content: llm.Text("ref"), Source: session.Source{Kind: session.SourceSessionRef, Name: "s0@1"}},
	} {
		if _, err := l.Append(at, p); err != nil {
			t.Fatalf("%T: %v", p, err)
		}
	}
	b := transcript.Builder{Cwd: "/w"}
	m := mapper{echo: map[string]bool{}}
	var out []sdk.SessionUpdate
	for _, ev := range l.Events(0) {
		es, err := b.Add(ev)
		if err != nil {
			t.Fatal(err)
		}
		for i := range es {
			out = m.appendUpdates(out, &es[i])
		}
	}
	blocked := transcript.BlockedEntry("m9", llm.Text("rm"), session.Source{Kind: session.SourceUser}, "no")
	out = m.appendUpdates(out, &blocked)
	out = append(out,
		sdk.SessionUpdate{AvailableCommandsUpdate: &sdk.SessionAvailableCommandsUpdate{AvailableCommands: commands, SessionUpdate: "available_commands_update"}},
		sdk.UpdateToolCall("c9", sdk.WithUpdateContent([]sdk.ToolCallContent{sdk.ToolTerminalRef("t1")})),
	)
	return out
}

// TestEncodeMatchesSDK: every update rein sends encodes to JSON equal to
// the SDK's encoding of the same value.
func TestEncodeMatchesSDK(t *testing.T) {
	us := sampleUpdates(t)
	kinds := map[string]bool{}
	for i, u := range us {
		want, got := sdkLine(t, "s\"1", u), fastLine(t, "s\"1", u)
		if !reflect.DeepEqual(want, got) {
			w, _ := json.Marshal(want)
			g, _ := json.Marshal(got)
			t.Errorf("update %d differs\n sdk:  %s\n fast: %s", i, w, g)
		}
		kinds[want.(map[string]any)["params"].(map[string]any)["update"].(map[string]any)["sessionUpdate"].(string)] = true
	}
	for _, k := range []string{"user_message_chunk", "agent_message_chunk", "agent_thought_chunk", "tool_call", "tool_call_update", "plan", "session_info_update", "available_commands_update"} {
		if !kinds[k] {
			t.Errorf("the sample has no %s", k)
		}
	}
}

// FuzzAppendString: strings encode as encoding/json decodes them back.
func FuzzAppendString(f *testing.F) {
	for _, s := range []string{"", "plain", "q\"b\\", "\n\r\t\x00\x1f", "\u2028\u2029", "é✓😀", "\xff\xfe", "<&>"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		b := appendString(nil, s)
		var got string
		if err := json.Unmarshal(b, &got); err != nil {
			t.Fatalf("%q -> %s: %v", s, b, err)
		}
		want, _ := json.Marshal(s)
		var w string
		_ = json.Unmarshal(want, &w)
		if got != w {
			t.Fatalf("%q: decodes to %q, encoding/json's to %q", s, got, w)
		}
	})
}
