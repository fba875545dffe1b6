package wire

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// The oracle of every test here is the general decoder: encoding/json over
// the same bytes, which must also be valid UTF-8.

func general(b []byte, v any) bool {
	return utf8.Valid(b) && json.Unmarshal(b, v) == nil
}

// FuzzValid: Valid accepts exactly what json.Valid accepts in valid UTF-8
// (but for nesting deeper than maxDepth, which it leaves to the general
// decoder).
func FuzzValid(f *testing.F) {
	for _, s := range []string{`{}`, `[1,2,{"a":"b\n"}]`, ` {"a" : [ true , false , null ] } `, `-0.5e+7`, `01`, `1.`, `"\u12"`, `"\ud800"`,
		"\"\x01\"", `{"a":}`, `[1,]`, `"é\xff"`, `tru`, `{"a":1}}`, "{\"\xed\xa0\x80\":1}", `"\uD83D\uDE00"`, "[\"\xf4\x90\x80\x80\"]"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got := Valid([]byte(s))
		want := json.Valid([]byte(s)) && utf8.ValidString(s)
		if got && !want {
			t.Fatalf("Valid(%q) = true, the general decoder refuses it", s)
		}
		if want && !got && strings.Count(s, "[")+strings.Count(s, "{") < maxDepth {
			t.Fatalf("Valid(%q) = false, the general decoder takes it", s)
		}
	})
}

// FuzzStr: a string Str takes, the general decoder takes with the same
// value, also when loading (aliased or arena strings); StrLen agrees.
func FuzzStr(f *testing.F) {
	for _, s := range []string{`"a"`, `"a\"b\\c\/\b\f\n\r\t"`, `"\u00e9\ud83d\ude00"`, `"\ud800"`, `"\ud800\u0041"`, "\"é\xff\"", "\"\x1f\"", `null`, `"unterminated`, `"x"y`, `"\u12g4"`,
		`"` + strings.Repeat("long run ", 40) + `\n"`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		var want string
		ok := general([]byte(s), &want)
		for _, a := range []*Arena{nil, new(Arena)} {
			d := NewDec([]byte(s), a)
			got := d.Str()
			done := d.Done()
			d.Release()
			if done && (!ok || got != want) {
				t.Fatalf("Str(%q) = %q; general: %q, %v", s, got, want, ok)
			}
		}
		d := Dec{b: []byte(s)}
		d.SkipStr()
		if d.Done() && !ok {
			t.Fatalf("SkipStr takes %q, the general decoder does not", s)
		}
		if ok && s[0] == '"' && StrLen([]byte(s)) != len(s) && !d.Done() {
			t.Fatalf("StrLen(%q) = %d, want %d", s, StrLen([]byte(s)), len(s))
		}
	})
}

// FuzzInts: Int and Int64s give what encoding/json gives, or give up.
func FuzzInts(f *testing.F) {
	for _, s := range []string{`0`, `-12`, `01`, `1.0`, `1e3`, `null`, `999999999999999`, `9999999999999999`, `[1,2,3]`, `[]`, `[ 1 , 2 ]`, `[12345678,0]`, `[01]`, `[1,]`, `null`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		var wi int
		oki := general([]byte(s), &wi)
		d := Dec{b: []byte(s)}
		gi := d.Int()
		if d.Done() && (!oki || gi != wi) {
			t.Fatalf("Int(%q) = %d; general %d, %v", s, gi, wi, oki)
		}
		var ws []int64
		oks := general([]byte(s), &ws)
		d = Dec{b: []byte(s)}
		gs := d.Int64s()
		if d.Done() && (!oks || !reflect.DeepEqual(gs, ws)) {
			t.Fatalf("Int64s(%q) = %#v; general %#v, %v", s, gs, ws, oks)
		}
	})
}

