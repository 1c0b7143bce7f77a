package nft

import (
	"strings"
	"time"
)

// elementValue is what the desired ruleset keeps of an element besides its ID: the
// data as the bytes the kernel is given, not as Datums. The key is in the ID. An
// element of a set the ruleset does not declare (whose types it cannot split the
// bytes by) is kept whole.
type elementValue struct {
	data    string
	verdict *Verdict
	comment string
	timeout time.Duration
	whole   *Element // only for sets the ruleset does not declare
}

func (r *Ruleset) valueOf(e Element) elementValue {
	if _, ok := r.Sets[e.Set]; !ok {
		return elementValue{whole: &e, data: string(concatBytes(e.Data)), verdict: e.Verdict, comment: e.Comment}
	}
	return elementValue{data: string(concatBytes(e.Data)), verdict: e.Verdict, comment: e.Comment, timeout: e.Timeout}
}

// equal is elementsEqual for kept values: data, verdict and comment.
func (v elementValue) equal(o elementValue) bool {
	if v.data != o.data || v.comment != o.comment || (v.verdict == nil) != (o.verdict == nil) {
		return false
	}
	return v.verdict == nil || *v.verdict == *o.verdict
}

// elementOf rebuilds the element an entry holds.
func (r *Ruleset) elementOf(entry *elementEntry) Element {
	v := entry.value
	if v.whole != nil {
		return *v.whole
	}
	set, key, _ := strings.Cut(entry.id, "\x00")
	s := r.Sets[set]
	e := Element{Set: set, Verdict: v.verdict, Comment: v.comment, Timeout: v.timeout}
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
