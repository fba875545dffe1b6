package postgres

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"sync"

	"github.com/jackc/pgx/v5/pgconn"

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
	// body is the part of size after the header line: where the next
	// appended line starts in the session's lines.
	body int64
	// cut describes a read that stopped inside a segment (readLines' to):
	// the segment's first seq and the length of the part of its lines
	// that was read (cutSeq -1 when none was cut).
	cutSeq int64
	cutLen int
}

// Segment sizes of loading: segments' lines are copied, each followed by
// '\n', into buffers that grow from firstBuffer to maxBuffer, so that
// parsing starts early and no single huge buffer is needed.
const (
	firstBuffer = 256 << 10
	maxBuffer   = 16 << 20
)

// load reads session id (header and events in one snapshot) and parses it
// as the JSONL store parses a file (store.ReadFile): the lines are the
// file's, every one validated; a final line that does not parse and holds
// a zero byte is a write a crash lost (store.LostWrite: dropped, reported
// in TornBytes); any other bad line is damage (a *store.LineError, the
// header being line 1), unless opts.Salvage, which keeps what
// session.(*Log).Salvage can prove. With repair set, the result is
// repaired in memory unless a writer other than the lease of token (0:
// none of ours) holds the session (Loaded.Locked: its open turn is
// running, not interrupted).
//
// It costs one round trip: a transaction of two binary COPYs, the
// session's row and its segments, sent as one query. The session's row
// comes as a row whose first_seq is negative, -1 minus the size of the
// lines as the summary has it (so that the buffers are allocated to fit),
// and whose bytes are the header line, followed, while another writer
// holds the lease, by '\n' and the holder's name.
func (s *Store) load(ctx context.Context, id string, opts store.LoadOptions, repair bool, token int64) (*parsed, error) {
	c, err := s.pool.Acquire(ctx)
	if err != nil {
		return nil, unreadable(err)
	}
	// A connection left in a transaction by a failure is not reused.
	defer c.Release()
	pc := c.Conn().PgConn()
	lit, err := pc.EscapeString(id)
	if err != nil {
		return nil, unreadable(err)
	}
	sql := `BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY; ` + planSegments + `;
COPY (SELECT -1 - greatest(size - octet_length(header) - 1, 0),
	header || CASE WHEN lease_expires > now() AND lease_token <> ` + strconv.FormatInt(token, 10) + `
		THEN '\x0a'::bytea || convert_to(coalesce(lease_holder, ''), 'UTF8') ELSE '' END
	FROM rein_sessions WHERE id = '` + lit + `') TO STDOUT (FORMAT binary);
COPY (SELECT first_seq, lines FROM rein_segments WHERE session_id = '` + lit + `' ORDER BY session_id, first_seq) TO STDOUT (FORMAT binary);
COMMIT`
	var locked *store.LockedError
	// row splits the session's row into the header line and the lease.
	row := func(raw []byte) ([]byte, error) {
		if raw == nil {
			return nil, notFound(id)
		}
		hl, holder, held := bytes.Cut(raw, []byte("\n"))
		if held {
			locked = &store.LockedError{ID: id, Holder: string(holder)}
		}
		return hl, nil
	}
	if opts.Salvage {
		// Salvage looks ahead of a damaged line: the whole file at once.
		rv, bufs, finish := receive(ctx, pc, sql, -1)
		var body []byte
		for buf := range bufs {
			body = append(body, buf...)
		}
		if err := finish(); err != nil {
			return nil, err
		}
		hl, err := row(rv.header)
		if err != nil {
			return nil, err
		}
		data := append(append(hl[:len(hl):len(hl)], '\n'), body...)
		ld, err := store.ReadFile(fileName(id), data, opts, repair && locked == nil)
		if err != nil {
			return nil, err
		}
		ld.Locked = locked
		return &parsed{header: ld.Log.Header(), loaded: ld, size: int64(len(data) - ld.TornBytes),
			body: int64(len(data)-ld.TornBytes) - int64(len(hl)) - 1, cutSeq: -1}, nil
	}
	var l *session.Log
	p, err := readLines(ctx, pc, sql, id, -1, func(raw []byte) (lineSink, []byte, error) {
		hl, err := row(raw)
		if err != nil {
			return nil, nil, err
		}
		hdr, err := store.ParseHeader(hl)
		if err != nil {
			return nil, nil, &store.LineError{File: fileName(id), Line: 1, Err: err}
		}
		l = session.NewLog(hdr)
		return l, hl, nil
	}, nil)
	if err != nil {
		return nil, err
	}
	p.header, p.loaded.Log, p.loaded.Locked = l.Header(), l, locked
	if repair && locked == nil {
		if p.loaded.Repair, err = session.Repair(l); err != nil {
			return nil, fmt.Errorf("postgres: repair %s: %w", id, err)
		}
	}
	return p, nil
}

