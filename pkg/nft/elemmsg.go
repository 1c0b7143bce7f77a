package nft

import (
	"encoding/binary"

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
	if len(elems) == 0 {
		return msgs
	}
	typ := nlkit.NftType(unix.NFT_MSG_NEWSETELEM)
	if !add {
		typ = nlkit.NftType(unix.NFT_MSG_DELSETELEM)
	}
	// Group by set without reordering a set's elements: the sets in order of first
	// appearance, and for each the indexes of its elements.
	var order []string
	bySet := map[string][]int32{}
	for i, e := range elems {
		l, ok := bySet[e.Set]
		if !ok {
			order = append(order, e.Set)
		}
		bySet[e.Set] = append(l, int32(i))
	}
	for _, set := range order {
		idx := bySet[set]
		for len(idx) > 0 {
			n := min(len(idx), elementsPerMessage)
			msgs = append(msgs, netlink.Message{
				Header: netlink.Header{Type: typ, Flags: netlink.Request | netlink.Acknowledge | netlink.Create},
				Data:   elementMessage(family, table, set, elems, idx[:n]),
			})
			idx = idx[n:]
		}
	}
	return msgs
}

// elementMessage is the body of one element message: the nfgenmsg header, then
// the set's name, its (zero) ID, the table and the list of elems[idx].
func elementMessage(family Family, table, set string, elems []Element, idx []int32) []byte {
	size := 4 + nlkit.AttrLen(len(set)+1) + nlkit.AttrLen(4) + nlkit.AttrLen(len(table)+1) + 4
	for _, i := range idx {
		size += elementLen(&elems[i])
	}
	b := make([]byte, 0, size)
	b = append(b, nlkit.NfGenMsg(uint8(family))...)
	b = nlkit.AppendStringAttr(b, attrElemListSet, set)
	b = nlkit.AppendAttr(b, attrElemListSetID, []byte{0, 0, 0, 0})
	b = nlkit.AppendStringAttr(b, attrElemListTable, table)
	b, list := nlkit.BeginNested(b, attrElemListElements)
	for k, i := range idx {
		b = appendElement(b, uint16(k+1)|unix.NLA_F_NESTED, &elems[i])
	}
	nlkit.EndNested(b, list)
	return b
}

// appendElement appends e as the list item of type typ.
func appendElement(b []byte, typ uint16, e *Element) []byte {
	b, item := nlkit.BeginNested(b, typ)
	b, key := nlkit.BeginNested(b, attrElemKey)
	b = appendDatumsAttr(b, attrDataValue, e.Key)
	nlkit.EndNested(b, key)
	if ms := e.Timeout.Milliseconds(); e.Timeout != 0 {
		b = nlkit.AppendAttr(b, attrElemTimeout, binary.BigEndian.AppendUint64(nil, uint64(ms)))
	}
	switch {
	case e.Verdict != nil:
		// The code as a 32-bit two's complement: jump and goto are negative.
		v := e.Verdict.expr()
		var data, verdict int
		b, data = nlkit.BeginNested(b, attrElemData)
		b, verdict = nlkit.BeginNested(b, attrDataVerdict)
		b = nlkit.AppendAttr(b, attrVerdictCode, binary.BigEndian.AppendUint32(nil, uint32(v.Kind)))
		if v.Chain != "" {
			b = nlkit.AppendStringAttr(b, attrVerdictChain, v.Chain)
		}
		nlkit.EndNested(b, verdict)
		nlkit.EndNested(b, data)
	case len(e.Data) > 0:
		var data int
		b, data = nlkit.BeginNested(b, attrElemData)
		b = appendDatumsAttr(b, attrDataValue, e.Data)
		nlkit.EndNested(b, data)
	}
	if c := limitComment(e.Comment); c != "" {
		start := len(b)
		b = append(b, 0, 0, 0, 0, udataElemComment, byte(len(c)+1))
		b = append(b, c...)
		b = append(b, 0)
		b = nlkit.FinishAttr(b, start, attrElemUserData)
	}
	nlkit.EndNested(b, item)
	return b
}

// elementLen is at least the bytes appendElement writes for e (the message's
// buffer is allocated once).
func elementLen(e *Element) int {
	n := 4 + 4 + nlkit.AttrLen(concatLen(e.Key))
	if e.Timeout != 0 {
		n += nlkit.AttrLen(8)
	}
	switch {
	case e.Verdict != nil:
		n += 4 + 4 + nlkit.AttrLen(4) + nlkit.AttrLen(len(e.Verdict.Chain)+1)
	case len(e.Data) > 0:
		n += 4 + nlkit.AttrLen(concatLen(e.Data))
	}
	if e.Comment != "" {
		n += nlkit.AttrLen(2 + MaxCommentLen + 1)
	}
	return n
}

// appendDatumsAttr appends the concatenation of ds as the attribute typ.
func appendDatumsAttr(b []byte, typ uint16, ds []Datum) []byte {
	start := len(b)
	b = append(b, 0, 0, 0, 0)
	b = appendConcat(b, ds)
	return nlkit.FinishAttr(b, start, typ)
}
