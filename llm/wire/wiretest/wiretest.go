// Package wiretest draws random conversations for the adapters' encoding
// cache tests: a sequence of requests as an agent makes them (the history
// growing), broken now and then the ways that must make an adapter encode
// again (a compaction, an edited or dropped message, a new system prompt,
// tool set, model or params).
//
// Only tests import it.
package wiretest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"

	"pgregory.net/rapid"

	"github.com/reinhq/rein/llm"
)

// Step is one request of a conversation and, from how it was made, the
// number of its leading messages that are the very messages of the
// previous request (-1 for the first).
type Step struct {
	Req  *llm.Request
	Kept int
	// Op names how the request differs from the previous one.
	Op string
}

// texts mix what a JSON encoder must escape, HTML characters (which rein
// sends unescaped), and non-ASCII text.
var texts = []string{"", "hi", "a \"quoted\" <b>&</b>", "line\nbreak\ttab", "é ü 你好 →", "\u2028sep\u2029", "ctl\x01\x1f", "{\"json\":true}", "trailing \\"}

func text(t *rapid.T, label string) string { return rapid.SampledFrom(texts).Draw(t, label) }

var argsChoices = []string{`{"path":"a.go"}`, ``, `not json`, `[1,2]`, `{"x":"<y>"}`, `null`}

// Message draws one message of the given role.
func Message(t *rapid.T, role llm.Role, label string) llm.Message {
	img := func(l string) llm.Part {
		return llm.Part{Type: llm.PartImage, MediaType: "image/png", Data: rapid.SampledFrom([]string{"AAAA", "iVBORw0KGgo="}).Draw(t, l)}
	}
	switch role {
	case llm.RoleUser:
		parts := []llm.Part{{Type: llm.PartText, Text: text(t, label+".text")}}
		if rapid.IntRange(0, 4).Draw(t, label+".img") == 0 {
			parts = append(parts, img(label+".data"))
		}
		return llm.Message{Role: llm.RoleUser, Content: parts}
	case llm.RoleAssistant:
		var parts []llm.Part
		if rapid.Bool().Draw(t, label+".reasoning") {
			sig := ""
			if rapid.Bool().Draw(t, label+".signed") {
				sig = "sig=="
			}
			parts = append(parts, llm.Part{Type: llm.PartReasoning, Text: text(t, label+".rtext"), Signature: sig})
		}
		if rapid.Bool().Draw(t, label+".hastext") {
			parts = append(parts, llm.Part{Type: llm.PartText, Text: text(t, label+".text")})
		}
		var calls []llm.ToolCall
		for i := range rapid.IntRange(0, 3).Draw(t, label+".calls") {
			calls = append(calls, llm.ToolCall{ID: fmt.Sprintf("c%d", i), Name: "read", Arguments: rapid.SampledFrom(argsChoices).Draw(t, label+".args")})
		}
		return llm.Message{Role: llm.RoleAssistant, Content: parts, ToolCalls: calls}
	default:
		var parts []llm.Part
		switch rapid.IntRange(0, 3).Draw(t, label+".kind") {
		case 0:
			parts = []llm.Part{{Type: llm.PartText, Text: text(t, label+".text")}}
		case 1:
			parts = []llm.Part{img(label + ".data")}
		case 2:
			parts = []llm.Part{{Type: llm.PartText, Text: text(t, label+".text")}, img(label + ".data")}
		}
		return llm.Message{Role: llm.RoleTool, ToolCallID: "c" + text(t, label+".id"), Content: parts, IsError: rapid.Bool().Draw(t, label+".err")}
	}
}

var roles = []llm.Role{llm.RoleUser, llm.RoleAssistant, llm.RoleTool, llm.RoleTool}

var toolSets = [][]llm.ToolSpec{
	nil,
	{{Name: "read", Description: "Read <a> file.", Parameters: json.RawMessage(`{"type":"object", "properties":{"path":{"type":"string"}}}`)}},
	{{Name: "read", Description: "Read a file.", Parameters: json.RawMessage(`{"type":"object"}`)}, {Name: "now", Description: "", Parameters: nil}},
}

func f64(v float64) *float64 { return &v }

var paramSets = []llm.Params{{}, {MaxTokens: 100}, {MaxTokens: 4096, Temperature: f64(0.2), TopP: f64(1), ReasoningEffort: "high"}, {ThinkingBudget: 2000, Temperature: f64(1e-7)}}

