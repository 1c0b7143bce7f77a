package nft

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/nftables"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"

	"github.com/svcproxy/svcproxy/internal/nlkit"
)

// The decoders below turn the kernel's dump messages (the nfgenmsg header and its
// attributes) into view values. They are pure, bounds-checked and never panic, whatever
// the bytes: another program may have put anything in our table, and reading it must
// always end in a view that the plan can repair.

// errForeign marks an object that svcproxy never writes and cannot represent; the
// reader turns it into drift to remove, not into a failed read.
var errForeign = errors.New("not an object svcproxy writes")

// Set flags svcproxy writes; any other flag makes a set foreign.
const (
	setFlagConcat = 0x80 // NFT_SET_CONCAT, set by google/nftables on concatenated keys
	knownSetFlags = unix.NFT_SET_MAP | unix.NFT_SET_EVAL | unix.NFT_SET_TIMEOUT | setFlagConcat

	// Set attributes svcproxy never writes, each of which changes what the set
	// does: a default timeout expires the elements we add without one, and
	// expressions attached to a set (a limit, a quota) run on every update of a
	// dynamic set and can end the rule. A set carrying one is foreign.
	nftaSetExprAttr    = 17 // NFTA_SET_EXPR
	nftaSetExpressions = 18 // NFTA_SET_EXPRESSIONS
	// Likewise for an element: expressions of its own, a stateful object it
	// refers to, an interval end.
	nftaSetElemKeyEnd      = 10 // NFTA_SET_ELEM_KEY_END
	nftaSetElemExpressions = 11 // NFTA_SET_ELEM_EXPRESSIONS

	nfDrop       = 0 // NF_DROP
	nfAccept     = 1 // NF_ACCEPT
	nftaHookDevs = 4 // NFTA_HOOK_DEVS
)

// userdataGet returns the value of the first TLV of type typ in nftables user data
// (type byte, length byte, value), checking every length against what is left.
func userdataGet(ud []byte, typ byte) ([]byte, bool) {
	for len(ud) >= 2 {
		n := int(ud[1])
		if len(ud) < 2+n {
			return nil, false // truncated: nothing after this point can be trusted
		}
		if ud[0] == typ {
			return ud[2 : 2+n], true
		}
		ud = ud[2+n:]
	}
	return nil, false
}

// ruleHashOf returns the Rule.Hash svcproxy stored in a rule's user data; ok is false
// for a rule without one (a rule svcproxy did not write, or whose user data is
// damaged), which the view holds as foreignRuleHash.
func ruleHashOf(ud []byte) (hash uint64, ok bool) {
	b, found := userdataGet(ud, byte(ruleHashType))
	if !found || len(b) != 8 {
		return foreignRuleHash, false
	}
	return binary.BigEndian.Uint64(b), true
}

// foreignRuleHash stands for a rule whose hash cannot be read: it equals no desired
// rule's hash (in practice), so the chain holding it differs and is rewritten.
const foreignRuleHash uint64 = 0

// decodeRule returns the table, chain and hash of an NFT_MSG_NEWRULE message, and
// the digest of what the rule does (exprsDigest): the hash says which rule
// svcproxy wrote, the digest whether the kernel holds that rule, as anyone can
// copy user data onto another rule. Expressions that cannot be decoded give
// foreignExprsDigest, never an error: the rule is drift to rewrite.
func decodeRule(data []byte) (table, chain string, hash, exprs uint64, err error) {
	ad, err := nlkit.Msg(data)
	if err != nil {
		return "", "", 0, 0, err
	}
	hash, exprs = foreignRuleHash, foreignExprsDigest
	hasExprs := false
	for ad.Next() {
		switch ad.Type() {
		case unix.NFTA_RULE_TABLE:
			table = nlkit.CString(ad.Bytes()) // C semantics, as the kernel reads it: an embedded NUL ends the name
		case unix.NFTA_RULE_CHAIN:
			chain = nlkit.CString(ad.Bytes())
		case unix.NFTA_RULE_USERDATA:
			hash, _ = ruleHashOf(ad.Bytes())
		case unix.NFTA_RULE_EXPRESSIONS:
			exprs, _ = exprsDigest(ad.Bytes())
			hasExprs = true
		}
	}
	if err := ad.Err(); err != nil {
		return "", "", 0, 0, fmt.Errorf("decode rule: %w", err)
	}
	if !hasExprs {
		// A rule without expressions does nothing; svcproxy never writes one.
		exprs = foreignExprsDigest
	}
	return table, chain, hash, exprs, nil
}