// planSegments tells the planner how to read a session's segments: in key
// order from the primary key's index. With statistics that undercount a
// big session (a fresh import, or one session among many small ones) it
// would rather sort them, on disk. And without JIT compilation, which a
// session of a million segments or so is costed high enough to get, and
// which would take longer than the plain scan it speeds up. (SET LOCAL:
// within a transaction.)
const planSegments = `SET LOCAL enable_seqscan = off; SET LOCAL enable_bitmapscan = off; SET LOCAL enable_sort = off; SET LOCAL jit = off`

// lineSink takes lines as loading them does: a *session.Log, or a
// *session.Validator that keeps nothing.
type lineSink interface {
	AppendLines(data []byte) error
	Len() int64
}

// receive starts receiving the result of sql on pc: binary COPYs of rows
// (first_seq, lines), maybe first the session's row (a negative
// first_seq, see load), then segments in order, with to as in readLines.
// A goroutine collects the lines into buffers of whole lines, each line
// followed by '\n', and sends them on bufs, which it closes at the end;
// it never waits for whoever takes them (they are kept by the log
// anyway), so the server is never held up by parsing. finish stops the
// receiving (the rest of the stream is read and dropped) and returns its
// error; the session's row is in rv once bufs is closed or has yielded.
func receive(ctx context.Context, pc *pgconn.PgConn, sql string, to int64) (rv *receiver, bufs <-chan []byte, finish func() error) {
	ch := make(chan []byte, 64)
	stop := make(chan struct{})
	var recvErr error
	done := make(chan struct{})
	rv = &receiver{to: to, cutSeq: -1, size: firstBuffer, out: ch, stop: stop}
	go func() {
		defer close(done)
		defer close(ch)
		cr := &copyReader{row: rv}
		if _, recvErr = pc.CopyTo(ctx, cr, sql); recvErr == nil {
			recvErr = cr.end()
		}
		if recvErr == nil && len(rv.buf) > 0 {
			rv.send()
		}
	}()
	var once sync.Once
	return rv, ch, func() error {
		once.Do(func() { close(stop) })
		<-done
		if recvErr != nil {
			return unreadable(recvErr)
		}
		return nil
	}
}

