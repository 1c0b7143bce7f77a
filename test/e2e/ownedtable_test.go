//go:build e2e

package e2e

import (
	"encoding/binary"
	"fmt"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"

	"github.com/svcproxy/svcproxy/internal/netns"
)

// nftTableFOwner is NFT_TABLE_F_OWNER (linux/netfilter/nf_tables.h), which
// x/sys/unix lacks.
const nftTableFOwner = 0x2

// nftMsg is an nf_tables netlink message: nfgenmsg (family, version 0, res_id)
// then attributes.
func nftMsg(typ uint16, flags netlink.HeaderFlags, family uint8, resID uint16, attrs []byte) netlink.Message {
	data := []byte{family, unix.NFNETLINK_V0, byte(resID >> 8), byte(resID)}
	return netlink.Message{Header: netlink.Header{Type: netlink.HeaderType(typ), Flags: flags}, Data: append(data, attrs...)}
}

// dialNetfilter opens a NETLINK_NETFILTER socket (nftables, ctnetlink) in
// the network namespace ns; it stays there whatever thread uses it.
func dialNetfilter(ns string) (*netlink.Conn, error) {
	var conn *netlink.Conn
	var derr error
	if err := netns.Do(netns.Path(ns), func() error {
		conn, derr = netlink.Dial(unix.NETLINK_NETFILTER, nil)
		return nil
	}); err != nil {
		return nil, err
	}
	if derr != nil {
		return nil, fmt.Errorf("netlink in %s: %w", ns, derr)
	}
	return conn, nil
}

// holdTable swaps the table `ip name` in namespace ns, in one transaction, for an
// empty one owned by a netlink socket that this test holds (NFT_TABLE_F_OWNER):
// until release closes the socket, the kernel refuses every other program's change
// to that table with EPERM. It stands for "another program holds the proxy's
// table", an obstacle that kube-proxy and svcproxy meet in the same way.
func holdTable(ns, name string) (release func(), err error) {
	conn, err := dialNetfilter(ns)
	if err != nil {
		return nil, err
	}
	nameAttr := netlink.NewAttributeEncoder()
	nameAttr.String(unix.NFTA_TABLE_NAME, name)
	del, err := nameAttr.Encode()
	if err != nil {
		conn.Close()
		return nil, err
	}
	owned := netlink.NewAttributeEncoder()
	owned.ByteOrder = binary.BigEndian
	owned.String(unix.NFTA_TABLE_NAME, name)
	owned.Uint32(unix.NFTA_TABLE_FLAGS, nftTableFOwner)
	add, err := owned.Encode()
	if err != nil {
		conn.Close()
		return nil, err
	}
	const tables = unix.NFNL_SUBSYS_NFTABLES << 8
	msgs := []netlink.Message{
		nftMsg(unix.NFNL_MSG_BATCH_BEGIN, netlink.Request, unix.AF_UNSPEC, unix.NFNL_SUBSYS_NFTABLES, nil),
		nftMsg(tables|unix.NFT_MSG_DELTABLE, netlink.Request|netlink.Acknowledge, unix.NFPROTO_IPV4, 0, del),
		nftMsg(tables|unix.NFT_MSG_NEWTABLE, netlink.Request|netlink.Acknowledge|netlink.Create|netlink.Excl, unix.NFPROTO_IPV4, 0, add),
		nftMsg(unix.NFNL_MSG_BATCH_END, netlink.Request, unix.AF_UNSPEC, unix.NFNL_SUBSYS_NFTABLES, nil),
	}
	if _, err := conn.SendMessages(msgs); err != nil {
		conn.Close()
		return nil, fmt.Errorf("hold table %s in %s: %w", name, ns, err)
	}
	for range 2 { // one ack per acknowledged message; an error ends the batch
		if _, err := conn.Receive(); err != nil {
			conn.Close()
			return nil, fmt.Errorf("hold table %s in %s: %w", name, ns, err)
		}
	}
	return func() { conn.Close() }, nil
}
