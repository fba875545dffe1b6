package jsonl

import (
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/reinhq/rein/session"
	"github.com/reinhq/rein/store"
)

// streamed returns what Stream passes and returns for session id, as
// event lines, and its error.
func streamed(s *Store, id string) (string, string, error) {
	var b []byte
	st, err := s.Stream(bg, id, store.StreamOptions{Piece: 100}, func(ev session.Event, _ session.Payload) error {
		b = ev.AppendLine(b)
		return nil
	})
	var r []byte
	if err != nil {
		return string(b), "", err
	}
	for _, ev := range st.Repair {
		r = ev.AppendLine(r)
	}
	return string(b), string(r), err
}

func lines(evs []session.Event) string {
	var b []byte
	for _, ev := range evs {
		b = ev.AppendLine(b)
	}
	return string(b)
}

// TestStreamAgreesWithLoad: Stream passes the stored events Load reads and
// returns the repair Load adds, for a whole session, one a crash left
// inside a turn, one with a torn final line and one whose final line is
// garbage; on a corrupt middle line or a seq gap both fail at the same line,
// Stream after passing the lines before it.
func TestStreamAgreesWithLoad(t *testing.T) {
	s := newStore(t)
	richSession(t, s, "p")
	w, ld, err := s.Open(bg, "p")
	if err != nil {
		t.Fatal(err)
	}
	turn, _ := ld.Log.Turn()
	l := ld.Log
	var open []session.Event
	for _, p := range []session.Payload{&session.TurnStart{Turn: turn + 1, Trigger: session.Trigger{Kind: session.TriggerSend}}, userMsg("u", "x"), &session.StepStart{Turn: turn + 1, Step: 1}} {
		open = append(open, event(t, l, p))
	}
	if err := w.Append(bg, open); err != nil {
		t.Fatal(err)
	}
	w.(*writer).abandon()
	good := mustRead(t, s.Path("p"))
	ends := lineEnds(good)
	// A chunk line naming another step.
	chunkAt := strings.Index(string(good), `"type":"assistant/chunk"`)
	chunkAt = strings.LastIndex(string(good[:chunkAt]), "\n") + 1
	chunkLine := string(good[chunkAt : chunkAt+strings.Index(string(good[chunkAt:]), "\n")+1])
	badChunk := strings.Replace(chunkLine, `"step":`, `"step":9`, 1)
	for name, content := range map[string]string{
		"crashed":   string(good),
		"torn":      string(good) + `{"seq":999,"type":"ses`,
		"garbage":   string(good) + "\x00\x00\x00\x00\n",
		"whole":     string(good[:ends[len(ends)-4]]),
		"corrupt":   string(good[:ends[5]]) + `{"seq":5,"type":"user/mes` + "\x00garbage\n" + string(good[ends[6]:]),
		"seq-gap":   string(good[:ends[5]]) + string(good[ends[6]:]),
		"invariant": string(good[:ends[2]]) + strings.Replace(string(good[ends[2]:ends[3]]), `"turn/start"`, `"turn/end"`, 1) + string(good[ends[3]:]),
		// A complete final line that does not parse is damage, not a torn
		// write; so are bytes that are not UTF-8 and a chunk of another
		// step.
		"edited":   string(good) + `{"seq":999,"type":"session/title","time":"x"}` + "\n",
		"not-utf8": string(good[:ends[5]]) + strings.Replace(string(good[ends[5]:ends[6]]), `"data":{`, `"data":{"`+"\xff"+`":0,`, 1) + string(good[ends[6]:]),
		"chunk":    string(good[:chunkAt]) + badChunk + string(good[chunkAt+len(chunkLine):]),
	} {
		t.Run(name, func(t *testing.T) {
			os.WriteFile(s.Path("p"), []byte(content), 0o600)
			evs, rep, err := streamed(s, "p")
			ld, lerr := s.Load(bg, "p", store.LoadOptions{})
			if (err == nil) != (lerr == nil) {
				t.Fatalf("stream: %v; load: %v", err, lerr)
			}
			if lerr != nil {
				var se, le *store.LineError
				if !errors.As(err, &se) || !errors.As(lerr, &le) || se.Line != le.Line {
					t.Fatalf("stream: %v; load: %v", err, lerr)
				}
				if n := strings.Count(evs, "\n"); n != le.Line-2 {
					t.Errorf("stream passed %d events before failing at line %d", n, le.Line)
				}
				return
			}
			stored := ld.Log.Events(0)[:ld.Log.Len()-int64(len(ld.Repair))]
			if evs != lines(stored) || rep != lines(ld.Repair) {
				t.Errorf("stream differs from load:\n%s%s\nload:\n%s%s", evs, rep, lines(stored), lines(ld.Repair))
			}
			if name == "crashed" && rep == "" {
				t.Errorf("no repair of the open turn")
			}
		})
	}
}

// TestLastForkPoint: the last event between turns; before the open turn
// or between-turn compaction otherwise; the same with or without the
// sidecar; and Fork accepts it.
func TestLastForkPoint(t *testing.T) {
	s := newStore(t)
	richSession(t, s, "p")
	ld, _ := s.Load(bg, "p", store.LoadOptions{})
	last := ld.Log.Len() - 1
	check := func(step string, want, wantLast int64) {
		t.Helper()
		for _, idx := range []bool{true, false} {
			if !idx {
				os.Rename(s.idxPath("p"), s.idxPath("p")+".away")
			}
			fp, err := s.LastForkPoint(bg, "p")
			if !idx {
				os.Rename(s.idxPath("p")+".away", s.idxPath("p"))
			}
			if err != nil || fp.At != want || fp.Last != wantLast || fp.Header.ID != "p" {
				t.Fatalf("%s (sidecar %v): %+v, %v; want at %d of %d", step, idx, fp, err, want, wantLast)
			}
		}
		if _, err := s.Fork(bg, "p", want, session.Header{ID: "c"}); err != nil {
			t.Fatalf("%s: Fork at %d: %v", step, want, err)
		}
		s.Delete(bg, "c")
	}
	check("between turns", last, last)

	w, ld, _ := s.Open(bg, "p")
	l := ld.Log
	turn, _ := l.Turn()
	start := event(t, l, &session.TurnStart{Turn: turn + 1, Trigger: session.Trigger{Kind: session.TriggerSend}})
	w.Append(bg, []session.Event{start, event(t, l, userMsg("u", "x"))})
	check("inside a turn", start.Seq-1, start.Seq+1)
	w.Append(bg, []session.Event{event(t, l, &session.TurnEnd{Turn: turn + 1, Reason: session.Reason{Kind: session.ReasonCompleted}})})
	comp := event(t, l, &session.CompactionStart{ID: "c9", Reason: session.CompactManual})
	w.Append(bg, []session.Event{comp, event(t, l, ctxMsg(99))})
	check("inside a between-turn compaction", comp.Seq-1, comp.Seq+1)
	w.Close()
	if _, err := s.LastForkPoint(bg, "nope"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("unknown session: %v", err)
	}
}
