package proxy

import (
	"context"
	"encoding/binary"
	"errors"
	"net/netip"
	"strings"

	"golang.org/x/sys/unix"
	"k8s.io/klog/v2"

	"github.com/svcproxy/svcproxy/pkg/nft"
)

// The affinity map (client . ClusterIP . proto . port : endpoint . port) is written
// by the kernel after NAT and read by the sticky-N chains before it. Nothing in the
// rules checks that an entry's endpoint is still an endpoint of the port: the
// sweeper below deletes the entries that are not, after every commit in which a
// sticky port lost an endpoint (or stopped being sticky, or went away), and once
// after start (entries made by an earlier svcproxy, or while none ran).
//
// Residual window: between the commit that removes an endpoint and the sweep that
// follows it in the same sync (one dump of the map and one transaction, a few ms;
// longer if the sweep fails and waits for the next sync), a known client's new
// connection still goes to the removed endpoint, as its established connections do.

// stickyKey is a ClientIP-affinity Service port as the affinity map keys it.
type stickyKey struct {
	clusterIP netip.Addr
	proto     uint8
	port      uint16
}

// stickyPorts maps each ClientIP-affinity port to the endpoints its rules send to.
type stickyPorts map[stickyKey]map[netip.AddrPort]bool

// stickyOf reads a rendered fragment's sticky ports: those with an element in
// sticky-ports, with the endpoints of their endpoints-SS elements. Reading what
// render produced keeps one definition of "usable endpoint".
func stickyOf(f nft.Fragment) stickyPorts {
	var out stickyPorts
	for _, e := range f.Elements {
		if e.Set != mapStickyPorts || len(e.Key) != 3 {
			continue
		}
		if out == nil {
			out = stickyPorts{}
		}
		out[keyOf(e.Key)] = map[netip.AddrPort]bool{}
	}
	for _, e := range f.Elements {
		if !strings.HasPrefix(e.Set, mapEndpoints+"-") || len(e.Key) != 4 || len(e.Data) != 2 {
			continue
		}
		if eps, ok := out[keyOf(e.Key[:3])]; ok {
			eps[addrPortOf(e.Data)] = true
		}
	}
	return out
}

// keyOf reads ClusterIP . proto . port data.
func keyOf(ds []nft.Datum) stickyKey {
	a, _ := netip.AddrFromSlice(ds[0].Bytes())
	var proto uint8
	if b := ds[1].Bytes(); len(b) == 1 {
		proto = b[0]
	}
	return stickyKey{clusterIP: a, proto: proto, port: portOf(ds[2])}
}

func addrPortOf(ds []nft.Datum) netip.AddrPort {
	a, _ := netip.AddrFromSlice(ds[0].Bytes())
	return netip.AddrPortFrom(a, portOf(ds[1]))
}

func portOf(d nft.Datum) uint16 {
	if b := d.Bytes(); len(b) == 2 {
		return binary.BigEndian.Uint16(b)
	}
	return 0
}

// staleAffinity returns the entries of the affinity map whose endpoint is not an
// endpoint of their port in live (or whose port is not sticky at all).
func staleAffinity(entries []nft.Element, live stickyPorts) []nft.Element {
	var out []nft.Element
	for _, e := range entries {
		if len(e.Key) != 4 || len(e.Data) != 2 || !live[keyOf(e.Key[1:])][addrPortOf(e.Data)] {
			out = append(out, e)
		}
	}
	return out
}

// affinityTable is, for every sticky port the kernel's rules serve, its endpoints.
// Like servingTable it changes only once the kernel holds an owner's rules.
type affinityTable struct {
	live    stickyPorts
	byOwner map[string][]stickyKey
	pending map[string]stickyPorts
	// sweep: an entry may be stale (a sticky port lost an endpoint, or svcproxy
	// just started); cleared by a successful sweep.
	sweep bool
}

func newAffinityTable() *affinityTable {
	return &affinityTable{live: stickyPorts{}, byOwner: map[string][]stickyKey{}, pending: map[string]stickyPorts{}, sweep: true}
}

// render records the sticky ports owner's rules will serve once the kernel has them.
func (a *affinityTable) render(owner string, sp stickyPorts) { a.pending[owner] = sp }

// commit takes in the rendered state of every owner with no change pending any more.
func (a *affinityTable) commit(pending map[string]bool) {
	for owner, sp := range a.pending {
		if pending[owner] {
			continue
		}
		delete(a.pending, owner)
		for _, k := range a.byOwner[owner] {
			for ep := range a.live[k] {
				if !sp[k][ep] {
					a.sweep = true
				}
			}
			delete(a.live, k)
		}
		keys := make([]stickyKey, 0, len(sp))
		for k, eps := range sp {
			a.live[k] = eps
			keys = append(keys, k)
		}
		if len(keys) == 0 {
			delete(a.byOwner, owner)
		} else {
			a.byOwner[owner] = keys
		}
	}
}

// affinityKernel is what the sweeper needs beyond nft.Kernel; a kernel without it
// (a test double) is not swept.
type affinityKernel interface {
	DynamicElements(ctx context.Context, family nft.Family, table string, s *nft.Set) ([]nft.Element, error)
	DestroyElements(ctx context.Context, family nft.Family, table string, elems []nft.Element) error
}

// sweepAttempts bounds the dump-and-delete rounds of one sweep: a round fails when
// an entry expires between the dump and the delete (ENOENT, on kernels without
// NFT_MSG_DESTROYSETELEM).
const sweepAttempts = 3

// sweepAffinity deletes stale affinity entries when some may exist. It never fails
// the sync: a sweep that does not complete is logged and retried after the next
// sync.
func (p *Proxy) sweepAffinity(ctx context.Context) {
	k, ok := p.cfg.Kernel.(affinityKernel)
	if !p.affinity.sweep || !ok {
		return
	}
	set := p.desired.Sets[setAffinity]
	for attempt := 1; ; attempt++ {
		entries, err := k.DynamicElements(ctx, nft.FamilyIPv4, TableName, set)
		if err != nil {
			klog.ErrorS(err, "Reading the affinity map failed; stale entries are swept after the next sync")
			return
		}
		stale := staleAffinity(entries, p.affinity.live)
		if len(stale) == 0 {
			p.affinity.sweep = false
			return
		}
		err = k.DestroyElements(ctx, nft.FamilyIPv4, TableName, stale)
		if err == nil {
			p.commits++
			p.affinity.sweep = false
			p.cfg.Metrics.AffinityEntriesDeleted.Add(float64(len(stale)))
			klog.V(2).InfoS("Deleted affinity entries of endpoints no longer in use", "entries", len(stale))
			return
		}
		if errors.Is(err, unix.ENOENT) && attempt < sweepAttempts {
			continue // an entry expired meanwhile: read again
		}
		klog.ErrorS(err, "Deleting stale affinity entries failed; retried after the next sync", "entries", len(stale))
		return
	}
}