// decodeChain returns the table, name and view of an NFT_MSG_NEWCHAIN message.
func decodeChain(data []byte) (table, name string, cv ChainView, err error) {
	ad, err := nlkit.Msg(data)
	if err != nil {
		return "", "", ChainView{}, err
	}
	var hook *ChainHook
	var typ string
	for ad.Next() {
		switch ad.Type() {
		case unix.NFTA_CHAIN_TABLE:
			table = nlkit.CString(ad.Bytes())
		case unix.NFTA_CHAIN_NAME:
			name = nlkit.CString(ad.Bytes())
		case unix.NFTA_CHAIN_TYPE:
			typ = nlkit.CString(ad.Bytes())
		case unix.NFTA_CHAIN_POLICY:
			if p := ad.Uint32(); p != nfAccept {
				cv.Policy = fmt.Sprintf("policy(%d)", p)
				if p == nfDrop {
					cv.Policy = "drop"
				}
			}
		case unix.NFTA_CHAIN_HOOK:
			hook = &ChainHook{}
			ad.Nested(func(nd *netlink.AttributeDecoder) error {
				nd.ByteOrder = binary.BigEndian
				for nd.Next() {
					switch nd.Type() {
					case unix.NFTA_HOOK_HOOKNUM:
						hook.Hook = hookName(nftables.ChainHook(nd.Uint32()))
					case unix.NFTA_HOOK_PRIORITY:
						hook.Priority = int32(nd.Uint32())
					case unix.NFTA_HOOK_DEV, nftaHookDevs:
						hook.Hook += "+device" // netdev-style hooks never equal ours
					}
				}
				return nil
			})
		}
	}
	if err := ad.Err(); err != nil {
		return "", "", ChainView{}, fmt.Errorf("decode chain: %w", err)
	}
	if hook != nil {
		hook.Type = typ
		cv.Hook = hook
	}
	return table, name, cv, nil
}

func hookName(h nftables.ChainHook) string {
	for name, v := range hooks {
		if v == h {
			return name
		}
	}
	return fmt.Sprintf("hook(%d)", h)
}

// decodeSet returns the table and definition of an NFT_MSG_NEWSET message. A set
// svcproxy could not have written (a key or data type, a length or a flag it never
// uses) comes back with no key type and a wrapped errForeign: its definition equals
// no desired set, so the plan deletes it or, if its name is one of ours, the table is
// recreated. anonymous reports a set bound to a rule (it lives and dies with the rule).
func decodeSet(data []byte) (table string, s *Set, anonymous bool, err error) {
	ad, err := nlkit.Msg(data)
	if err != nil {
		return "", nil, false, err
	}
	s = &Set{}
	var flags, keyMagic, dataMagic, keyLen, dataLen uint32
	var hasData bool
	var unwritten []string // attributes svcproxy never writes (see nftaSetExprAttr)
	for ad.Next() {
		switch ad.Type() {
		case unix.NFTA_SET_TIMEOUT:
			if ad.Uint64() != 0 {
				unwritten = append(unwritten, "a default timeout")
			}
		case nftaSetExprAttr, nftaSetExpressions:
			unwritten = append(unwritten, "expressions")
		case unix.NFTA_SET_OBJ_TYPE:
			unwritten = append(unwritten, "an object type")
		case unix.NFTA_SET_TABLE:
			table = nlkit.CString(ad.Bytes())
		case unix.NFTA_SET_NAME:
			s.Name = nlkit.CString(ad.Bytes())
		case unix.NFTA_SET_FLAGS:
			flags = ad.Uint32()
		case unix.NFTA_SET_KEY_TYPE:
			keyMagic = ad.Uint32()
		case unix.NFTA_SET_KEY_LEN:
			keyLen = ad.Uint32()
		case unix.NFTA_SET_DATA_TYPE:
			dataMagic, hasData = ad.Uint32(), true
		case unix.NFTA_SET_DATA_LEN:
			dataLen = ad.Uint32()
		case unix.NFTA_SET_DESC:
			ad.Nested(func(nd *netlink.AttributeDecoder) error {
				nd.ByteOrder = binary.BigEndian
				for nd.Next() {
					if nd.Type() == unix.NFTA_SET_DESC_SIZE {
						s.Size = nd.Uint32()
					}
				}
				return nil
			})
		}
	}
	if err := ad.Err(); err != nil {
		return "", nil, false, fmt.Errorf("decode set: %w", err)
	}
	anonymous = flags&unix.NFT_SET_ANONYMOUS != 0
	foreign := func(format string, a ...any) (string, *Set, bool, error) {
		return table, &Set{Name: s.Name}, anonymous, fmt.Errorf("set %s: %s: %w", s.Name, fmt.Sprintf(format, a...), errForeign)
	}
	if flags&^knownSetFlags != 0 {
		return foreign("flags %#x", flags&^knownSetFlags)
	}
	if len(unwritten) > 0 {
		return foreign("%s", strings.Join(unwritten, ", "))
	}
	s.Dynamic = flags&unix.NFT_SET_EVAL != 0
	s.Timeout = flags&unix.NFT_SET_TIMEOUT != 0
	if s.Key, err = typesFromMagic(keyMagic); err != nil {
		return foreign("key: %v", err)
	}
	if int(keyLen) != valueLen(s.Key) {
		return foreign("key of %d bytes for %s", keyLen, typesText(s.Key))
	}
	switch {
	case flags&unix.NFT_SET_MAP == 0:
		if hasData {
			return foreign("data type on a plain set")
		}
	case dataMagic == unix.NFT_DATA_VERDICT:
		s.Verdict = true
	default:
		if s.Data, err = typesFromMagic(dataMagic); err != nil {
			return foreign("data: %v", err)
		}
		if int(dataLen) != valueLen(s.Data) {
			return foreign("data of %d bytes for %s", dataLen, typesText(s.Data))
		}
	}
	return table, s, anonymous, nil
}

