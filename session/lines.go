package session

import (
	"bytes"
	"fmt"
	"runtime"
	"strconv"
	"sync"
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
// modified afterwards. It stops at the first line that does not parse or is
// refused, returning a *LineError; the lines before it stay appended.
//
// Large inputs are parsed and their payloads decoded on several goroutines
// (GOMAXPROCS) while the calling goroutine checks and appends in order.
func (l *Log) AppendLines(data []byte) error {
	l.events.grow(len(data) / 128)
	workers := min(runtime.GOMAXPROCS(0), 8)
	if len(data) < 2*blockSize || workers < 2 {
		var b lineBlock
		b.data = data
		b.parse()
		return l.appendBlock(&b, 0)
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
	// appender, so the transient Events stay bounded.
	window := 2 * workers
	tokens := make(chan struct{}, window)
	for range window {
		tokens <- struct{}{}
	}
	quit := make(chan struct{})
	// Parsed blocks' buffers go back to the workers through free.
	free := make(chan *lineBlock, window+workers)
	var next int
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
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
				select {
				case old := <-free:
					blocks[i].evs, blocks[i].ps = old.evs[:0], old.ps[:0]
				default:
				}
				blocks[i].parse()
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
		line += len(b.evs)
		clear(b.ps)
		select {
		case free <- &lineBlock{evs: b.evs, ps: b.ps}:
		default:
		}
		b.evs, b.ps = nil, nil
		tokens <- struct{}{}
	}
	return nil
}

// lineBlock is a run of whole lines, parsed and decoded off the appending
// goroutine.
type lineBlock struct {
	data []byte // the input up to the block's end
	base int    // the block's first byte in data
	evs  []Event
	ps   []Payload
	err  error // what stopped parse at line len(evs), if anything
	eseq int64 // that line's seq, or -1 when its envelope did not parse
	done chan struct{}
}

// parse parses the block's lines and decodes their payloads, stopping at
// the first bad line.
func (b *lineBlock) parse() {
	d := b.data[b.base:]
	if b.evs == nil {
		n := bytes.Count(d, []byte{'\n'}) + 1
		b.evs = make([]Event, 0, n)
		b.ps = make([]Payload, 0, n)
	}
	var tc timeCache
	for len(d) > 0 {
		ln := d
		if j := bytes.IndexByte(d, '\n'); j >= 0 {
			ln, d = d[:j], d[j+1:]
		} else {
			d = nil
		}
		// Data that gets decoded is validated by decoding; only the rest
		// needs parsePrefix's bracket scan.
		ev, ok := parsePrefixOpt(ln, false, &tc)
		decode := ok && ev.Type != TypeAssistantChunk && ev.Type.Known()
		if ok && !decode {
			if ev.Type == TypeAssistantChunk {
				ok = chunkDataOK(ev.Data)
			} else {
				ok = objectLen(ev.Data) == len(ev.Data)
			}
		}
		var err error
		if !ok {
			if ev, err = parseLineSlow(ln); err != nil {
				b.err, b.eseq = err, -1
				return
			}
			decode = ev.Type != TypeAssistantChunk && ev.Type.Known()
		}
		var p Payload
		if decode {
			if p, err = ev.Decode(); err != nil {
				// Maybe data was not one value (fields after it):
				// parse the line the careful way.
				if ev, err = ParseLine(ln); err == nil {
					p, err = ev.Decode()
				}
				if err != nil {
					b.err, b.eseq = err, ev.Seq
					return
				}
			}
		}
		b.evs = append(b.evs, ev)
		b.ps = append(b.ps, p)
	}
}

// appendBlock appends a parsed block; line is the index of its first line.
func (l *Log) appendBlock(b *lineBlock, line int) error {
	// The events' data stay in the block: register it as a segment.
	l.events.useSegment(b.data[b.base:len(b.data):len(b.data)])
	defer l.events.endSegment()
	for i, ev := range b.evs {
		if err := l.appendDecoded(ev, b.ps[i]); err != nil {
			return &LineError{Line: line + i, End: b.lineEnd(i), Seq: ev.Seq, Err: err}
		}
	}
	if b.err != nil {
		i := len(b.evs)
		return &LineError{Line: line + i, End: b.lineEnd(i), Seq: b.eseq, Err: b.err}
	}
	return nil
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
// already (nil for chunks and unknown types).
func (l *Log) appendDecoded(ev Event, p Payload) error {
	if ev.Seq != l.Len() {
		return fmt.Errorf("%w: seq %d, want %d", ErrInvariant, ev.Seq, l.Len())
	}
	if !ev.Type.Known() && !ev.Ignorable {
		return fmt.Errorf("%w: %q at seq %d", ErrUnknownType, ev.Type, ev.Seq)
	}
	return l.add(ev, p)
}

// chunkDataOK is objectLen(d) == len(d) for assistant/chunk data, with a
// fast path for the shape rein writes:
// {"turn":N,"step":N,"delta":{"text"|"reasoning":"…"}}.
func chunkDataOK(d []byte) bool {
	i, ok := skipLit(d, 0, `{"turn":`)
	if ok {
		i, ok = skipDigits(d, i)
	}
	if ok {
		i, ok = skipLit(d, i, `,"step":`)
	}
	if ok {
		i, ok = skipDigits(d, i)
	}
	if ok {
		i, ok = skipLit(d, i, `,"delta":{"`)
	}
	if ok {
		if j, ok2 := skipLit(d, i, `text":"`); ok2 {
			i = j
		} else {
			i, ok = skipLit(d, i, `reasoning":"`)
		}
	}
	if ok {
		for i < len(d) {
			for i < len(d) && !quoteStop[d[i]] {
				i++
			}
			if i >= len(d) || d[i] == '"' {
				break
			}
			i += 2
		}
		if i < len(d) && string(d[i:]) == `"}}` {
			return true
		}
	}
	return objectLen(d) == len(d)
}

func skipLit(d []byte, i int, lit string) (int, bool) {
	if len(d)-i >= len(lit) && string(d[i:i+len(lit)]) == lit {
		return i + len(lit), true
	}
	return i, false
}

func skipDigits(d []byte, i int) (int, bool) {
	s := i
	for i < len(d) && d[i] >= '0' && d[i] <= '9' {
		i++
	}
	return i, i > s
}
