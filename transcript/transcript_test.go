package transcript_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/reinhq/rein/llm"
	"github.com/reinhq/rein/session"
	"github.com/reinhq/rein/transcript"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden")

func ip(n int) *int { return &n }

// sampleLog builds a log that exercises every entry kind: an out-of-turn
// inject, a turn with an admission context, reasoning, two tool calls (one
// rewritten by a hook, one denied), steering, a compaction between turns, a
// turn that failed, and a crash left open and repaired.
func sampleLog(t *testing.T) *session.Log {
	t.Helper()
	l := session.NewLog(session.Header{ID: "s1", Cwd: "/w", Version: session.Version})
	at := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	add := func(p session.Payload) {
		t.Helper()
		if _, err := l.Append(at, p); err != nil {
			t.Fatalf("append %T: %v", p, err)
		}
	}
	userSrc := session.Source{Kind: session.SourceUser}
	add(&session.SessionTitle{Title: "Fix CI"})
	add(&session.UserMessage{ID: "m1", Content: llm.Text("CI is red on main"), Source: session.Source{Kind: "plugin", Name: "ci-watch"}})
	add(&session.TurnStart{Turn: 1, Trigger: session.Trigger{Kind: session.TriggerSend, MessageID: "m2"}})
	add(&session.UserMessage{ID: "m2", Content: llm.Text("why?"), Source: userSrc})
	add(&session.UserMessage{ID: "m3", Content: llm.Text("branch: main\nstatus: clean"), Source: session.Source{Kind: "hook", Name: "claude-code:UserPromptSubmit"}})
	add(&session.StepStart{Turn: 1, Step: 1})
	add(&session.RequestHeader{Turn: 1, Step: 1, Reason: session.HeaderInitial, Model: "scripted:demo", System: "rein"})
	add(&session.AssistantChunk{Turn: 1, Step: 1, Delta: llm.Delta{Text: "Let me look."}})
	add(&session.AssistantMessage{Turn: 1, Step: 1,
		Content: []llm.Part{{Type: llm.PartReasoning, Text: "Read the log."}, {Type: llm.PartText, Text: "Let me look."}},
		ToolCalls: []llm.ToolCall{
			{ID: "c1", Name: "read", Arguments: `{"path":"ci.log"}`},
			{ID: "c2", Name: "bash", Arguments: `{"command":"rm -rf /"}`},
		},
		Finish: llm.FinishToolCalls, Usage: llm.Usage{Input: 900, Output: 20}, ChunkSeqs: []int64{7}})
	add(&session.ToolCall{Turn: 1, Step: 1, CallID: "c1", Name: "read", Arguments: `{"path":"/w/ci.log"}`, OriginalArguments: `{"path":"ci.log"}`})
	add(&session.ToolApproval{Turn: 1, Step: 1, CallID: "c2", Decision: "deny", By: "mode:read-only", Reason: "bash writes"})
	add(&session.ToolCall{Turn: 1, Step: 1, CallID: "c2", Name: "bash", Arguments: `{"command":"rm -rf /"}`})
	add(&session.ToolResult{Turn: 1, Step: 1, CallID: "c1", Content: llm.Text("l1\nl2\nl3\nl4\nl5\nl6\nl7\nl8\n")})
	add(&session.ToolResult{Turn: 1, Step: 1, CallID: "c2", Content: llm.Text("denied: bash writes"), IsError: true, Code: "denied"})
	add(&session.SteeringMessage{Turn: 1, ID: "s1", Content: llm.Text("only the test job"), Source: userSrc})
	add(&session.StepEnd{Turn: 1, Step: 1})
	add(&session.StepStart{Turn: 1, Step: 2})
	add(&session.AssistantMessage{Turn: 1, Step: 2, Content: llm.Text("TestX fails."), Finish: llm.FinishStop, Usage: llm.Usage{Input: 950, Output: 30}})
	add(&session.StepEnd{Turn: 1, Step: 2})
	add(&session.TurnEnd{Turn: 1, Reason: session.Reason{Kind: session.ReasonCompleted}})
	add(&session.HookResult{Point: "UserPromptSubmit", Hook: "claude-code:UserPromptSubmit#1", Decision: "block", ExitCode: ip(2), Stderr: "no secrets"})
	add(&session.CompactionStart{ID: "k1", Reason: session.CompactManual})
	add(&session.UserMessage{ID: "m4", Content: llm.Text("The user asked why CI is red; TestX fails."),
		Source: session.Source{Kind: session.SourceSystem, Name: "compaction"}, Replaces: &session.Replaces{Start: 1, End: 17, Seqs: []int64{1, 3, 4, 8, 12, 13, 14, 17}}})
	add(&session.CompactionEnd{ID: "k1", Reason: session.CompactManual})
	add(&session.UserMessage{ID: "m5", Content: llm.Text("earlier session"), Source: session.Source{Kind: session.SourceSessionRef, Name: "s0@41"}})
	add(&session.TurnStart{Turn: 2, Trigger: session.Trigger{Kind: session.TriggerSend, MessageID: "m6"}})
	add(&session.UserMessage{ID: "m6", Content: llm.Text("fix it"), Source: userSrc})
	add(&session.StepStart{Turn: 2, Step: 1})
	add(&session.AssistantMessage{Turn: 2, Step: 1, Finish: llm.FinishError})
	add(&session.StepEnd{Turn: 2, Step: 1})
	add(&session.TurnEnd{Turn: 2, Reason: session.Reason{Kind: session.ReasonError, Code: "rate-limit", Message: "slow down"}})
	// Turn 3 crashes mid-stream: repair closes it.
	add(&session.TurnStart{Turn: 3, Trigger: session.Trigger{Kind: session.TriggerSend, MessageID: "m7"}})
	add(&session.UserMessage{ID: "m7", Content: llm.Text("try again"), Source: userSrc})
	add(&session.StepStart{Turn: 3, Step: 1})
	add(&session.AssistantChunk{Turn: 3, Step: 1, Delta: llm.Delta{Text: "Working on"}})
	if _, err := session.Repair(l); err != nil {
		t.Fatal(err)
	}
	return l
}

