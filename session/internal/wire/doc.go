// Package wire is the fast path of reading session lines: a JSON scanner
// (Dec), payload plans made once per type from its json tags (ObjOf), so
// that a decoder is a plan instead of a spelled-out scan, the envelope of
// an event line as rein writes it (Prefix), the one-pass parser of rein's
// own assistant/chunk lines (ChunkLine), what can be read of a damaged
// line (ReadHead), and event times (TimeCache).
//
// Everything here either takes its input exactly as encoding/json would
// (and as valid UTF-8), or gives up: it never accepts what the general
// decoder, encoding/json over the same bytes plus a UTF-8 check, refuses,
// and where both accept they give the same values. Callers fall back to
// the general decoder when this package gives up, so giving up is always
// safe; the fuzz tests of this package and of session hold it to that.
//
// The package knows the line format but not the event types: session
// owns those and makes their plans.
package wire
