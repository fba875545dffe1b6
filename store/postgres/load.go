package postgres

import (
	"bytes"
	"context"
	"encoding/binary"
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
// as the JSONL store parses a file (store.ReadFile): rows are lines, every
// one validated; a final row of zeros that does not parse is a torn tail
// (dropped, reported in TornBytes); any other bad row is damage (a
// *store.LineError, the header being line 1), unless opts.Salvage, which
// keeps what session.(*Log).Salvage can prove. With repair set the result
// is repaired in memory.
//
// One goroutine receives lines into segments while this one parses them
// (session.Log.AppendLines, itself parallel); the events alias the
// segments.
func (s *Store) load(ctx context.Context, id string, opts store.LoadOptions, repair bool) (*parsed, error) {
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
	// Rows come in key order from the primary key's index. The planner
	// is told so: with statistics that undercount a big session (a fresh
	// import, or one session among many small ones) it would rather sort
	// them, on disk. They come as a binary COPY, the cheapest way to
	// stream rows out of PostgreSQL.
	if _, err := tx.Exec(ctx, `SET LOCAL enable_seqscan = off; SET LOCAL enable_bitmapscan = off; SET LOCAL enable_sort = off`); err != nil {
		return nil, unreadable(err)
	}
	pc := tx.Conn().PgConn()
	lit, err := pc.EscapeString(id)
	if err != nil {
		return nil, unreadable(err)
	}
	copySQL := `COPY (SELECT line FROM rein_events WHERE session_id = '` + lit + `' ORDER BY session_id, seq) TO STDOUT (FORMAT binary)`

	segs := make(chan []byte, 2)
	stop := make(chan struct{})
	var recvErr error
	recvDone := make(chan struct{})
	go func() {
		defer close(recvDone)
		defer close(segs)
		size := firstSegment
		buf := make([]byte, 0, size)
		stopped := false
		send := func() {
			select {
			case segs <- buf:
			case <-stop:
				stopped = true // the rest is read and dropped
			}
			size = min(2*size, maxSegment)
			buf = make([]byte, 0, size)
		}
		cw := &copyLines{line: func(line []byte) {
			if stopped {
				return
			}
			if len(buf) > 0 && len(buf)+len(line)+1 > cap(buf) {
				send()
			}
			buf = append(buf, line...)
			buf = append(buf, '\n')
		}}
		if _, recvErr = pc.CopyTo(ctx, cw, copySQL); recvErr == nil {
			recvErr = cw.end()
		}
		if recvErr == nil && len(buf) > 0 && !stopped {
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

	if opts.Salvage {
		// Salvage looks ahead of a damaged line: the whole file at once.
		data := append(append([]byte(nil), raw...), '\n')
		for seg := range segs {
			data = append(data, seg...)
		}
		if err := finish(); err != nil {
			return nil, err
		}
		ld, err := store.ReadFile(file, data, opts, repair)
		if err != nil {
			return nil, err
		}
		return &parsed{header: ld.Log.Header(), loaded: ld, size: int64(len(data) - ld.TornBytes)}, nil
	}
	l := session.NewLog(hdr)
	ld := &store.Loaded{Log: l}
	feed := func(body []byte) error {
		if err := l.AppendLines(body); err != nil {
			return store.LoadError(file, l.Len(), 2, err)
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
		// Rows cannot tear, but an import or an edit can leave a final
		// row that is what a crash leaves in a file (zeros): dropped as a
		// file's would be. Any other bad row is damage.
		if last := pending[:len(pending)-1]; store.LostWrite(last) {
			ld.TornBytes, ld.TornZeros = len(last), true
			total -= int64(len(pending))
			pending = nil
		}
		if err := feed(pending); err != nil {
			return nil, err
		}
	}
	if repair {
		rep, err := session.Repair(l)
		if err != nil {
			return nil, fmt.Errorf("postgres: repair %s: %w", id, err)
		}
		ld.Repair = rep
	}
	return &parsed{header: hdr, loaded: ld, size: total}, nil
}

// copyLines parses the binary COPY of one bytea column (its header, then
// per row a field count, a length and the bytes, then -1), calling line
// for each value. Messages usually hold whole rows; a row split across
// them is joined.
type copyLines struct {
	line   func([]byte)
	header bool // the header was read
	done   bool // the trailer was read
	carry  []byte
}

var copySignature = []byte("PGCOPY\n\377\r\n\x00")

func (c *copyLines) Write(p []byte) (int, error) {
	n := len(p)
	if len(c.carry) > 0 {
		p = append(c.carry, p...)
		c.carry = nil
	}
	for len(p) > 0 && !c.done {
		if !c.header {
			if len(p) < len(copySignature)+8 {
				break
			}
			if !bytes.Equal(p[:len(copySignature)], copySignature) {
				return 0, errors.New("postgres: not a binary COPY stream")
			}
			ext := int(binary.BigEndian.Uint32(p[len(copySignature)+4:]))
			if len(p) < len(copySignature)+8+ext {
				break
			}
			p = p[len(copySignature)+8+ext:]
			c.header = true
			continue
		}
		if len(p) < 2 {
			break
		}
		fields := int16(binary.BigEndian.Uint16(p))
		if fields == -1 {
			c.done = true
			break
		}
		if fields != 1 || len(p) < 6 {
			if fields != 1 {
				return 0, fmt.Errorf("postgres: COPY row of %d fields", fields)
			}
			break
		}
		size := int32(binary.BigEndian.Uint32(p[2:]))
		if size < 0 {
			return 0, errors.New("postgres: NULL line in COPY")
		}
		if len(p) < 6+int(size) {
			break
		}
		c.line(p[6 : 6+size])
		p = p[6+size:]
	}
	if len(p) > 0 && !c.done {
		c.carry = append([]byte(nil), p...)
	}
	return n, nil
}

// end reports a stream that stopped short.
func (c *copyLines) end() error {
	if !c.done {
		return errors.New("postgres: binary COPY ended early")
	}
	return nil
}
