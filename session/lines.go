package session

import (
	"bytes"
	"fmt"
	"math"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/reinhq/rein/session/internal/wire"
)

// LineError locates the line that stopped AppendLines.
type LineError struct {
	// Line is the 0-based index of the failing line within the data.
	Line int
	// End is the offset just past the failing line (after its '\n').
	End int
	// Seq is the seq the line carries, or -1 when it did not parse.
	Seq int64
	Err error
}

func (e *LineError) Error() string {
	return "line " + strconv.Itoa(e.Line) + ": " + e.Err.Error()
}

func (e *LineError) Unwrap() error { return e.Err }

// blockSize is the unit of parallel parsing.
const blockSize = 256 << 10

// AppendLines parses JSONL event lines (each ending in '\n'; a final line
// without one is taken whole) and appends them to l in order, exactly as
// AppendEvent would. The events' Data alias data, which must not be
// modified afterwards (nor may the strings of the decoded messages, which
// alias it too). It stops at the first line that does not parse or is
// refused, returning a *LineError; the lines before it stay appended.
//
// Large inputs are parsed and their payloads decoded on several goroutines
// (GOMAXPROCS) while the calling goroutine checks and appends in order.
// Payloads the log keeps only raw (request headers but the last, tool
// calls) are validated, not decoded; the last request header is decoded
// before AppendLines returns.
func (l *Log) AppendLines(data []byte) error {
	defer l.settleHeader()
	workers := min(runtime.GOMAXPROCS(0), 8)
	// Workers' string arenas live on between calls (a loader feeds a file
	// in pieces), so no call leaves a partly used chunk behind.
	for len(l.loaders) < workers {
		l.loaders = append(l.loaders, new(wire.Arena))
	}
	// Appended blocks' record buffers go back to the parsers through
	// free. A Validator keeps them between calls (it is fed a file in
	// pieces and lives as long as that); a Log, which may live long after
	// its load, lets them go.
	free := l.spare
	if free == nil {
		free = make(chan *lineBlock, 3*workers)
		if l.check {
			l.spare = free
		}
	}
	if len(data) < 2*blockSize || workers < 2 {
		var b lineBlock
		b.data = data
		b.reuse(free)
		b.parse(l.loaders[0], l.check, l.visit != nil)
		err := l.appendBlock(&b, 0)
		b.release(free)
		return err
	}
	// Cut the input into blocks at line ends.
	var blocks []*lineBlock
	for off := 0; off < len(data); {
		end := min(off+blockSize, len(data))
		if j := bytes.IndexByte(data[end:], '\n'); j >= 0 {
			end += j + 1
		} else {
			end = len(data)
		}
		blocks = append(blocks, &lineBlock{data: data[:end], base: off, done: make(chan struct{})})
		off = end
	}
	// Workers parse blocks in order, at most window blocks ahead of the
	// appender, so the transient records stay bounded.
	window := 2 * workers
	tokens := make(chan struct{}, window)
	for range window {
		tokens <- struct{}{}
	}
	quit := make(chan struct{})
	var next int
	var mu sync.Mutex
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			a := l.loaders[w]
			for {
				select {
				case <-tokens:
				case <-quit:
					return
				}
				mu.Lock()
				i := next
				next++
				mu.Unlock()
				if i >= len(blocks) {
					return
				}
				blocks[i].reuse(free)
				blocks[i].parse(a, l.check, l.visit != nil)
				close(blocks[i].done)
			}
		}()
	}
	defer func() {
		close(quit)
		wg.Wait()
	}()
	line := 0
	for _, b := range blocks {
		<-b.done
		if err := l.appendBlock(b, line); err != nil {
			return err
		}
		line += len(b.recs)
		b.release(free)
		tokens <- struct{}{}
	}
	return nil
}

// reuse gives b the record buffers of a block released to free, if any.
func (b *lineBlock) reuse(free chan *lineBlock) {
	select {
	case old := <-free:
		b.recs, b.ps = old.recs[:0], old.ps[:0]
	default:
	}
}

// release hands b's record buffers to free (when it has room) once b is
// appended.
func (b *lineBlock) release(free chan *lineBlock) {
	clear(b.ps)
	clear(b.odd)
	select {
	case free <- &lineBlock{recs: b.recs, ps: b.ps}:
	default:
	}
	b.recs, b.ps, b.odd = nil, nil, nil
}

// lineBlock is a run of whole lines, parsed and decoded off the appending
// goroutine.
type lineBlock struct {
	data []byte // the input up to the block's end
	base int    // the block's first byte in data
	recs []lineRec
	ps   []Payload // payloads, recs[i].p-1 for recs[i] (p 0: none)
	odd  []Event   // events of lines parsed the careful way (see oddType)
	err  error     // what stopped parse at line len(recs), if anything
	eseq int64     // that line's seq, or -1 when its envelope did not parse
	done chan struct{}
}