func TestRenderGolden(t *testing.T) {
	l := sampleLog(t)
	entries, err := transcript.Build(l.Events(0))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		opts transcript.Options
	}{
		{"default", transcript.Options{}},
		{"verbose", transcript.Options{Verbose: true, Seqs: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b bytes.Buffer
			if err := transcript.Render(&b, entries, tc.opts); err != nil {
				t.Fatal(err)
			}
			golden(t, filepath.Join("testdata", tc.name+".golden"), b.Bytes())
		})
	}
}

func golden(t *testing.T, path string, got []byte) {
	t.Helper()
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs (run with -update and review the diff)\n--- got\n%s\n--- want\n%s", path, got, want)
	}
}

// TestSourcesDecideKind pins the rule of docs/semantics.md ("What faces show"): a message is shown as the
// user's only when its source kind is "user", whatever its text says.
func TestSourcesDecideKind(t *testing.T) {
	l := session.NewLog(session.Header{ID: "s"})
	at := time.Unix(0, 0)
	for i, src := range []session.Source{{Kind: "user"}, {Kind: "user-context", Name: "cli"}, {Kind: "brand-new-kind", Name: "x"}} {
		if _, err := l.Append(at, &session.UserMessage{ID: string(rune('a' + i)), Content: llm.Text("user: hi"), Source: src}); err != nil {
			t.Fatal(err)
		}
	}
	es, err := transcript.Build(l.Events(0))
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, e := range es {
		kinds = append(kinds, string(e.Kind)+"/"+transcript.Label(*e.Source))
	}
	if got, want := strings.Join(kinds, ","), "user/user,context/user-context cli,context/brand-new-kind x"; got != want {
		t.Fatalf("kinds = %s, want %s", got, want)
	}
}

func TestUnknownIgnorableType(t *testing.T) {
	ev := session.Event{Seq: 0, Type: "future/thing", Ignorable: true, Data: json.RawMessage(`{}`)}
	es, err := transcript.Build([]session.Event{ev})
	if err != nil {
		t.Fatal(err)
	}
	if len(es) != 1 || es[0].Kind != transcript.Unknown || es[0].Text != "future/thing" {
		t.Fatalf("entries = %+v", es)
	}
}

