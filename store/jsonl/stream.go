package jsonl

import (
	"context"
	"encoding/json"
	"fmt"
	"os"

	"github.com/reinhq/rein/session"
	"github.com/reinhq/rein/store"
)

// Stream implements store.Streamer: it reads session id's file a piece at
// a time (store.StreamFile), without the session's lock, and holds about
// one piece and the validator's state (a byte per event). A session another
// writer holds is not repaired: its open turn is running.
func (s *Store) Stream(ctx context.Context, id string, opts store.StreamOptions, fn func(ev session.Event, p session.Payload) error) (*store.Streamed, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := checkID(id); err != nil {
		return nil, err
	}
	f, err := os.Open(s.Path(id))
	if err != nil {
		return nil, notFound(id, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("%w: %v", store.ErrUnreadable, err)
	}
	return store.StreamFile(ctx, s.Path(id), f, st.Size(), func() *store.LockedError { return s.holder(id) }, opts, fn)
}

// ForkPoint is where a fork of a session at its latest stable point goes
// (see LastForkPoint).
type ForkPoint struct {
	// At is the fork seq: Last, or the last event before the open turn or
	// between-turn compaction that Last lies in (-1 when there is none).
	At int64
	// Last is the session's last stored event.
	Last int64
	// Header is the session's header.
	Header session.Header
	// Locked says who holds the session's writer, when one does (the open
	// turn is running, not interrupted).
	Locked *store.LockedError
}

// LastForkPoint returns where session id can be forked latest: its last
// event, unless that lies inside a turn or a between-turn compaction (the
// session is running, or a crash left it there), then the event before it
// opened. Like Fork, it reads the fork index sidecar and scans only the
// lines after the size it names, by their prefix; it parses no event.
func (s *Store) LastForkPoint(ctx context.Context, id string) (ForkPoint, error) {
	if err := ctx.Err(); err != nil {
		return ForkPoint{}, err
	}
	if err := checkID(id); err != nil {
		return ForkPoint{}, err
	}
	raw, _ := os.ReadFile(s.idxPath(id))
	f, err := os.Open(s.Path(id))
	if err != nil {
		return ForkPoint{}, notFound(id, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return ForkPoint{}, fmt.Errorf("%w: %v", store.ErrUnreadable, err)
	}
	line, err := readHeaderLine(f, st.Size())
	if err != nil {
		return ForkPoint{}, &store.LineError{File: s.Path(id), Line: 1, Err: err}
	}
	var fp ForkPoint
	if err := json.Unmarshal(line[:len(line)-1], &fp.Header); err != nil {
		return ForkPoint{}, &store.LineError{File: s.Path(id), Line: 1, Err: err}
	}
	x, _, _, ok := parseIndex(raw, int64(len(line)), st.Size())
	if !ok {
		x = newIndex(int64(len(line)))
	}
	if err := x.scan(f, s.Path(id), st.Size(), -1); err != nil {
		return ForkPoint{}, err
	}
	fp.Last, fp.At = x.Events-1, x.Events-1
	// The open span's start; a between-turn compaction holds no turn, and
	// a turn holds its compactions, so one step back is enough.
	for _, spans := range [][]int64{x.Turns, x.Comps} {
		if n := len(spans); n > 0 && spans[n-1] < 0 {
			fp.At = min(fp.At, spans[n-2]-1)
		}
	}
	if fp.At >= 0 && x.forkPoint(fp.At) != nil {
		return ForkPoint{}, fmt.Errorf("jsonl: %s: no fork point found before seq %d", id, fp.Last)
	}
	fp.Locked = s.holder(id)
	return fp, nil
}
