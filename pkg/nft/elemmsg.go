package nft

import (
	"encoding/binary"
	"time"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"

	"github.com/svcproxy/svcproxy/internal/nlkit"
)

// Element messages are encoded here, straight from the elements, into one
// buffer per message: the same bytes google/nftables' SetAddElements and
// SetDeleteElements make (elemmsg_test.go compares them), without their
// per-element attribute lists, nested marshalling and copies. A cold sync sends
// hundreds of thousands of elements, and that path was a sixth of all the
// process allocated during one.

// Netlink attribute types of an element message (linux/netfilter/nf_tables.h),
// as the library writes them.
const (
	attrElemListTable    = unix.NFTA_SET_ELEM_LIST_TABLE
	attrElemListSet      = unix.NFTA_SET_ELEM_LIST_SET
	attrElemListSetID    = unix.NFTA_SET_ELEM_LIST_SET_ID
	attrElemListElements = unix.NFTA_SET_ELEM_LIST_ELEMENTS | unix.NLA_F_NESTED
	attrElemKey          = unix.NFTA_SET_ELEM_KEY | unix.NLA_F_NESTED
	attrElemData         = unix.NFTA_SET_ELEM_DATA | unix.NLA_F_NESTED
	attrElemTimeout      = unix.NFTA_SET_ELEM_TIMEOUT
	attrElemUserData     = unix.NFTA_SET_ELEM_USERDATA
	attrDataValue        = unix.NFTA_DATA_VALUE
	attrDataVerdict      = unix.NFTA_DATA_VERDICT | unix.NLA_F_NESTED
	attrVerdictCode      = unix.NFTA_VERDICT_CODE
	attrVerdictChain     = unix.NFTA_VERDICT_CHAIN
	// udataElemComment is NFTNL_UDATA_SET_ELEM_COMMENT, the comment's TLV type.
	udataElemComment = 0
)

// appendElementMessages appends to msgs the messages that add (or delete) elems
// in table of family: per set, in the order the sets first appear, messages of
// at most elementsPerMessage elements.
func appendElementMessages(msgs []netlink.Message, family Family, table string, elems []Element, add bool) []netlink.Message {
	typ := nlkit.NftType(unix.NFT_MSG_NEWSETELEM)
	if !add {
		typ = nlkit.NftType(unix.NFT_MSG_DELSETELEM)
	}
	return appendMessagesBySet(msgs, typ, len(elems), func(i int) string { return elems[i].Set }, func(set string, idx []int32) []byte {
		return elementMessage(family, table, set, elems, idx)
	})
}

// appendRawElementMessages is appendElementMessages for the elements a plan adds
// as the ruleset holds them (Tx.adds): their key bytes are their ID's, after the
// set's code, and their value is decoded from its encoding in place.
func appendRawElementMessages(msgs []netlink.Message, family Family, table string, elems []rawElement) []netlink.Message {
	return appendMessagesBySet(msgs, nlkit.NftType(unix.NFT_MSG_NEWSETELEM), len(elems), func(i int) string { return setOfID(elems[i].id) },
		func(set string, idx []int32) []byte { return rawElementMessage(family, table, set, elems, idx) })
}

// appendMessagesBySet appends the messages of type typ for n elements: grouped by
// their set (setOf) without reordering a set's elements, the sets in order of
// first appearance, each message the body of at most elementsPerMessage of them.
func appendMessagesBySet(msgs []netlink.Message, typ netlink.HeaderType, n int, setOf func(i int) string, body func(set string, idx []int32) []byte) []netlink.Message {
	var order []string
	bySet := map[string][]int32{}
	for i := range n {
		set := setOf(i)
		l, ok := bySet[set]
		if !ok {
			order = append(order, set)
		}
		bySet[set] = append(l, int32(i))
	}
	for _, set := range order {
		idx := bySet[set]
		for len(idx) > 0 {
			k := min(len(idx), elementsPerMessage)
			msgs = append(msgs, netlink.Message{
				Header: netlink.Header{Type: typ, Flags: netlink.Request | netlink.Acknowledge | netlink.Create},
				Data:   body(set, idx[:k]),
			})
			idx = idx[k:]
		}
	}
	return msgs
}

// rawElementMessage is elementMessage for elements the ruleset holds.
func rawElementMessage(family Family, table, set string, elems []rawElement, idx []int32) []byte {
	size := 0
	for _, i := range idx {
		_, key := splitID(elems[i].id)
		v := splitValue(elems[i].val)
		size += itemLen(len(key), len(v.data), v.verdict, len(v.chain), v.timeout != 0, v.comment != "")
	}
	return elementListMessage(family, table, set, size, func(b []byte) []byte {
		for k, i := range idx {
			_, key := splitID(elems[i].id)
			b = appendRawElement(b, uint16(k+1)|unix.NLA_F_NESTED, key, splitValue(elems[i].val))
		}
		return b
	})
}

// elementMessage is the body of one element message for elems[idx].
func elementMessage(family Family, table, set string, elems []Element, idx []int32) []byte {
	size := 0
	for _, i := range idx {
		size += elementLen(&elems[i])
	}
	return elementListMessage(family, table, set, size, func(b []byte) []byte {
		for k, i := range idx {
			b = appendElement(b, uint16(k+1)|unix.NLA_F_NESTED, &elems[i])
		}
		return b
	})
}

