package nft

import (
	"fmt"
	"sort"
	"strings"
	"syscall"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"

	"github.com/svcproxy/svcproxy/internal/nlkit"
)

// RefusedError is one message of a batch that the kernel refused: its reason (the
// errno and the extended-ack text), what the message did, and the ruleset owners
// (Services, "svc:ns/name") whose changes it carried.
type RefusedError struct {
	Errno  syscall.Errno
	Reason string // the kernel's extended-ack message, if any
	Object string // e.g. "add element ip svcproxy service-ips { 10.96.0.10 . tcp . 80 }"
	Owners []string
}

func (e *RefusedError) Error() string {
	var b strings.Builder
	b.WriteString(e.Object)
	if len(e.Owners) > 0 {
		fmt.Fprintf(&b, " (for %s)", strings.Join(e.Owners, ", "))
	}
	fmt.Fprintf(&b, ": %s", e.Errno.Error())
	if e.Reason != "" {
		fmt.Fprintf(&b, " (kernel: %s)", e.Reason)
	}
	return b.String()
}

func (e *RefusedError) Unwrap() error { return e.Errno }

// maxNameInError bounds how much of a (possibly very long) name an error repeats.
const maxNameInError = 80

func shortName(s string) string {
	if len(s) <= maxNameInError {
		return s
	}
	return fmt.Sprintf("%s...(%d bytes)", truncateUTF8(s, maxNameInError-20), len(s))
}

// refusal describes the refused message sent[i] of the batch that carried tx.
func refusal(tx *Tx, sent []netlink.Message, i int, a nlkit.Ack) *RefusedError {
	e := &RefusedError{Errno: a.Errno, Reason: a.Msg}
	if a.HasMissType {
		e.Reason = strings.TrimSpace(fmt.Sprintf("%s (missing attribute %d)", e.Reason, a.MissType))
	}
	if i == 0 {
		// The batch header carries the error of a failed commit (validation).
		e.Object = fmt.Sprintf("commit of the transaction on table %s %s", tx.Family, tx.Table)
		e.Owners = tx.Owners()
		return e
	}
	m := sent[i]
	if len(m.Data) < 4 {
		e.Object = fmt.Sprintf("message %d of the batch", i)
		return e
	}
	attrs := m.Data[4:]
	// Offsets in the ack count from the request's netlink header.
	base := nlkit.HdrLen + 4
	name := func(typ uint16) string {
		var s string
		_ = nlkit.WalkAttrs(attrs, func(t uint16, _ int, v []byte) {
			if t == typ {
				s = nlkit.CString(v)
			}
		})
		return s
	}
	table := fmt.Sprintf("%s %s", tx.Family, tx.Table)
	switch op := int(m.Header.Type) & 0xff; op {
	case unix.NFT_MSG_NEWTABLE, unix.NFT_MSG_DELTABLE:
		e.Object = verb(op) + " table " + table
	case unix.NFT_MSG_NEWCHAIN, unix.NFT_MSG_DELCHAIN, unix.NFT_MSG_DELRULE:
		chain := name(unix.NFTA_CHAIN_NAME)
		if op == unix.NFT_MSG_DELRULE {
			chain = name(unix.NFTA_RULE_CHAIN)
		}
		e.Object = fmt.Sprintf("%s chain %s %s", verb(op), table, shortName(chain))
		e.Owners = tx.chainOwners(chain)
	case unix.NFT_MSG_NEWRULE:
		chain := name(unix.NFTA_RULE_CHAIN)
		n := 1 // which rule of the chain in this batch
		for _, prev := range sent[1:i] {
			if int(prev.Header.Type)&0xff == unix.NFT_MSG_NEWRULE && len(prev.Data) >= 4 && ruleChain(prev.Data[4:]) == chain {
				n++
			}
		}
		e.Object = fmt.Sprintf("add rule %d of chain %s %s", n, table, shortName(chain))
		if c := tx.chain(chain); c != nil && n <= len(c.Rules) {
			e.Object += ": " + c.Rules[n-1].String()
		}
		e.Owners = tx.chainOwners(chain)
	case unix.NFT_MSG_NEWSET, unix.NFT_MSG_DELSET:
		e.Object = fmt.Sprintf("%s set %s %s", verb(op), table, shortName(name(unix.NFTA_SET_NAME)))
	case unix.NFT_MSG_NEWSETELEM, unix.NFT_MSG_DELSETELEM:
		set := name(unix.NFTA_SET_ELEM_LIST_SET)
		keys := elementKeys(attrs, base, a)
		var texts []string
		owners := map[string]bool{}
		for _, k := range keys {
			id := elementID(set, k)
			texts = append(texts, tx.elementText(id, k))
			for _, o := range tx.elementOwners(id) {
				owners[o] = true
			}
		}
		if len(texts) > 3 {
			texts = append(texts[:3], fmt.Sprintf("... %d more", len(texts)-3))
		}
		e.Object = fmt.Sprintf("%s element %s %s { %s }", verb(op), table, shortName(set), strings.Join(texts, ", "))
		e.Owners = sortedKeys(owners)
	default:
		e.Object = fmt.Sprintf("message %d (type %d) of the batch", i, op)
	}
	return e
}

