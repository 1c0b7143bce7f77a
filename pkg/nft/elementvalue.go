package nft

import (
	"encoding/binary"
	"strings"
	"time"
)

// An element's value (what it maps to, its verdict, comment and timeout) lives in
// its owner's arena right after its ID (arena.go), encoded by writeValue; the entry
// holds its offset there (4 bytes in what was padding) instead of a data string
// and a pointer to the rarer fields (24 bytes of each of 660k entries at 30k
// Services, and an allocation for each verdict). Two values are equal when their
// encodings are.
//
// The encoding: a flags byte, the data's length (uvarint) and bytes, then the
// verdict (kind byte, chain length and name), the comment (length and bytes) and
// the timeout (nanoseconds, uvarint) when their flags say so.
const (
	valueVerdict = 1 << iota
	valueComment
	valueTimeout
)

// encodedValueLen is how many bytes writeValue writes for e.
func encodedValueLen(e *Element) int {
	n := 1 + uvarintLen(uint64(concatLen(e.Data))) + concatLen(e.Data)
	if e.Verdict != nil {
		n += 1 + uvarintLen(uint64(len(e.Verdict.Chain))) + len(e.Verdict.Chain)
	}
	if e.Comment != "" {
		n += uvarintLen(uint64(len(e.Comment))) + len(e.Comment)
	}
	if e.Timeout != 0 {
		n += uvarintLen(uint64(e.Timeout))
	}
	return n
}

// writeValue writes the encoding of e's value to b.
func writeValue(b *strings.Builder, e *Element) {
	var flags byte
	if e.Verdict != nil {
		flags |= valueVerdict
	}
	if e.Comment != "" {
		flags |= valueComment
	}
	if e.Timeout != 0 {
		flags |= valueTimeout
	}
	b.WriteByte(flags)
	writeUvarint(b, uint64(concatLen(e.Data)))
	writeConcat(b, e.Data)
	if e.Verdict != nil {
		b.WriteByte(byte(e.Verdict.Kind))
		writeUvarint(b, uint64(len(e.Verdict.Chain)))
		b.WriteString(e.Verdict.Chain)
	}
	if e.Comment != "" {
		writeUvarint(b, uint64(len(e.Comment)))
		b.WriteString(e.Comment)
	}
	if e.Timeout != 0 {
		writeUvarint(b, uint64(e.Timeout))
	}
}

func writeUvarint(b *strings.Builder, v uint64) {
	var buf [binary.MaxVarintLen64]byte
	b.Write(binary.AppendUvarint(buf[:0], v))
}

// encodeValue is e's value as writeValue encodes it.
func encodeValue(e *Element) string {
	var b strings.Builder
	b.Grow(encodedValueLen(e))
	writeValue(&b, e)
	return b.String()
}

// decodeValue sets e's data (split by the types of s), verdict, comment and timeout
// from val. The bytes were made by writeValue from Datums of these types: splitting
// cannot fail but for a set redeclared with other types, which Compatible and the
// table's recreation handle.
func decodeValue(s *Set, val string, e *Element) {
	r := splitValue(val)
	if r.data != "" {
		e.Data, _ = splitBytes(s.Data, []byte(r.data))
	}
	if r.verdict {
		e.Verdict = &Verdict{Kind: r.kind, Chain: r.chain}
	}
	e.Comment, e.Timeout = r.comment, r.timeout
}

// rawValue is an encoded value taken apart, its strings those of the encoding.
type rawValue struct {
	data    string
	verdict bool
	kind    VerdictKind
	chain   string
	comment string
	timeout time.Duration
}

// splitValue takes apart a value writeValue encoded.
func splitValue(val string) rawValue {
	var r rawValue
	flags := val[0]
	var rest string
	r.data, rest = arenaField(val[1:])
	if flags&valueVerdict != 0 {
		r.verdict, r.kind = true, VerdictKind(rest[0])
		r.chain, rest = arenaField(rest[1:])
	}
	if flags&valueComment != 0 {
		r.comment, rest = arenaField(rest)
	}
	if flags&valueTimeout != 0 {
		v, _ := uvarintOf(rest)
		r.timeout = time.Duration(v)
	}
	return r
}

// rawValueHash is valueHash of the element whose encoded value is val.
func rawValueHash(val string) uint64 {
	r := splitValue(val)
	h := fnvString(fnvOffset, r.data) // the data's concatenation, padded as valueHash pads it
	if r.verdict {
		h = fnvByte(fnvByte(h, 0), byte(r.kind))
		h = fnvString(h, r.chain)
	}
	h = fnvByte(h, 0)
	return fnvString(h, limitComment(r.comment))
}

// valueOf is the encoded value of the element an entry holds.
func (r *Ruleset) valueOf(entry elementEntry) string {
	return r.owned[entry.owner].arenas[entry.arena()].valueAt(entry.off())
}

// idOf is the ID of the element an entry holds: the element table's key.
func (r *Ruleset) idOf(entry elementEntry) string {
	return r.owned[entry.owner].arenas[entry.arena()].idAt(entry.off())
}

// elementOf rebuilds the element the entry of id holds.
func (r *Ruleset) elementOf(id string, entry elementEntry) Element {
	if w, ok := r.undeclared[id]; ok {
		return *w
	}
	return r.decodeElement(id, r.valueOf(entry))
}

// decodeElement rebuilds the element of a declared set whose ID is id and encoded
// value val.
func (r *Ruleset) decodeElement(id, val string) Element { return elementFrom(r.Sets, id, val) }

// elementFrom rebuilds the element whose ID is id and encoded value val, of one
// of sets.
func elementFrom(sets map[string]*Set, id, val string) Element {
	set, key := splitID(id)
	s := sets[set]
	e := Element{Set: set}
	e.Key, _ = splitBytes(s.Key, []byte(key))
	decodeValue(s, val, &e)
	return e
}

// keepUndeclared keeps, for an element of a set the ruleset does not declare
// (whose bytes it cannot split into Datums), the element as given. The copy is
// made only then: taking e's own address moved every element put to the heap
// (~100 bytes each, 46 MB of garbage in a 30k cold sync).
func (r *Ruleset) keepUndeclared(id string, e Element) {
	if _, declared := r.Sets[e.Set]; !declared {
		kept := e.clone()
		r.undeclared[id] = &kept
	}
}

// setOfID is the set of an element ID.
func setOfID(id string) string {
	set, _ := splitID(id)
	return set
}
