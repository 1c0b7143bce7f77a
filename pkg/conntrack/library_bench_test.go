package conntrack

import (
	"fmt"
	"testing"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/svcproxy/svcproxy/internal/netnstest"
)

// The benchmarks below run the Cleaner's hand-written ctnetlink paths and
// vishvananda/netlink's (what upstream kube-proxy uses) on the same table, in a
// namespace each creates (docs/netlink.md has the numbers):
//
//	nice -n 10 go test -count=1 -run '^$' -bench 'KernelList|KernelDelete' -benchmem -benchtime 5x ./pkg/conntrack/

// BenchmarkKernelList lists the UDP entries of a table of 10k UDP entries, and
// of one that holds 10k TCP entries besides 100 UDP ones: the Cleaner's
// filtered dump (decoded without allocating) against ConntrackTableList
// (every entry of the family, parsed into ConntrackFlows; the caller filters).
func BenchmarkKernelList(b *testing.B) {
	for _, tc := range []struct{ udp, tcp int }{{10000, 0}, {100, 10000}} {
		ns := netnstest.New(b, "ctlist")
		c, h := newCleaner(b, ns), newHandle(b, ns)
		fill(b, h, unix.IPPROTO_UDP, tc.udp, false)
		fill(b, h, unix.IPPROTO_TCP, tc.tcp, false)
		b.Run(fmt.Sprintf("udp=%d/tcp=%d/svcproxy", tc.udp, tc.tcp), func(b *testing.B) {
			b.ReportAllocs()
			for range b.N {
				n := 0
				if _, err := c.scan(unix.AF_INET, unix.IPPROTO_UDP, false, func(Entry) { n++ }); err != nil {
					b.Fatal(err)
				}
				if n != tc.udp {
					b.Fatalf("%d entries", n)
				}
			}
		})
		b.Run(fmt.Sprintf("udp=%d/tcp=%d/vishvananda", tc.udp, tc.tcp), func(b *testing.B) {
			b.ReportAllocs()
			for range b.N {
				flows, err := h.ConntrackTableList(netlink.ConntrackTable, unix.AF_INET)
				if err != nil {
					b.Fatal(err)
				}
				n := 0
				for _, f := range flows {
					if f.Forward.Protocol == unix.IPPROTO_UDP {
						n++
					}
				}
				if n != tc.udp {
					b.Fatalf("%d UDP flows of %d", n, len(flows))
				}
			}
		})
	}
}

// BenchmarkKernelDelete deletes every UDP entry of a table of 2k: the Cleaner's
// filtered dump and its deletes, 128 per sendmsg without acknowledgements,
// against ConntrackDeleteFilters with a protocol filter (a dump of the family,
// then one delete per entry, each acknowledged). The table is refilled between
// rounds, untimed.
func BenchmarkKernelDelete(b *testing.B) {
	const n = 2000
	for _, path := range []string{"svcproxy", "vishvananda"} {
		b.Run(fmt.Sprintf("udp=%d/%s", n, path), func(b *testing.B) {
			ns := netnstest.New(b, "ctdel")
			c, h := newCleaner(b, ns), newHandle(b, ns)
			filter := &netlink.ConntrackFilter{}
			if err := filter.AddProtocol(unix.IPPROTO_UDP); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				b.StopTimer()
				fill(b, h, unix.IPPROTO_UDP, n, false)
				b.StartTimer()
				var deleted uint
				var err error
				if path == "svcproxy" {
					var entries []Entry
					if entries, _, err = c.list(unix.AF_INET, unix.IPPROTO_UDP); err == nil {
						deleted, err = c.delete(entries)
					}
				} else {
					deleted, err = h.ConntrackDeleteFilters(netlink.ConntrackTable, unix.AF_INET, filter)
				}
				if err != nil || deleted != n {
					b.Fatalf("deleted %d of %d: %v", deleted, n, err)
				}
			}
		})
	}
}
