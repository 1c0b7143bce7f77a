package nft

import (
	"strings"
	"time"
)

// elementValue is what the desired ruleset keeps of an element besides its ID: the
// data as the bytes the kernel is given, not as Datums (the key is in the ID). What
// most elements lack (a verdict, a comment, a timeout) sits behind one pointer, so
// that the hundreds of thousands of endpoint and hairpin elements pay 8 bytes for it.
type elementValue struct {
	data string
	rare *rareValue
}

type rareValue struct {
	verdict Verdict
	// isVerdict tells a verdict map's element (whose verdict may be the zero Verdict).
	isVerdict bool
	comment   string
	timeout   time.Duration
	whole     *Element // an element of a set the ruleset does not declare, kept as given
}

func (r *Ruleset) valueOf(e Element) elementValue { return r.valueWith(e, concatString(e.Data)) }

// valueWith is valueOf for an element whose data bytes are already made (in its
// owner's arena).
func (r *Ruleset) valueWith(e Element, data string) elementValue {
	v := elementValue{data: data}
	if _, declared := r.Sets[e.Set]; !declared {
		v.rare = &rareValue{whole: &e, comment: e.Comment}
		if e.Verdict != nil {
			v.rare.verdict, v.rare.isVerdict = *e.Verdict, true
		}
		return v
	}
	if e.Verdict != nil || e.Comment != "" || e.Timeout != 0 {
		v.rare = &rareValue{comment: e.Comment, timeout: e.Timeout}
		if e.Verdict != nil {
			v.rare.verdict, v.rare.isVerdict = *e.Verdict, true
		}
	}
	return v
}

// equal is elementsEqual for kept values: data, verdict and comment.
func (v elementValue) equal(o elementValue) bool {
	if v.data != o.data || (v.rare == nil) != (o.rare == nil) {
		return false
	}
	return v.rare == nil || (v.rare.comment == o.rare.comment && v.rare.isVerdict == o.rare.isVerdict && v.rare.verdict == o.rare.verdict)
}

// elementOf rebuilds the element the entry of id holds.
func (r *Ruleset) elementOf(id string, entry elementEntry) Element {
	v := entry.value
	if v.rare != nil && v.rare.whole != nil {
		return *v.rare.whole
	}
	set, key, _ := strings.Cut(id, "\x00")
	s := r.Sets[set]
	e := Element{Set: set}
	if v.rare != nil {
		e.Comment, e.Timeout = v.rare.comment, v.rare.timeout
		if v.rare.isVerdict {
			verdict := v.rare.verdict
			e.Verdict = &verdict
		}
	}
	// The bytes were made from Datums of these types by concatBytes: splitting
	// cannot fail but for a set redeclared with other types, which Compatible and
	// the table's recreation handle.
	e.Key, _ = splitBytes(s.Key, []byte(key))
	if v.data != "" {
		e.Data, _ = splitBytes(s.Data, []byte(v.data))
	}
	return e
}

// setOfID is the set name an element ID starts with.
func setOfID(id string) string {
	set, _, _ := strings.Cut(id, "\x00")
	return set
}
