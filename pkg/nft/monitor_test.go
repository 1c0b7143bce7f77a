package nft

import (
	"reflect"
	"testing"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// notification is an nf_tables notification of msgType about an object of table
// `family table`, made by the socket of port id pid.
func notification(t *testing.T, subsys, msgType int, family Family, table string, pid uint32) netlink.Message {
	t.Helper()
	ae := netlink.NewAttributeEncoder()
	if msgType == unix.NFT_MSG_NEWGEN {
		ae.Uint32(unix.NFTA_GEN_ID, 7) // attribute 1, as a table name is elsewhere
	} else {
		ae.String(unix.NFTA_TABLE_NAME, table) // NUL-terminated, as the kernel sends it
		ae.String(2, "some-chain")
	}
	b, err := ae.Encode()
	if err != nil {
		t.Fatal(err)
	}
	return netlink.Message{
		Header: netlink.Header{Type: netlink.HeaderType(subsys<<8 | msgType), PID: pid},
		Data:   append([]byte{byte(family), unix.NFNETLINK_V0, 0, 0}, b...),
	}
}

func TestForeignChange(t *testing.T) {
	const ours, other = 100, 200
	isOurs := func(pid uint32) bool { return pid == ours }
	nft := unix.NFNL_SUBSYS_NFTABLES
	tests := []struct {
		name string
		msg  netlink.Message
		want bool
	}{
		{"table deleted by another socket", notification(t, nft, unix.NFT_MSG_DELTABLE, FamilyIPv4, "svcproxy", other), true},
		{"chain added by another socket", notification(t, nft, unix.NFT_MSG_NEWCHAIN, FamilyIPv4, "svcproxy", other), true},
		{"rule deleted by another socket", notification(t, nft, unix.NFT_MSG_DELRULE, FamilyIPv4, "svcproxy", other), true},
		{"set deleted by another socket", notification(t, nft, unix.NFT_MSG_DELSET, FamilyIPv4, "svcproxy", other), true},
		{"elements deleted by another socket", notification(t, nft, unix.NFT_MSG_DELSETELEM, FamilyIPv4, "svcproxy", other), true},
		{"a change made by the kernel itself (port 0)", notification(t, nft, unix.NFT_MSG_DELTABLE, FamilyIPv4, "svcproxy", 0), true},
		{"our own transaction's echo", notification(t, nft, unix.NFT_MSG_NEWSETELEM, FamilyIPv4, "svcproxy", ours), false},
		{"another table", notification(t, nft, unix.NFT_MSG_DELTABLE, FamilyIPv4, "filter", other), false},
		{"a table whose name starts with ours", notification(t, nft, unix.NFT_MSG_DELTABLE, FamilyIPv4, "svcproxy2", other), false},
		{"the other family's table of that name", notification(t, nft, unix.NFT_MSG_DELTABLE, FamilyIPv6, "svcproxy", other), false},
		{"the end of a transaction", notification(t, nft, unix.NFT_MSG_NEWGEN, FamilyIPv4, "", other), false},
		{"another netfilter subsystem", notification(t, unix.NFNL_SUBSYS_CTNETLINK, unix.NFT_MSG_DELTABLE, FamilyIPv4, "svcproxy", other), false},
		{"truncated message", netlink.Message{Header: netlink.Header{Type: netlink.HeaderType(nft<<8 | unix.NFT_MSG_DELTABLE), PID: other}, Data: []byte{2}}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var p Parts
			addForeignPart(&p, tc.msg, FamilyIPv4, "svcproxy", isOurs)
			if got := !p.Empty(); got != tc.want {
				t.Fatalf("a foreign change: %v (%+v), want %v", got, p, tc.want)
			}
		})
	}
}

// The port ids of replaced transaction sockets stay ours for a while: their
// notifications may be read after the replacement.
func TestOwnPortsKeepsTheLastFew(t *testing.T) {
	var o ownPorts
	for id := uint32(1); id <= ownPortsKept+1; id++ {
		o.add(id)
	}
	if o.has(1) {
		t.Error("the oldest port id is still ours after ownPortsKept newer ones")
	}
	for id := uint32(2); id <= ownPortsKept+1; id++ {
		if !o.has(id) {
			t.Errorf("port id %d forgotten", id)
		}
	}
}

// Each notification names the part of the table it changed (attribute 2 is
// "some-chain" in every test notification: the rule's chain, the set's name, the
// elements' set), so that a repair reads back only that.
func TestForeignPartNamesWhatChanged(t *testing.T) {
	const other = 200
	isOurs := func(pid uint32) bool { return false }
	nft := unix.NFNL_SUBSYS_NFTABLES
	tests := []struct {
		name    string
		msgType int
		want    Parts
	}{
		{"table deleted", unix.NFT_MSG_DELTABLE, Parts{Table: true}},
		{"rule added", unix.NFT_MSG_NEWRULE, Parts{Chains: map[string]bool{"some-chain": true}}},
		{"rule deleted", unix.NFT_MSG_DELRULE, Parts{Chains: map[string]bool{"some-chain": true}}},
		{"set deleted", unix.NFT_MSG_DELSET, Parts{Sets: map[string]bool{"some-chain": true}}},
		{"elements deleted", unix.NFT_MSG_DELSETELEM, Parts{Sets: map[string]bool{"some-chain": true}}},
		{"elements added", unix.NFT_MSG_NEWSETELEM, Parts{Sets: map[string]bool{"some-chain": true}}},
		// The test notification has no NFTA_CHAIN_NAME (3): unnamed, so all.
		{"chain without a name", unix.NFT_MSG_NEWCHAIN, Parts{All: true}},
		{"an object", unix.NFT_MSG_NEWOBJ, Parts{All: true}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var got Parts
			addForeignPart(&got, notification(t, nft, tc.msgType, FamilyIPv4, "svcproxy", other), FamilyIPv4, "svcproxy", isOurs)
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("parts %+v, want %+v", got, tc.want)
			}
		})
	}
}
