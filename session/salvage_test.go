package session

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/reinhq/rein/llm"
)

// salvageSession is a session of 3 turns, each with a prompt, a step of
// four chunks and a message, and an out-of-turn context after turn 1, as
// lines. It returns the lines and the seqs of turn 2's chunks.
func salvageSession(t *testing.T) ([]string, []int64) {
	l := NewLog(Header{ID: "x"})
	at := t0
	var lines []string
	var chunks []int64
	add := func(p Payload) int64 {
		at = at.Add(time.Second)
		ev, err := l.Append(at, p)
		if err != nil {
			t.Fatal(err)
		}
		lines = append(lines, string(ev.AppendLine(nil)))
		return ev.Seq
	}
	for turn := 1; turn <= 3; turn++ {
		add(&TurnStart{Turn: turn, Trigger: Trigger{Kind: TriggerSend}})
		add(um(fmt.Sprintf("u%d", turn), "prompt"))
		add(ss(turn, 1))
		var seqs []int64
		for k := range 4 {
			seqs = append(seqs, add(chunk(turn, 1, fmt.Sprintf("w%d ", k))))
		}
		m := am(turn, 1, "w0 w1 w2 w3 ")
		m.ChunkSeqs = seqs
		add(m)
		add(se(turn, 1))
		add(te(turn))
		if turn == 1 {
			add(ctx("c", "between"))
		}
		if turn == 2 {
			chunks = seqs
		}
	}
	return lines, chunks
}

func salvage(t *testing.T, lines []string) (*Log, []Loss) {
	t.Helper()
	l := NewLog(Header{ID: "x"})
	losses := l.Salvage([]byte(strings.Join(lines, "")), 2)
	if vs := Check(l.Events(0)); len(vs) > 0 {
		t.Fatalf("salvaged log breaks the invariant: %v", vs)
	}
	return l, losses
}

func TestSalvageTombstones(t *testing.T) {
	orig, chunks := salvageSession(t)
	ref := NewLog(Header{ID: "x"})
	if err := ref.AppendLines([]byte(strings.Join(orig, ""))); err != nil {
		t.Fatal(err)
	}
	c := int(chunks[1]) // a chunk of turn 2, cited by its message
	for name, damage := range map[string]func(ls []string) []string{
		"not JSON":   func(ls []string) []string { ls[c] = ls[c][:40] + "\n"; return ls },
		"not UTF-8":  func(ls []string) []string { ls[c] = strings.Replace(ls[c], "w1", "w\xff", 1); return ls },
		"wrong turn": func(ls []string) []string { ls[c] = strings.Replace(ls[c], `"turn":2`, `"turn":1`, 1); return ls },
		"wrong step": func(ls []string) []string { ls[c] = strings.Replace(ls[c], `"step":1`, `"step":2`, 1); return ls },
		"garbled seq": func(ls []string) []string {
			ls[c] = strings.Replace(ls[c], fmt.Sprintf(`"seq":%d`, c), `"seq":9999`, 1)
			return ls
		},
		"line deleted":   func(ls []string) []string { return append(ls[:c:c], ls[c+1:]...) },
		"lines merged":   func(ls []string) []string { ls[c] = strings.TrimSuffix(ls[c], "\n"); return ls },
		"two damaged":    func(ls []string) []string { ls[c], ls[c+2] = "garbage\n", "{}\n"; return ls },
		"two runs apart": func(ls []string) []string { ls[c-1], ls[c+1] = "x\n", "y\n"; return ls },
	} {
		t.Run(name, func(t *testing.T) {
			l, losses := salvage(t, damage(append([]string(nil), orig...)))
			if l.Len() != ref.Len() {
				t.Fatalf("kept %d events, want all %d: %v", l.Len(), ref.Len(), losses)
			}
			if len(losses) == 0 {
				t.Fatal("no loss reported")
			}
			for _, x := range losses {
				if x.Tombstones == 0 || x.Err == nil {
					t.Errorf("loss %v is not a tombstone", x)
				}
				for s := x.Seq; s < x.Seq+int64(x.Tombstones); s++ {
					ev := l.Event(s)
					p := ev.MustDecode().(*AssistantChunk)
					if ev.Type != TypeAssistantChunk || p.Lost == nil || p.Turn != 2 || p.Step != 1 || p.Delta != (llm.Delta{}) || !slicesContain(chunks, s) {
						t.Errorf("seq %d: %s %+v, want a tombstone of turn 2's chunk", s, ev.Type, p)
					}
				}
			}
			// Nothing the model sees changed; the other events are as
			// they were.
			if !reflect.DeepEqual(l.Messages(), ref.Messages()) {
				t.Errorf("projection changed")
			}
			for s := range ref.Len() {
				if e := l.Event(s); !bytes.Equal(e.AppendLine(nil), ref.Event(s).AppendLine(nil)) && e.Type != TypeAssistantChunk {
					t.Errorf("seq %d changed: %s", s, e.AppendLine(nil))
				}
			}
		})
	}
}

