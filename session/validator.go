package session

// Validator checks event lines exactly as (*Log).AppendLines appends them,
// every line validated and the invariant checked, without keeping them: no
// events, no projection, payloads decoded only as far as the checker
// needs, and nothing that refers to the input once AppendLines returns,
// so the caller may reuse its buffers. A store validates what it copies
// with it (a fork).
type Validator struct{ l Log }

// NewValidator returns a validator for the lines of a session with header
// h.
func NewValidator(h Header) *Validator {
	v := &Validator{l: Log{header: h, check: true}}
	v.l.events.count = true
	return v
}

// AppendLines validates lines as (*Log).AppendLines appends them, with the
// same errors.
func (v *Validator) AppendLines(data []byte) error { return v.l.AppendLines(data) }

// Len returns the number of events validated, which is also the next seq.
func (v *Validator) Len() int64 { return v.l.Len() }

// ForkPoint is ForkPoint on the events validated.
func (v *Validator) ForkPoint(at int64) error { return ForkPoint(&v.l, at) }
