// Package wire is what rein's model adapters share for encoding requests
// cheaply: a request body held as byte segments that are sent in order and
// never joined (Body), and the encodings of a conversation's leading
// messages kept back to back in a buffer that only grows (Messages), so
// that a request re-encodes only the messages the previous one did not
// have.
//
// A Messages belongs to one conversation and is not safe for concurrent
// use. A Body made from it stays valid, and may be read from another
// goroutine (net/http writes request bodies from its own), while the
// Messages goes on growing or is cut back: kept bytes are never written
// again.
//
// It imports only the standard library and llm; it must not import an
// adapter or anything above llm.
package wire

import (
	"bytes"
	"encoding/json"
	"io"
	"unsafe"

	"github.com/reinhq/rein/llm"
)

// Body is a request body as byte slices, sent in order.
type Body [][]byte

// Len is the body's size in bytes.
func (b Body) Len() int64 {
	var n int64
	for _, s := range b {
		n += int64(len(s))
	}
	return n
}

// Bytes returns the body joined into one new slice.
func (b Body) Bytes() []byte {
	out := make([]byte, 0, b.Len())
	for _, s := range b {
		out = append(out, s...)
	}
	return out
}

// Reader returns a reader of the body from its start. It implements
// io.WriterTo, which writes each segment as it is.
func (b Body) Reader() io.Reader { return &reader{segs: b} }

type reader struct {
	segs Body
	off  int // into segs[0]
}

func (r *reader) Read(p []byte) (int, error) {
	n := 0
	for n < len(p) && len(r.segs) > 0 {
		c := copy(p[n:], r.segs[0][r.off:])
		n += c
		r.off += c
		if r.off == len(r.segs[0]) {
			r.segs, r.off = r.segs[1:], 0
		}
	}
	if n == 0 && len(r.segs) == 0 && len(p) > 0 {
		return 0, io.EOF
	}
	return n, nil
}

func (r *reader) WriteTo(w io.Writer) (int64, error) {
	var total int64
	for len(r.segs) > 0 {
		s := r.segs[0][r.off:]
		n, err := w.Write(s)
		total += int64(n)
		r.off += n
		if err != nil {
			return total, err
		}
		if n < len(s) {
			return total, io.ErrShortWrite
		}
		r.segs, r.off = r.segs[1:], 0
	}
	return total, nil
}

// Messages keeps the encodings of a conversation's leading messages with
// per-message data M of the adapter's choosing. Each message's encoding is
// whatever the adapter appended for it (separators and the glue its
// dialect puts between messages included); together they are the
// messages part of the request body.
type Messages[M any] struct {
	buf  []byte
	ends []int
	msgs []llm.Message
	meta []M
	// The request of the last Update, and its messages (array and
	// length): Stream after Prepare finds them encoded without a walk.
	lastReq  *llm.Request
	lastMsgs []llm.Message
}

// Keep compares msgs with the messages encoded so far, one by one, by
// identity (Same), and forgets every encoding from the first that differs
// on. It returns how many leading messages stay encoded. Its cost is a few
// comparisons per message; no message is read.
func (m *Messages[M]) Keep(msgs []llm.Message) int {
	k := 0
	for k < len(m.msgs) && k < len(msgs) && Same(&m.msgs[k], &msgs[k]) {
		k++
	}
	if k < len(m.msgs) {
		off := m.End(k)
		// A body made earlier may still be reading the bytes past off:
		// capping the buffer makes the next append copy instead of
		// writing over them.
		m.buf = m.buf[:off:off]
		clear(m.msgs[k:])
		clear(m.meta[k:])
		m.ends, m.msgs, m.meta = m.ends[:k], m.msgs[:k], m.meta[:k]
	}
	return k
}

// Len is the number of messages encoded.
func (m *Messages[M]) Len() int { return len(m.msgs) }

// End is the size of the encodings of the first n messages.
func (m *Messages[M]) End(n int) int {
	if n == 0 {
		return 0
	}
	return m.ends[n-1]
}

// Bytes returns the encodings of every kept message, back to back. The
// slice stays valid, unchanged, whatever the Messages does later.
func (m *Messages[M]) Bytes() []byte { return m.buf[:len(m.buf):len(m.buf)] }

