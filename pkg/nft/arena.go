package nft

import (
	"iter"
	"strings"
)

// elementArena is one owner's elements, IDs and values, in one string. The
// ruleset's entries hold the offset of their record in it, which gives both their
// ID (the element table's key: elemtable.go) and their value, so an owner's
// elements cost one allocation instead of three per element (the ID, the data and
// the owner's list of IDs).
//
// Each record is the ID's length (uvarint), the ID, the value's length (uvarint)
// and the value (elementvalue.go). An owner re-rendering gets a new arena and its
// entries move into it (putHolder), so the old one is freed.
type elementArena string

// arenaSpan is where one element's ID and value sit in its arena: off is the
// offset of its record.
type arenaSpan struct {
	id, val string
	off     uint32
}

// newArena builds the arena of elems, in order, and the spans of each element,
// appended to spans[:0].
func newArena(elems []Element, spans []arenaSpan) (elementArena, []arenaSpan) {
	// An owner's elements come in runs of one set: its code is looked up once a run.
	var set string
	var code uint64
	codeOf := func(name string) uint64 {
		if name != set || set == "" {
			set, code = name, setCode(name)
		}
		return code
	}
	size := 0
	for i := range elems {
		idLen, valLen := uvarintLen(codeOf(elems[i].Set))+concatLen(elems[i].Key), encodedValueLen(&elems[i])
		size += uvarintLen(uint64(idLen)) + idLen + uvarintLen(uint64(valLen)) + valLen
	}
	var b strings.Builder
	b.Grow(size)
	spans = spans[:0]
	for i := range elems {
		e := &elems[i]
		spans = append(spans, arenaSpan{off: uint32(b.Len())})
		c := codeOf(e.Set)
		writeUvarint(&b, uint64(uvarintLen(c)+concatLen(e.Key)))
		writeUvarint(&b, c)
		writeConcat(&b, e.Key)
		writeUvarint(&b, uint64(encodedValueLen(e)))
		writeValue(&b, e)
	}
	s := b.String()
	for i := range spans {
		id, rest := arenaField(s[spans[i].off:])
		spans[i].id, spans[i].val = id, recordValue(rest)
	}
	return elementArena(s), spans
}

// recordValue is the value field that rest, a record after its ID, starts with.
func recordValue(rest string) string {
	v, _ := arenaField(rest)
	return v
}

func uvarintLen(n uint64) int {
	l := 1
	for ; n >= 0x80; n >>= 7 {
		l++
	}
	return l
}

// ids yields the IDs the arena holds, in order.
func (a elementArena) ids() iter.Seq[string] {
	return func(yield func(string) bool) {
		s := string(a)
		for len(s) > 0 {
			id, rest := arenaField(s)
			_, rest = arenaField(rest)
			s = rest
			if !yield(id) {
				return
			}
		}
	}
}

// count is the number of elements the arena holds.
func (a elementArena) count() int {
	n := 0
	for range a.ids() {
		n++
	}
	return n
}

// idAt is the ID of the record at off.
func (a elementArena) idAt(off uint32) string {
	id, _ := arenaField(string(a[off:]))
	return id
}

// valueAt is the value of the record at off.
func (a elementArena) valueAt(off uint32) string {
	_, rest := arenaField(string(a[off:]))
	v, _ := arenaField(rest)
	return v
}

// find returns the arena's own string of id and the offset of its record; an
// owner's arena is short (its own elements), and this serves the rare hand-over of
// a contested element.
func (a elementArena) find(id string) (string, uint32, bool) {
	s := string(a)
	for len(s) > 0 {
		rec := uint32(len(a) - len(s))
		x, rest := arenaField(s)
		if x == id {
			return x, rec, true
		}
		_, s = arenaField(rest)
	}
	return "", 0, false
}

// arenaField splits the first length-prefixed field off s. The arena is only ever
// made by newArena, so the lengths are whole.
func arenaField(s string) (field, rest string) {
	n, k := uvarintOf(s)
	return s[k : k+int(n)], s[k+int(n):]
}

// uvarintOf decodes the uvarint s starts with and returns it and its length.
func uvarintOf(s string) (uint64, int) {
	var n uint64
	for k, shift := 0, 0; ; shift += 7 {
		c := s[k]
		k++
		n |= uint64(c&0x7f) << shift
		if c < 0x80 {
			return n, k
		}
	}
}
