package wire

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"unsafe"
)

// Obj is the decoding plan of a struct type T, made once (ObjOf): each of
// its fields by its JSON name, with where it lives in T and how to read
// it. Decoding follows encoding/json for what it takes: null leaves a
// string, number, bool or struct as it is, empties a slice or pointer, and
// is "null" for a json.RawMessage. A key T does not have, or has only
// case-folded, or one that comes twice, makes the decoder give up
// (encoding/json would ignore it, match it, or merge into the first).
type Obj[T any] struct{ p *plan }

type kind uint8

const (
	kString kind = iota
	kInt
	kInt64
	kBool
	kInt64s
	kRaw
	kIntPtr
	kStruct
	kCustom
)

type plan struct{ slots []slot }

type slot struct {
	name       string
	kind       kind
	off        uintptr
	sub        *plan                          // kStruct
	custom     func(d *Dec, v unsafe.Pointer) // kCustom: v points to the struct
	lazy, text bool
}

// Opt adjusts a plan (ObjOf).
type Opt func(p *plan, t reflect.Type)

// Lazy marks string or json.RawMessage fields that a decoder loading for a
// log (NewDec with an Arena) or checking (Check) only validates.
func Lazy(names ...string) Opt {
	return func(p *plan, t reflect.Type) {
		for _, n := range names {
			p.slot(t, n).lazy = true
		}
	}
}

// Text marks string or json.RawMessage fields that only a checking
// decoder validates without decoding: what the session invariant never
// looks at (message text, a call's arguments, a result's meta).
func Text(names ...string) Opt {
	return func(p *plan, t reflect.Type) {
		for _, n := range names {
			p.slot(t, n).text = true
		}
	}
}

// Custom has field name read by f, which gets the decoder and the struct
// (for slices of structs, pointers, floats: what the plan does not read).
func Custom[T any](name string, f func(d *Dec, v *T)) Opt {
	return func(p *plan, t reflect.Type) {
		s := p.slot(t, name)
		s.kind, s.custom = kCustom, func(d *Dec, v unsafe.Pointer) { f(d, (*T)(v)) }
	}
}

// Nested applies opts to the plan of struct field name (a field of kind
// struct).
func Nested(name string, opts ...Opt) Opt {
	return func(p *plan, t reflect.Type) {
		s := p.slot(t, name)
		f, _ := t.FieldByName(fieldName(t, name))
		for _, o := range opts {
			o(s.sub, f.Type)
		}
	}
}

func (p *plan) slot(t reflect.Type, name string) *slot {
	for i := range p.slots {
		if p.slots[i].name == name {
			return &p.slots[i]
		}
	}
	panic(fmt.Sprintf("wire: %s has no field %q", t, name))
}

// fieldName returns the Go name of t's field with JSON name name.
func fieldName(t reflect.Type, name string) string {
	for i := range t.NumField() {
		if n, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ","); n == name {
			return t.Field(i).Name
		}
	}
	return ""
}

var rawType = reflect.TypeFor[json.RawMessage]()

// ObjOf makes the plan of struct type T from its fields' json tags. A
// field of a type the plan cannot read (slices of structs, pointers but
// *int, floats) must be given a Custom reader; ObjOf panics otherwise, and
// on an Opt that names no field: plans are made at init, so that is a
// programming error.
func ObjOf[T any](opts ...Opt) *Obj[T] {
	t := reflect.TypeFor[T]()
	p := planOf(t)
	for _, o := range opts {
		o(p, t)
	}
	for _, s := range p.slots {
		if s.kind == kCustom && s.custom == nil {
			panic(fmt.Sprintf("wire: %s.%s needs a Custom reader", t, s.name))
		}
	}
	if len(p.slots) > 64 {
		panic(fmt.Sprintf("wire: %s has more than 64 fields", t))
	}
	return &Obj[T]{p}
}

