package session

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/reinhq/rein/session/internal/wire"
)

func TestParseLineFastPath(t *testing.T) {
	line := `{"seq":12,"type":"user/message","time":"2026-11-30T10:00:03.512Z","data":{"id":"m1","content":[{"type":"text","text":"hi"}],"source":{"kind":"user"}}}`
	ev, err := ParseLine([]byte(line))
	if err != nil {
		t.Fatal(err)
	}
	want := Event{Seq: 12, Type: TypeUserMessage, Time: time.Date(2026, 11, 30, 10, 0, 3, 512e6, time.UTC),
		Data: json.RawMessage(`{"id":"m1","content":[{"type":"text","text":"hi"}],"source":{"kind":"user"}}`)}
	if !reflect.DeepEqual(ev, want) {
		t.Fatalf("got %+v\nwant %+v", ev, want)
	}
	if _, ok := wire.Prefix([]byte(line), nil); !ok {
		t.Fatal("rein's own line did not take the fast path")
	}
	p := ev.MustDecode().(*UserMessage)
	if p.ID != "m1" || p.Source.Kind != SourceUser {
		t.Fatalf("payload %+v", p)
	}
}

func TestParseLineFallback(t *testing.T) {
	// Another tool's field order, whitespace and extra fields.
	line := `{ "type": "turn/start", "data": {"turn": 3, "trigger": {"kind": "send"}}, "extra": 1, "time": "2026-11-30T10:00:03.5Z", "seq": 7, "ignorable": true }`
	if _, ok := wire.Prefix([]byte(line), nil); ok {
		t.Fatal("reordered line took the fast path")
	}
	ev, err := ParseLine([]byte(line))
	if err != nil {
		t.Fatal(err)
	}
	if ev.Seq != 7 || ev.Type != TypeTurnStart || !ev.Ignorable || !ev.Time.Equal(time.Date(2026, 11, 30, 10, 0, 3, 500e6, time.UTC)) {
		t.Fatalf("got %+v", ev)
	}
	if ts := ev.MustDecode().(*TurnStart); ts.Turn != 3 || ts.Trigger.Kind != TriggerSend {
		t.Fatalf("payload %+v", ts)
	}
	for _, bad := range []string{``, `{`, `[]`, `{"type":"x","time":"2026-11-30T10:00:03.512Z","data":{}}`, `{"seq":1,"time":"2026-11-30T10:00:03.512Z","data":{}}`, `{"seq":1,"type":"x","time":"yesterday","data":{}}`} {
		if _, err := ParseLine([]byte(bad)); !errors.Is(err, ErrCorrupt) {
			t.Errorf("ParseLine(%q) = %v, want ErrCorrupt", bad, err)
		}
	}
}

func TestAppendLineRoundTrip(t *testing.T) {
	tm := time.Date(2026, 11, 30, 10, 0, 3, 512_345_678, time.FixedZone("x", 3600))
	for _, p := range validLog() {
		ev, err := NewEvent(41, tm, p)
		if err != nil {
			t.Fatal(err)
		}
		for _, ign := range []bool{false, true} {
			ev.Ignorable = ign
			line := ev.AppendLine(nil)
			if !strings.HasSuffix(string(line), "}\n") || strings.Count(string(line), "\n") != 1 {
				t.Fatalf("line %q", line)
			}
			if !json.Valid(line) {
				t.Fatalf("line not JSON: %s", line)
			}
			got, err := ParseLine(line[:len(line)-1])
			if err != nil {
				t.Fatal(err)
			}
			if _, ok := wire.Prefix(line[:len(line)-1], nil); !ok {
				t.Fatalf("own line missed the fast path: %s", line)
			}
			if got.Seq != 41 || got.Type != p.EventType() || !got.Time.Equal(tm.Truncate(time.Millisecond)) || got.Ignorable != ign || string(got.Data) != string(ev.Data) {
				t.Fatalf("round trip %+v\nfrom %+v", got, ev)
			}
			if got.Time.Location() != time.UTC {
				t.Fatal("time not UTC")
			}
			if !reflect.DeepEqual(got.MustDecode(), p) {
				t.Fatalf("payload %+v\nwant %+v", got.MustDecode(), p)
			}
		}
	}
}