// TestObj: a plan follows encoding/json: null leaves a scalar or struct
// as it is and empties a slice or pointer; a key it does not know (or
// knows only case-folded) or a repeated key makes it give up.
func TestObj(t *testing.T) {
	type inner struct {
		A int `json:"a"`
	}
	type obj struct {
		S string          `json:"s"`
		N int             `json:"n"`
		B bool            `json:"b"`
		L []int64         `json:"l"`
		R json.RawMessage `json:"r"`
		P *int            `json:"p"`
		I inner           `json:"i"`
		C []inner         `json:"c"`
	}
	o := ObjOf[obj](Custom("c", func(d *Dec, v *obj) { v.C = List(d, ObjOf[inner](), 0) }))
	seven := 7
	start := func() obj { return obj{S: "keep", N: 7, B: true, L: []int64{9}, P: &seven, I: inner{3}} }
	dec := func(s string) (obj, bool) {
		v := start()
		d := Dec{b: []byte(s)}
		o.Decode(&d, &v)
		return v, d.Done()
	}
	for _, s := range []string{`{"s":"a","n":2,"p":3,"i":{"a":4},"c":[{"a":1},{}]}`, `{"s":null,"n":null,"b":null,"l":null,"r":null,"p":null,"i":null,"c":null}`,
		`{"l":[],"c":[]}`, `{"r":{"x":[1,"y"]}}`, `null`, `{}`, `{"i":{}}`} {
		got, ok := dec(s)
		want := start()
		if err := json.Unmarshal([]byte(s), &want); err != nil || !ok {
			t.Fatalf("%s: plan %v, json %v", s, ok, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: plan %#v, json %#v", s, got, want)
		}
	}
	for _, s := range []string{`{"S":"a"}`, `{"x":1}`, `{"s":1}`, `{"n":"1"}`, `{"s":"a",}`, `{"s":"a"} x`, `{"s":"a","s":"b"}`, `{"l":[1],"l":[]}`, `{"i":{"a":1,"a":2}}`, `{"i":[]}`} {
		if _, ok := dec(s); ok {
			t.Errorf("%s: the plan took it", s)
		}
	}
	// Lazy fields are validated only when loading (or checking), Text
	// fields only when checking.
	type lz struct {
		S string `json:"s"`
		T string `json:"t"`
	}
	lo := ObjOf[lz](Lazy("s"), Text("t"))
	for _, tc := range []struct {
		mode      string
		in        string
		ok        bool
		s, tfield string
	}{
		{"plain", `{"s":"a","t":"b"}`, true, "a", "b"},
		{"log", `{"s":"a","t":"b"}`, true, "", "b"},
		{"check", `{"s":"a","t":"b"}`, true, "", ""},
		{"log", `{"s":5}`, false, "", ""},
		{"check", `{"t":5}`, false, "", ""},
	} {
		var v lz
		d := Dec{b: []byte(tc.in)}
		switch tc.mode {
		case "log":
			d.a = new(Arena)
		case "check":
			d.Check()
		}
		lo.Decode(&d, &v)
		if d.Done() != tc.ok || (tc.ok && (v.S != tc.s || v.T != tc.tfield)) {
			t.Errorf("%s %s: %v %+v", tc.mode, tc.in, d.Done(), v)
		}
	}
}

// envelope is the general decoder's reading of a line's envelope.
type envelope struct {
	Seq       *int64          `json:"seq"`
	Type      string          `json:"type"`
	Time      string          `json:"time"`
	Ignorable bool            `json:"ignorable"`
	Data      json.RawMessage `json:"data"`
}

func sampleLines() []string {
	return []string{
		`{"seq":12,"type":"user/message","time":"2026-11-30T10:00:03.512Z","data":{"id":"m1"}}`,
		`{"seq":0,"type":"x/y","time":"2026-11-30T10:00:03.512Z","ignorable":true,"data":{"a":[1,{"b":"}"}]}}`,
		`{"seq":7,"type":"assistant/chunk","time":"2026-02-28T23:59:59.999Z","data":{"turn":3,"step":1,"delta":{"text":"a\"b\\\n é"}}}`,
		`{"seq":8,"type":"assistant/chunk","time":"2026-02-28T23:59:59.999Z","data":{"turn":3,"step":12,"delta":{"reasoning":"\ud83d\ude00"}}}`,
		`{"seq":9,"type":"assistant/chunk","time":"2026-02-28T23:59:59.999Z","data":{"turn":3,"step":1,"delta":{"toolCall":{"index":0}}}}`,
		`{"seq":01,"type":"x","time":"2026-11-30T10:00:03.512Z","data":{}}`,
		`{"seq":1,"type":"x","time":"2026-02-30T10:00:03.512Z","data":{}}`,
		`{"seq":1,"type":"x","time":"2026-12-31T23:59:60.000Z","data":{}}`,
		`{"seq":1,"type":"x","time":"2026-11-30T10:00:03.512Z","data":{},"data":{"a":1}}`,
	}
}

// FuzzPrefix: a line Prefix takes (with valid data), the general decoder
// takes, with the same envelope.
func FuzzPrefix(f *testing.F) {
	for _, s := range sampleLines() {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, line string) {
		var tc TimeCache
		e, ok := Prefix([]byte(line), &tc)
		if !ok || !Valid(e.Data) {
			return
		}
		var w envelope
		if !general([]byte(line), &w) || w.Seq == nil {
			t.Fatalf("Prefix took %q, the general decoder refuses it", line)
		}
		tm, err := time.Parse(time.RFC3339Nano, w.Time)
		if err != nil || *w.Seq != e.Seq || w.Type != string(e.Type) || tm.UnixMilli() != e.Ms || tm.Nanosecond()%1e6 != 0 ||
			w.Ignorable != e.Ignorable || !bytes.Equal(w.Data, e.Data) {
			t.Fatalf("Prefix %+v, general %+v (%v) for %q", e, w, err, line)
		}
	})
}

// chunkData is the general decoder's reading of chunk data, as far as
// ChunkLine reads it.
type chunkData struct {
	Turn, Step int
	Delta      map[string]any
}

