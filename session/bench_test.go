package session

import (
	"fmt"
	"testing"
)

// benchEvents is a log of n turns, each with a prompt, two tool steps of
// two calls and a final text step, 20 chunks per step.
func benchEvents(b *testing.B, n int) []Event {
	var ps []Payload
	for t := 1; t <= n; t++ {
		ps = append(ps, ts(t), um("u", "please look at the failing test and fix it"))
		for s := 1; s <= 3; s++ {
			ps = append(ps, ss(t, s))
			for range 20 {
				ps = append(ps, chunk(t, s, "some streamed text "))
			}
			if s < 3 {
				k1, k2 := fmt.Sprintf("k%d_%d_1", t, s), fmt.Sprintf("k%d_%d_2", t, s)
				ps = append(ps, am(t, s, "reading", k1, k2), tcall(t, s, k1), tres(t, s, k1), tcall(t, s, k2), tres(t, s, k2))
			} else {
				ps = append(ps, am(t, s, "done"))
			}
			ps = append(ps, se(t, s))
		}
		ps = append(ps, te(t), ctx("c", "idle inject"))
	}
	return events(b, ps...)
}

func BenchmarkLogAppendEvent(b *testing.B) {
	evs := benchEvents(b, 200)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		l := NewLog(Header{ID: "s"})
		for _, ev := range evs {
			if err := l.AppendEvent(ev); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(evs)), "ns/event")
}

func BenchmarkCheck(b *testing.B) {
	evs := benchEvents(b, 200)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if vs := Check(evs); len(vs) != 0 {
			b.Fatal(vs)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(evs)), "ns/event")
}

func BenchmarkCheckerAdd(b *testing.B) {
	evs := benchEvents(b, 200)
	ps := make([]Payload, len(evs))
	for i, ev := range evs {
		if ev.Type != TypeAssistantChunk {
			ps[i] = ev.MustDecode()
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		var c Checker
		for i, ev := range evs {
			if vs := c.Add(ev, ps[i]); vs != nil {
				b.Fatal(vs)
			}
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(evs)), "ns/event")
}

func BenchmarkForkPoint(b *testing.B) {
	l := NewLog(Header{ID: "s"})
	for _, ev := range benchEvents(b, 200) {
		if err := l.AppendEvent(ev); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	for i := range b.N {
		_ = ForkPoint(l, int64(i)%l.Len())
	}
}
