package proxy

import (
	"net/netip"
	"slices"
	"time"

	"golang.org/x/sys/unix"
	"k8s.io/klog/v2"

	"github.com/svcproxy/svcproxy/pkg/conntrack"
	"github.com/svcproxy/svcproxy/pkg/endpoints"
	"github.com/svcproxy/svcproxy/pkg/nft"
)

// unansweredGap is the least time between two passes. Under churn the proxy syncs
// every few tens of milliseconds, and a pass after each took 8% of a core at 30k
// Services with 20k entries in the node's table (make bench's churn, 2026-12-04:
// 10.2 CPU seconds a minute with the passes, 5.4 without), as much as the syncs
// themselves. An unanswered SYN is retransmitted 1 s, then 3 s after the first:
// a pass at most a second after the sync still lets the 3 s one through.
const unansweredGap = time.Second

// unansweredDelay is how long after a sync that changed the kernel its pass waits.
// The pass walks the node's whole conntrack table in the kernel (~15 ms at 30k
// entries) just when clients make their first connections to what the sync
// changed: run right after the commit, it put the one-change latency's tail at
// 11-16 ms against 7 ms without it (make bench's side by side at 30k, 60 changes,
// 2026-12-04). A quarter of a second still comes before the first retransmission.
const unansweredDelay = 250 * time.Millisecond

// reconcileUnanswered deletes the conntrack entries of TCP SYNs nobody answered
// that go to a Service address without being translated to one of its endpoints:
// sent before the Service had rules or endpoints, or translated to an endpoint that
// has gone. Each retransmission follows such an entry, and so does a later
// connection that gets the same source port while it lives (120 s, renewed by every
// SYN): the client times out although the Service works. kube-proxy leaves them;
// svcproxy deletes them after every sync that changed the kernel and on resyncs:
// such a sync owes a pass, made by the first sync unansweredDelay after it (the
// loop syncs then). The kernel filters the dump (Linux 6.1+), so a table of
// answered connections costs a walk of the table, not their transfer: ~0.7 µs of
// CPU per entry (BenchmarkReconcile's kernel-filtered dump), which a busy node's
// hundreds of thousands of entries make worth bounding: the next pass waits at
// least ten times as long as the last one took, as the drift check's reads do, and
// at least unansweredGap.
func (p *Proxy) reconcileUnanswered(snap endpoints.Snapshot, run bool) {
	if p.cfg.Conntrack == nil || !(run || p.unansweredOwed) {
		return
	}
	start := p.cfg.Clock.Now()
	if !p.unansweredOwed {
		p.unansweredOwed = true
		p.nextUnanswered = later(p.nextUnanswered, start.Add(unansweredDelay))
		return
	}
	if start.Before(p.nextUnanswered) {
		return
	}
	p.unansweredOwed = false
	defer func() { p.nextUnanswered = start.Add(max(10*p.cfg.Clock.Since(start), unansweredGap)) }()
	family := uint8(unix.AF_INET)
	if p.cfg.Options.Family == endpoints.IPv6 {
		family = unix.AF_INET6
	}
	deleted, err := p.cfg.Conntrack.ReconcileUnanswered(family, func(keys []conntrack.Service) conntrack.Serving {
		return p.tcpServing(snap, keys)
	})
	p.cfg.Metrics.ConntrackDeletedEntries.Add(float64(deleted))
	p.cfg.Metrics.ConntrackDeleted.Add(float64(deleted))
	if err != nil {
		klog.ErrorS(err, "Reconciling unanswered TCP conntrack entries; will retry after the next sync")
		return
	}
	if deleted > 0 {
		klog.V(2).InfoS("Deleted conntrack entries of unanswered SYNs towards Services", "count", deleted)
	}
}

// tcpServing is servingOf for the TCP Service addresses among keys (ClusterIPs,
// external and load balancer IPs, NodePorts on the node's NodePort addresses),
// keeping only the addresses asked about. It looks at the Services that claim one
// of keys (the tracker's address and node port indexes) rather than at every
// Service: a pass follows the unanswered entries, not the cluster (issue 22: 18 ms
// at 30k Services for a walk of all of them).
func (p *Proxy) tcpServing(snap endpoints.Snapshot, keys []conntrack.Service) conntrack.Serving {
	want := make(map[conntrack.Service]bool, len(keys))
	nodeAddrs := p.nodePortAddresses()
	dests := make([]endpoints.Destination, 0, len(keys))
	for _, k := range keys {
		want[k] = true
		if k.Proto == nft.ProtoTCP {
			dests = append(dests, endpoints.Destination{Addr: k.Addr, Protocol: "TCP", Port: k.Port, NodeAddr: slices.Contains(nodeAddrs, k.Addr)})
		}
	}
	claimants := map[endpoints.ServiceKey]struct{}{}
	p.cfg.Tracker.ClaimantsOf(dests, claimants)
	out := conntrack.Serving{}
	for svc := range claimants {
		for _, sp := range snap.ServicePortsOf(svc) {
			for _, k := range serviceAddresses(sp) {
				if k.Proto != nft.ProtoTCP {
					break // one protocol per port
				}
				addrs := []netip.Addr{k.Addr}
				if k.Addr == anyNodeAddress {
					addrs = nodeAddrs
				}
				for _, a := range addrs {
					if k.Addr = a; want[k] {
						out[k] = servingEndpoints(sp, snap)
					}
				}
			}
		}
	}
	return out
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
