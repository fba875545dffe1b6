package jsonl

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/reinhq/rein/session"
	"github.com/reinhq/rein/store"
)

// Stream reads session id line by line and calls fn with each stored
// event, in order, without holding the session: it keeps one line and the
// invariant checker's state (about a byte per event). fn must not keep
// ev.Data, which is reused for the next line. A torn final line is
// skipped, as Load does.
//
// It validates each line as Load does (envelope, seq, payload, chunks'
// included, and the session invariant), failing as Load does (a
// *store.LineError naming the line) after fn has seen the events before
// the bad line, and judges a torn final line as Load does.
//
// It returns the events crash repair adds to a session left inside a turn
// or a between-turn compaction (see Load), which fn does not see; only
// then does it read the session again, through Load. A session another
// writer holds is not repaired: its open turn is running.
func (s *Store) Stream(ctx context.Context, id string, fn func(ev session.Event) error) (repair []session.Event, err error) {
	if err := checkID(id); err != nil {
		return nil, err
	}
	f, err := os.Open(s.Path(id))
	if err != nil {
		return nil, notFound(id, err)
	}
	defer f.Close()
	file := s.Path(id)
	lineErr := func(line int64, err error) error { return &store.LineError{File: file, Line: int(line), Err: err} }
	r := bufio.NewReaderSize(f, 256<<10)
	hdr, err := readLine(r, nil)
	if err != nil || len(hdr) == 0 || hdr[len(hdr)-1] != '\n' {
		return nil, lineErr(1, fmt.Errorf("%w: no complete header line", session.ErrCorrupt))
	}
	var h session.Header
	if err := json.Unmarshal(hdr[:len(hdr)-1], &h); err != nil {
		if !errors.Is(err, session.ErrCorrupt) && !errors.Is(err, session.ErrVersion) {
			err = fmt.Errorf("%w: header: %v", session.ErrCorrupt, err)
		}
		return nil, lineErr(1, err)
	}

	var (
		c        session.Checker
		next     int64
		turnOpen bool
		compOpen bool // between turns
	)
	put := func(line []byte) error {
		ev, err := session.ParseLine(line)
		if err != nil {
			return lineErr(next+2, err)
		}
		if ev.Seq != next {
			return lineErr(next+2, fmt.Errorf("%w: seq %d, want %d", store.ErrSeq, ev.Seq, next))
		}
		var p session.Payload
		switch {
		case !ev.Type.Known() && !ev.Ignorable:
			return lineErr(next+2, fmt.Errorf("%w: %q at seq %d", session.ErrUnknownType, ev.Type, ev.Seq))
		case ev.Type.Known():
			if p, err = ev.Decode(); err != nil {
				return lineErr(next+2, err)
			}
		}
		if vs := c.Add(ev, p); len(vs) > 0 {
			return lineErr(next+2, &session.InvariantError{Violations: vs})
		}
		switch ev.Type {
		case session.TypeTurnStart:
			turnOpen = true
		case session.TypeTurnEnd:
			turnOpen = false
		case session.TypeCompactionStart:
			compOpen = !turnOpen
		case session.TypeCompactionEnd:
			compOpen = false
		}
		next++
		return fn(ev)
	}

	// Only at the end can the final line be judged torn, so each line
	// waits in held until the next one is read.
	var held, cur []byte
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		cur, err = readLine(r, cur[:0])
		if err != nil && err != io.EOF {
			return nil, fmt.Errorf("%w: %v", store.ErrUnreadable, err)
		}
		if len(cur) == 0 || cur[len(cur)-1] != '\n' {
			break // the end, maybe after a line without '\n' (torn)
		}
		if held != nil {
			if err := put(held[:len(held)-1]); err != nil {
				return nil, err
			}
		}
		held, cur = cur, held
	}
	if held != nil && !store.LostWrite(held[:len(held)-1]) {
		if err := put(held[:len(held)-1]); err != nil {
			return nil, err
		}
	}
	if !turnOpen && !compOpen || s.holder(id) != nil {
		return nil, nil
	}
	ld, err := s.Load(ctx, id, store.LoadOptions{})
	if err != nil {
		return nil, err
	}
	if stored := ld.Log.Len() - int64(len(ld.Repair)); stored != next {
		return nil, fmt.Errorf("jsonl: session %s changed while it was read (%d events, then %d)", id, next, stored)
	}
	return ld.Repair, nil
}

// readLine appends the next line of r, '\n' included, to b; at the end of
// r it returns what is left (maybe a line without '\n') and io.EOF.
func readLine(r *bufio.Reader, b []byte) ([]byte, error) {
	for {
		part, err := r.ReadSlice('\n')
		b = append(b, part...)
		if err != bufio.ErrBufferFull {
			return b, err
		}
	}
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
