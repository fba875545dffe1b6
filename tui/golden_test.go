package tui

import (
	"bytes"
	"context"
	"flag"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/charmbracelet/x/vt"

	"github.com/reinhq/rein/agent"
	"github.com/reinhq/rein/llm"
	"github.com/reinhq/rein/llm/scripted"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden")

// vterm is a virtual terminal the program draws on: the screen it shows
// is what a person would see, without colours.
type vterm struct {
	mu   sync.Mutex // the emulator
	em   *vt.Emulator
	inMu sync.Mutex // writes to out
	in   *io.PipeReader
	out  *io.PipeWriter
}

// Write draws. Bubble Tea expects a terminal whose input is not a TTY to
// map newlines to CR LF (a cooked TTY's output does); the emulator does
// not, so the terminal's driver is played here.
func (v *vterm) Write(p []byte) (int, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if _, err := v.em.Write(bytes.ReplaceAll(p, []byte("\n"), []byte("\r\n"))); err != nil {
		return 0, err
	}
	return len(p), nil
}

// newVterm makes a w×h terminal. The program reads in: the keys typed
// (type_) and the emulator's answers to its queries.
func newVterm(w, h int) *vterm {
	v := &vterm{em: vt.NewEmulator(w, h)}
	v.in, v.out = io.Pipe()
	go func() {
		buf := make([]byte, 256)
		for {
			n, err := v.em.Read(buf)
			if n > 0 {
				v.send(buf[:n])
			}
			if err != nil {
				return
			}
		}
	}()
	return v
}

// send writes bytes to the program's input, as a terminal does when keys
// are typed (raw mode: enter is CR, ctrl+X is X&0x1f).
func (v *vterm) send(b []byte) {
	v.inMu.Lock()
	defer v.inMu.Unlock()
	_, _ = v.out.Write(b)
}

func (v *vterm) screen() string {
	v.mu.Lock()
	defer v.mu.Unlock()
	lines := strings.Split(v.em.String(), "\n")
	for i, l := range lines {
		lines[i] = strings.TrimRight(l, " ")
	}
	// The spinner's frame changes from run to run.
	return spinnerFrame.ReplaceAllString(strings.Join(lines, "\n"), "⠿")
}

var spinnerFrame = regexp.MustCompile(`[⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏]`)

// stable waits until the screen shows want and has not changed for a
// moment, and returns it.
func (v *vterm) stable(t *testing.T, want string) string {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	last, since := "", time.Now()
	for time.Now().Before(deadline) {
		s := v.screen()
		if s != last {
			last, since = s, time.Now()
		} else if strings.Contains(s, want) && time.Since(since) > 300*time.Millisecond {
			return s
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("the screen never settled showing %q:\n%s", want, last)
	return ""
}

func checkFrame(t *testing.T, name, got string) {
	t.Helper()
	got += "\n"
	path := filepath.Join("testdata", name+".golden")
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if got != string(want) {
		t.Errorf("frame %s differs from %s (run with -update and review the diff):\n%s", name, path, got)
	}
}

// TestGoldenFrames runs the whole program on a 100×30 virtual terminal and
// compares what it shows at each point with testdata/*.golden: an empty
// session, a turn with markdown, reasoning and tool cards, an inline
// approval of an edit with its diff, everything unfolded, a steer and a
// queued prompt during a slow tool.
func TestGoldenFrames(t *testing.T) {
	e := newEnv(t)
	if err := os.WriteFile(filepath.Join(e.dir, "greet.go"), []byte("package greet\n\nconst Hello = \"helo\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	open, wait := gate()
	e.model.Append(
		scripted.Call{Reply: scripted.Reply{
			Reasoning: []string{"The greeting is misspelled."},
			Text:      []string{"Let me look at `greet.go`."},
			ToolCalls: []scripted.ToolCall{{ID: "r1", Name: "read", Arguments: `{"file_path":"greet.go"}`}, {ID: "b1", Name: "bash", Arguments: `{"command":"echo checking && false"}`}},
			Usage:     &llm.Usage{Input: 2048, Output: 64, CacheRead: 1024},
		}},
		scripted.Call{Reply: scripted.Reply{ToolCalls: []scripted.ToolCall{{ID: "e1", Name: "edit", Arguments: `{"file_path":"greet.go","old_string":"\"helo\"","new_string":"\"hello\""}`}}}},
		scripted.Call{Reply: scripted.Reply{Text: []string{"Fixed:\n\n| file | change |\n|---|---|\n| greet.go | `helo` → `hello` |\n"}, Usage: &llm.Usage{Input: 3072, Output: 32, CacheRead: 2048}}},
		scripted.Call{Reply: scripted.Reply{ToolCalls: []scripted.ToolCall{{ID: "b2", Name: "bash", Arguments: `{"command":"echo slow"}`}}}, BeforeChunk: wait},
		scripted.Answer("All tests pass."),
		scripted.Answer("Docs updated."),
	)
	e.hooks.ToolPre = []agent.Hook[agent.ToolCallInfo, agent.ToolDecision]{
		func(ctx context.Context, in agent.ToolCallInfo, next func(context.Context, agent.ToolCallInfo) (agent.ToolDecision, error)) (agent.ToolDecision, error) {
			if in.Name == "edit" {
				return agent.ToolDecision{Kind: agent.Ask, Reason: "edits need approval"}, nil
			}
			return next(ctx, in)
		}}
	v := newVterm(100, 30)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	p, err := New(ctx, Config{Open: e.open, Theme: "plain", Now: func() time.Time { return time.Unix(1_700_000_000, 0) }, ApprovalGrace: -1},
		Options{Input: v.in, Output: v, Width: 100, Height: 30})
	if err != nil {
		t.Fatal(err)
	}
	ran := make(chan error, 1)
	go func() {
		_, err := p.Run()
		ran <- err
	}()
	keys := func(s string) { v.send([]byte(s)) }
	ctrl := func(c byte) { v.send([]byte{c & 0x1f}) }

	checkFrame(t, "01-empty", v.stable(t, "Ask rein…"))

	keys("fix the greeting")
	keys("\r")
	checkFrame(t, "02-approval", v.stable(t, "[y] allow once"))
	keys("y")
	checkFrame(t, "03-turn", v.stable(t, "Fixed"))

	ctrl('o')
	checkFrame(t, "04-unfolded", v.stable(t, "$ echo checking"))
	ctrl('o')

	keys("run the tests")
	keys("\r")
	v.stable(t, "› run the tests")
	keys("only the unit tests")
	ctrl('s')
	keys("then the docs")
	keys("\r")
	checkFrame(t, "05-steer-and-queue", v.stable(t, "⧗ queued (1): then the docs"))
	close(open)
	checkFrame(t, "06-after", v.stable(t, "Docs updated."))

	ctrl('c')
	select {
	case err := <-ran:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("ctrl+c did not end the program")
	}
}
