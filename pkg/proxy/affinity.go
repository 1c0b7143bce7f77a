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

// The affinity maps (client . ClusterIP . proto . port : endpoint . port, sharded by
// ClusterIP like the endpoints maps) are written by the kernel after NAT and read by
// the sticky-N-SS chains before it. Nothing in the rules checks that an entry's
// endpoint is still an endpoint of the port: the sweeper below deletes the entries
// that are not, after every commit in which a sticky port lost an endpoint (or
// stopped being sticky, or went away), and once after start (entries made by an
// earlier svcproxy, or while none ran). It reads only the shards of the ports that
// lost endpoints: the kernel resumes a set dump by walking the set from its start,
// so dumping one map of 100k entries took 22 s here, and one shard of it a
// sixteenth of the entries and far less than a sixteenth of the time.
//
// Residual window: between the commit that removes an endpoint and the sweep that
// follows it in the same sync (one dump of the map and one transaction, a few ms;
// longer if the sweep fails and waits for the next sync), a known client's new
// connection still goes to the removed endpoint, as its established connections do.

// stickyKey is a ClientIP-affinity Service port as the affinity map keys it: a
// ClusterIP, external or load balancer IP and its port, or, with the invalid (zero)
// address, a NodePort on any node address.
type stickyKey struct {
	clusterIP netip.Addr
	proto     uint8
	port      uint16
}

// affinityMapOf is the affinity map holding k's entries.
func affinityMapOf(k stickyKey) string {
	if !k.clusterIP.IsValid() {
		return nodePortAffinityMap(k.port)
	}
	return affinityMap(k.clusterIP)
}

// stickyPorts maps each ClientIP-affinity port to the endpoints its rules send to.
type stickyPorts map[stickyKey]map[netip.AddrPort]bool

// stickyOf reads a rendered fragment's sticky ports: those with an element in
// sticky-ports (or sticky-nodeports), with the endpoints of their endpoints-SS (or
// nodeport-endpoints-N) elements. Reading what render produced keeps one definition
// of "usable endpoint".
func stickyOf(f nft.Fragment) stickyPorts {
	var out stickyPorts
	for _, e := range f.Elements {
		var k stickyKey
		switch {
		case e.Set == mapStickyPorts && len(e.Key) == 3:
			k = keyOf(e.Key)
		case e.Set == mapStickyNodePorts && len(e.Key) == 2:
			k = nodePortKeyOf(e.Key)
		default:
			continue
		}
		if out == nil {
			out = stickyPorts{}
		}
		out[k] = map[netip.AddrPort]bool{}
	}
	if out == nil {
		return nil // most Services: no key to read (a million endpoint elements at 100k)
	}
	for _, e := range f.Elements {
		var k stickyKey
		switch {
		case len(e.Data) != 2:
			continue
		case strings.HasPrefix(e.Set, mapEndpoints+"-") && len(e.Key) == 4:
			k = keyOf(e.Key[:3])
		case strings.HasPrefix(e.Set, mapNodePortEPs+"-") && len(e.Key) == 3:
			k = nodePortKeyOf(e.Key[:2])
		default:
			continue
		}
		if eps, ok := out[k]; ok {
			eps[addrPortOf(e.Data)] = true
		}
	}
	return out
}

// nodePortKeyOf reads proto . nodePort data.
func nodePortKeyOf(ds []nft.Datum) stickyKey {
	var proto uint8
	if b := ds[0].Bytes(); len(b) == 1 {
		proto = b[0]
	}
	return stickyKey{proto: proto, port: portOf(ds[1])}
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
// endpoint of their port in live (or whose port is not sticky at all). A NodePort
// entry (in a nodeport-affinity map) names the node address it came in on, which
// the port's key leaves out.
func staleAffinity(entries []nft.Element, live stickyPorts) []nft.Element {
	var out []nft.Element
	for _, e := range entries {
		if len(e.Key) != 4 || len(e.Data) != 2 {
			out = append(out, e)
			continue
		}
		k := keyOf(e.Key[1:])
		if strings.HasPrefix(e.Set, mapNodePortAffinity+"-") {
			k = nodePortKeyOf(e.Key[2:])
		}
		if !live[k][addrPortOf(e.Data)] {
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
	// sweep marks, by name, the affinity maps that may hold stale entries (a sticky
	// port of the map lost an endpoint, or svcproxy just started); a successful sweep
	// of a map clears its mark.
	sweep map[string]bool
}

func newAffinityTable() *affinityTable {
	a := &affinityTable{live: stickyPorts{}, byOwner: map[string][]stickyKey{}, pending: map[string]stickyPorts{},
		sweep: map[string]bool{}}
	for k := 0; k < shards; k++ {
		a.sweep[affinityShard(k)] = true
	}
	for k := 0; k < nodePortShards; k++ {
		a.sweep[nodePortAffinityShard(k)] = true
	}
	return a
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
					a.sweep[affinityMapOf(k)] = true
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
	a.pending = shrunk(a.pending)
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

// sweepAffinity deletes stale affinity entries in the shards that may hold some. It
// never fails the sync: a shard whose sweep does not complete is logged and swept
// again after the next sync.
func (p *Proxy) sweepAffinity(ctx context.Context) {
	k, ok := p.cfg.Kernel.(affinityKernel)
	if !ok {
		return
	}
	for name, due := range p.affinity.sweep {
		if due && p.sweepShard(ctx, k, name) {
			p.affinity.sweep[name] = false
		}
	}
}

// sweepShard deletes the stale entries of one affinity map and reports whether it
// completed.
func (p *Proxy) sweepShard(ctx context.Context, k affinityKernel, name string) bool {
	if _, ok := p.desired.PresentSets()[name]; !ok {
		return true // the shard went with its last sticky port, entries included
	}
	set := p.desired.Sets[name]
	for attempt := 1; ; attempt++ {
		entries, err := k.DynamicElements(ctx, p.desired.Family, TableName, set)
		if err != nil {
			klog.ErrorS(err, "Reading an affinity map failed; stale entries are swept after the next sync", "map", name)
			return false
		}
		stale := staleAffinity(entries, p.affinity.live)
		if len(stale) == 0 {
			return true
		}
		err = k.DestroyElements(ctx, p.desired.Family, TableName, stale)
		if err == nil {
			p.commits++
			p.cfg.Metrics.AffinityEntriesDeleted.Add(float64(len(stale)))
			klog.V(2).InfoS("Deleted affinity entries of endpoints no longer in use", "map", name, "entries", len(stale))
			return true
		}
		if errors.Is(err, unix.ENOENT) && attempt < sweepAttempts {
			continue // an entry expired meanwhile: read again
		}
		klog.ErrorS(err, "Deleting stale affinity entries failed; retried after the next sync", "map", name, "entries", len(stale))
		return false
	}
}
