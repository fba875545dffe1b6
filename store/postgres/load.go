package postgres

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/reinhq/rein/session"
	"github.com/reinhq/rein/store"
)

// parsed is a session read from the database.
type parsed struct {
	header session.Header
	loaded *store.Loaded
	// size is the byte size of the good part as a JSONL file: header line
	// and event lines with their newlines, without a torn final line.
	size int64
}

// Segment sizes of loading: rows are copied, each followed by '\n', into
// segments that grow from firstSegment to maxSegment, so that parsing
// starts early and no single huge buffer is needed.
const (
	firstSegment = 256 << 10
	maxSegment   = 16 << 20
)

// load reads session id (header and events in one snapshot) and parses it
// as the JSONL store parses a file: rows are lines, a final row that does
// not parse is a torn tail (dropped, reported in TornBytes), a bad row
// before others is corruption (a *store.LineError, the header being line
// 1) unless opts.Salvage skips it. The result is repaired in memory.
//
// One goroutine receives rows into segments while this one parses them
// (session.Log.AppendLines, itself parallel); the events alias the
// segments.
func (s *Store) load(ctx context.Context, id string, opts store.LoadOptions) (*parsed, error) {
	tx, err := s.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return nil, unreadable(err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	file := fileName(id)
	lineErr := func(line int, err error) error { return &store.LineError{File: file, Line: line, Err: err} }
	var raw []byte
	if err := tx.QueryRow(ctx, `SELECT header FROM rein_sessions WHERE id = $1`, id).Scan(&raw); err != nil {
		if errors.Is(err, pgx.ErrNoRows) {
			return nil, notFound(id)
		}
		return nil, unreadable(err)
	}
	var hdr session.Header
	if err := json.Unmarshal(raw, &hdr); err != nil {
		if !errors.Is(err, session.ErrCorrupt) && !errors.Is(err, session.ErrVersion) {
			err = fmt.Errorf("%w: header: %v", session.ErrCorrupt, err)
		}
		return nil, lineErr(1, err)
	}
	rows, err := tx.Query(ctx, `SELECT line FROM rein_events WHERE session_id = $1 ORDER BY seq`, id)
	if err != nil {
		return nil, unreadable(err)
	}

	segs := make(chan []byte, 2)
	stop := make(chan struct{})
	var recvErr error
	recvDone := make(chan struct{})
	go func() {
		defer close(recvDone)
		defer close(segs)
		defer rows.Close()
		size := firstSegment
		buf := make([]byte, 0, size)
		send := func() bool {
			select {
			case segs <- buf:
			case <-stop:
				return false
			}
			size = min(2*size, maxSegment)
			buf = make([]byte, 0, size)
			return true
		}
		for rows.Next() {
			line := rows.RawValues()[0]
			if len(buf) > 0 && len(buf)+len(line)+1 > cap(buf) && !send() {
				return
			}
			buf = append(buf, line...)
			buf = append(buf, '\n')
		}
		if recvErr = rows.Err(); recvErr == nil && len(buf) > 0 {
			send()
		}
	}()
	finish := func() error {
		close(stop)
		<-recvDone
		if recvErr != nil {
			return unreadable(recvErr)
		}
		return nil
	}

	l := session.NewLog(hdr)
	ld := &store.Loaded{Log: l}
	// feed appends whole lines, skipping bad ones under Salvage.
	feed := func(body []byte) error {
		for len(body) > 0 {
			err := l.AppendLines(body)
			if err == nil {
				return nil
			}
			var lerr *session.LineError
			if !errors.As(err, &lerr) {
				return err
			}
			cause := lerr.Err
			if errors.Is(cause, session.ErrInvariant) && lerr.Seq >= 0 && lerr.Seq != l.Len() {
				cause = fmt.Errorf("%w: seq %d, want %d", store.ErrSeq, lerr.Seq, l.Len())
			}
			// Every line before the failing one was appended or dropped.
			line := 2 + int(l.Len()) + len(ld.Dropped)
			if !opts.Salvage {
				return lineErr(line, cause)
			}
			ld.Dropped = append(ld.Dropped, store.Dropped{Line: line, Err: cause})
			body = body[lerr.End:]
		}
		return nil
	}
	// Only the final line can be judged torn, so the last line of each
	// segment is held back until more lines follow it.
	var pending []byte
	total := int64(len(raw) + 1)
	for seg := range segs {
		total += int64(len(seg))
		if err := feed(pending); err != nil {
			finish()
			return nil, err
		}
		j := bytes.LastIndexByte(seg[:len(seg)-1], '\n')
		if err := feed(seg[:j+1]); err != nil {
			finish()
			return nil, err
		}
		pending = seg[j+1:]
	}
	if err := finish(); err != nil {
		return nil, err
	}
	if len(pending) > 0 {
		last := pending[:len(pending)-1]
		// A final line that is not an event is what a crash while
		// writing leaves in a file; rows cannot tear, but an import or an
		// edit can leave one, and it is treated the same way.
		if _, err := session.ParseLine(last); err != nil || !json.Valid(last) {
			ld.TornBytes = len(last)
			total -= int64(len(pending))
			pending = nil
		}
		if err := feed(pending); err != nil {
			return nil, err
		}
	}
	rep, err := session.Repair(l)
	if err != nil {
		return nil, fmt.Errorf("postgres: repair %s: %w", id, err)
	}
	ld.Repair = rep
	return &parsed{header: hdr, loaded: ld, size: total}, nil
}