// Conversation draws 1 to 16 requests.
func Conversation(t *rapid.T) []Step {
	var (
		msgs   []llm.Message
		system = "You are rein."
		tools  = toolSets[1]
		model  = "m1"
		params llm.Params
		steps  []Step
	)
	n := rapid.IntRange(1, 16).Draw(t, "requests")
	for r := range n {
		label := fmt.Sprintf("r%d", r)
		kept := len(msgs)
		op := rapid.SampledFrom([]string{"append", "append", "append", "compact", "edit", "same-content", "truncate", "system", "tools", "model", "params"}).Draw(t, label+".op")
		if r == 0 {
			op, kept = "append", -1
		}
		switch op {
		case "append":
			for i := range rapid.IntRange(0, 4).Draw(t, label+".n") {
				l := fmt.Sprintf("%s.m%d", label, i)
				msgs = append(msgs, Message(t, rapid.SampledFrom(roles).Draw(t, l+".role"), l))
			}
		case "compact":
			if len(msgs) == 0 {
				break
			}
			a := rapid.IntRange(0, len(msgs)-1).Draw(t, label+".a")
			b := rapid.IntRange(a+1, len(msgs)).Draw(t, label+".b")
			sum := llm.Message{Role: llm.RoleUser, Content: llm.Text("Summary " + text(t, label+".sum"))}
			msgs = slices.Concat(msgs[:a], []llm.Message{sum}, msgs[b:])
			kept = a
		case "edit", "same-content":
			if len(msgs) == 0 {
				break
			}
			i := rapid.IntRange(0, len(msgs)-1).Draw(t, label+".i")
			m := msgs[i]
			if op == "edit" {
				m = Message(t, m.Role, label+".e")
			} else {
				// Equal values in new arrays: not the same message.
				m.Content, m.ToolCalls = slices.Clone(m.Content), slices.Clone(m.ToolCalls)
			}
			if len(m.Content) == 0 && len(m.ToolCalls) == 0 {
				// An empty message is the same as any other with its
				// role, id and flag: give it content.
				m.Content = llm.Text("edited")
			}
			msgs = slices.Clone(msgs)
			msgs[i] = m
			kept = i
		case "truncate":
			j := rapid.IntRange(0, len(msgs)).Draw(t, label+".j")
			msgs = slices.Clone(msgs[:j])
			kept = j
		case "system":
			system = text(t, label+".system")
		case "tools":
			tools = rapid.SampledFrom(toolSets).Draw(t, label+".tools")
		case "model":
			model = rapid.SampledFrom([]string{"m1", "m2"}).Draw(t, label+".model")
		case "params":
			params = rapid.SampledFrom(paramSets).Draw(t, label+".params")
		}
		steps = append(steps, Step{Op: op, Kept: kept, Req: &llm.Request{Model: model, System: system, Tools: tools, Messages: slices.Clip(msgs), Params: params}})
	}
	return steps
}

// Encoder is what Check needs of an adapter.
type Encoder struct {
	// Prepare is the adapter's llm.Preparer.
	Prepare func(*llm.Request) (llm.Shared, error)
	// Sent returns the body Stream would send for a request carrying a
	// cache (after Prepare).
	Sent func(*llm.Request) ([]byte, error)
	// Body encodes a request from scratch.
	Body func(*llm.Request) ([]byte, error)
	// Reference is the encoding the others must match byte for byte.
	Reference func(*llm.Request) ([]byte, error)
}

// Check encodes a random conversation request after request through one
// llm.Cache and fails t when a body differs, byte for byte, from the
// reference encoding, or when Prepare reports another number of shared
// messages than the way the request was made implies.
func Check(t *rapid.T, e Encoder) {
	cache := &llm.Cache{}
	var prev int64
	for i, st := range Conversation(t) {
		req := *st.Req
		req.Cache = cache
		want, werr := e.Reference(st.Req)
		sh, err := e.Prepare(&req)
		if (err != nil) != (werr != nil) {
			t.Fatalf("request %d: prepare error %v, reference %v", i, err, werr)
		}
		if err != nil {
			continue
		}
		if i > 0 && sh.Messages != st.Kept {
			t.Fatalf("request %d (%s): %d messages shared, want %d", i, st.Op, sh.Messages, st.Kept)
		}
		if (sh.Bytes > 0) != (sh.Messages > 0) || sh.Bytes > prev {
			t.Fatalf("request %d (%s): %d bytes shared for %d messages, previous body %d bytes", i, st.Op, sh.Bytes, sh.Messages, prev)
		}
		got, err := e.Sent(&req)
		if err != nil {
			t.Fatal(err)
		}
		prev = int64(len(got))
		if !bytes.Equal(got, want) {
			t.Fatalf("request %d (%s): cached body differs\n got: %s\nwant: %s", i, st.Op, got, want)
		}
		if scratch, err := e.Body(st.Req); err != nil || !bytes.Equal(scratch, want) {
			t.Fatalf("request %d: Body differs (%v)\n got: %s\nwant: %s", i, err, scratch, want)
		}
	}
}