func slicesContain(s []int64, x int64) bool {
	for _, v := range s {
		if v == x {
			return true
		}
	}
	return false
}

// TestSalvageCuts: a damaged line that is not provably inessential cuts
// the log there, and the loss says which lines went and why.
func TestSalvageCuts(t *testing.T) {
	orig, chunks := salvageSession(t)
	um := 0
	for i, ln := range orig {
		if strings.Contains(ln, `"u2"`) {
			um = i
		}
	}
	for name, tc := range map[string]struct {
		line   int
		damage func(string) string
		kind   error
	}{
		"user message not JSON":  {um, func(ln string) string { return ln[:30] + "\n" }, ErrCorrupt},
		"user message not UTF-8": {um, func(ln string) string { return strings.Replace(ln, "prompt", "pr\xc3\x28mpt", 1) }, ErrCorrupt},
		"chunk after message":    {int(chunks[3]) + 1, func(ln string) string { return ln[:20] + "\n" }, ErrCorrupt},
		"step number":            {int(chunks[0]) - 1, func(ln string) string { return strings.Replace(ln, `"step":1`, `"step":3`, 1) }, ErrInvariant},
	} {
		t.Run(name, func(t *testing.T) {
			ls := append([]string(nil), orig...)
			ls[tc.line] = tc.damage(ls[tc.line])
			l, losses := salvage(t, ls)
			if l.Len() != int64(tc.line) || len(losses) != 1 {
				t.Fatalf("kept %d events (want %d), losses %v", l.Len(), tc.line, losses)
			}
			x := losses[0]
			if x.Line != tc.line+2 || x.Lines != len(ls)-tc.line || x.Seq != int64(tc.line) || x.Tombstones != 0 || !errors.Is(x.Err, tc.kind) {
				t.Errorf("loss %+v (%v), want lines %d.. of %d from seq %d, %v", x, x, tc.line+2, len(ls)+1, tc.line, tc.kind)
			}
			if !strings.Contains(x.String(), fmt.Sprintf("line %d", tc.line+2)) {
				t.Errorf("loss says %q", x)
			}
		})
	}
}

// TestSalvageIgnorable: a damaged line marked ignorable, of a type this
// reader does not know, becomes a tombstone of its type; one of a known
// type does not.
func TestSalvageIgnorable(t *testing.T) {
	orig, _ := salvageSession(t)
	i := 0 // the out-of-turn context after turn 1
	for k, ln := range orig {
		if strings.Contains(ln, `"between"`) {
			i = k
		}
	}
	ls := append([]string(nil), orig...)
	ls[i] = fmt.Sprintf(`{"seq":%d,"type":"x/note","time":"2026-11-30T10:00:09.000Z","ignorable":true,"data":{"a":`+"\n", i)
	l, losses := salvage(t, ls)
	if l.Len() != int64(len(ls)) || len(losses) != 1 || losses[0].Tombstones != 1 {
		t.Fatalf("kept %d of %d, losses %v", l.Len(), len(ls), losses)
	}
	ev := l.Event(int64(i))
	if ev.Type != "x/note" || !ev.Ignorable || !strings.Contains(string(ev.Data), fmt.Sprintf(`"lost":{"line":%d,`, i+2)) {
		t.Errorf("tombstone %s", ev.AppendLine(nil))
	}
	ls[i] = strings.Replace(ls[i], "x/note", "user/message", 1)
	l, losses = salvage(t, ls)
	if l.Len() != int64(i) || losses[0].Tombstones != 0 {
		t.Errorf("known type: kept %d, losses %v", l.Len(), losses)
	}
}
