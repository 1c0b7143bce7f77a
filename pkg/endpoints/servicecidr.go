package endpoints

import (
	"fmt"
	"net/netip"
	"slices"
	"sync"

	networkingv1 "k8s.io/api/networking/v1"
)

// KindServiceCIDR is passed to ServiceCIDRTracker's OnInvalid.
const KindServiceCIDR = "ServiceCIDR"

// ServiceCIDRPrefixes decodes the CIDRs of a ServiceCIDR (networking.k8s.io/v1).
// Every object counts, whatever its conditions, as in kube-proxy
// (pkg/proxy/config ServiceCIDRConfig takes spec.cidrs of every object it is
// given): a ServiceCIDR that is being deleted may still hold Services until its
// finalizer goes, and one not yet Ready has no Service whose traffic a drop
// could hurt. A CIDR that does not parse is reported and skipped; one with host
// bits set (the API server refuses it) is masked, so that the drop covers what
// the object names and never more than its network.
func ServiceCIDRPrefixes(sc *networkingv1.ServiceCIDR, report func(error)) []netip.Prefix {
	if sc == nil {
		return nil
	}
	out := make([]netip.Prefix, 0, len(sc.Spec.CIDRs))
	for _, s := range sc.Spec.CIDRs {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			report(fmt.Errorf("spec.cidrs: %w", err))
			continue
		}
		if p.Addr().Is4In6() || p.Addr().Zone() != "" {
			// An IPv4-mapped prefix would be programmed as IPv6 and match nothing
			// the API server allocates; a zone has no meaning in a route.
			report(fmt.Errorf("spec.cidrs: %q is not a plain IPv4 or IPv6 CIDR", s))
			continue
		}
		out = append(out, p.Masked())
	}
	return out
}

// ServiceCIDRTrackerOptions configures a ServiceCIDRTracker; the zero value is usable.
type ServiceCIDRTrackerOptions struct {
	// OnInvalid, if set, is told about a CIDR that was skipped.
	OnInvalid func(kind, namespace, name, reason string)
	// OnChange, if set, is called (without the tracker's lock) after an event
	// changed the union of the CIDRs, so that the proxies can take it.
	OnChange func()
}

// ServiceCIDRTracker keeps the CIDRs of the cluster's ServiceCIDR objects, by
// object, and answers their union per family. One tracker serves every family's
// proxy: the objects are few (one per range the cluster allocates from) and a
// dual-stack object names one CIDR of each family.
type ServiceCIDRTracker struct {
	opts ServiceCIDRTrackerOptions

	mu     sync.Mutex
	byName map[string][]netip.Prefix
}

// NewServiceCIDRTracker returns an empty tracker.
func NewServiceCIDRTracker(opts ServiceCIDRTrackerOptions) *ServiceCIDRTracker {
	return &ServiceCIDRTracker{opts: opts, byName: map[string][]netip.Prefix{}}
}

// OnAdd records a new or changed ServiceCIDR.
func (t *ServiceCIDRTracker) OnAdd(sc *networkingv1.ServiceCIDR) {
	if sc == nil {
		return
	}
	prefixes := ServiceCIDRPrefixes(sc, func(err error) {
		if t.opts.OnInvalid != nil {
			t.opts.OnInvalid(KindServiceCIDR, "", sc.Name, err.Error())
		}
	})
	t.set(sc.Name, prefixes)
}

// OnDeleteObj forgets a ServiceCIDR; obj is the object or a tombstone.
func (t *ServiceCIDRTracker) OnDeleteObj(obj any) {
	_, name, ok := deletedKey[*networkingv1.ServiceCIDR](obj)
	if !ok {
		if t.opts.OnInvalid != nil {
			t.opts.OnInvalid(KindServiceCIDR, "", "", fmt.Sprintf("unexpected object of type %T in delete notification", obj))
		}
		return
	}
	t.set(name, nil)
}

// set stores one object's prefixes (nil: gone) and tells OnChange when the
// union changed. The union, not the object, decides: a second object naming a
// CIDR that another already names changes nothing, and deleting one of them
// keeps the CIDR (kube-proxy's set of strings would drop it then).
func (t *ServiceCIDRTracker) set(name string, prefixes []netip.Prefix) {
	t.mu.Lock()
	before := unionLocked(t.byName)
	if len(prefixes) == 0 {
		delete(t.byName, name)
	} else {
		t.byName[name] = prefixes
	}
	changed := !slices.Equal(before, unionLocked(t.byName))
	t.mu.Unlock()
	if changed && t.opts.OnChange != nil {
		t.opts.OnChange()
	}
}

// CIDRs returns the union of every object's CIDRs of family f: sorted, each
// CIDR contained in another left out, so that what remains is disjoint (an
// nftables interval set, or a list of prefix matches, holds no overlaps).
func (t *ServiceCIDRTracker) CIDRs(f Family) []netip.Prefix {
	t.mu.Lock()
	all := unionLocked(t.byName)
	t.mu.Unlock()
	out := all[:0:0]
	for _, p := range all {
		if f.matches(p.Addr()) {
			out = append(out, p)
		}
	}
	return out
}

func unionLocked(byName map[string][]netip.Prefix) []netip.Prefix {
	var all []netip.Prefix
	for _, ps := range byName {
		all = append(all, ps...)
	}
	return DisjointPrefixes(all)
}

// DisjointPrefixes sorts ps and removes duplicates and every prefix contained
// in another. Two CIDRs either are disjoint or one contains the other, so the
// result is disjoint and covers the same addresses.
func DisjointPrefixes(ps []netip.Prefix) []netip.Prefix {
	out := slices.Clone(ps)
	// By address, then shorter prefix first: a container precedes what it holds.
	slices.SortFunc(out, func(a, b netip.Prefix) int {
		if c := a.Addr().Compare(b.Addr()); c != 0 {
			return c
		}
		return a.Bits() - b.Bits()
	})
	kept := out[:0]
	for _, p := range out {
		if n := len(kept); n > 0 && kept[n-1].Contains(p.Addr()) && kept[n-1].Bits() <= p.Bits() {
			continue
		}
		kept = append(kept, p)
	}
	return kept
}