// typesFromMagic splits a set's (concatenated) type number into svcproxy's types.
func typesFromMagic(magic uint32) ([]DataType, error) {
	if magic == 0 {
		return nil, errors.New("no type")
	}
	var out []DataType
	for magic != 0 {
		part := magic & nftables.SetConcatTypeMask
		magic >>= nftables.SetConcatTypeBits
		t, ok := typeOfMagic(part)
		if !ok {
			return nil, fmt.Errorf("unknown set data type %d", part)
		}
		out = append([]DataType{t}, out...)
	}
	return out, nil
}

func typeOfMagic(m uint32) (DataType, bool) {
	for t, nt := range setDatatypes {
		if nt.GetNFTMagic() == m {
			return t, true
		}
	}
	return 0, false
}

// valueLen is the length of a value of the given types as the kernel stores it.
func valueLen(ts []DataType) int {
	if len(ts) == 1 {
		return ts[0].Len()
	}
	n := 0
	for _, t := range ts {
		n += (t.Len() + 3) &^ 3
	}
	return n
}

// decodeElements returns the elements of set s in an NFT_MSG_NEWSETELEM message
// (s must be the decoded definition of the set the message names). An element that
// does not fit s (a catch-all element, a key or value of another length) makes the
// whole set foreign (errForeign): svcproxy cannot name it to delete it.
func decodeElements(s *Set, data []byte) (table, set string, out []Element, err error) {
	ad, err := nlkit.Msg(data)
	if err != nil {
		return "", "", nil, err
	}
	for ad.Next() {
		switch ad.Type() {
		case unix.NFTA_SET_ELEM_LIST_TABLE:
			table = nlkit.CString(ad.Bytes())
		case unix.NFTA_SET_ELEM_LIST_SET:
			set = nlkit.CString(ad.Bytes())
		case unix.NFTA_SET_ELEM_LIST_ELEMENTS:
			ad.Nested(func(nd *netlink.AttributeDecoder) error {
				for nd.Next() {
					if nd.Type() != unix.NFTA_LIST_ELEM {
						continue
					}
					e, err := decodeElement(s, nd.Bytes())
					if err != nil {
						return err
					}
					out = append(out, e)
				}
				return nd.Err()
			})
		}
	}
	if err := ad.Err(); err != nil {
		return "", "", nil, fmt.Errorf("elements of set %s: %w", s.Name, err)
	}
	return table, set, out, nil
}

