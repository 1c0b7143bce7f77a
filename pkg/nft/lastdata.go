package nft

import (
	"iter"
	"strings"
)

// LastData yields, in the order of owner's last fragment, the elements of set that
// fragment gave whose key starts with prefix: the rest of each key and the data,
// as Datums of the set's types. A renderer reads back what it rendered last (an
// endpoint keeps its slot in an endpoints map: proxy.keepSlots) from the owner's
// own records, one pass over them: a lookup per element in the ruleset's table
// cost a cache miss each. The yielded slices are valid only during the call.
func (r *Ruleset) LastData(owner, set string, prefix []Datum) iter.Seq2[[]Datum, []Datum] {
	return func(yield func(rest, data []Datum) bool) {
		ref, ok := r.owners[owner]
		s := r.Sets[set]
		if !ok || s == nil || len(prefix) >= len(s.Key) {
			return
		}
		var b strings.Builder
		writeIDPrefix(&b, set)
		for _, d := range prefix { // a key of several Datums: each padded (writeConcat)
			b.Write(d.b[:d.n])
			for pad := (4 - int(d.n)%4) % 4; pad > 0; pad-- {
				b.WriteByte(0)
			}
		}
		idPrefix := b.String()
		var rest, data []Datum
		a := string(r.owned[ref].elements())
		for len(a) > 0 {
			id, tail := arenaField(a)
			val, next := arenaField(tail)
			a = next
			if !strings.HasPrefix(id, idPrefix) {
				continue
			}
			var okKey, okData bool
			rest, okKey = appendSplit(rest[:0], s.Key[len(prefix):], id[len(idPrefix):], true)
			data, okData = appendSplit(data[:0], s.Data, splitValue(val).data, len(s.Data) > 1)
			if !okKey || !okData {
				continue
			}
			if !yield(rest, data) {
				return
			}
		}
	}
}

// appendSplit appends to dst the Datums of types that b concatenates, each padded
// to four bytes when padded (a concatenation of several: writeConcat), and reports
// whether b held them.
func appendSplit(dst []Datum, types []DataType, b string, padded bool) ([]Datum, bool) {
	for _, t := range types {
		n := t.Len()
		if len(b) < n {
			return dst, false
		}
		d := Datum{Type: t, n: uint8(n)}
		copy(d.b[:], b[:n])
		dst = append(dst, d)
		if padded {
			n = min((n+3)&^3, len(b))
		}
		b = b[n:]
	}
	return dst, true
}
