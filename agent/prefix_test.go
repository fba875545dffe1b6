package agent_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/reinhq/rein/agent"
	"github.com/reinhq/rein/llm"
	"github.com/reinhq/rein/llm/mock"
	"github.com/reinhq/rein/llm/scripted"
	"github.com/reinhq/rein/session"
)

// headers lists the log's request/headers as reason, then, when the
// prompt-cache prefix broke, ":cause@messages".
func headers(t *testing.T, evs []session.Event) []string {
	t.Helper()
	var out []string
	for _, ev := range evs {
		if ev.Type != session.TypeRequestHeader {
			continue
		}
		h := ev.MustDecode().(*session.RequestHeader)
		s := h.Reason
		if h.Prefix != nil {
			s += fmt.Sprintf(":%s@%d", h.Prefix.Break, h.Prefix.Messages)
		}
		out = append(out, s)
	}
	return out
}

// TestPrefixBreaks: a request/header records where the prompt-cache
// prefix broke and why (a new tool, a compaction, a changed system prompt
// or model across a resume, a compaction made before the resume), and
// nothing when requests only grow, in one agent's life or across a resume.
func TestPrefixBreaks(t *testing.T) {
	var calls []scripted.Call
	for i := range 11 {
		calls = append(calls, scripted.Answer(fmt.Sprintf("a%d", i)))
	}
	h := newHarness(t, calls, withTools(echoTool("t1")))
	turn := func(p string) {
		t.Helper()
		h.send(p)
		h.idle()
	}
	resume := func(cfg agent.Config) {
		t.Helper()
		if err := h.a.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		a, err := agent.Resume(context.Background(), h.st, "s1", cfg)
		if err != nil {
			t.Fatal(err)
		}
		h.attach(a)
	}
	want := []string{session.HeaderInitial}
	check := func(step string) {
		t.Helper()
		if got := headers(t, h.events()); strings.Join(got, " ") != strings.Join(want, " ") {
			t.Fatalf("after %s: headers %v, want %v", step, got, want)
		}
	}
	turn("u1")
	turn("u2")
	check("two turns")

	if err := h.cfg.Tools.Register(echoTool("t2")); err != nil {
		t.Fatal(err)
	}
	turn("u3")
	want = append(want, "change:tools@0")
	check("a new tool")

	if err := h.a.Compact(context.Background(), agent.CompactOptions{Keep: 2}); err != nil {
		t.Fatal(err)
	}
	turn("u4")
	turn("u5")
	want = append(want, "change:compaction@0")
	check("a compaction")

	resume(h.cfg)
	turn("u6")
	want = append(want, session.HeaderResume)
	check("a resume")

	other := h.cfg
	other.System = []agent.Section{{Text: "You are another agent."}}
	resume(other)
	turn("u7")
	want = append(want, session.HeaderResume+":system@0")
	check("a resume with a new system prompt")

	other.Model = "scripted:other"
	resume(other)
	turn("u8")
	want = append(want, session.HeaderResume+":model@0")
	check("a resume with a new model")

	if err := h.a.Compact(context.Background(), agent.CompactOptions{Keep: 2}); err != nil {
		t.Fatal(err)
	}
	resume(other)
	turn("u9")
	want = append(want, session.HeaderResume+":compaction@0")
	check("a resume after a compaction")
}

// TestPrefixThroughAdapter: with a real adapter, which encodes ahead of
// the request (llm.Preparer) through the agent's cache, growth records
// nothing and a new tool breaks the prefix at its start.
func TestPrefixThroughAdapter(t *testing.T) {
	var replies []mock.Reply
	for i := range 3 {
		replies = append(replies, mock.Reply{Text: fmt.Sprintf("a%d", i)})
	}
	h, srv := newProviderHarness(t, replies, nil, withTools(echoTool("t1")))
	if _, ok := h.cfg.Provider.(llm.Preparer); !ok {
		t.Fatal("the harness hides the adapter's Prepare")
	}
	for _, p := range []string{"u1", "u2"} {
		h.send(p)
		h.idle()
	}
	if err := h.cfg.Tools.Register(echoTool("t2")); err != nil {
		t.Fatal(err)
	}
	h.send("u3")
	h.idle()
	if got := headers(t, h.events()); strings.Join(got, " ") != "initial change:tools@0" {
		t.Fatalf("headers %v", got)
	}
	// Each request repeats the previous one's body ahead of its new
	// messages (the third after its tool list).
	reqs := srv.Requests()
	if len(reqs) != 3 {
		t.Fatalf("%d requests", len(reqs))
	}
	msgsOf := func(b []byte) string {
		return string(b[strings.Index(string(b), `"messages":[`):strings.Index(string(b), `],"model"`)])
	}
	if m0, m1 := msgsOf(reqs[0].Body), msgsOf(reqs[1].Body); !strings.HasPrefix(m1, m0) {
		t.Errorf("second request does not extend the first:\n%s\n%s", m0, m1)
	}
}
