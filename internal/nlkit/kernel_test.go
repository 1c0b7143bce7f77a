package nlkit

import (
	"syscall"
	"testing"
	"time"

	"github.com/google/nftables"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"

	"github.com/svcproxy/svcproxy/internal/netnstest"
)

// TestKernelDumpSendDrain runs the socket side of the toolkit against nf_tables
// in a namespace of its own: the collected and the streamed dump see the same
// tables, and a batch of requests sent without acknowledgements leaves exactly
// its failures to drain.
func TestKernelDumpSendDrain(t *testing.T) {
	ns := netnstest.New(t, "nlkit")
	c, err := nftables.New(nftables.WithNetNSFd(ns.Fd))
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"a", "b"} {
		c.AddTable(&nftables.Table{Family: nftables.TableFamilyIPv4, Name: name})
	}
	c.AddTable(&nftables.Table{Family: nftables.TableFamilyIPv6, Name: "v6"})
	if err := c.Flush(); err != nil {
		t.Fatal(err)
	}
	conn, err := netlink.Dial(unix.NETLINK_NETFILTER, &netlink.Config{NetNS: ns.Fd})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if err := RaiseBuffers(conn, 1<<20); err != nil {
		t.Fatal(err)
	}
	tableName := func(data []byte) string {
		ad, err := Msg(data)
		if err != nil {
			t.Fatal(err)
		}
		for ad.Next() {
			if ad.Type() == unix.NFTA_TABLE_NAME {
				return CString(ad.Bytes())
			}
		}
		return ""
	}

	for _, tc := range []struct {
		family uint8
		want   []string
	}{{unix.NFPROTO_IPV4, []string{"a", "b"}}, {unix.NFPROTO_IPV6, []string{"v6"}}, {unix.NFPROTO_ARP, nil}} {
		msgs, err := Dump(conn, unix.NFT_MSG_GETTABLE, tc.family, nil)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, m := range msgs {
			got = append(got, tableName(m.Data))
		}
		var streamed []string
		_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
		err = DumpEach(conn, netlink.Message{
			Header: netlink.Header{Type: NftType(unix.NFT_MSG_GETTABLE), Flags: netlink.Request | netlink.Dump},
			Data:   NfGenMsg(tc.family),
		}, make([]byte, 64<<10), func(m Message) { streamed = append(streamed, tableName(m.Data)) })
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(tc.want) || len(streamed) != len(tc.want) {
			t.Fatalf("family %d: Dump %q, DumpEach %q, want %q", tc.family, got, streamed, tc.want)
		}
		for i := range got {
			if got[i] != tc.want[i] || streamed[i] != tc.want[i] {
				t.Fatalf("family %d: Dump %q, DumpEach %q, want %q", tc.family, got, streamed, tc.want)
			}
		}
	}

	// Three GETTABLEs without acknowledgements: two of tables that do not exist
	// fail (ENOENT), one answers with the table, which is not an error.
	var b []byte
	for i, name := range []string{"a", "nope", "gone"} {
		var start int
		b, start = AppendHeader(b, NftType(unix.NFT_MSG_GETTABLE), netlink.Request, uint32(100+i), 0)
		b = append(b, NfGenMsg(unix.NFPROTO_IPV4)...)
		b = AppendStringAttr(b, unix.NFTA_TABLE_NAME, name)
		SetLength(b, start)
	}
	if err := Send(conn, b); err != nil {
		t.Fatal(err)
	}
	failed := map[syscall.Errno]int{}
	var seen int
	count := CountErrors(failed)
	if err := Drain(conn, make([]byte, 64<<10), func(m Message) { seen++; count(m) }); err != nil {
		t.Fatal(err)
	}
	if seen != 3 || len(failed) != 1 || failed[unix.ENOENT] != 2 {
		t.Fatalf("drained %d messages, errors %v; want 3 and 2 ENOENT", seen, failed)
	}
	// Nothing left: a second drain returns at once.
	if err := Drain(conn, make([]byte, 64<<10), func(Message) { t.Fatal("a message after the drain") }); err != nil {
		t.Fatal(err)
	}
	// A failed dump request ends DumpEach with its errno.
	err = DumpEach(conn, netlink.Message{
		Header: netlink.Header{Type: NftType(unix.NFT_MSG_GETSETELEM), Flags: netlink.Request | netlink.Dump},
		Data:   AppendStringAttr(AppendStringAttr(NfGenMsg(unix.NFPROTO_IPV4), unix.NFTA_SET_ELEM_LIST_TABLE, "nope"), unix.NFTA_SET_ELEM_LIST_SET, "x"),
	}, make([]byte, 64<<10), func(Message) {})
	if err != unix.ENOENT {
		t.Fatalf("dump of a missing table: %v, want ENOENT", err)
	}
}