// elementListMessage is the body of one element message: the nfgenmsg header,
// then the set's name, its (zero) ID, the table and the list that appendItems
// appends, of at most itemsLen bytes (the buffer is allocated once).
func elementListMessage(family Family, table, set string, itemsLen int, appendItems func([]byte) []byte) []byte {
	size := 4 + nlkit.AttrLen(len(set)+1) + nlkit.AttrLen(4) + nlkit.AttrLen(len(table)+1) + 4 + itemsLen
	b := make([]byte, 0, size)
	b = append(b, nlkit.NfGenMsg(uint8(family))...)
	b = nlkit.AppendStringAttr(b, attrElemListSet, set)
	b = nlkit.AppendAttr(b, attrElemListSetID, []byte{0, 0, 0, 0})
	b = nlkit.AppendStringAttr(b, attrElemListTable, table)
	b, list := nlkit.BeginNested(b, attrElemListElements)
	b = appendItems(b)
	nlkit.EndNested(b, list)
	return b
}

// appendElement appends e as the list item of type typ.
func appendElement(b []byte, typ uint16, e *Element) []byte {
	b, item := nlkit.BeginNested(b, typ)
	b, key := nlkit.BeginNested(b, attrElemKey)
	b = appendDatumsAttr(b, attrDataValue, e.Key)
	nlkit.EndNested(b, key)
	b = appendTimeout(b, e.Timeout)
	switch {
	case e.Verdict != nil:
		b = appendVerdictData(b, *e.Verdict)
	case len(e.Data) > 0:
		var data int
		b, data = nlkit.BeginNested(b, attrElemData)
		b = appendDatumsAttr(b, attrDataValue, e.Data)
		nlkit.EndNested(b, data)
	}
	b = appendComment(b, e.Comment)
	nlkit.EndNested(b, item)
	return b
}

// appendRawElement is appendElement for the element of key bytes key and value v
// (the same attributes, from the ruleset's encoding).
func appendRawElement(b []byte, typ uint16, key string, v rawValue) []byte {
	b, item := nlkit.BeginNested(b, typ)
	b, k := nlkit.BeginNested(b, attrElemKey)
	b = appendBytesAttr(b, attrDataValue, key)
	nlkit.EndNested(b, k)
	b = appendTimeout(b, v.timeout)
	switch {
	case v.verdict:
		b = appendVerdictData(b, Verdict{Kind: v.kind, Chain: v.chain})
	case v.data != "":
		var data int
		b, data = nlkit.BeginNested(b, attrElemData)
		b = appendBytesAttr(b, attrDataValue, v.data)
		nlkit.EndNested(b, data)
	}
	b = appendComment(b, v.comment)
	nlkit.EndNested(b, item)
	return b
}

func appendTimeout(b []byte, d time.Duration) []byte {
	if d == 0 {
		return b
	}
	return nlkit.AppendAttr(b, attrElemTimeout, binary.BigEndian.AppendUint64(nil, uint64(d.Milliseconds())))
}

// appendVerdictData appends v as an element's data. The code is a 32-bit two's
// complement: jump and goto are negative.
func appendVerdictData(b []byte, v Verdict) []byte {
	x := v.expr() // only jump and goto carry their chain
	var data, verdict int
	b, data = nlkit.BeginNested(b, attrElemData)
	b, verdict = nlkit.BeginNested(b, attrDataVerdict)
	b = nlkit.AppendAttr(b, attrVerdictCode, binary.BigEndian.AppendUint32(nil, uint32(x.Kind)))
	if x.Chain != "" {
		b = nlkit.AppendStringAttr(b, attrVerdictChain, x.Chain)
	}
	nlkit.EndNested(b, verdict)
	nlkit.EndNested(b, data)
	return b
}

// appendComment appends an element's comment, as the user data nft reads.
func appendComment(b []byte, comment string) []byte {
	c := limitComment(comment)
	if c == "" {
		return b
	}
	start := len(b)
	b = append(b, 0, 0, 0, 0, udataElemComment, byte(len(c)+1))
	b = append(b, c...)
	b = append(b, 0)
	return nlkit.FinishAttr(b, start, attrElemUserData)
}

// elementLen is at least the bytes appendElement writes for e (the message's
// buffer is allocated once).
func elementLen(e *Element) int {
	chain := 0
	if e.Verdict != nil {
		chain = len(e.Verdict.Chain)
	}
	return itemLen(concatLen(e.Key), concatLen(e.Data), e.Verdict != nil, chain, e.Timeout != 0, e.Comment != "")
}

// itemLen is at least the bytes of an element's list item: its key and data of
// these lengths, or a verdict naming a chain of this length, a timeout and a
// comment if it has them.
func itemLen(key, data int, verdict bool, chain int, timeout, comment bool) int {
	n := 4 + 4 + nlkit.AttrLen(key)
	if timeout {
		n += nlkit.AttrLen(8)
	}
	switch {
	case verdict:
		n += 4 + 4 + nlkit.AttrLen(4) + nlkit.AttrLen(chain+1)
	case data > 0:
		n += 4 + nlkit.AttrLen(data)
	}
	if comment {
		n += nlkit.AttrLen(2 + MaxCommentLen + 1)
	}
	return n
}

// appendBytesAttr appends the bytes of s as the attribute typ.
func appendBytesAttr(b []byte, typ uint16, s string) []byte {
	start := len(b)
	b = append(b, 0, 0, 0, 0)
	b = append(b, s...)
	return nlkit.FinishAttr(b, start, typ)
}

// appendDatumsAttr appends the concatenation of ds as the attribute typ.
func appendDatumsAttr(b []byte, typ uint16, ds []Datum) []byte {
	start := len(b)
	b = append(b, 0, 0, 0, 0)
	b = appendConcat(b, ds)
	return nlkit.FinishAttr(b, start, typ)
}
