package nft

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"

	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"

	"github.com/svcproxy/svcproxy/internal/nlkit"
)

// A rule's user data says which Rule svcproxy meant to write (Rule.Hash), but
// anyone can copy it onto another rule: a `drop` carrying the hash of a
// load-balancing rule looked, to a drift check that read only user data, like
// the rule it replaced, and stayed for good. So the drift check also compares
// what the rule does: the digest of its expressions as the kernel dumps them
// against the digest of the expressions svcproxy would send for the Rule.
//
// The kernel does not echo a rule byte for byte: it adds attributes with their
// default values (lookup and dynset flags, numgen offset, bitwise op), fills in
// what it derives (nat's flags and max registers), drops what only names an
// object in the batch (set IDs) and nests without NLA_F_NESTED. canonExpr
// reduces both sides to the same form: attributes sorted by type, flag bits of
// the type cleared, nft_data values read inside their nest, and, per
// expression, attributes equal to what their absence means removed.

// foreignExprsDigest stands for expressions that cannot be decoded: it equals no
// digest of a rule svcproxy writes (in practice), so the chain is rewritten.
const foreignExprsDigest uint64 = 0

var errBadExprs = errors.New("malformed rule expressions")

// exprsDigest returns the digest of an NFTA_RULE_EXPRESSIONS payload as the kernel
// dumps it: a list of NFTA_LIST_ELEM, each one expression.
func exprsDigest(list []byte) (uint64, error) {
	h := fnvOffset
	var canon []byte
	var err error
	n := 0
	walkErr := nlkit.WalkAttrs(list, func(t uint16, _ int, elem []byte) {
		if err != nil {
			return
		}
		if t != unix.NFTA_LIST_ELEM {
			err = fmt.Errorf("attribute %d in an expression list: %w", t, errBadExprs)
			return
		}
		canon, err = canonExpr(canon[:0], elem)
		h = fnvBytes(fnvByte(h, 0xff), canon)
		n++
	})
	if err == nil {
		err = walkErr
	}
	if err != nil {
		return foreignExprsDigest, fmt.Errorf("expression %d: %w", n, err)
	}
	return h, nil
}

// ruleDigest returns the digest of the expressions svcproxy sends for r in a
// table of the given family: the same expressions Apply encodes, with the ct
// keys patched as withCtIPKeys patches them.
func ruleDigest(family Family, r Rule) (uint64, error) {
	ctx := &encCtx{family: family, setID: func(string) uint32 { return 0 }}
	key := ctIPKey(family)
	h := fnvOffset
	var canon []byte
	for i, e := range ruleExprs(ctx, r) {
		elem, err := expr.Marshal(byte(family), e)
		if err != nil {
			return foreignExprsDigest, fmt.Errorf("encode expression %d of %q: %w", i, r.String(), err)
		}
		patchCtKey(elem, key)
		if canon, err = canonExpr(canon[:0], elem); err != nil {
			return foreignExprsDigest, fmt.Errorf("expression %d of %q: %w", i, r.String(), err)
		}
		h = fnvBytes(fnvByte(h, 0xff), canon)
	}
	return h, nil
}

// attr is one attribute of an expression's data, its type without flag bits.
type attr struct {
	typ uint16
	val []byte
}

// canonExpr appends the canonical form of one expression (the content of an
// NFTA_LIST_ELEM: NFTA_EXPR_NAME and NFTA_EXPR_DATA) to out.
func canonExpr(out, elem []byte) ([]byte, error) {
	var name string
	var data []byte
	hasName := false
	if err := nlkit.WalkAttrs(elem, func(t uint16, _ int, v []byte) {
		switch t & nlkit.TypeMask {
		case unix.NFTA_EXPR_NAME:
			name, hasName = nlkit.CString(v), true
		case unix.NFTA_EXPR_DATA:
			data = v
		}
	}); err != nil {
		return out, err
	}
	if !hasName {
		return out, fmt.Errorf("expression without a name: %w", errBadExprs)
	}
	attrs, err := parseAttrs(data)
	if err != nil {
		return out, fmt.Errorf("%s: %w", name, err)
	}
	attrs = normalizeExpr(name, attrs)
	slices.SortStableFunc(attrs, func(a, b attr) int { return int(a.typ) - int(b.typ) })
	out = append(out, name...)
	out = append(out, 0)
	for _, a := range attrs {
		val := a.val
		if isDataAttr(name, a.typ) {
			if val, err = canonData(a.val); err != nil {
				return out, fmt.Errorf("%s attribute %d: %w", name, a.typ, err)
			}
		}
		out = appendCanonAttr(out, a.typ, val)
	}
	return out, nil
}

// parseAttrs splits b into attributes, flag bits of their types cleared.
func parseAttrs(b []byte) ([]attr, error) {
	var out []attr
	err := nlkit.WalkAttrs(b, func(t uint16, _ int, v []byte) { out = append(out, attr{t & nlkit.TypeMask, v}) })
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errBadExprs, err)
	}
	return out, nil
}

// appendCanonAttr writes type, length and value: unambiguous, whatever the bytes.
func appendCanonAttr(out []byte, typ uint16, val []byte) []byte {
	out = binary.BigEndian.AppendUint16(out, typ)
	out = binary.BigEndian.AppendUint32(out, uint32(len(val)))
	return append(out, val...)
}

// canonData is the canonical form of an nft_data nest (NFTA_DATA_VALUE, or
// NFTA_DATA_VERDICT holding a code and a chain name): sorted, flags cleared, a
// verdict's chain name read up to its NUL.
func canonData(b []byte) ([]byte, error) {
	attrs, err := parseAttrs(b)
	if err != nil {
		return nil, err
	}
	slices.SortStableFunc(attrs, func(a, b attr) int { return int(a.typ) - int(b.typ) })
	var out []byte
	for _, a := range attrs {
		val := a.val
		if a.typ == unix.NFTA_DATA_VERDICT {
			inner, err := parseAttrs(a.val)
			if err != nil {
				return nil, err
			}
			slices.SortStableFunc(inner, func(a, b attr) int { return int(a.typ) - int(b.typ) })
			val = nil
			for _, in := range inner {
				v := in.val
				if in.typ == unix.NFTA_VERDICT_CHAIN {
					v = []byte(nlkit.CString(v))
				}
				val = appendCanonAttr(val, in.typ, v)
			}
		}
		out = appendCanonAttr(out, a.typ, val)
	}
	return out, nil
}

// isDataAttr reports whether an expression's attribute holds an nft_data nest.
func isDataAttr(name string, typ uint16) bool {
	switch name {
	case "cmp":
		return typ == unix.NFTA_CMP_DATA
	case "immediate":
		return typ == unix.NFTA_IMMEDIATE_DATA
	case "bitwise":
		return typ == unix.NFTA_BITWISE_MASK || typ == unix.NFTA_BITWISE_XOR || typ == nftaBitwiseData
	case "range":
		return typ == unix.NFTA_RANGE_FROM_DATA || typ == unix.NFTA_RANGE_TO_DATA
	}
	return false
}

func ctIPKey(family Family) uint32 {
	if family == FamilyIPv6 {
		return unix.NFT_CT_DST_IP6
	}
	return unix.NFT_CT_DST_IP
}