// readLines runs sql on pc (see receive) and feeds the lines, as a file's,
// to the sink that start returns for the session's row (nil when there
// was none), together with the header line. after, when set, sees every
// piece of lines the sink accepted. With to >= 0 the segments must be
// those that start before position to: only the lines before it are read,
// every one of them must be an event (none is judged torn), and the
// segment read in part is described in the result's cut fields. The
// result's loaded holds TornBytes; its Log is the caller's to set.
//
// The caller parses while the receiver receives (session.Log.AppendLines
// is itself parallel). A log's events alias the buffers.
func readLines(ctx context.Context, pc *pgconn.PgConn, sql, id string, to int64,
	start func(row []byte) (lineSink, []byte, error), after func(lines []byte)) (*parsed, error) {
	rv, bufs, finish := receive(ctx, pc, sql, to)
	file := fileName(id)
	var sink lineSink
	var hl []byte
	ld := &store.Loaded{}
	// begin makes the sink once the session's row is known: the receiver
	// sets it before it sends the first buffer or closes.
	begin := func() error {
		if sink != nil {
			return nil
		}
		var err error
		sink, hl, err = start(rv.header)
		return err
	}
	feed := func(lines []byte) error {
		if len(lines) == 0 {
			return nil
		}
		if err := sink.AppendLines(lines); err != nil {
			return store.LoadError(file, sink.Len(), 2, err)
		}
		if after != nil {
			after(lines)
		}
		return nil
	}
	// Only the final line can be judged torn, so the last line of each
	// buffer is held back until more lines follow it.
	var pending []byte
	body := int64(0)
	for buf := range bufs {
		body += int64(len(buf))
		err := begin()
		if err == nil {
			err = feed(pending)
		}
		j := bytes.LastIndexByte(buf[:len(buf)-1], '\n')
		if err == nil {
			err = feed(buf[:j+1])
		}
		if err != nil {
			finish()
			return nil, err
		}
		pending = buf[j+1:]
	}
	if err := finish(); err != nil {
		return nil, err
	}
	if err := begin(); err != nil {
		return nil, err
	}
	// Segments cannot tear, but an import or an edit can leave a final
	// line that is what a crash leaves in a file (zeros): dropped as a
	// file's would be. Any other bad line is damage.
	if last := bytes.TrimSuffix(pending, []byte("\n")); to < 0 && len(pending) > 0 && store.LostWrite(last) {
		ld.TornBytes, ld.TornZeros = len(last), true
		body -= int64(len(pending))
		pending = nil
	}
	if err := feed(pending); err != nil {
		return nil, err
	}
	return &parsed{loaded: ld, size: int64(len(hl)) + 1 + body, body: body, cutSeq: rv.cutSeq, cutLen: rv.cutLen}, nil
}

// receiver collects the segments of a COPY into buffers of whole lines,
// each line followed by '\n', and hands them to the parser. It stops
// collecting (and drops the rest of the stream) when stop closes.
type receiver struct {
	header []byte // the header line, from its row (negative first_seq)
	hint   int64  // the size of the lines, as the header's row says (0: unknown)
	to     int64  // read only the lines before this position (-1: all)
	size   int    // the capacity of the next buffer, unless the hint says less is left
	got    int64  // bytes sent in buffers
	buf    []byte
	out    chan<- []byte
	stop   <-chan struct{}

	stopped bool
	first   int64 // the current segment's first seq
	start   int   // where its lines start in buf
	cutSeq  int64
	cutLen  int
}

func (r *receiver) send() {
	if !r.stopped {
		select {
		case r.out <- r.buf:
		case <-r.stop:
			r.stopped = true
		}
	}
	r.got += int64(len(r.buf))
	r.buf = nil
}

// begin starts a row of n bytes of lines (the header's when first < 0).
func (r *receiver) begin(first int64, n int) {
	r.first = first
	if first < 0 {
		r.header, r.hint = make([]byte, 0, n), -first-1
		return
	}
	if len(r.buf) > 0 && len(r.buf)+n+1 > cap(r.buf) {
		r.send()
	}
	if r.buf == nil {
		// Buffers double up to maxBuffer, but are no larger than what
		// is left (fresh memory costs its zeroing).
		c := r.size
		if r.hint > 0 {
			c = int(min(int64(c), r.hint-r.got))
		}
		r.buf = make([]byte, 0, max(c, n+1))
		r.size = min(2*r.size, maxBuffer)
	}
	r.start = len(r.buf)
}

func (r *receiver) data(p []byte) {
	if r.first < 0 {
		r.header = append(r.header, p...)
		return
	}
	r.buf = append(r.buf, p...)
}