// FuzzChunkLine: a chunk ChunkLine takes, the general decoder takes, with
// the same envelope, turn and step, and data where ChunkLine says. (The
// session package checks the payload against its own types.)
func FuzzChunkLine(f *testing.F) {
	for _, s := range sampleLines() {
		f.Add(s + "\n" + s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		var tc TimeCache
		d := []byte(in)
		for pos := 0; pos < len(d); {
			end := bytes.IndexByte(d[pos:], '\n')
			if end < 0 {
				end = len(d)
			} else {
				end += pos
			}
			c, next := ChunkLine(d, pos, &tc)
			if next > 0 {
				line := d[pos:end]
				if next != min(end+1, len(d)) {
					t.Fatalf("next %d, line ends at %d", next, end)
				}
				var w envelope
				var cd chunkData
				if !general(line, &w) || w.Type != "assistant/chunk" || w.Ignorable || !general(w.Data, &cd) || len(cd.Delta) != 1 {
					t.Fatalf("ChunkLine took %q, the general decoder reads it otherwise", line)
				}
				tm, _ := time.Parse(time.RFC3339Nano, w.Time)
				if *w.Seq != c.Seq || tm.UnixMilli() != c.Ms || int(c.Turn) != cd.Turn || int(c.Step) != cd.Step || !bytes.Equal(d[c.Off:c.Off+c.Len], w.Data) {
					t.Fatalf("ChunkLine %+v, general %+v %+v for %q", c, w, cd, line)
				}
			}
			pos = end + 1
		}
	})
}

func TestTimes(t *testing.T) {
	var tc TimeCache
	base := time.Date(2026, 11, 30, 23, 58, 0, 0, time.UTC)
	for i := range 5000 {
		tm := base.Add(time.Duration(i) * 37 * time.Millisecond)
		s := tm.Format(TimeLayout)
		ms, ok := tc.Ms([]byte(s))
		if !ok || ms != tm.UnixMilli() {
			t.Fatalf("Ms(%s) = %d %v, want %d", s, ms, ok, tm.UnixMilli())
		}
	}
	for _, s := range []string{"2026-02-29T10:00:00.000Z", "2026-13-01T10:00:00.000Z", "2026-12-31T23:59:60.000Z", "2026-11-30T10:00:00.000+", "2026-11-30 10:00:00.000Z"} {
		if _, ok := tc.Ms([]byte(s)); ok {
			t.Errorf("Ms(%s) took it", s)
		}
	}
}

func TestPlainLen(t *testing.T) {
	slow := func(b []byte) int {
		for i, c := range b {
			if c < 0x20 || c == '"' || c == '\\' || c >= 0x80 {
				return i
			}
		}
		return len(b)
	}
	r := rand.New(rand.NewPCG(1, 2))
	alphabet := []byte("ab \"\\\x00\x1f\x20\x7f\x80\xff~!#")
	for range 20000 {
		b := make([]byte, r.IntN(40))
		for i := range b {
			if r.IntN(4) == 0 {
				b[i] = alphabet[r.IntN(len(alphabet))]
			} else {
				b[i] = byte(r.IntN(256))
			}
		}
		if got, want := PlainLen(b), slow(b); got != want {
			t.Fatalf("PlainLen(%q) = %d, want %d", b, got, want)
		}
	}
}

func TestSWARDigits(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for range 100000 {
		n := r.IntN(10)
		var b []byte
		for range n {
			b = append(b, byte('0'+r.IntN(10)))
		}
		for len(b) < 8+r.IntN(3) {
			b = append(b, []byte(",]}x/:\x00\xff9")[r.IntN(9)])
		}
		want := 0
		for want < len(b) && b[want] >= '0' && b[want] <= '9' {
			want++
		}
		got := Digits8(b)
		if want >= 8 || len(b) < 8 {
			want = 0
		}
		if got != want {
			t.Fatalf("Digits8(%q) = %d, want %d", b, got, want)
		}
		if got > 0 {
			x, _ := strconv.ParseUint(string(b[:got]), 10, 64)
			if v := Swar8(b, got); v != x {
				t.Fatalf("Swar8(%q, %d) = %d, want %d", b, got, v, x)
			}
		}
	}
}

// TestUTF8Len: the in-line UTF-8 check agrees with unicode/utf8 on every
// lead and second byte, with third and fourth bytes on the boundaries.
func TestUTF8Len(t *testing.T) {
	edge := []byte{0x00, 0x7f, 0x80, 0x9f, 0xa0, 0xbf, 0xc0, 0xff}
	for c0 := 0x80; c0 < 0x100; c0++ {
		for c1 := 0; c1 < 0x100; c1++ {
			for _, c2 := range edge {
				for _, c3 := range edge {
					for _, b := range [][]byte{{byte(c0), byte(c1), c2, c3}, {byte(c0), byte(c1)}, {byte(c0)}} {
						r, n := utf8.DecodeRune(b)
						want := n
						if r == utf8.RuneError && n == 1 {
							want = 0
						}
						if got := utf8Len(b, 0); got != want {
							t.Fatalf("utf8Len(% x) = %d, want %d", b, got, want)
						}
					}
				}
			}
		}
	}
}
