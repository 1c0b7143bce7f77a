package conntrack

import (
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/svcproxy/svcproxy/internal/netnstest"
)

// benchTable fills a fresh namespace's conntrack table with n UDP entries spread over
// 100 Services of one endpoint each; stale entries reply from a gone endpoint.
// Extra TCP entries (to the same Service addresses) stand for a busy node's TCP
// traffic, which the reconciler must not pay much for.
func benchTable(b *testing.B, h *netlink.Handle, n, tcp int, stale bool) Serving {
	b.Helper()
	const services = 100
	serving := Serving{}
	for s := 0; s < services; s++ {
		svc := Service{Proto: unix.IPPROTO_UDP, Addr: netip.AddrFrom4([4]byte{10, 96, byte(s / 250), byte(1 + s%250)}), Port: 53}
		serving[svc] = []netip.AddrPort{netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 244, byte(s / 250), byte(1 + s%250)}), 53)}
	}
	fill(b, h, unix.IPPROTO_UDP, n, stale)
	fill(b, h, unix.IPPROTO_TCP, tcp, stale)
	return serving
}

func fill(b *testing.B, h *netlink.Handle, proto uint8, n int, stale bool) {
	const services = 100
	for i := 0; i < n; i++ {
		s := i % services
		client := netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 200, byte(i / 60000), byte(i / 250 % 240)}), uint16(1024+i%60000))
		svc := netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 96, byte(s / 250), byte(1 + s%250)}), 53)
		ep := netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 244, byte(s / 250), byte(1 + s%250)}), 53)
		if stale {
			ep = netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 245, byte(s / 250), byte(1 + s%250)}), 53)
		}
		createEntry(b, h, proto, client, svc, ep)
	}
}

// BenchmarkReconcile measures one Reconcile call against a real conntrack table in a
// namespace: go test -run '^$' -bench Reconcile -benchtime 5x ./pkg/conntrack/
func BenchmarkReconcile(b *testing.B) {
	for _, tc := range []struct {
		udp, tcp int
		stale    bool
	}{
		{10000, 0, false},
		{10000, 0, true},
		{100, 10000, false},
	} {
		b.Run(fmt.Sprintf("udp=%d/tcp=%d/stale=%v", tc.udp, tc.tcp, tc.stale), func(b *testing.B) {
			ns := netnstest.New(b, "bench")
			c, h := newCleaner(b, ns), newHandle(b, ns)
			serving := benchTable(b, h, tc.udp, tc.tcp, tc.stale)
			var cpu time.Duration
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if tc.stale && i > 0 {
					b.StopTimer()
					fill(b, h, unix.IPPROTO_UDP, tc.udp, true)
					b.StartTimer()
				}
				before := cpuTime(b)
				n, err := c.Reconcile(serving)
				cpu += cpuTime(b) - before
				if err != nil {
					b.Fatal(err)
				}
				if want := map[bool]uint{true: uint(tc.udp), false: 0}[tc.stale]; n != want {
					b.Fatalf("deleted %d, want %d", n, want)
				}
			}
			// The machine is shared: CPU time (user + system, the kernel's dump and
			// deletes included) says more than wall time.
			b.ReportMetric(float64(cpu.Microseconds())/1000/float64(b.N), "cpu-ms/op")
		})
	}
}

// cpuTime is the process's user + system CPU time so far.
func cpuTime(b *testing.B) time.Duration {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