func TestSummarize(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`{"path":"a.go","limit":3}`, "a.go"},
		{`{"command":"go test ./...\necho hi"}`, "go test ./... …"},
		{`{"x":1}`, `{"x":1}`},
		{`not json`, "not json"},
		{`{"query":"` + strings.Repeat("a", 50) + `"}`, strings.Repeat("a", 19) + "…"},
	} {
		if got := transcript.Summarize(tc.in, 20); got != tc.want {
			t.Errorf("Summarize(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// TestToolLifecycle: a call is pending when the model asks for it, running
// once its tool/call is in the log, completed or failed with its result;
// edits carry their diff, the todo tool its plan.
func TestToolLifecycle(t *testing.T) {
	l := session.NewLog(session.Header{ID: "s"})
	at := time.Unix(0, 0)
	for _, p := range []session.Payload{
		&session.TurnStart{Turn: 1, Trigger: session.Trigger{Kind: session.TriggerSend, MessageID: "m1"}},
		&session.UserMessage{ID: "m1", Content: llm.Text("fix"), Source: session.Source{Kind: session.SourceUser}},
		&session.StepStart{Turn: 1, Step: 1},
		&session.AssistantMessage{Turn: 1, Step: 1, Finish: llm.FinishToolCalls, ToolCalls: []llm.ToolCall{
			{ID: "e", Name: "edit", Arguments: `{"file_path":"a.go","old_string":"x","new_string":"y"}`},
			{ID: "t", Name: "todo", Arguments: `{"todos":[]}`},
			{ID: "b", Name: "bash", Arguments: `{"command":"go test ./..."}`},
		}},
		&session.ToolCall{Turn: 1, Step: 1, CallID: "e", Name: "edit", Arguments: `{"file_path":"a.go","old_string":"x","new_string":"y"}`},
		&session.ToolResult{Turn: 1, Step: 1, CallID: "e", Content: llm.Text("edited a.go"), Meta: json.RawMessage(`{"path":"/w/a.go","replacements":1,"diff":"@@"}`)},
		&session.ToolCall{Turn: 1, Step: 1, CallID: "t", Name: "todo", Arguments: `{"todos":[]}`},
		&session.ToolResult{Turn: 1, Step: 1, CallID: "t", Content: llm.Text("plan"), Meta: json.RawMessage(`{"todos":[{"content":"a","status":"in_progress"}]}`)},
		&session.ToolCall{Turn: 1, Step: 1, CallID: "b", Name: "bash", Arguments: `{"command":"go test ./..."}`},
		&session.ToolResult{Turn: 1, Step: 1, CallID: "b", Content: llm.Text("FAIL"), IsError: true, Code: "exit", Meta: json.RawMessage(`{"exitCode":1,"timedOut":false}`)},
		&session.StepEnd{Turn: 1, Step: 1},
		&session.TurnEnd{Turn: 1, Reason: session.Reason{Kind: session.ReasonCompleted}},
	} {
		if _, err := l.Append(at, p); err != nil {
			t.Fatalf("%T: %v", p, err)
		}
	}
	b := transcript.Builder{Cwd: "/w"}
	var got []string
	for _, ev := range l.Events(0) {
		es, err := b.Add(ev)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range es {
			switch {
			case e.Tool != nil && e.Kind != transcript.Approval:
				s := string(e.Kind) + " " + e.Tool.CallID + " " + string(e.Tool.Status)
				if e.Tool.Title != "" {
					s += " [" + e.Tool.Title + " " + string(e.Tool.Kind) + "]"
				}
				if e.Tool.ExitCode != nil {
					s += fmt.Sprintf(" exit %d", *e.Tool.ExitCode)
				}
				if d := e.Tool.Diff; d != nil {
					s += " diff " + d.Path
					if d.Old != nil && d.New != nil {
						s += " " + *d.Old + "->" + *d.New
					}
				}
				got = append(got, s)
			case e.Kind == transcript.Plan:
				got = append(got, fmt.Sprintf("plan %+v", e.Plan))
			case e.Kind == transcript.TurnStart:
				got = append(got, "turn-start by "+e.ID)
			}
		}
	}
	want := []string{
		"turn-start by m1",
		"tool-call e pending [edit a.go edit] diff /w/a.go x->y",
		"tool-call t pending [plan plan]",
		"tool-call b pending [bash: go test ./... execute]",
		"tool-started e running",
		"tool-result e completed diff /w/a.go x->y",
		"tool-started t running",
		"tool-result t completed",
		"plan [{Content:a Status:in_progress}]",
		"tool-started b running",
		"tool-result b failed exit 1",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("entries:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestStream: with Stream, chunks are deltas and the message that
// completes them says how much was streamed; a retried request whose
// chunks differ from the final text streams nothing the face can trust.
func TestStream(t *testing.T) {
	l := session.NewLog(session.Header{ID: "s"})
	at := time.Unix(0, 0)
	add := func(p session.Payload) {
		t.Helper()
		if _, err := l.Append(at, p); err != nil {
			t.Fatalf("%T: %v", p, err)
		}
	}
	add(&session.TurnStart{Turn: 1, Trigger: session.Trigger{Kind: session.TriggerSend, MessageID: "m1"}})
	add(&session.UserMessage{ID: "m1", Content: llm.Text("hi"), Source: session.Source{Kind: session.SourceUser}})
	add(&session.StepStart{Turn: 1, Step: 1})
	add(&session.AssistantChunk{Turn: 1, Step: 1, Delta: llm.Delta{Reasoning: "hm"}})
	add(&session.AssistantChunk{Turn: 1, Step: 1, Delta: llm.Delta{Text: "Hel"}})
	add(&session.AssistantChunk{Turn: 1, Step: 1, Delta: llm.Delta{Text: "lo"}})
	add(&session.AssistantMessage{Turn: 1, Step: 1, Content: []llm.Part{{Type: llm.PartReasoning, Text: "hm"}, {Type: llm.PartText, Text: "Hello there"}}, Finish: llm.FinishStop, ChunkSeqs: []int64{3, 4, 5}})
	add(&session.StepEnd{Turn: 1, Step: 1})
	add(&session.StepStart{Turn: 1, Step: 2})
	add(&session.AssistantChunk{Turn: 1, Step: 2, Delta: llm.Delta{Text: "Oops"}})
	add(&session.AssistantMessage{Turn: 1, Step: 2, Content: llm.Text("Fine"), Finish: llm.FinishStop})
	for _, stream := range []bool{true, false} {
		b := transcript.Builder{Stream: stream}
		var got []string
		for _, ev := range l.Events(0) {
			es, err := b.Add(ev)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range es {
				switch e.Kind {
				case transcript.AssistantDelta, transcript.ReasoningDelta, transcript.Assistant, transcript.Reasoning:
					got = append(got, fmt.Sprintf("%s %q %d", e.Kind, e.Text, e.Streamed))
				}
			}
		}
		want := `reasoning "hm" 0,assistant "Hello there" 0,assistant "Fine" 0`
		if stream {
			want = `reasoning-delta "hm" 0,assistant-delta "Hel" 0,assistant-delta "lo" 0,reasoning "hm" 2,assistant "Hello there" 5,assistant-delta "Oops" 0,assistant "Fine" 0`
		}
		if g := strings.Join(got, ","); g != want {
			t.Errorf("stream=%v:\n got %s\nwant %s", stream, g, want)
		}
	}
}

// TestModelEntry: a request/header shows its model, whether rein's field
// order lets the builder stop early or not.
func TestModelEntry(t *testing.T) {
	for _, data := range []string{
		`{"turn":1,"step":1,"reason":"initial","model":"deepseek:chat","system":"long","tools":[],"params":{}}`,
		`{"system":"long","model":"deepseek:chat","turn":1,"step":1,"reason":"initial","tools":[],"params":{}}`,
	} {
		es, err := transcript.Build([]session.Event{{Seq: 4, Type: session.TypeRequestHeader, Data: json.RawMessage(data)}})
		if err != nil {
			t.Fatal(err)
		}
		if len(es) != 1 || es[0].Kind != transcript.Model || es[0].Text != "deepseek:chat" || es[0].Turn != 1 || es[0].Step != 1 {
			t.Fatalf("%s: %+v", data, es)
		}
	}
}

// TestBlockedEntry: a blocked prompt renders with its reason.
func TestBlockedEntry(t *testing.T) {
	e := transcript.BlockedEntry("m9", llm.Text("rm -rf /"), session.Source{Kind: session.SourceUser}, "no destructive commands")
	var b bytes.Buffer
	if err := transcript.Render(&b, []transcript.Entry{e}, transcript.Options{}); err != nil {
		t.Fatal(err)
	}
	if got := b.String(); got != "blocked (no destructive commands): rm -rf /\n" {
		t.Fatalf("rendered %q", got)
	}
}