// Meta returns message i's data.
func (m *Messages[M]) Meta(i int) M { return m.meta[i] }

// Add encodes msg as the next message: enc appends its encoding to b (the
// buffer so far, whose length is the offset it starts at) and returns the
// result and the message's data. When enc fails nothing is added.
func (m *Messages[M]) Add(msg llm.Message, enc func(b []byte) ([]byte, M, error)) error {
	b, meta, err := enc(m.buf)
	if err != nil {
		return err // whatever enc wrote lies past len(m.buf): unseen
	}
	m.buf = b
	m.ends = append(m.ends, len(b))
	m.msgs = append(m.msgs, msg)
	m.meta = append(m.meta, meta)
	return nil
}

// Update brings the encodings up to date with req's messages: it keeps
// what it can (Keep) and encodes the other messages in order, enc
// appending msgs[i]'s encoding to b as Add describes. It returns what they
// share with the messages encoded before: the kept messages and their
// size. A second Update of the same request with the same Messages slice
// (Stream after Prepare) finds them encoded without comparing them again.
func (m *Messages[M]) Update(req *llm.Request, enc func(b []byte, i int) ([]byte, M, error)) (llm.Shared, error) {
	msgs := req.Messages
	if req == m.lastReq && len(msgs) == len(m.lastMsgs) && unsafe.SliceData(msgs) == unsafe.SliceData(m.lastMsgs) && len(msgs) == len(m.msgs) {
		return llm.Shared{Messages: len(msgs), Bytes: int64(m.End(len(msgs)))}, nil
	}
	m.lastReq, m.lastMsgs = nil, nil
	k := m.Keep(msgs)
	sh := llm.Shared{Messages: k, Bytes: int64(m.End(k))}
	for i := k; i < len(msgs); i++ {
		if err := m.Add(msgs[i], func(b []byte) ([]byte, M, error) { return enc(b, i) }); err != nil {
			return sh, err
		}
	}
	m.lastReq, m.lastMsgs = req, msgs
	return sh, nil
}

// Same reports whether a and b are the same message: equal role, tool call
// id and error flag, and the same Content and ToolCalls arrays (not merely
// equal ones). Messages are never modified once sent, so the same message
// has the same encoding.
func Same(a, b *llm.Message) bool {
	return a.IsError == b.IsError && len(a.Content) == len(b.Content) && len(a.ToolCalls) == len(b.ToolCalls) &&
		unsafe.SliceData(a.Content) == unsafe.SliceData(b.Content) &&
		unsafe.SliceData(a.ToolCalls) == unsafe.SliceData(b.ToolCalls) &&
		sameString(string(a.Role), string(b.Role)) && sameString(a.ToolCallID, b.ToolCallID)
}

// sameString is a == b, without a call when both are the same bytes (as
// the fields of a message and of its copy are).
func sameString(a, b string) bool {
	return len(a) == len(b) && (unsafe.StringData(a) == unsafe.StringData(b) || a == b)
}

// AppendJSON appends v encoded as encoding/json does, without HTML escaping
// and without the encoder's trailing newline.
func AppendJSON(b []byte, v any) ([]byte, error) {
	w := appender{b: b}
	enc := json.NewEncoder(&w)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return b, err
	}
	return w.b[:len(w.b)-1], nil
}

type appender struct{ b []byte }

func (a *appender) Write(p []byte) (int, error) {
	a.b = append(a.b, p...)
	return len(p), nil
}

// State returns owner's state in c: the one stored there, or a new zero S
// stored in c when it holds none or another owner's. When c is nil it is a
// new S kept nowhere (the request is encoded from scratch).
func State[S any](c *llm.Cache, owner any) *S {
	if c == nil {
		return new(S)
	}
	s, ok := c.Slot(owner).(*S)
	if !ok {
		s = new(S)
		c.SetSlot(owner, s)
	}
	return s
}

// SameTools reports whether a and b list equal tools.
func SameTools(a, b []llm.ToolSpec) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Name != b[i].Name || a[i].Description != b[i].Description || !bytes.Equal(a[i].Parameters, b[i].Parameters) {
			return false
		}
	}
	return true
}
