package session

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/reinhq/rein/llm"
)

// fastDecodeCases are payload JSON texts: rein's own encodings plus
// hand-written edge cases (escapes, null, empty arrays, unknown fields,
// case-folded keys, invalid UTF-8, numbers encoding/json refuses).
var fastDecodeCases = []struct {
	t    Type
	data string
}{
	{TypeUserMessage, `{"id":"m1","content":[{"type":"text","text":"hi \"there\"\n\t\\ \u00e9 \ud83d\ude00 \/"}],"source":{"kind":"user"}}`},
	{TypeUserMessage, `{"id":"m1","content":null,"source":{"kind":"plugin","name":"x"},"replaces":{"start":1,"end":4,"seqs":[1,2,4]}}`},
	{TypeUserMessage, `{"id":"m1","content":[],"source":{"kind":"user"},"replaces":null}`},
	{TypeUserMessage, `{"id":"m1","Content":[{"type":"text","text":"case-folded key"}],"source":{"kind":"user"}}`},
	{TypeUserMessage, `{"id":"m1","content":[{"type":"text","text":"bad utf8 ` + "\xff" + `"}],"source":{"kind":"user"}}`},
	{TypeUserMessage, `{"id":"m1","content":[{"type":"text","text":"lone surrogate \ud800 x"}],"source":{"kind":"user"}}`},
	{TypeUserMessage, `{"id":"m1","content":[null,{"type":"image","mediaType":"image/png","data":"AAAA"}],"source":{"kind":"user"},"extra":1}`},
	{TypeUserMessage, ` { "id" : "m1" , "content" : [ ] , "source" : { "kind" : "user" } } `},
	{TypeAssistantMessage, `{"turn":1,"step":2,"content":[{"type":"reasoning","text":"r","signature":"s"},{"type":"text","text":"t"}],"toolCalls":[{"id":"c1","name":"read","arguments":"{\"file_path\":\"a\"}"}],"finish":"tool-calls","usage":{"input":1,"output":2,"cacheRead":3,"cacheWrite":4,"reasoning":5},"chunkSeqs":[3,4,5],"interrupted":true}`},
	{TypeAssistantMessage, `{"turn":1,"step":1,"content":[],"toolCalls":[],"finish":"stop","usage":{"input":0,"output":0},"chunkSeqs":[]}`},
	{TypeAssistantMessage, `{"turn":1.0,"step":1}`},
	{TypeAssistantMessage, `{"turn":1e2,"step":1}`},
	{TypeAssistantMessage, `{"turn":01,"step":1}`},
	{TypeAssistantMessage, `{"turn":-3,"step":99999999999999999999}`},
	{TypeAssistantMessage, `{"turn":"1"}`},
	{TypeAssistantMessage, `{"turn":1,"step":1,"interrupted":null,"toolCalls":null,"chunkSeqs":null}`},
	{TypeToolCall, `{"turn":1,"step":1,"callID":"c1","name":"read","arguments":"{not json","originalArguments":"{}"}`},
	{TypeToolResult, `{"turn":1,"step":1,"callID":"c1","content":[{"type":"text","text":"out"}],"isError":true,"code":"timeout","meta":{"exit":1,"a":[1,{"b":"}"}]}}`},
	{TypeToolResult, `{"turn":1,"step":1,"callID":"c1","content":[],"isError":false,"meta":null}`},
	{TypeToolResult, `{"turn":1,"step":1,"callID":"c1","content":[],"isError":false,"meta":{"x":}}`},
	{TypeStepStart, `{"turn":1,"step":1}`},
	{TypeStepEnd, `{"turn":1,"step":1}`},
	{TypeStepEnd, `{"turn":1,"step":1}x`},
	{TypeStepEnd, `{"turn":1,"step":1},"x":{}`},
	{TypeStepEnd, `{"turn":1,"step":1`},
	{TypeTurnStart, `{"turn":1,"trigger":{"kind":"send","messageID":"m1"}}`},
	{TypeTurnEnd, `{"turn":1,"reason":{"kind":"error","code":"persistence","message":"disk full","cause":"x"}}`},
	{TypeRequestHeader, `{"turn":1,"step":1,"reason":"initial","model":"m","system":"s\nx","tools":[{"name":"read","description":"d","parameters":{"type":"object"}}],"params":{"maxTokens":5,"temperature":0.5}}`},
	{TypeRequestHeader, `{"turn":1,"step":1,"reason":"initial","model":"m","system":"","tools":[],"params":{}}`},
	{TypeRequestHeader, `{"turn":1,"step":1,"params":{"maxTokens":"x"}}`},
	{TypeSessionTitle, `{"title":"fast too"}`},
	{TypeSessionTitle, `{"title":"x","title":null}`},
	{TypeSessionTitle, `{"TITLE":"case-folded"}`},
	{TypeAssistantChunk, `{"turn":1,"step":2,"delta":{"text":"a\u00e9"}}`},
	{TypeAssistantChunk, `{"turn":1,"step":2,"delta":{"toolCall":{"index":0,"id":"c","name":"read","arguments":"{\""}}}`},
	{TypeAssistantChunk, `{"turn":1,"step":2,"delta":{"toolCall":null}}`},
	{TypeAssistantChunk, `{"turn":01,"step":2,"delta":{}}`},
	{TypeHookResult, `{"turn":null,"point":"SessionStart","hook":"h","decision":"pass","exitCode":2,"durationMs":12}`},
	{TypeCompactionStart, `{"turn":3,"id":"c","reason":"manual"}`},
	{TypeCompactionEnd, `{"turn":null,"id":"c","reason":"manual","error":"x"}`},
	{TypeToolApproval, `{"turn":1,"step":1,"callID":"c","decision":"deny","by":"user"}`},
	{TypeSteeringMessage, `{"turn":1,"id":"s","content":[{"type":"text","text":"x"}],"source":{"kind":"user"}}`},
	{TypeUserMessage, `{"id":"m1","content":[{"type":"text","text":"bad utf8 in a key"}],"sou` + "\xff" + `rce":{"kind":"user"}}`},
}