// lineRec is one parsed line: the index record plus its seq.
type lineRec struct {
	rec       // seg unset; off is relative to the block's start
	seq int64 //
	run int32 // on the first chunk of a run of run chunks (see appendRun)
	p   int32 // 1 + the index of the payload in lineBlock.ps, 0 for none
	// turn and step of a chunk parsed by wire.ChunkLine (which has no
	// payload): what the checker asks of it.
	turn, step int32
	flags      uint8
}

const (
	// oddType marks a record whose event is in lineBlock.odd (at index
	// off): a line of another field order, an unknown type, or data not
	// in the block.
	oddType = 1<<16 - 1
	// lazyHeader marks a request/header whose payload holds only Turn
	// and Step (the rest was validated, not decoded).
	lazyHeader uint8 = 1
	chunkType        = 7 // index of TypeAssistantChunk in Types
)

// parse parses the block's lines and decodes their payloads, stopping at
// the first bad line. With full set (a Validator that visits) payloads but
// request headers' are decoded in full, strings copied, as Event.Decode
// decodes them, to be handed on.
func (b *lineBlock) parse(a *wire.Arena, check, full bool) {
	d := b.data[b.base:]
	if b.recs == nil {
		n := len(d)/100 + 16
		b.recs = make([]lineRec, 0, n)
		b.ps = make([]Payload, 0, n/16)
	}
	var tc wire.TimeCache
	runStart := -1
	for pos := 0; pos < len(d); {
		if c, next := wire.ChunkLine(d, pos, &tc); next > 0 {
			n := len(b.recs)
			b.recs = append(b.recs, lineRec{})
			r := &b.recs[n]
			r.seq, r.turn, r.step, r.ms, r.typ, r.off, r.n = c.Seq, c.Turn, c.Step, c.Ms, chunkType, c.Off, c.Len
			// Extend the run of chunks: consecutive seqs, times in order,
			// the same step.
			if p := &b.recs[max(n-1, 0)]; runStart >= 0 && r.seq == p.seq+1 && r.ms >= p.ms && r.turn == p.turn && r.step == p.step {
				b.recs[runStart].run++
			} else {
				runStart = n
				r.run = 1
			}
			pos = next
			continue
		}
		runStart = -1
		ln := d[pos:]
		next := len(d)
		if j := bytes.IndexByte(ln, '\n'); j >= 0 {
			ln, next = ln[:j], pos+j+1
		}
		if !b.parseLine(pos, ln, &tc, a, check, full) {
			return
		}
		pos = next
	}
}

// parseLine parses one line that is not a plain chunk (ln, at offset pos
// of the block), reporting false when it stops the block. Lines in rein's
// field order take the fast path: the envelope by wire.Prefix, the
// payload by the fast decoders (unknown types' data only validated). Any
// other line, or one the fast path does not take, goes to the general
// decoder, which decides.
func (b *lineBlock) parseLine(pos int, ln []byte, tc *wire.TimeCache, a *wire.Arena, check, full bool) bool {
	var ev Event
	var p Payload
	var flags uint8
	e, fast := wire.Prefix(ln, tc)
	if fast {
		ev = envelopeEvent(e)
		switch {
		case !ev.Type.Known():
			fast = wire.Valid(ev.Data)
		case ev.Type == TypeRequestHeader:
			p, fast = decodeWith(ev.Type, ev.Data, a, check)
			flags = lazyHeader
		case full:
			p, fast = fastDecode(ev.Type, ev.Data)
		default:
			p, fast = decodeWith(ev.Type, ev.Data, a, check)
		}
	}
	if !fast {
		seq := int64(-1)
		if e.Data != nil {
			seq = e.Seq
		}
		var err error
		if ev, err = parseLineGeneral(ln); err != nil {
			b.err, b.eseq = err, seq
			return false
		}
		p, flags = nil, 0
		if ev.Type.Known() {
			if p, err = ev.Decode(); err != nil {
				b.err, b.eseq = err, ev.Seq
				return false
			}
		}
	}
	r := lineRec{seq: ev.Seq, flags: flags}
	r.ign = ev.Ignorable
	k := typeIdx(string(ev.Type))
	if !fast || k < 0 || uint64(len(ev.Data)) > math.MaxUint32 {
		// Keep the whole event (its data may not be in the block, or be
		// too big for a record; its time may be finer than the index
		// keeps, which the checker must still see).
		r.typ, r.off = oddType, uint32(len(b.odd))
		b.odd = append(b.odd, ev)
	} else {
		r.typ = uint16(k)
		r.ms = ev.Time.UnixMilli()
		// wire.Prefix's data ends just before the line's last byte.
		r.off, r.n = uint32(pos+len(ln)-1-len(ev.Data)), uint32(len(ev.Data))
	}
	if p != nil {
		b.ps = append(b.ps, p)
		r.p = int32(len(b.ps))
	}
	b.recs = append(b.recs, r)
	return true
}

