package nft

import (
	"encoding/binary"
	"fmt"

	"github.com/google/nftables/userdata"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"

	"github.com/svcproxy/svcproxy/internal/nlkit"
)

// A set's user data (NFTA_SET_USERDATA) tells nft how to type its key and data:
// the byte order and the "typeof" expressions, TLVs as nft 1.0.6 writes them
// (libnftnl udata.h; nft's expression build_udata callbacks). google/nftables
// writes none, so setUserData builds them and withSetUserData adds them to the
// encoded NEWSET messages.

// nft's expression types (enum expr_types) and the typeof TLVs.
const (
	exprPayload = 7
	exprMeta    = 9
	exprConcat  = 13
	exprNumgen  = 23

	typeofExpr = 0 // NFTNL_UDATA_SET_TYPEOF_EXPR: the expression type
	typeofData = 1 // NFTNL_UDATA_SET_TYPEOF_DATA: nested, the expression's own TLVs

	concatSubType = 0 // NFTNL_UDATA_SET_KEY_CONCAT_SUB_TYPE
	concatSubData = 1 // NFTNL_UDATA_SET_KEY_CONCAT_SUB_DATA

	byteorderInvalid = 0
	byteorderHost    = 1
	byteorderBig     = 2

	maxTypeofParts = 4
)

// payloadUdata is what nft writes for a payload field: protocol description and
// header field template ids, as observed from nft 1.0.6.
var payloadUdata = map[Field][2]uint32{
	FieldIPSaddr: {12, 11},
	FieldIPDaddr: {12, 12},
	// PROTO_DESC_IP6, IP6HDR_SADDR and IP6HDR_DADDR (after IP6HDR_DSCP and
	// IP6HDR_ECN: 8 and 9, as nft 1.0.6 lists them).
	FieldIP6Saddr: {13, 8},
	FieldIP6Daddr: {13, 9},
	FieldThDport:  {11, 2},
}

func tlv(b []byte, typ userdata.Type, v []byte) []byte { return userdata.Append(b, typ, v) }

func u32(v uint32) []byte { return binary.NativeEndian.AppendUint32(nil, v) }

// exprUdata returns nft's expression type and TLVs for one operand.
func exprUdata(o Operand) (uint32, []byte, uint32, error) {
	switch {
	case o.Const != nil:
		return 0, nil, 0, fmt.Errorf("typeof: a constant has no expression")
	case o.Random != 0:
		var b []byte
		b = tlv(b, 0, u32(unix.NFT_NG_RANDOM))
		b = tlv(b, 1, u32(o.Random))
		b = tlv(b, 2, u32(0))
		return exprNumgen, b, byteorderHost, nil
	case o.Field == FieldL4Proto:
		return exprMeta, tlv(nil, 0, u32(unix.NFT_META_L4PROTO)), byteorderHost, nil
	}
	p, ok := payloadUdata[o.Field]
	if !ok {
		return 0, nil, 0, fmt.Errorf("typeof: field %s not supported", o.Field)
	}
	return exprPayload, tlv(tlv(nil, 0, u32(p[0])), 1, u32(p[1])), byteorderBig, nil
}

// typeofUdata encodes the typeof TLVs of ops and the byte order nft records for it.
func typeofUdata(ops []Operand) ([]byte, uint32, error) {
	if len(ops) == 1 {
		typ, data, order, err := exprUdata(ops[0])
		if err != nil {
			return nil, 0, err
		}
		return tlv(tlv(nil, typeofExpr, u32(typ)), typeofData, data), order, nil
	}
	if len(ops) > maxTypeofParts {
		// nft 1.0.6 itself records only the first four parts (seen here): a
		// longer typeof would not read back as written.
		return nil, 0, fmt.Errorf("typeof: %d parts, nft keeps at most %d", len(ops), maxTypeofParts)
	}
	var subs []byte
	for i, o := range ops {
		typ, data, _, err := exprUdata(o)
		if err != nil {
			return nil, 0, err
		}
		subs = tlv(subs, userdata.Type(i), tlv(tlv(nil, concatSubType, u32(typ)), concatSubData, data))
	}
	if len(subs) > 255 {
		return nil, 0, fmt.Errorf("typeof: %d parts do not fit in user data", len(ops))
	}
	return tlv(tlv(nil, typeofExpr, u32(exprConcat)), typeofData, subs), byteorderInvalid, nil
}

// setUserData returns the set's NFTA_SET_USERDATA, or nil when it declares no typeof.
func setUserData(s *Set) ([]byte, error) {
	if len(s.KeyExpr) == 0 {
		return nil, nil
	}
	key, keyOrder, err := typeofUdata(s.KeyExpr)
	if err != nil {
		return nil, fmt.Errorf("set %s key: %w", s.Name, err)
	}
	ud := tlv(nil, userdata.NFTNL_UDATA_SET_KEYBYTEORDER, u32(keyOrder))
	var data []byte
	dataOrder := uint32(byteorderInvalid)
	if len(s.DataExpr) > 0 {
		if data, dataOrder, err = typeofUdata(s.DataExpr); err != nil {
			return nil, fmt.Errorf("set %s data: %w", s.Name, err)
		}
	}
	if s.IsMap() {
		ud = tlv(ud, userdata.NFTNL_UDATA_SET_DATABYTEORDER, u32(dataOrder))
	}
	ud = tlv(ud, userdata.NFTNL_UDATA_SET_KEY_TYPEOF, key)
	if data != nil {
		ud = tlv(ud, userdata.NFTNL_UDATA_SET_DATA_TYPEOF, data)
	}
	if s.IsMap() {
		ud = tlv(ud, userdata.NFTNL_UDATA_SET_DATA_INTERVAL, u32(0))
	}
	if len(ud) > 256 {
		return nil, fmt.Errorf("set %s: user data of %d bytes exceeds the kernel's 256", s.Name, len(ud))
	}
	return ud, nil
}

// withSetUserData appends NFTA_SET_USERDATA to the NEWSET messages of sets that
// declare typeof (google/nftables writes no user data for our sets).
func withSetUserData(msgs []netlink.Message, sets []*Set) error {
	byName := map[string]*Set{}
	for _, s := range sets {
		byName[s.Name] = s
	}
	for i := range msgs {
		m := &msgs[i]
		if int(m.Header.Type)&0xff != unix.NFT_MSG_NEWSET || len(m.Data) < 4 {
			continue
		}
		var name string
		_ = nlkit.WalkAttrs(m.Data[4:], func(t uint16, _ int, v []byte) {
			if t == unix.NFTA_SET_NAME {
				name = nlkit.CString(v)
			}
		})
		s := byName[name]
		if s == nil {
			continue
		}
		ud, err := setUserData(s)
		if err != nil || ud == nil {
			if err != nil {
				return err
			}
			continue
		}
		attr, err := netlink.MarshalAttributes([]netlink.Attribute{{Type: unix.NFTA_SET_USERDATA, Data: ud}})
		if err != nil {
			return fmt.Errorf("set %s user data: %w", name, err)
		}
		m.Data = append(m.Data[:len(m.Data):len(m.Data)], attr...)
	}
	return nil
}
