package nlkit

import (
	"encoding/binary"
	"errors"
)

// TypeMask clears NLA_F_NESTED and NLA_F_NET_BYTEORDER from an attribute type.
const TypeMask = 0x3fff

var (
	// ErrTruncated: an attribute's length is under its header's or runs past
	// the end of the stream.
	ErrTruncated = errors.New("netlink attribute runs past the end")
	// ErrTrailing: 1 to 3 bytes after the last attribute, too few for a header.
	ErrTrailing = errors.New("netlink attributes: trailing bytes")
)

// Attrs walks a stream of netlink attributes (header in host byte order,
// payload padded to 4 bytes) without allocating:
//
//	a := nlkit.Attrs{B: b}
//	for a.Next() { ... a.Type, a.Val ... }
//	if a.Err != nil { ... }
//
// It stops at the first attribute that runs past the end (Err ErrTruncated) or
// at 1-3 trailing bytes (Err ErrTrailing). Type has the nested and byte-order
// flags cleared; Off is the offset of the attribute's header in the stream.
type Attrs struct {
	B    []byte
	Type uint16
	Val  []byte
	Off  int
	Err  error

	next int // offset of the next attribute
}

// Next advances to the next attribute; false at the end or on an error.
func (a *Attrs) Next() bool {
	if len(a.B) < 4 {
		if len(a.B) != 0 {
			a.Err = ErrTrailing
		}
		return false
	}
	n := int(binary.NativeEndian.Uint16(a.B[0:2]))
	if n < 4 || n > len(a.B) {
		a.Err = ErrTruncated
		return false
	}
	a.Type = binary.NativeEndian.Uint16(a.B[2:4]) & TypeMask
	a.Val = a.B[4:n]
	aligned := min((n+3)&^3, len(a.B))
	a.Off = a.next
	a.next += aligned
	a.B = a.B[aligned:]
	return true
}

// WalkAttrs calls fn for each attribute of a stream: its type without the
// nested/byte-order flags, the offset of its header in b, its value. It
// returns ErrTruncated at an attribute that runs past the end; bytes too few
// for a header at the end are ignored.
func WalkAttrs(b []byte, fn func(typ uint16, off int, v []byte)) error {
	a := Attrs{B: b}
	for a.Next() {
		fn(a.Type, a.Off, a.Val)
	}
	if a.Err == ErrTruncated {
		return a.Err
	}
	return nil
}

// AttrLen is the bytes an attribute with n bytes of data takes, padding included.
func AttrLen(n int) int { return (4 + n + 3) &^ 3 }

// AppendAttr appends the attribute typ with data, padded to 4 bytes.
func AppendAttr(b []byte, typ uint16, data []byte) []byte {
	start := len(b)
	b = append(b, 0, 0, 0, 0)
	b = append(b, data...)
	return FinishAttr(b, start, typ)
}

// AppendStringAttr appends s, NUL-terminated, as the attribute typ.
func AppendStringAttr(b []byte, typ uint16, s string) []byte {
	start := len(b)
	b = append(b, 0, 0, 0, 0)
	b = append(b, s...)
	b = append(b, 0)
	return FinishAttr(b, start, typ)
}

// FinishAttr writes the header of the attribute that starts at start (its 4
// header bytes reserved, its value appended) and runs to the end of b, and
// pads the attribute to 4 bytes (relative to start: b may hold anything
// before the message).
func FinishAttr(b []byte, start int, typ uint16) []byte {
	binary.NativeEndian.PutUint16(b[start:], uint16(len(b)-start))
	binary.NativeEndian.PutUint16(b[start+2:], typ)
	for (len(b)-start)%4 != 0 {
		b = append(b, 0)
	}
	return b
}

// BeginNested appends the header of a nested attribute and returns b and where
// the attribute starts; EndNested writes its length once its contents are
// appended (they are padded already, so the length is the padded one, as the
// netlink package's). typ carries NLA_F_NESTED if the caller wants it.
func BeginNested(b []byte, typ uint16) ([]byte, int) {
	start := len(b)
	b = append(b, 0, 0, 0, 0)
	binary.NativeEndian.PutUint16(b[start+2:], typ)
	return b, start
}

// EndNested: see BeginNested.
func EndNested(b []byte, start int) {
	binary.NativeEndian.PutUint16(b[start:], uint16(len(b)-start))
}