func (r *receiver) end() {
	if r.first < 0 {
		return
	}
	if r.to >= 0 && r.first < r.to {
		// Keep the lines before r.to: cut after the (to-first)th newline.
		seg, keep := r.buf[r.start:], r.to-r.first
		off := 0
		for ; keep > 0; keep-- {
			i := bytes.IndexByte(seg[off:], '\n')
			if i < 0 {
				off = -1
				break
			}
			off += i + 1
		}
		if off > 0 {
			r.cutSeq, r.cutLen = r.first, off-1
			r.buf = r.buf[:r.start+off-1]
		}
	}
	r.buf = append(r.buf, '\n')
}

// copyReader parses binary COPYs of rows (first_seq bigint, lines bytea)
// as they stream in, one after the other: each the file header, then per
// row a field count, each field's length and bytes, and finally a count of
// -1. Each row's lines go to the receiver as they come, without being
// gathered first; only the fixed-size parts are, when a message boundary
// splits one.
type copyReader struct {
	row     *receiver
	st      copyState
	hold    []byte // a fixed-size part gathered across writes
	left    int    // bytes of lines (copyData) or header extension (copyExt) still to come
	streams int    // COPYs read to their end
}

type copyState int

const (
	copySig   copyState = iota // the signature, flags and extension length (19 bytes)
	copyExt                    // the header extension, skipped
	copyCount                  // a row's field count (2 bytes), or -1
	copyHead                   // first_seq's length and value and the lines' length (16 bytes)
	copyData                   // the lines
)

// size is the length of a fixed-size part.
func (st copyState) size() int {
	switch st {
	case copySig:
		return len(copySignature) + 8
	case copyCount:
		return 2
	}
	return 16
}

var copySignature = []byte("PGCOPY\n\377\r\n\x00")

func (c *copyReader) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		if c.st == copyData || c.st == copyExt {
			take := min(c.left, len(p))
			if c.st == copyData {
				c.row.data(p[:take])
			}
			p, c.left = p[take:], c.left-take
			if c.left == 0 {
				if c.st == copyData {
					c.row.end()
				}
				c.st = copyCount
			}
			continue
		}
		want := c.st.size()
		var b []byte
		if len(c.hold) == 0 && len(p) >= want {
			b, p = p[:want], p[want:]
		} else {
			take := min(want-len(c.hold), len(p))
			c.hold, p = append(c.hold, p[:take]...), p[take:]
			if len(c.hold) < want {
				break
			}
			b, c.hold = c.hold, c.hold[:0]
		}
		if err := c.part(b); err != nil {
			return 0, err
		}
	}
	return n, nil
}

// part handles a complete fixed-size part.
func (c *copyReader) part(b []byte) error {
	switch c.st {
	case copySig:
		if !bytes.Equal(b[:len(copySignature)], copySignature) {
			return errors.New("postgres: not a binary COPY stream")
		}
		c.st, c.left = copyCount, int(binary.BigEndian.Uint32(b[len(copySignature)+4:]))
		if c.left > 0 {
			c.st = copyExt
		}
	case copyCount:
		switch fields := int16(binary.BigEndian.Uint16(b)); fields {
		case -1:
			c.st = copySig // another COPY may follow
			c.streams++
		case 2:
			c.st = copyHead
		default:
			return fmt.Errorf("postgres: COPY row of %d fields", fields)
		}
	case copyHead:
		if int32(binary.BigEndian.Uint32(b)) != 8 {
			return errors.New("postgres: COPY first_seq is not a bigint")
		}
		first := int64(binary.BigEndian.Uint64(b[4:]))
		size := int32(binary.BigEndian.Uint32(b[12:]))
		if size < 0 {
			return errors.New("postgres: NULL lines in COPY")
		}
		c.row.begin(first, int(size))
		c.st, c.left = copyData, int(size)
		if size == 0 {
			c.row.end()
			c.st = copyCount
		}
	}
	return nil
}

// end reports a stream that stopped short.
func (c *copyReader) end() error {
	if c.st != copySig || len(c.hold) > 0 || c.streams == 0 {
		return errors.New("postgres: binary COPY ended early")
	}
	return nil
}
