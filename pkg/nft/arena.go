package nft

import (
	"encoding/binary"
	"iter"
	"strings"
)

// elementArena is one owner's element IDs and data bytes in one string. The
// ruleset's entries use substrings of it as their map keys and data, so an owner's
// elements cost one allocation instead of three per element (the ID, the data and
// the owner's list of IDs: 56 bytes each of 660k elements at 30k Services).
//
// Each record is the ID's length (uvarint), the ID, the data's length (uvarint) and
// the data. An owner re-rendering gets a new arena and its entries are re-keyed
// into it (putHolder), so the old one is freed.
type elementArena string

// arenaSpan is where one element's ID and data sit in its arena.
type arenaSpan struct{ id, data string }

// newArena builds the arena of elems, in order, and the spans of each element.
func newArena(elems []Element) (elementArena, []arenaSpan) {
	size := 0
	for i := range elems {
		idLen, dataLen := len(elems[i].Set)+1+concatLen(elems[i].Key), concatLen(elems[i].Data)
		size += uvarintLen(idLen) + idLen + uvarintLen(dataLen) + dataLen
	}
	var b strings.Builder
	b.Grow(size)
	type offsets struct{ id, idEnd, data, end int }
	at := make([]offsets, len(elems))
	var lenBuf [binary.MaxVarintLen64]byte
	for i := range elems {
		e := &elems[i]
		b.Write(binary.AppendUvarint(lenBuf[:0], uint64(len(e.Set)+1+concatLen(e.Key))))
		at[i].id = b.Len()
		b.WriteString(e.Set)
		b.WriteByte(0)
		writeConcat(&b, e.Key)
		at[i].idEnd = b.Len()
		b.Write(binary.AppendUvarint(lenBuf[:0], uint64(concatLen(e.Data))))
		at[i].data = b.Len()
		writeConcat(&b, e.Data)
		at[i].end = b.Len()
	}
	s := b.String()
	spans := make([]arenaSpan, len(elems))
	for i, o := range at {
		spans[i] = arenaSpan{id: s[o.id:o.idEnd], data: s[o.data:o.end]}
	}
	return elementArena(s), spans
}

func uvarintLen(n int) int {
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

// arenaField splits the first length-prefixed field off s. The arena is only ever
// made by newArena, so the lengths are whole.
func arenaField(s string) (field, rest string) {
	n, k := 0, 0
	for shift := 0; ; shift += 7 {
		c := s[k]
		k++
		n |= int(c&0x7f) << shift
		if c < 0x80 {
			break
		}
	}
	return s[k : k+n], s[k+n:]
}

// count is the number of elements the arena holds.
func (a elementArena) count() int {
	n := 0
	for range a.ids() {
		n++
	}
	return n
}
