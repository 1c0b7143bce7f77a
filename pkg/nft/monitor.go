package nft

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"

	"github.com/svcproxy/svcproxy/internal/nlkit"
)

// monitorBuffer is the notification socket's receive buffer. A big write of ours
// pauses the notifications (NotifyGate); the rest of ours (a few thousand elements
// at most), and foreign changes, a few objects at a time, fit. An overrun is
// reported as a possible foreign change (see WatchForeign), which costs one resync
// that reads nothing unless another program committed.
const monitorBuffer = 4 << 20

// ownPortsKept is how many of our transaction sockets' port ids are remembered: the
// notifications of a transaction may be read after its socket was replaced (after an
// error), and must still count as ours.
const ownPortsKept = 4

// ownPorts are the netlink port ids of the sockets n sent transactions on.
type ownPorts struct {
	mu  sync.Mutex
	ids []uint32 // newest last, at most ownPortsKept
}

func (o *ownPorts) add(id uint32) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.ids = append(o.ids, id)
	if len(o.ids) > ownPortsKept {
		o.ids = o.ids[len(o.ids)-ownPortsKept:]
	}
}

func (o *ownPorts) has(id uint32) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, x := range o.ids {
		if x == id {
			return true
		}
	}
	return false
}

// portID is the netlink port id the kernel bound c to.
func portID(c *netlink.Conn) (uint32, error) {
	raw, err := c.SyscallConn()
	if err != nil {
		return 0, err
	}
	var id uint32
	var serr error
	err = raw.Control(func(fd uintptr) {
		sa, e := unix.Getsockname(int(fd))
		if e != nil {
			serr = e
			return
		}
		nl, ok := sa.(*unix.SockaddrNetlink)
		if !ok {
			serr = fmt.Errorf("socket address %T is not netlink's", sa)
			return
		}
		id = nl.Pid
	})
	if err != nil {
		return 0, err
	}
	return id, serr
}

// WatchForeign calls changed whenever a program other than n (another netlink
// socket) commits a transaction that changes one of the tables `family table` in
// n's network namespace (once per transaction and table, after it, with the table's
// name and the parts it changed), and for every table with Parts.All when
// notifications were lost (the socket overran), since one of them may have been
// such a change. It subscribes to nf_tables' notifications
// (NFNLGRP_NFTABLES), in which the kernel tags every changed table, chain, rule,
// set, element and object with the port id of the socket whose transaction made it:
// those of n's own transactions are skipped without decoding. While n's
// NotifyGate is paused it is not subscribed, and on resume it reports every table
// with Parts{All, Unwatched}, from the goroutine that resumed. It returns when ctx
// ends (nil), or on a socket error. changed is called from WatchForeign's goroutine
// and must not block for long: notifications queue meanwhile.
func (n *Netlink) WatchForeign(ctx context.Context, family Family, tables []string, changed func(table string, p Parts)) error {
	conn, err := netlink.Dial(unix.NETLINK_NETFILTER, &netlink.Config{NetNS: n.NetNSFd})
	if err != nil {
		return fmt.Errorf("dial netlink for nftables notifications: %w", err)
	}
	stop := context.AfterFunc(ctx, func() { _ = conn.Close() })
	defer func() {
		if stop() {
			_ = conn.Close()
		}
	}()
	if err := nlkit.RaiseBuffers(conn, monitorBuffer); err != nil {
		return fmt.Errorf("nftables notification socket buffer: %w", err)
	}
	raw, err := conn.SyscallConn()
	if err != nil {
		return fmt.Errorf("nftables notification socket: %w", err)
	}
	gate := n.gate()
	w := &gateWatcher{conn: conn, missed: func() {
		for _, table := range tables {
			changed(table, Parts{All: true, Unwatched: true})
		}
	}}
	if err := gate.join(w); err != nil {
		return fmt.Errorf("subscribe to nftables notifications: %w", err)
	}
	defer gate.leave(w)
	// parts[i]: what the transaction being read changed in tables[i]. One call per
	// transaction and table, at its end: deleting a table notifies every object in
	// it, over several reads, and a call per read would spend the caller's rate
	// limit on one change.
	parts := make([]Parts, len(tables))
	lost := func() {
		for i, table := range tables {
			parts[i] = Parts{}
			changed(table, Parts{All: true})
		}
	}
	// Datagrams are read into one buffer and their messages walked in place: our
	// own writes notify every element (275k when a deleted table of 10k Services
	// is written again), and the library's Receive, which copies each message
	// out, took ~95 ms of CPU per such write, on the core the kernel's commit
	// needs, and its garbage as much again in collections.
	buf := make([]byte, notifyBuffer)
	for {
		nb, err := nlkit.Recv(raw, buf, true)
		if ctx.Err() != nil {
			return nil
		}
		if errors.Is(err, unix.ENOBUFS) || errors.Is(err, nlkit.ErrLong) {
			// Notifications were lost (an overrun, or a datagram too long for the
			// buffer, dropped by the read).
			lost()
			continue
		}
		if err != nil {
			if jerr := gate.err(w); jerr != nil {
				return fmt.Errorf("subscribe to nftables notifications again: %w", jerr)
			}
			return fmt.Errorf("receive nftables notifications: %w", err)
		}
		msgs := nlkit.Msgs{B: buf[:nb]}
		for msgs.Next() {
			m := netlink.Message{Header: netlink.Header{Type: netlink.HeaderType(msgs.Msg.Type), Flags: netlink.HeaderFlags(msgs.Msg.Flags),
				Sequence: msgs.Msg.Seq, PID: msgs.Msg.PID}, Data: msgs.Msg.Data}
			if endOfTransaction(m) {
				for i, table := range tables {
					if !parts[i].Empty() {
						changed(table, parts[i])
					}
					parts[i] = Parts{}
				}
				continue
			}
			for i, table := range tables {
				addForeignPart(&parts[i], m, family, table, n.ports.has)
			}
		}
		if msgs.Err != nil {
			// A malformed datagram: what it said is unknown.
			for i := range parts {
				parts[i].All = true
			}
		}
	}
}

