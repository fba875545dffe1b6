package wire

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"math/bits"
)

// Field is one key of an object a decoder knows, and where its value goes.
type Field struct {
	name       string
	to         any
	lazy, text bool
}

// F maps key name to to: a *string, *int, *int64 or *bool (which null
// leaves as it is), a *[]int64 (null: nil) or a *json.RawMessage (null:
// "null"), as encoding/json has it; or a func() that reads the value
// itself with the decoder's methods.
func F(name string, to any) Field { return Field{name: name, to: to} }

// Lazy is F for a value that a decoder loading for a log (NewDec with an
// Arena) or checking (Check) only validates: a *string must be a string
// or null, a *json.RawMessage any value; to is left untouched.
func Lazy(name string, to any) Field { return Field{name: name, to: to, lazy: true} }

// Text is F for a value only a checking decoder (Check) validates without
// decoding: what the session invariant never looks at (message text, a
// call's arguments, a result's meta).
func Text(name string, to any) Field { return Field{name: name, to: to, text: true} }

// Fields decodes an object whose keys are among fs (at most 64), each
// into its target; null leaves the targets untouched. A key that is not
// among them, or one that comes twice, fails: encoding/json would ignore
// the first, match it case-insensitively, or merge a repeated object or
// array into the earlier one, and it decides those.
func (d *Dec) Fields(fs ...Field) {
	var seen uint64
	d.Object(func(k []byte) {
		for i := range fs {
			if fs[i].name == string(k) {
				if seen&(1<<i) != 0 {
					break
				}
				seen |= 1 << i
				fs[i].decode(d)
				return
			}
		}
		d.Fail()
	})
}

func (f *Field) decode(d *Dec) {
	if f.lazy && d.Lazy() || f.text && d.check {
		switch f.to.(type) {
		case *string:
			d.SkipStr()
		case *json.RawMessage:
			d.Value()
		default:
			d.Fail()
		}
		return
	}
	switch f.to.(type) {
	case *string, *int, *int64, *bool:
		if d.Null() {
			return // as in encoding/json: no effect
		}
	}
	switch to := f.to.(type) {
	case *string:
		*to = d.Str()
	case *int:
		*to = d.Int()
	case *int64:
		*to = int64(d.Int())
	case *bool:
		*to = d.Bool()
	case *[]int64:
		*to = d.Int64s()
	case *json.RawMessage:
		*to = d.Raw()
	case func():
		to()
	default:
		d.Fail()
	}
}

var comma = []byte{','}

// Int64s reads an array of integers (null gives nil).
func (d *Dec) Int64s() []int64 {
	var v []int64
	if d.Peek() == '[' {
		// Size the slice at once: count the commas up to ']'.
		rest := d.b[d.i:]
		if j := bytes.IndexByte(rest, ']'); j >= 0 {
			rest = rest[:j]
		}
		v = make([]int64, 0, bytes.Count(rest, comma)+1)
		// Fast path: plain non-negative numbers, no spaces.
		b := d.b
		i := d.i + 1
		if i < len(b) && b[i] == ']' {
			d.i = i + 1
			return v
		}
		for i < len(b) {
			s := i
			var x int64
			if n := Digits8(b[i:]); n > 0 {
				x = int64(Swar8(b[i:], n))
				i += n
			} else {
				for i < len(b) && b[i] >= '0' && b[i] <= '9' {
					x = x*10 + int64(b[i]-'0')
					i++
				}
			}
			if i == s || i-s > 15 || (b[s] == '0' && i-s > 1) || i >= len(b) {
				break
			}
			v = append(v, x)
			if b[i] == ']' {
				d.i = i + 1
				return v
			}
			if b[i] != ',' {
				break
			}
			i++
		}
		v = v[:0] // something else: the general path
	}
	if !d.Array(func() { v = append(v, int64(d.Int())) }) {
		return nil
	}
	return v
}

// Digits8 returns how many decimal digits b starts with when that is 1 to
// 7 and b has 8 bytes to look at, else 0.
func Digits8(b []byte) int {
	if len(b) < 8 {
		return 0
	}
	w := binary.LittleEndian.Uint64(b)
	// A high bit on each byte above '9' or below '0'; carries and
	// borrows only reach bytes above a marked one.
	m := ((w + ones*(0x7f-'9')) | (w - ones*'0') | w) & highs
	return bits.TrailingZeros64(m) >> 3 & 7
}

// Swar8 converts the n (1..7) digits b starts with, eight bytes at a time.
func Swar8(b []byte, n int) uint64 {
	v := (binary.LittleEndian.Uint64(b) - ones*'0') << (64 - 8*n) // the digits, then zeros, as leading zeros
	v = (v & 0x0F0F0F0F0F0F0F0F) * 2561 >> 8
	v = (v & 0x00FF00FF00FF00FF) * 6553601 >> 16
	return (v & 0x0000FFFF0000FFFF) * 42949672960001 >> 32
}
