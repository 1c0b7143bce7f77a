package nft

import (
	"encoding/binary"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"

	"github.com/svcproxy/svcproxy/internal/nlkit"
)

// nft loads "ct original ip daddr" with NFT_CT_DST_IP and a direction ("ct original
// ip6 daddr" with NFT_CT_DST_IP6). google/nftables sends a direction only for
// NFT_CT_SRC/DST and the proto keys, and nft cannot parse an NFT_CT_DST inside a
// concatenation back (it aborts listing the table). So the field is encoded as
// NFT_CT_DST with its direction, and withCtIPKeys turns the key into the table
// family's NFT_CT_DST_IP or NFT_CT_DST_IP6 in the encoded messages; svcproxy writes
// no other NFT_CT_DST.
func withCtIPKeys(msgs []netlink.Message, family Family) {
	key := ctIPKey(family)
	for i := range msgs {
		m := &msgs[i]
		if int(m.Header.Type)&0xff != unix.NFT_MSG_NEWRULE || len(m.Data) < 4 {
			continue
		}
		_ = nlkit.WalkAttrs(m.Data[4:], func(t uint16, _ int, list []byte) {
			if t != unix.NFTA_RULE_EXPRESSIONS {
				return
			}
			_ = nlkit.WalkAttrs(list, func(t uint16, _ int, elem []byte) {
				if t == unix.NFTA_LIST_ELEM {
					patchCtKey(elem, key)
				}
			})
		})
	}
}

// patchCtKey rewrites, in place, the key of one ct expression from NFT_CT_DST to key
// (same length: the message keeps its layout).
func patchCtKey(elem []byte, key uint32) {
	var name string
	var data []byte
	_ = nlkit.WalkAttrs(elem, func(t uint16, _ int, v []byte) {
		switch t {
		case unix.NFTA_EXPR_NAME:
			name = nlkit.CString(v)
		case unix.NFTA_EXPR_DATA:
			data = v
		}
	})
	if name != "ct" {
		return
	}
	_ = nlkit.WalkAttrs(data, func(t uint16, _ int, v []byte) {
		if t == unix.NFTA_CT_KEY && len(v) == 4 && binary.BigEndian.Uint32(v) == unix.NFT_CT_DST {
			binary.BigEndian.PutUint32(v, key)
		}
	})
}
