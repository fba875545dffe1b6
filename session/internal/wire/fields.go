package wire

import (
	"bytes"
	"encoding/binary"
	"math/bits"
)

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