// TestFastDecodeMatchesJSON: whenever fastDecode succeeds it equals the
// general decoder (json.Unmarshal on valid UTF-8), and it never accepts
// what that refuses.
func TestFastDecodeMatchesJSON(t *testing.T) {
	fast := 0
	for _, c := range fastDecodeCases {
		if compareDecode(t, c.t, []byte(c.data)) {
			fast++
		}
	}
	if fast < len(fastDecodeCases)/2 {
		t.Errorf("fast path taken for only %d of %d cases", fast, len(fastDecodeCases))
	}
	// Every payload rein writes goes the fast path.
	for _, p := range []Payload{
		&UserMessage{ID: "x", Content: []llm.Part{{Type: "text", Text: "a\"b\\c\n\u2028"}}, Source: Source{Kind: "user"}},
		&AssistantMessage{Turn: 1, Step: 1, ChunkSeqs: []int64{1}},
		&ToolResult{Turn: 1, Step: 1, CallID: "c", Meta: json.RawMessage(`{"a":1}`)},
		&RequestHeader{Turn: 1, Step: 1},
		&RequestHeader{Turn: 1, Step: 2, Reason: HeaderChange, Tools: []llm.ToolSpec{}, Prefix: &Prefix{Messages: 3, Bytes: 1200, Break: BreakTools}},
		&TurnEnd{Turn: 2, Reason: Reason{Kind: ReasonAborted, Cause: CauseUser}},
		&AssistantChunk{Turn: 1, Step: 2, Delta: llm.Delta{ToolCall: &llm.ToolCallDelta{Index: 1, ID: "c", Name: "n", Arguments: "{\"a\""}}},
		&HookResult{Turn: new(int), Point: "p", Hook: "h", Decision: "pass", ExitCode: new(int), DurationMs: 12, Stderr: "x"},
		&CompactionStart{Turn: nil, ID: "c1", Reason: CompactManual, Instructions: "i"},
		&CompactionEnd{Turn: new(int), ID: "c1", Reason: CompactManual, Error: "e"},
		&SteeringMessage{Turn: 1, ID: "s", Content: llm.Text("x"), Source: Source{Kind: SourceUser}},
		&ToolApproval{Turn: 1, Step: 1, CallID: "c", Decision: "allow", By: "user", Reason: "r"},
		&SessionTitle{Title: "t"},
	} {
		ev, err := NewEvent(0, time.Unix(0, 0), p)
		if err != nil {
			t.Fatal(err)
		}
		if !compareDecode(t, ev.Type, ev.Data) {
			t.Errorf("%s %s: fast path refused rein's own encoding", ev.Type, ev.Data)
		}
	}
}

// compareDecode checks fastDecode against the general decoder for one
// input and reports whether the fast path took it.
func compareDecode(t *testing.T, typ Type, data []byte) bool {
	t.Helper()
	want, jerr := decodeGeneral(Event{Type: typ, Data: data})
	got, ok := fastDecode(typ, data)
	if !ok {
		return false
	}
	if jerr != nil {
		t.Errorf("%s %s: fast path accepted what the general decoder refuses (%v)", typ, data, jerr)
		return true
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%s %s:\nfast %#v\njson %#v", typ, data, got, want)
	}
	return true
}

func FuzzFastDecode(f *testing.F) {
	for _, c := range fastDecodeCases {
		f.Add(string(c.t), c.data)
	}
	f.Fuzz(func(t *testing.T, typ, data string) {
		if !Type(typ).Known() {
			typ = string(Types[len(typ)%len(Types)])
		}
		compareDecode(t, Type(typ), []byte(data))
	})
}