// notifyBuffer holds the longest notification datagram: the kernel batches
// nf_tables notifications into buffers of NLMSG_GOODSIZE (a page, at most 8 KiB),
// and a single object's message is as small; 64 KiB leaves room.
const notifyBuffer = 64 << 10

// endOfTransaction reports whether m is NEWGEN, the notification that ends every
// committed transaction's.
func endOfTransaction(m netlink.Message) bool {
	return m.Header.Type == nlkit.NftType(unix.NFT_MSG_NEWGEN)
}

// addForeignPart adds to p the part of table `family table` that notification m
// says a socket for which ours is false changed, if any.
func addForeignPart(p *Parts, m netlink.Message, family Family, table string, ours func(portID uint32) bool) {
	if int(m.Header.Type)>>8 != unix.NFNL_SUBSYS_NFTABLES {
		return
	}
	// The attribute that names the changed object within the table, by kind.
	var nameAttr uint16
	var add func(string)
	switch int(m.Header.Type) & 0xff {
	case unix.NFT_MSG_NEWGEN, unix.NFT_MSG_TRACE:
		// The end of a transaction, and packet traces: neither names a table.
		return
	case unix.NFT_MSG_NEWTABLE, unix.NFT_MSG_DELTABLE:
		add = func(string) { p.Table = true }
	case unix.NFT_MSG_NEWCHAIN, unix.NFT_MSG_DELCHAIN:
		nameAttr, add = unix.NFTA_CHAIN_NAME, p.addChain
	case unix.NFT_MSG_NEWRULE, unix.NFT_MSG_DELRULE:
		nameAttr, add = unix.NFTA_RULE_CHAIN, p.addChain
	case unix.NFT_MSG_NEWSET, unix.NFT_MSG_DELSET:
		nameAttr, add = unix.NFTA_SET_NAME, p.addSet
	case unix.NFT_MSG_NEWSETELEM, unix.NFT_MSG_DELSETELEM:
		nameAttr, add = unix.NFTA_SET_ELEM_LIST_SET, p.addSet
	default:
		// Objects, flowtables: not named by chain or set.
		add = func(string) { p.All = true }
	}
	if len(m.Data) < 4 || Family(m.Data[0]) != family || ours(m.Header.PID) {
		return
	}
	ad, err := nlkit.Msg(m.Data)
	if err != nil {
		return
	}
	// Attribute 1 names the table in every object's message: NFTA_TABLE_NAME,
	// NFTA_CHAIN_TABLE, NFTA_RULE_TABLE, NFTA_SET_TABLE, NFTA_SET_ELEM_LIST_TABLE,
	// NFTA_OBJ_TABLE, NFTA_FLOWTABLE_TABLE.
	ourTable, name, named := false, "", false
	for ad.Next() {
		switch ad.Type() {
		case unix.NFTA_TABLE_NAME:
			if nlkit.CString(ad.Bytes()) != table {
				return
			}
			ourTable = true
		case nameAttr:
			if nameAttr != 0 {
				name, named = nlkit.CString(ad.Bytes()), true
			}
		}
	}
	switch {
	case !ourTable:
	case nameAttr != 0 && !named:
		// A change to our table that does not say which object: read it all.
		p.All = true
	default:
		add(name)
	}
}
