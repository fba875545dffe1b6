package storetest

import (
	"errors"
	"reflect"
	"slices"
	"testing"

	"github.com/reinhq/rein/session"
	"github.com/reinhq/rein/store"
)

// streamAgrees checks store.Stream against Load on session id, whole and
// in pieces of a few lines (so that lines, the held-back final line and
// the open turn's re-read cross pieces): the same stored events (every
// one, or every one but the chunks), header, repair, torn tail and holder;
// or a failure at the same line, after the events before it (from a
// Streamer; a store that has none fails in its load); and with
// RefuseHeld, the holder's error before any event when a writer holds it.
func streamAgrees(t *testing.T, s store.Store, id string) {
	t.Helper()
	ld, lerr := s.Load(ctx, id, store.LoadOptions{})
	_, streams := s.(store.Streamer) // else Stream loads: a failure passes nothing
	for _, opts := range []store.StreamOptions{{}, {Piece: 64}, {SkipChunks: true, Piece: 300}, {RefuseHeld: true}} {
		var got []session.Event
		st, err := store.Stream(ctx, s, id, opts, func(ev session.Event, p session.Payload) error {
			if p != nil {
				if want, err := ev.Decode(); err != nil || !reflect.DeepEqual(p, want) {
					t.Errorf("Stream %+v: seq %d: payload %#v, want %#v (%v)", opts, ev.Seq, p, want, err)
				}
			}
			got = append(got, session.Event{Seq: ev.Seq, Type: ev.Type, Time: ev.Time, Ignorable: ev.Ignorable, Data: slices.Clone(ev.Data)})
			return nil
		})
		if lerr != nil {
			var le, se *store.LineError
			switch {
			case err == nil:
				t.Errorf("Stream %+v read what Load refuses (%v)", opts, lerr)
			case errors.As(lerr, &le) && (!errors.As(err, &se) || se.Line != le.Line):
				t.Errorf("Stream %+v: %v; Load: %v", opts, err, lerr)
			case le != nil && streams && !opts.SkipChunks && len(got) != max(le.Line-2, 0):
				t.Errorf("Stream %+v passed %d events before failing at line %d", opts, len(got), le.Line)
			}
			continue
		}
		if opts.RefuseHeld && ld.Locked != nil {
			if !errors.Is(err, store.ErrLocked) || len(got) > 0 {
				t.Errorf("Stream of a held session with RefuseHeld: %v after %d events", err, len(got))
			}
			continue
		}
		if err != nil {
			t.Errorf("Stream %+v: %v; Load read it", opts, err)
			continue
		}
		stored := ld.Log.Len() - int64(len(ld.Repair))
		want := ld.Log.EventRange(0, stored)
		if opts.SkipChunks {
			want = slices.DeleteFunc(want, func(ev session.Event) bool { return ev.Type == session.TypeAssistantChunk })
		}
		sameEvents(t, "Stream", got, want)
		sameEvents(t, "Stream's repair", st.Repair, ld.Log.EventRange(stored, ld.Log.Len()))
		if st.Events != stored || !reflect.DeepEqual(st.Header, ld.Log.Header()) || st.TornBytes != ld.TornBytes || st.TornZeros != ld.TornZeros || (st.Locked == nil) != (ld.Locked == nil) {
			t.Errorf("Stream %+v: %d events, header %+v, torn %d %v, locked %v; Load: %d, %+v, %d %v, %v", opts,
				st.Events, st.Header, st.TornBytes, st.TornZeros, st.Locked, stored, ld.Log.Header(), ld.TornBytes, ld.TornZeros, ld.Locked)
		}
	}
	// An error of fn stops it and comes back as it is.
	stop := errors.New("stop")
	if _, err := store.Stream(ctx, s, id, store.StreamOptions{}, func(session.Event, session.Payload) error { return stop }); lerr == nil && ld.Log.Len() > int64(len(ld.Repair)) && err != stop {
		t.Errorf("Stream whose fn fails: %v", err)
	}
}