func planOf(t reflect.Type) *plan {
	p := &plan{}
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if !f.IsExported() || name == "-" {
			continue
		}
		if name == "" {
			name = f.Name
		}
		s := slot{name: name, off: f.Offset, kind: kCustom} // unknown kinds need a Custom reader
		switch ft := f.Type; {
		case ft == rawType:
			s.kind = kRaw
		case ft.Kind() == reflect.String:
			s.kind = kString
		case ft.Kind() == reflect.Int:
			s.kind = kInt
		case ft.Kind() == reflect.Int64:
			s.kind = kInt64
		case ft.Kind() == reflect.Bool:
			s.kind = kBool
		case ft.Kind() == reflect.Slice && ft.Elem().Kind() == reflect.Int64:
			s.kind = kInt64s
		case ft.Kind() == reflect.Pointer && ft.Elem().Kind() == reflect.Int:
			s.kind = kIntPtr
		case ft.Kind() == reflect.Struct:
			s.kind, s.sub = kStruct, planOf(ft)
		}
		p.slots = append(p.slots, s)
	}
	return p
}

// Decode decodes an object into v (null: v unchanged).
func (o *Obj[T]) Decode(d *Dec, v *T) { d.decodePlan(o.p, unsafe.Pointer(v)) }

func (d *Dec) decodePlan(p *plan, base unsafe.Pointer) {
	if d.bad || d.Null() {
		return
	}
	if !d.eat('{') {
		d.Fail()
		return
	}
	if d.eat('}') {
		return
	}
	var seen uint64
	next := 0 // rein writes fields in their order: try the next one first
	for !d.bad {
		if d.Peek() != '"' {
			d.Fail()
			return
		}
		k := d.key()
		if !d.eat(':') {
			d.Fail()
			return
		}
		i := p.find(k, next)
		if i < 0 || seen&(1<<i) != 0 {
			d.Fail()
			return
		}
		seen |= 1 << i
		next = i + 1
		s := &p.slots[i]
		d.slot(s, unsafe.Add(base, s.off), base)
		if d.eat(',') {
			continue
		}
		if !d.eat('}') {
			d.Fail()
		}
		return
	}
}

// find returns the index of the slot named k, looking at slot next first,
// or -1.
func (p *plan) find(k []byte, next int) int {
	if next < len(p.slots) && p.slots[next].name == string(k) {
		return next
	}
	for i := range p.slots {
		// Length and first byte first: most keys differ there, and
		// comparing whole strings costs a call.
		if n := p.slots[i].name; len(n) == len(k) && len(k) > 0 && n[0] == k[0] && n == string(k) {
			return i
		}
	}
	return -1
}

// slot reads the value of slot s into at (base is the struct's start).
func (d *Dec) slot(s *slot, at, base unsafe.Pointer) {
	if s.lazy && d.Lazy() || s.text && d.check {
		if s.kind == kRaw {
			d.Value()
		} else {
			d.SkipStr()
		}
		return
	}
	switch s.kind {
	case kString:
		if !d.Null() {
			*(*string)(at) = d.Str()
		}
	case kInt:
		if !d.Null() {
			*(*int)(at) = d.Int()
		}
	case kInt64:
		if !d.Null() {
			*(*int64)(at) = int64(d.Int())
		}
	case kBool:
		if !d.Null() {
			*(*bool)(at) = d.Bool()
		}
	case kInt64s:
		*(*[]int64)(at) = d.Int64s()
	case kRaw:
		*(*json.RawMessage)(at) = d.Raw()
	case kIntPtr:
		if d.Null() {
			*(**int)(at) = nil
			return
		}
		n := d.Int()
		*(**int)(at) = &n
	case kStruct:
		d.decodePlan(s.sub, at)
	case kCustom:
		s.custom(d, base)
	}
}

// List decodes an array of objects of plan o, with room for n elements at
// first. null gives nil, an empty array an empty, non-nil slice, as
// encoding/json does.
func List[T any](d *Dec, o *Obj[T], n int) []T {
	var out []T
	if n > 0 && d.Peek() == '[' {
		out = make([]T, 0, n)
	}
	if !d.Array(func() {
		var zero T
		out = append(out, zero)
		o.Decode(d, &out[len(out)-1])
	}) {
		return nil
	}
	if out == nil {
		out = []T{}
	}
	return out
}

// Ptr decodes an object of plan o into a new T (null: nil).
func Ptr[T any](d *Dec, o *Obj[T]) *T {
	if d.Null() {
		return nil
	}
	v := new(T)
	o.Decode(d, v)
	return v
}
