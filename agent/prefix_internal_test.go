package agent

import (
	"slices"
	"testing"

	"github.com/reinhq/rein/llm"
	"github.com/reinhq/rein/session"
)

// TestPrefixEdited: messages that differ from the previous request's with
// no compaction in between are an edited history; the adapter's measured
// bytes are kept only when it counted the same messages.
func TestPrefixEdited(t *testing.T) {
	msgs := []llm.Message{{Role: llm.RoleUser, Content: llm.Text("a")}, {Role: llm.RoleAssistant, Content: llm.Text("b")}, {Role: llm.RoleUser, Content: llm.Text("c")}}
	h := &session.RequestHeader{Model: "m", System: "s", Tools: []llm.ToolSpec{}}
	s := sentRequest{known: true, model: "m", system: "s", tools: []llm.ToolSpec{}, msgs: msgs[:2], n: 2}
	if p := s.prefix(h, msgs, llm.Shared{}, false); p != nil {
		t.Fatalf("growth recorded %+v", p)
	}
	edited := slices.Clone(msgs)
	edited[1].Content = llm.Text("b") // equal text, another message
	// Without a compaction the projection never changes a message it
	// holds: nothing is compared.
	if p := s.prefix(h, edited, llm.Shared{}, false); p != nil {
		t.Fatalf("edit without a compaction, unmeasured: %+v", p)
	}
	// After a request prepared through the adapter, its count is used,
	// with its bytes; otherwise (its cache held something else) not.
	if p := s.prefix(h, edited, llm.Shared{Messages: 0, Bytes: 0}, true); p != nil {
		t.Fatalf("an adapter whose cache held another request: %+v", p)
	}
	s.adapter = true
	if p := s.prefix(h, edited, llm.Shared{Messages: 1, Bytes: 40}, true); p == nil || *p != (session.Prefix{Messages: 1, Bytes: 40, Break: session.BreakEdited}) {
		t.Fatalf("edit measured by the adapter: %+v", p)
	}
	s.adapter = false
	s.compacted = true
	if p := s.prefix(h, edited[:1], llm.Shared{}, false); p == nil || p.Break != session.BreakCompaction || p.Messages != 1 {
		t.Fatalf("compaction: %+v", p)
	}
	if p := s.prefix(h, edited, llm.Shared{}, false); p == nil || p.Break != session.BreakCompaction || p.Messages != 1 {
		t.Fatalf("compaction, the other message rebuilt: %+v", p)
	}
	if p := (&sentRequest{}).prefix(h, msgs, llm.Shared{}, false); p != nil {
		t.Fatalf("first request recorded %+v", p)
	}
}