func decodeElement(s *Set, b []byte) (Element, error) {
	ad, err := nlkit.Nested(b)
	if err != nil {
		return Element{}, err
	}
	e := Element{Set: s.Name}
	var key, val []byte
	var hasKey, hasVal bool
	var verdict *Verdict
	for ad.Next() {
		switch ad.Type() {
		case unix.NFTA_SET_ELEM_KEY:
			key, hasKey = dataValue(ad.Bytes()), true
		case unix.NFTA_SET_ELEM_DATA:
			hasVal = true
			val, verdict, err = decodeData(ad.Bytes())
			if err != nil {
				return Element{}, err
			}
		case unix.NFTA_SET_ELEM_TIMEOUT:
			if ms := ad.Uint64(); ms <= uint64(1<<63-1)/uint64(time.Millisecond) {
				e.Timeout = time.Duration(ms) * time.Millisecond
			}
		case unix.NFTA_SET_ELEM_USERDATA:
			if c, ok := userdataGet(ad.Bytes(), 0); ok { // NFTNL_UDATA_SET_ELEM_COMMENT
				if n := len(c); n > 0 && c[n-1] == 0 {
					c = c[:n-1]
				}
				e.Comment = string(c)
			}
		case unix.NFTA_SET_ELEM_FLAGS:
			if f := ad.Uint32(); f != 0 {
				return Element{}, fmt.Errorf("element flags %#x: %w", f, errForeign)
			}
		case unix.NFTA_SET_ELEM_EXPR, nftaSetElemExpressions, unix.NFTA_SET_ELEM_OBJREF, nftaSetElemKeyEnd:
			// What the element does beyond its key and value: svcproxy writes none.
			return Element{}, fmt.Errorf("element attribute %d: %w", ad.Type(), errForeign)
		}
	}
	if err := ad.Err(); err != nil {
		return Element{}, fmt.Errorf("decode element: %w", err)
	}
	if !hasKey || len(key) != valueLen(s.Key) {
		return Element{}, fmt.Errorf("element key of %d bytes for %s: %w", len(key), typesText(s.Key), errForeign)
	}
	if e.Key, err = splitBytes(s.Key, key); err != nil {
		return Element{}, fmt.Errorf("element key: %v: %w", err, errForeign)
	}
	switch {
	case s.Verdict:
		if verdict == nil {
			return Element{}, fmt.Errorf("element of verdict map %s without a verdict: %w", s.Name, errForeign)
		}
		e.Verdict = verdict
	case len(s.Data) > 0:
		if !hasVal || verdict != nil || len(val) != valueLen(s.Data) {
			return Element{}, fmt.Errorf("element value of %d bytes for %s: %w", len(val), typesText(s.Data), errForeign)
		}
		if e.Data, err = splitBytes(s.Data, val); err != nil {
			return Element{}, fmt.Errorf("element value: %v: %w", err, errForeign)
		}
	case hasVal:
		return Element{}, fmt.Errorf("element of plain set %s with a value: %w", s.Name, errForeign)
	}
	return e, nil
}

// dataValue returns the NFTA_DATA_VALUE inside an NFTA_SET_ELEM_KEY (nil if absent).
func dataValue(b []byte) []byte {
	ad, err := nlkit.Nested(b)
	if err != nil {
		return nil
	}
	var v []byte
	for ad.Next() {
		if ad.Type() == unix.NFTA_DATA_VALUE {
			v = ad.Bytes()
		}
	}
	if ad.Err() != nil {
		return nil
	}
	return v
}

// decodeData returns an element's value: bytes (NFTA_DATA_VALUE) or a verdict
// (NFTA_DATA_VERDICT).
func decodeData(b []byte) ([]byte, *Verdict, error) {
	ad, err := nlkit.Nested(b)
	if err != nil {
		return nil, nil, err
	}
	var val []byte
	var verdict *Verdict
	for ad.Next() {
		switch ad.Type() {
		case unix.NFTA_DATA_VALUE:
			val = ad.Bytes()
		case unix.NFTA_DATA_VERDICT:
			var code int32
			var chain string
			ad.Nested(func(nd *netlink.AttributeDecoder) error {
				nd.ByteOrder = binary.BigEndian
				for nd.Next() {
					switch nd.Type() {
					case unix.NFTA_VERDICT_CODE:
						code = int32(nd.Uint32())
					case unix.NFTA_VERDICT_CHAIN:
						chain = nd.String()
					}
				}
				return nil
			})
			v, err := verdictOfCode(code, chain)
			if err != nil {
				return nil, nil, err
			}
			verdict = v
		}
	}
	if err := ad.Err(); err != nil {
		return nil, nil, fmt.Errorf("decode element data: %w", err)
	}
	return val, verdict, nil
}

// verdictOfCode maps a kernel verdict to svcproxy's; verdicts svcproxy never writes
// (queue, continue, ...) are foreign.
func verdictOfCode(code int32, chain string) (*Verdict, error) {
	switch code {
	case nfAccept:
		return &Verdict{Kind: Accept}, nil
	case nfDrop:
		return &Verdict{Kind: Drop}, nil
	case unix.NFT_RETURN:
		return &Verdict{Kind: Return}, nil
	case unix.NFT_JUMP:
		return &Verdict{Kind: Jump, Chain: chain}, nil
	case unix.NFT_GOTO:
		return &Verdict{Kind: Goto, Chain: chain}, nil
	}
	return nil, fmt.Errorf("verdict %d: %w", code, errForeign)
}