func TestUnknownType(t *testing.T) {
	line := []byte(`{"seq":0,"type":"future/thing","time":"2026-11-30T10:00:03.512Z","data":{"x":1}}`)
	ev, err := ParseLine(line)
	if err != nil {
		t.Fatal(err)
	}
	if ev.Type.Known() {
		t.Fatal("future/thing known")
	}
	if _, err := ev.Decode(); !errors.Is(err, ErrUnknownType) {
		t.Fatalf("Decode: %v", err)
	}
	l := NewLog(Header{ID: "s"})
	if err := l.AppendEvent(ev); !errors.Is(err, ErrUnknownType) || l.Len() != 0 {
		t.Fatalf("AppendEvent unknown: %v, Len %d", err, l.Len())
	}
	if vs := Check([]Event{ev}); len(vs) != 1 || vs[0].Rule != RuleUnknownType {
		t.Fatalf("Check: %v", vs)
	}

	ign := []byte(`{"seq":0,"type":"future/thing","time":"2026-11-30T10:00:03.512Z","ignorable":true,"data":{"x":1}}`)
	if ev, err = ParseLine(ign); err != nil || !ev.Ignorable {
		t.Fatalf("ParseLine ignorable: %+v, %v", ev, err)
	}
	if err := l.AppendEvent(ev); err != nil || l.Len() != 1 || len(l.Messages()) != 0 {
		t.Fatalf("AppendEvent ignorable: %v", err)
	}
	if vs := Check([]Event{ev}); len(vs) != 0 {
		t.Fatalf("Check ignorable: %v", vs)
	}
	// An ignorable event keeps its line byte for byte.
	if got := ev.AppendLine(nil); string(got) != string(ign)+"\n" {
		t.Fatalf("AppendLine %s", got)
	}
}

func TestLogAppendClampsTime(t *testing.T) {
	l := NewLog(Header{ID: "s"})
	later := t0.Add(time.Second + 1234567)
	ev := mustAppendAt(t, l, later, um("a", "x"))
	if !ev.Time.Equal(later.Truncate(time.Millisecond)) || ev.Time.Location() != time.UTC {
		t.Fatalf("time %v", ev.Time)
	}
	ev2 := mustAppendAt(t, l, t0, um("b", "y")) // earlier: clamped
	if !ev2.Time.Equal(ev.Time) {
		t.Fatalf("time %v not clamped to %v", ev2.Time, ev.Time)
	}
	if !l.LastTime().Equal(ev.Time) || !l.Event(1).Time.Equal(ev.Time) {
		t.Fatal("stored time not clamped")
	}
	if vs := Check(l.Events(0)); len(vs) != 0 {
		t.Fatal(vs)
	}
	// AppendEvent does not clamp: a decreasing time is refused.
	bad, _ := NewEvent(2, t0, um("c", "z"))
	if err := l.AppendEvent(bad); !IsInvariant(err) || rules(err)[0] != RuleTime {
		t.Fatalf("AppendEvent: %v", err)
	}
}

func mustAppendAt(t *testing.T, l *Log, at time.Time, p Payload) Event {
	t.Helper()
	ev, err := l.Append(at, p)
	if err != nil {
		t.Fatal(err)
	}
	return ev
}

func TestLogRefusesAndStaysUnchanged(t *testing.T) {
	l := newLog(t, ctx("c", "x"), ts(1), um("u", "p"), ss(1, 1), am(1, 1, "", "k1"))
	before, msgs, n := l.Messages(), len(l.Messages()), l.Len()
	_, err := l.Append(l.LastTime(), um("u2", "too early")) // inside the batch
	if !IsInvariant(err) || !errors.Is(err, ErrInvariant) {
		t.Fatalf("Append: %v", err)
	}
	var ie *InvariantError
	if !errors.As(err, &ie) || ie.Violations[0].Rule != RuleToolAdjacency || ie.Violations[0].Seq != n {
		t.Fatalf("violations %+v", ie)
	}
	if !strings.Contains(err.Error(), "tool-adjacency") {
		t.Fatalf("message %q", err)
	}
	if l.Len() != n || len(l.Messages()) != msgs || &before[0] != &l.Messages()[0] {
		t.Fatal("log changed")
	}
	// The state is as before: the batch can still be answered and closed.
	mustAppend(t, l, tres(1, 1, "k1"))
	mustAppend(t, l, se(1, 1))
	mustAppend(t, l, te(1))
	if vs := Check(l.Events(0)); len(vs) != 0 {
		t.Fatal(vs)
	}
	// Wrong seq through AppendEvent.
	ev, _ := NewEvent(99, l.LastTime(), um("x", "y"))
	if err := l.AppendEvent(ev); !IsInvariant(err) {
		t.Fatalf("AppendEvent seq: %v", err)
	}
}
