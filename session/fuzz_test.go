package session

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
	"time"
)

// FuzzParseLine: ParseLine never panics, and on a valid JSON line the fast
// path agrees with the encoding/json fallback.
func FuzzParseLine(f *testing.F) {
	tm := time.Date(2026, 11, 30, 10, 0, 3, 512e6, time.UTC)
	for i, p := range validLog() {
		ev, err := NewEvent(int64(i), tm, p)
		if err != nil {
			f.Fatal(err)
		}
		ev.Ignorable = i%3 == 0
		line := ev.AppendLine(nil)
		f.Add(line[:len(line)-1])
	}
	f.Add([]byte(`{"seq":0,"type":"x","time":"2026-11-30T10:00:03.512Z","data":{},"data":{"a":1}}`))
	f.Add([]byte(`{"seq":0,"type":"","time":"2026-11-30T10:00:03.512Z","data":{}}`))
	f.Add([]byte(`{"seq":0,"type":"x","time":"2026-02-30T10:00:03.512Z","data":{}}`))
	f.Add([]byte(`{"seq":0,"type":"x","time":"2026-12-31T23:59:60.000Z","data":{}}`))
	f.Add([]byte("{\"seq\":0,\"type\":\"\xff\",\"time\":\"2026-11-30T10:00:03.512Z\",\"data\":{}}"))
	f.Add([]byte(`{"seq":0,"type":"0","time":"2026-11-30T10:00:03.512Z","data":{"":"&"}}`))
	f.Add([]byte(`{"type":"turn/start","seq":1,"time":"2026-11-30T10:00:03Z","data":{"turn":1}}`))
	f.Fuzz(func(t *testing.T, line []byte) {
		ev, err := ParseLine(line)
		fast, ok := parsePrefix(line)
		if !ok || !json.Valid(line) {
			return
		}
		if err != nil {
			t.Fatalf("fast path accepted what ParseLine refused: %v", err)
		}
		// Same object, keys in another order: ParseLine must fall back.
		var m map[string]json.RawMessage
		if err := json.Unmarshal(line, &m); err != nil {
			return
		}
		other, err := json.Marshal(m) // sorted keys: "data" first
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := parsePrefix(other); ok {
			t.Fatalf("reordered line took the fast path: %s", other)
		}
		slow, err := ParseLine(other)
		if err != nil {
			t.Fatalf("fallback refused a line the fast path accepted: %v\n%s\n%s", err, line, other)
		}
		if fast.Seq != slow.Seq || fast.Type != slow.Type || !fast.Time.Equal(slow.Time) || fast.Ignorable != slow.Ignorable || !jsonEqual(fast.Data, slow.Data) {
			t.Fatalf("fast %+v\nslow %+v\nline %s", fast, slow, line)
		}
		if ev.Seq != fast.Seq || !bytes.Equal(ev.Data, fast.Data) {
			t.Fatal("ParseLine did not take the fast path")
		}
	})
}

// jsonEqual compares two JSON texts by value (json.Marshal re-escapes
// strings, so bytes may differ).
func jsonEqual(a, b []byte) bool {
	decode := func(b []byte) (any, bool) {
		d := json.NewDecoder(bytes.NewReader(b))
		d.UseNumber()
		var v any
		return v, d.Decode(&v) == nil
	}
	x, ok1 := decode(a)
	y, ok2 := decode(b)
	return ok1 && ok2 && reflect.DeepEqual(x, y)
}
