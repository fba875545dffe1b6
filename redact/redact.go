// Package redact removes known secret values (the API keys rein uses) from
// text before it is written or printed: error messages, slog lines, event
// payloads, a process's output. A secret is replaced by its mask, a short
// prefix and the last four characters around an ellipsis ("sk-…abcd"), so
// a person can still tell which key was meant.
//
// Redaction is by value: only the exact secret strings given to a Redactor
// are found. A secret split across two separate writes or two events is
// not recognised; every caller in rein writes whole lines, events or
// messages.
//
// Concurrency: a Redactor is safe for concurrent use; Add may run while
// other goroutines redact. The nil *Redactor redacts nothing. This package
// imports only the standard library.
package redact

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync/atomic"
)

// MinLen is the shortest value Add accepts as a secret: shorter values
// (an empty variable, "1", "true") would mangle ordinary text and are no
// credential anyway.
const MinLen = 8

// Redactor replaces a set of secret values by their masks.
type Redactor struct {
	// set holds the secrets, longest first (so a secret containing
	// another is replaced whole), and their masks. Replaced, never
	// changed, by Add.
	set atomic.Pointer[secrets]
}

type secrets struct {
	vals  []string
	masks []string
	repl  *strings.Replacer
}

// New returns a Redactor for values (see Add).
func New(values ...string) *Redactor {
	r := &Redactor{}
	r.Add(values...)
	return r
}

// Add adds secret values. Values shorter than MinLen and values already
// known are ignored. Surrounding white space is not part of a secret.
func (r *Redactor) Add(values ...string) {
	if r == nil {
		return
	}
	for {
		old := r.set.Load()
		var vals []string
		if old != nil {
			vals = slices.Clone(old.vals)
		}
		added := false
		for _, v := range values {
			v = strings.TrimSpace(v)
			if len(v) < MinLen || slices.Contains(vals, v) {
				continue
			}
			vals = append(vals, v)
			added = true
		}
		if !added {
			return
		}
		slices.SortStableFunc(vals, func(a, b string) int { return len(b) - len(a) })
		s := &secrets{vals: vals, masks: make([]string, len(vals))}
		pairs := make([]string, 0, 2*len(vals))
		for i, v := range vals {
			s.masks[i] = Mask(v)
			pairs = append(pairs, v, s.masks[i])
		}
		s.repl = strings.NewReplacer(pairs...)
		if r.set.CompareAndSwap(old, s) {
			return
		}
	}
}

// Active reports whether r knows any secret.
func (r *Redactor) Active() bool { return r != nil && r.set.Load() != nil }

// Mask is how a secret is shown: its first three and last four characters
// around "…" for a secret of 16 characters or more, else "[redacted]".
func Mask(secret string) string {
	if len(secret) < 16 {
		return "[redacted]"
	}
	return secret[:3] + "…" + secret[len(secret)-4:]
}

// String returns s with every known secret masked.
func (r *Redactor) String(s string) string {
	set := r.load()
	if set == nil || !set.in(s) {
		return s
	}
	return set.repl.Replace(s)
}

// Bytes returns b with every known secret masked. It returns b itself
// when b holds no secret, and a new slice otherwise; b is never modified.
func (r *Redactor) Bytes(b []byte) []byte {
	set := r.load()
	if set == nil {
		return b
	}
	hit := false
	for _, v := range set.vals {
		if bytes.Contains(b, []byte(v)) {
			hit = true
			break
		}
	}
	if !hit {
		return b
	}
	return []byte(set.repl.Replace(string(b)))
}

// Contains reports whether s holds a known secret.
func (r *Redactor) Contains(s string) bool {
	set := r.load()
	return set != nil && set.in(s)
}

// Error returns err with its message redacted; errors.Is and errors.As
// still see the original chain. A nil err stays nil, and an error without
// a secret is returned as is.
func (r *Redactor) Error(err error) error {
	if err == nil || !r.Contains(err.Error()) {
		return err
	}
	return &redacted{msg: r.String(err.Error()), err: err}
}

type redacted struct {
	msg string
	err error
}

func (e *redacted) Error() string { return e.msg }
func (e *redacted) Unwrap() error { return e.err }

func (r *Redactor) load() *secrets {
	if r == nil {
		return nil
	}
	return r.set.Load()
}

func (s *secrets) in(text string) bool {
	for _, v := range s.vals {
		if strings.Contains(text, v) {
			return true
		}
	}
	return false
}

// Writer returns a writer that redacts each Write before passing it to w.
// It reports len(p) written when w took the whole redacted text. A secret
// split across two Writes is not recognised.
func (r *Redactor) Writer(w io.Writer) io.Writer { return &writer{r: r, w: w} }

type writer struct {
	r *Redactor
	w io.Writer
}

func (w *writer) Write(p []byte) (int, error) {
	q := w.r.Bytes(p)
	n, err := w.w.Write(q)
	if err != nil {
		if len(q) == len(p) {
			return n, err
		}
		return 0, err
	}
	if n < len(q) {
		return 0, io.ErrShortWrite
	}
	return len(p), nil
}

// Unwrap returns the underlying writer (to ask, e.g., whether it is a
// terminal).
func (w *writer) Unwrap() io.Writer { return w.w }

// Handler wraps h so that every record's message and attribute values are
// redacted before h sees them.
func (r *Redactor) Handler(h slog.Handler) slog.Handler { return &handler{r: r, h: h} }

type handler struct {
	r *Redactor
	h slog.Handler
}

func (h *handler) Enabled(ctx context.Context, l slog.Level) bool { return h.h.Enabled(ctx, l) }

func (h *handler) Handle(ctx context.Context, rec slog.Record) error {
	if !h.r.Active() {
		return h.h.Handle(ctx, rec)
	}
	out := slog.NewRecord(rec.Time, rec.Level, h.r.String(rec.Message), rec.PC)
	rec.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(h.attr(a))
		return true
	})
	return h.h.Handle(ctx, out)
}

func (h *handler) WithAttrs(as []slog.Attr) slog.Handler {
	red := make([]slog.Attr, len(as))
	for i, a := range as {
		red[i] = h.attr(a)
	}
	return &handler{r: h.r, h: h.h.WithAttrs(red)}
}

func (h *handler) WithGroup(name string) slog.Handler {
	return &handler{r: h.r, h: h.h.WithGroup(name)}
}

// attr redacts one attribute's value: strings, errors, Stringers and
// anything else whose printed form holds a secret.
func (h *handler) attr(a slog.Attr) slog.Attr {
	v := a.Value.Resolve()
	switch v.Kind() {
	case slog.KindString:
		return slog.String(a.Key, h.r.String(v.String()))
	case slog.KindGroup:
		g := v.Group()
		red := make([]any, len(g))
		for i, x := range g {
			red[i] = h.attr(x)
		}
		return slog.Group(a.Key, red...)
	case slog.KindAny:
		var s string
		switch x := v.Any().(type) {
		case error:
			s = x.Error()
		case []byte:
			s = string(x)
		case fmt.Stringer:
			s = x.String()
		default:
			s = fmt.Sprint(x)
		}
		if h.r.Contains(s) {
			return slog.String(a.Key, h.r.String(s))
		}
	}
	return slog.Attr{Key: a.Key, Value: v}
}
