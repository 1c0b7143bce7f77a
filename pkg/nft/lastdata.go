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
		for i := range prefix { // the start of a key of several Datums: each padded
			writePadded(&b, &prefix[i])
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