// event returns the event of record i (data in the block).
func (b *lineBlock) event(i int) Event {
	r := &b.recs[i]
	if r.typ == oddType {
		return b.odd[r.off]
	}
	d := b.data[b.base:]
	return Event{Seq: r.seq, Type: Types[r.typ], Time: time.UnixMilli(r.ms).UTC(), Ignorable: r.ign,
		Data: d[r.off : r.off+r.n : r.off+r.n]}
}

// appendBlock appends a parsed block; line is the index of its first line.
func (l *Log) appendBlock(b *lineBlock, line int) error {
	// The events' data stay in the block: register it as a segment (a
	// Validator keeps nothing).
	seg := -1
	if l.check {
		seg = 0
	} else if d := b.data[b.base:len(b.data):len(b.data)]; uint64(len(d)) <= math.MaxUint32 {
		seg = len(l.events.segs)
		l.events.segs = append(l.events.segs, d)
	}
	for i := 0; i < len(b.recs); {
		r := &b.recs[i]
		if r.run > 0 && seg >= 0 && l.appendRun(b.recs[i:i+int(r.run)], uint32(seg)) {
			if l.visit != nil && l.visitChunks {
				for j := i; j < i+int(r.run); j++ {
					if err := l.visit(b.event(j), nil); err != nil {
						return err
					}
				}
			}
			i += int(r.run)
			continue
		}
		ev := b.event(i)
		at := seg
		if r.typ == oddType {
			at = -1 // data elsewhere: copied
		}
		var p Payload
		switch {
		case r.p > 0:
			p = b.ps[r.p-1]
		case r.typ == chunkType:
			// A chunk wire.ChunkLine took (validated); the checker needs
			// only its coordinates.
			p = &AssistantChunk{Turn: int(r.turn), Step: int(r.step)}
		}
		if err := l.appendDecoded(ev, p, r.flags&lazyHeader != 0, at, r.off); err != nil {
			return &LineError{Line: line + i, End: b.lineEnd(i), Seq: ev.Seq, Err: err}
		}
		if l.visit != nil && (ev.Type != TypeAssistantChunk || l.visitChunks) {
			if ev.Type == TypeAssistantChunk || ev.Type == TypeRequestHeader {
				p = nil // checked, not decoded in full
			}
			if err := l.visit(ev, p); err != nil {
				return err
			}
		}
		i++
	}
	if b.err != nil {
		i := len(b.recs)
		return &LineError{Line: line + i, End: b.lineEnd(i), Seq: b.eseq, Err: b.err}
	}
	return nil
}

// appendRun appends a run of chunks (consecutive seqs, times in order, one
// turn and step, data in segment seg) at once when the state lets every
// one of them in: the next seq, no earlier time, inside that very step,
// which has no assistant/message yet. That is exactly what Checker.check
// asks of a chunk, and the state changes are Checker.apply's and
// Log.add's. Otherwise it reports false and the chunks
// take the general path.
func (l *Log) appendRun(rs []lineRec, seg uint32) bool {
	c := &l.checker
	first, last := &rs[0], &rs[len(rs)-1]
	if first.seq != c.next || !c.turnOpen || !c.stepOpen || c.asstSeen || int(first.turn) != c.turn || int(first.step) != c.step {
		return false
	}
	if time.UnixMilli(first.ms).Before(c.last) {
		return false
	}
	l.events.addRun(rs, seg)
	n := len(c.kinds)
	c.kinds = slices.Grow(c.kinds, len(rs))[:n+len(rs)]
	for i := n; i < len(c.kinds); i++ {
		c.kinds[i] = kChunk
	}
	n = len(c.stepChunks)
	c.stepChunks = slices.Grow(c.stepChunks, len(rs))[:n+len(rs)]
	for i := range rs {
		c.stepChunks[n+i] = first.seq + int64(i)
	}
	c.next = last.seq + 1
	t := time.UnixMilli(last.ms).UTC()
	if t.After(c.last) {
		c.last = t
	}
	if t.After(l.last) {
		l.last = t
	}
	return true
}

// lineEnd returns the offset in data just past the block's i-th line.
func (b *lineBlock) lineEnd(i int) int {
	off := b.base
	for ; i >= 0; i-- {
		j := bytes.IndexByte(b.data[off:], '\n')
		if j < 0 {
			return len(b.data)
		}
		off += j + 1
	}
	return off
}

// appendDecoded is AppendEvent for an event whose payload is decoded
// already (nil for chunks and unknown types); lazy marks a request/header
// decoded lazily. With seg >= 0 the event's data is at offset off of that
// segment of the log's store already.
func (l *Log) appendDecoded(ev Event, p Payload, lazy bool, seg int, off uint32) error {
	if ev.Seq != l.Len() {
		return fmt.Errorf("%w: seq %d, want %d", ErrInvariant, ev.Seq, l.Len())
	}
	if !ev.Type.Known() && !ev.Ignorable {
		return fmt.Errorf("%w: %q at seq %d", ErrUnknownType, ev.Type, ev.Seq)
	}
	return l.addP(ev, p, lazy, seg, off)
}