// TestAppendLinesMatchesAppendEvent: the parallel loader builds the same
// log as appending event by event, and reports the same first error with
// its line.
func TestAppendLinesMatchesAppendEvent(t *testing.T) {
	h := Header{ID: "x"}
	src := NewLog(h)
	at := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	tick := func() time.Time { at = at.Add(1700 * time.Millisecond); return at }
	var data []byte
	add := func(p Payload) {
		ev, err := src.Append(tick(), p)
		if err != nil {
			t.Fatal(err)
		}
		data = ev.AppendLine(data)
	}
	for turn := 1; len(data) < 3*blockSize; turn++ {
		add(&UserMessage{ID: fmt.Sprintf("c%d", turn), Content: []llm.Part{{Type: "text", Text: strings.Repeat("ctx\n", turn%50)}}, Source: Source{Kind: "plugin", Name: "p"}})
		add(&TurnStart{Turn: turn, Trigger: Trigger{Kind: TriggerSend, MessageID: fmt.Sprintf("m%d", turn)}})
		add(&UserMessage{ID: fmt.Sprintf("m%d", turn), Content: []llm.Part{{Type: "text", Text: "q"}}, Source: Source{Kind: "user"}})
		add(&StepStart{Turn: turn, Step: 1})
		var seqs []int64
		for range 20 {
			seqs = append(seqs, src.Len())
			add(&AssistantChunk{Turn: turn, Step: 1, Delta: llm.Delta{Text: "w "}})
		}
		add(&AssistantMessage{Turn: turn, Step: 1, Content: []llm.Part{{Type: "text", Text: strings.Repeat("w ", 20)}}, ToolCalls: nil, Finish: "stop", ChunkSeqs: seqs})
		add(&StepEnd{Turn: turn, Step: 1})
		add(&TurnEnd{Turn: turn, Reason: Reason{Kind: ReasonCompleted}})
	}
	l := NewLog(h)
	if err := l.AppendLines(data); err != nil {
		t.Fatal(err)
	}
	if l.Len() != src.Len() {
		t.Fatalf("len %d, want %d", l.Len(), src.Len())
	}
	var got []byte
	for _, ev := range l.Events(0) {
		got = ev.AppendLine(got)
	}
	if string(got) != string(data) {
		t.Errorf("events differ")
	}
	if !reflect.DeepEqual(l.Messages(), src.Messages()) {
		t.Errorf("projection differs")
	}
	if l.LastTime() != src.LastTime() {
		t.Errorf("last time %v, want %v", l.LastTime(), src.LastTime())
	}

	// Damage a line deep in the third block: same error, same line.
	lines := strings.SplitAfter(string(data), "\n")
	bad := len(lines) * 3 / 4
	lines[bad] = `{"seq":` + fmt.Sprint(bad) + `,"type":"step/start","time":"2026-11-30T10:00:00.000Z","data":{"turn":1,"step":}}` + "\n"
	broken := []byte(strings.Join(lines, ""))
	l = NewLog(h)
	err := l.AppendLines(broken)
	var le *LineError
	if !errors.As(err, &le) || le.Line != bad || le.Seq != int64(bad) || !errors.Is(err, ErrCorrupt) {
		t.Fatalf("error %v, want corrupt line %d", err, bad)
	}
	if l.Len() != int64(bad) {
		t.Errorf("appended %d events before the bad line, want %d", l.Len(), bad)
	}
	if want := len(strings.Join(lines[:bad+1], "")); le.End != want {
		t.Errorf("End = %d, want %d", le.End, want)
	}
}

// TestEventStoreSegments: events appended one by one (copied into arena
// chunks, or kept whole when big) and by AppendLines (kept in the input)
// read back byte for byte.
func TestEventStoreSegments(t *testing.T) {
	l := NewLog(Header{ID: "x"})
	var want []byte
	at := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	for i := range 300 {
		size := []int{1, 100, 5000, 20000, 70000}[i%5]
		ev, err := l.Append(at, &UserMessage{ID: fmt.Sprintf("m%d", i), Content: []llm.Part{{Type: "text", Text: strings.Repeat("y", size)}}, Source: Source{Kind: "plugin"}})
		if err != nil {
			t.Fatal(err)
		}
		want = ev.AppendLine(want)
	}
	var more []byte
	for i := 300; i < 400; i++ {
		ev, err := NewEvent(int64(i), at, &UserMessage{ID: fmt.Sprintf("m%d", i), Content: []llm.Part{{Type: "text", Text: "z"}}, Source: Source{Kind: "plugin"}})
		if err != nil {
			t.Fatal(err)
		}
		more = ev.AppendLine(more)
	}
	if err := l.AppendLines(more); err != nil {
		t.Fatal(err)
	}
	want = append(want, more...)
	var got []byte
	for s := range l.Len() {
		got = l.Event(s).AppendLine(got)
	}
	if string(got) != string(want) {
		t.Errorf("events differ after mixed appends")
	}
}
