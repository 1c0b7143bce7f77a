//go:build e2e

package e2e

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/mdlayher/netlink"
	"github.com/vishvananda/netlink/nl"
	"golang.org/x/sys/unix"
)

// Filling a node's conntrack table, for the soak's "conntrack table full"
// fault. nf_conntrack_max is global (writable in the initial namespace only),
// but the count it limits is each namespace's own: a namespace holding
// nf_conntrack_max entries refuses every new connection ("nf_conntrack: table
// full, dropping packet"), while every other namespace goes on. The entries
// are made ASSURED, so that the kernel's early drop, which evicts unassured
// entries to make room, cannot take them; they carry ctFillMark, by which
// they are deleted afterwards (and nothing else is), and a timeout, so that
// they go by themselves if the harness does not get to delete them.

// ctFillMark marks the filler entries.
const ctFillMark = 0x5eedf111

// The ctnetlink values the netlink library does not name
// (linux/netfilter/nfnetlink_conntrack.h, nf_conntrack_common.h); the rest are nl's.
const (
	ctMsgNew    = unix.NFNL_SUBSYS_CTNETLINK<<8 | nl.IPCTNL_MSG_CT_NEW
	ctMsgDelete = unix.NFNL_SUBSYS_CTNETLINK<<8 | nl.IPCTNL_MSG_CT_DELETE
	ctaMarkMask = 21 // CTA_MARK_MASK
	// IPS_SEEN_REPLY | IPS_ASSURED | IPS_CONFIRMED: a created entry is
	// CONFIRMED already, and a status that clears the bit is refused (EBUSY).
	ctStatusAssured = 1<<1 | 1<<2 | 1<<3
)

// conntrackMax is the kernel's nf_conntrack_max.
func conntrackMax() (int, error) {
	b, err := os.ReadFile("/proc/sys/net/netfilter/nf_conntrack_max")
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(strings.TrimSpace(string(b)))
}

// fillConntrack adds filler entries to ns's conntrack table until the kernel
// refuses one for want of room (ENOMEM), and returns how many it added. Each
// is a flow from 198.18.0.0/15 (RFC 2544's benchmark range) to 192.0.2.1:9
// (TEST-NET-1), UDP and TCP in turn, that no test traffic can match.
func fillConntrack(ns string, timeout time.Duration) (int, error) {
	max, err := conntrackMax()
	if err != nil {
		return 0, err
	}
	conn, err := dialNetfilter(ns)
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	const batch = 256
	added := 0
	for k := 0; k < 2*max; k += batch {
		msgs := make([]netlink.Message, 0, batch)
		for i := k; i < k+batch; i++ {
			m, err := fillerEntry(i, timeout)
			if err != nil {
				return added, err
			}
			msgs = append(msgs, m)
		}
		if _, err := conn.SendMessages(msgs); err != nil {
			return added, fmt.Errorf("send fillers: %w", err)
		}
		for acked := 0; acked < len(msgs); {
			replies, err := conn.Receive()
			if errors.Is(err, unix.ENOMEM) {
				return added + acked, nil // full
			}
			if err != nil {
				return added + acked, fmt.Errorf("filler %d: %w", added+acked, err)
			}
			acked += len(replies)
		}
		added += len(msgs)
	}
	return added, fmt.Errorf("%d entries added and the table (nf_conntrack_max %d) not full", added, max)
}

// fillerEntry is the creation of the i-th filler entry.
func fillerEntry(i int, timeout time.Duration) (netlink.Message, error) {
	src := [4]byte{198, 18 + byte(i>>16&1), byte(i >> 8), byte(i)}
	dst := [4]byte{192, 0, 2, 1}
	sport, dport := uint16(10000+i>>17), uint16(9)
	proto := uint8(unix.IPPROTO_UDP)
	if i%2 == 1 {
		proto = unix.IPPROTO_TCP
	}
	tuple := func(src, dst [4]byte, sport, dport uint16) func(*netlink.AttributeEncoder) error {
		return func(ae *netlink.AttributeEncoder) error {
			ae.Nested(nl.CTA_TUPLE_IP|unix.NLA_F_NESTED, func(ae *netlink.AttributeEncoder) error {
				ae.Bytes(nl.CTA_IP_V4_SRC, src[:])
				ae.Bytes(nl.CTA_IP_V4_DST, dst[:])
				return nil
			})
			ae.Nested(nl.CTA_TUPLE_PROTO|unix.NLA_F_NESTED, func(ae *netlink.AttributeEncoder) error {
				ae.Uint8(nl.CTA_PROTO_NUM, proto)
				ae.Uint16(nl.CTA_PROTO_SRC_PORT, sport)
				ae.Uint16(nl.CTA_PROTO_DST_PORT, dport)
				return nil
			})
			return nil
		}
	}
	ae := netlink.NewAttributeEncoder()
	ae.ByteOrder = binary.BigEndian
	ae.Nested(nl.CTA_TUPLE_ORIG|unix.NLA_F_NESTED, tuple(src, dst, sport, dport))
	ae.Nested(nl.CTA_TUPLE_REPLY|unix.NLA_F_NESTED, tuple(dst, src, dport, sport))
	ae.Uint32(nl.CTA_STATUS, ctStatusAssured)
	ae.Uint32(nl.CTA_TIMEOUT, uint32(timeout/time.Second))
	ae.Uint32(nl.CTA_MARK, ctFillMark)
	b, err := ae.Encode()
	if err != nil {
		return netlink.Message{}, err
	}
	return netlink.Message{
		Header: netlink.Header{Type: ctMsgNew, Flags: netlink.Request | netlink.Create | netlink.Excl | netlink.Acknowledge},
		Data:   append([]byte{unix.AF_INET, unix.NFNETLINK_V0, 0, 0}, b...),
	}, nil
}

// drainConntrack deletes ns's filler entries: a ctnetlink delete without a
// tuple, filtered by the mark, which the kernel applies to the namespace's
// table alone.
func drainConntrack(ns string) error {
	conn, err := dialNetfilter(ns)
	if err != nil {
		return err
	}
	defer conn.Close()
	ae := netlink.NewAttributeEncoder()
	ae.ByteOrder = binary.BigEndian
	ae.Uint32(nl.CTA_MARK, ctFillMark)
	ae.Uint32(ctaMarkMask, 0xffffffff)
	b, err := ae.Encode()
	if err != nil {
		return err
	}
	_, err = conn.Execute(netlink.Message{
		Header: netlink.Header{Type: ctMsgDelete, Flags: netlink.Request | netlink.Acknowledge},
		Data:   append([]byte{unix.AF_UNSPEC, unix.NFNETLINK_V0, 0, 0}, b...),
	})
	if err != nil {
		return fmt.Errorf("delete the fillers in %s: %w", ns, err)
	}
	return nil
}