func verb(op int) string {
	switch op {
	case unix.NFT_MSG_DELTABLE, unix.NFT_MSG_DELCHAIN, unix.NFT_MSG_DELSET, unix.NFT_MSG_DELSETELEM:
		return "delete"
	case unix.NFT_MSG_DELRULE:
		return "flush"
	}
	return "add"
}

func ruleChain(attrs []byte) string {
	var s string
	_ = nlkit.WalkAttrs(attrs, func(t uint16, _ int, v []byte) {
		if t == unix.NFTA_RULE_CHAIN {
			s = nlkit.CString(v)
		}
	})
	return s
}

// elementKeys returns the keys of the elements in an element-list message: the one
// the kernel pointed at (its offset falls inside the element), else all of them.
func elementKeys(attrs []byte, base int, a nlkit.Ack) [][]byte {
	var all, hit [][]byte
	_ = nlkit.WalkAttrs(attrs, func(t uint16, off int, v []byte) {
		if t != unix.NFTA_SET_ELEM_LIST_ELEMENTS {
			return
		}
		listStart := base + off + 4
		_ = nlkit.WalkAttrs(v, func(_ uint16, eoff int, ev []byte) {
			key := elementKey(ev)
			all = append(all, key)
			start := listStart + eoff
			if a.HasOffset && int(a.Offset) >= start && int(a.Offset) < start+4+len(ev) {
				hit = append(hit, key)
			}
		})
	})
	if len(hit) > 0 {
		return hit
	}
	return all
}

func elementKey(elem []byte) []byte {
	var key []byte
	_ = nlkit.WalkAttrs(elem, func(t uint16, _ int, v []byte) {
		if t != unix.NFTA_SET_ELEM_KEY {
			return
		}
		_ = nlkit.WalkAttrs(v, func(t uint16, _ int, d []byte) {
			if t == unix.NFTA_DATA_VALUE {
				key = d
			}
		})
	})
	return key
}

// chain returns the chain whose rules the transaction writes.
func (t *Tx) chain(name string) *Chain {
	for _, c := range t.Chains {
		if c.Name == name {
			return c
		}
	}
	return nil
}

func (t *Tx) chainOwners(name string) []string {
	var out []string
	for owner, d := range t.planned {
		if d.hasChain(name) && owner != staleOwner {
			out = append(out, owner)
		}
	}
	sort.Strings(out)
	return out
}

func (t *Tx) elementOwners(id string) []string {
	var out []string
	for owner, d := range t.planned {
		if d.hasElem(id) && owner != staleOwner {
			out = append(out, owner)
		}
	}
	sort.Strings(out)
	return out
}

// elementText prints an element's key as nft does when the transaction holds it,
// else its bytes.
func (t *Tx) elementText(id string, key []byte) string {
	for _, list := range [][]Element{t.AddElements, t.DelElements} {
		for _, e := range list {
			if e.ID() == id {
				return joinData(e.Key)
			}
		}
	}
	for _, r := range t.adds {
		if r.id == id {
			return joinData(t.rawToElement(r).Key)
		}
	}
	return fmt.Sprintf("0x%x", key)
}
