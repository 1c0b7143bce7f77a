package endpoints

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
)

// extSvc is Service ns/name with ClusterIP ip, created at, with the given ports
// (default: 80/TCP) and externalIPs.
func extSvc(ns, name, ip string, at time.Time, externalIPs []string, ports ...v1.ServicePort) *v1.Service {
	if len(ports) == 0 {
		ports = []v1.ServicePort{tcpPort("http", 80)}
	}
	return makeService(ns, name, ip, ports, created(at, "u-"+name), func(s *v1.Service) { s.Spec.ExternalIPs = externalIPs })
}

// lbSvc is extSvc of type LoadBalancer whose load balancer gave it ingress IPs.
func lbSvc(ns, name, ip string, at time.Time, ingress []string, ports ...v1.ServicePort) *v1.Service {
	s := extSvc(ns, name, ip, at, nil, ports...)
	s.Spec.Type = v1.ServiceTypeLoadBalancer
	for _, a := range ingress {
		s.Status.LoadBalancer.Ingress = append(s.Status.LoadBalancer.Ingress, v1.LoadBalancerIngress{IP: a})
	}
	return s
}

// servedAddrs is what the snapshot serves per Service: its ports as
// "port/PROTO ext=externalIPs lb=loadBalancerIPs", space separated.
func servedAddrs(snap Snapshot) map[string]string {
	out := map[string]string{}
	for k, ports := range snap.Services() {
		var parts []string
		for _, sp := range ports {
			parts = append(parts, fmt.Sprintf("%d/%s ext=%s lb=%s", sp.Port, sp.Name.Protocol, sp.ExternalIPs, sp.LoadBalancerIPs))
		}
		out[k.String()] = strings.Join(parts, "; ")
	}
	return out
}

// addrConflictText describes an external address conflict as the tests list them:
// "loser: use lost, winner, winner's use" (ClusterIP when it is the winner's
// ClusterIP); other conflicts as conflictText does.
func addrConflictText(c ConflictChange) string {
	if c.External == (AddrUse{}) {
		if c.NodePort == (NodePortUse{}) {
			return fmt.Sprintf("%s: ClusterIP %s, %s, resolved=%v", c.Service.Key, c.Addr, c.Winner, c.Resolved)
		}
		return conflictText(c)
	}
	if c.Resolved {
		return fmt.Sprintf("%s: %s resolved", c.Service.Key, c.External)
	}
	how := "ClusterIP"
	if c.WinnerExternal != (AddrUse{}) {
		how = c.WinnerExternal.String()
	}
	return fmt.Sprintf("%s: %s, %s, %s", c.Service.Key, c.External, c.Winner, how)
}

// TestTrackerExternalAddrConflicts: an external or load balancer IP is whatever a
// user or a controller wrote, rendered under the same keys (and endpoint maps) as a
// ClusterIP. One equal to another Service's ClusterIP is refused on every port,
// whatever the ages (the API server allocated the ClusterIP to its owner); between
// two external claims of one address, port and protocol the older Service keeps it.
// Only the lost address goes, for the loser's port; the rest of the Service stays.
func TestTrackerExternalAddrConflicts(t *testing.T) {
	t0, t1, t2 := time.Unix(1_700_000_000, 0), time.Unix(1_700_000_100, 0), time.Unix(1_700_000_200, 0)
	const none = "80/TCP ext= lb="
	tests := []struct {
		name      string
		services  []*v1.Service // added in this order, then reversed
		want      map[string]string
		conflicts []string
	}{
		{name: "an externalIP on another Service's ClusterIP and port: refused, although older",
			services:  []*v1.Service{extSvc("default", "good", "10.96.0.10", t1, nil), extSvc("aaa", "attacker", "10.96.0.99", t0, []string{"10.96.0.10"})},
			want:      map[string]string{"default/good": none, "aaa/attacker": none},
			conflicts: []string{"aaa/attacker: externalIP 10.96.0.10 port 80/TCP, default/good, ClusterIP"}},
		{name: "on another port of that ClusterIP: refused too",
			services:  []*v1.Service{extSvc("default", "good", "10.96.0.10", t1, nil), extSvc("aaa", "attacker", "10.96.0.99", t0, []string{"10.96.0.10"}, tcpPort("alt", 8080))},
			want:      map[string]string{"default/good": none, "aaa/attacker": "8080/TCP ext= lb="},
			conflicts: []string{"aaa/attacker: externalIP 10.96.0.10 port 8080/TCP, default/good, ClusterIP"}},
		{name: "a load balancer IP on a ClusterIP: refused, the other externalIPs and ports kept",
			services: []*v1.Service{
				extSvc("default", "good", "10.96.0.10", t1, nil),
				lbSvc("aaa", "attacker", "10.96.0.99", t0, []string{"10.96.0.10", "192.0.2.1"}, tcpPort("http", 80), udpPort("dns", 53))},
			want: map[string]string{"default/good": none, "aaa/attacker": "53/UDP ext= lb=192.0.2.1; 80/TCP ext= lb=192.0.2.1"},
			conflicts: []string{
				"aaa/attacker: load balancer IP 10.96.0.10 port 53/UDP, default/good, ClusterIP",
				"aaa/attacker: load balancer IP 10.96.0.10 port 80/TCP, default/good, ClusterIP"}},
		{name: "the Service's own ClusterIP as its externalIP: kept",
			services: []*v1.Service{extSvc("ns", "self", "10.96.0.10", t0, []string{"10.96.0.10"})},
			want:     map[string]string{"ns/self": "80/TCP ext=10.96.0.10 lb="}},
		{name: "one externalIP, port and protocol in two Services: the older keeps it",
			services:  []*v1.Service{extSvc("z", "old", "10.96.0.1", t0, []string{"192.0.2.1"}), extSvc("a", "young", "10.96.0.2", t1, []string{"192.0.2.1", "192.0.2.2"})},
			want:      map[string]string{"z/old": "80/TCP ext=192.0.2.1 lb=", "a/young": "80/TCP ext=192.0.2.2 lb="},
			conflicts: []string{"a/young: externalIP 192.0.2.1 port 80/TCP, z/old, externalIP 192.0.2.1 port 80/TCP"}},
		{name: "a load balancer IP on an older Service's externalIP",
			services:  []*v1.Service{extSvc("ns", "old", "10.96.0.1", t0, []string{"192.0.2.1"}), lbSvc("ns", "young", "10.96.0.2", t1, []string{"192.0.2.1"})},
			want:      map[string]string{"ns/old": "80/TCP ext=192.0.2.1 lb=", "ns/young": none},
			conflicts: []string{"ns/young: load balancer IP 192.0.2.1 port 80/TCP, ns/old, externalIP 192.0.2.1 port 80/TCP"}},
		{name: "one address on different ports (a shared load balancer IP): both served",
			services: []*v1.Service{lbSvc("ns", "a", "10.96.0.1", t0, []string{"192.0.2.1"}), lbSvc("ns", "b", "10.96.0.2", t1, []string{"192.0.2.1"}, tcpPort("https", 443))},
			want:     map[string]string{"ns/a": "80/TCP ext= lb=192.0.2.1", "ns/b": "443/TCP ext= lb=192.0.2.1"}},
		{name: "one address and port, other protocols: both served",
			services: []*v1.Service{extSvc("ns", "a", "10.96.0.1", t0, []string{"192.0.2.1"}, tcpPort("dns", 53)), extSvc("ns", "b", "10.96.0.2", t1, []string{"192.0.2.1"}, udpPort("dns", 53))},
			want:     map[string]string{"ns/a": "53/TCP ext=192.0.2.1 lb=", "ns/b": "53/UDP ext=192.0.2.1 lb="}},
		{name: "same age (manifests): namespace/name decides",
			services:  []*v1.Service{extSvc("ns", "b", "10.96.0.2", time.Time{}, []string{"192.0.2.1"}), extSvc("ns", "a", "10.96.0.1", time.Time{}, []string{"192.0.2.1"})},
			want:      map[string]string{"ns/a": "80/TCP ext=192.0.2.1 lb=", "ns/b": none},
			conflicts: []string{"ns/b: externalIP 192.0.2.1 port 80/TCP, ns/a, externalIP 192.0.2.1 port 80/TCP"}},
		{name: "the oldest claimant is not proxied (it lost its ClusterIP): the next one keeps the address",
			services: []*v1.Service{
				extSvc("ns", "ip-owner", "10.96.0.10", t0, nil),
				extSvc("ns", "oldest", "10.96.0.10", t1, []string{"192.0.2.1"}),
				extSvc("ns", "young", "10.96.0.2", t2, []string{"192.0.2.1"})},
			want:      map[string]string{"ns/ip-owner": none, "ns/young": "80/TCP ext=192.0.2.1 lb="},
			conflicts: []string{"ns/oldest: ClusterIP 10.96.0.10, ns/ip-owner, resolved=false"}},
	}
	for _, tc := range tests {
		takeInBothOrders(t, tc.name, tc.services, func(t *testing.T, snap Snapshot, conflicts []ConflictChange) {
			if got := servedAddrs(snap); !mapsEqual(got, tc.want) {
				t.Fatalf("served %q, want %q", got, tc.want)
			}
			var got []string
			for _, c := range conflicts {
				got = append(got, addrConflictText(c))
				if c.Active != 1 {
					t.Fatalf("Active %d in %+v, want 1 (one Service in conflict)", c.Active, c)
				}
			}
			if !slices.Equal(got, tc.conflicts) {
				t.Fatalf("conflicts %q, want %q", got, tc.conflicts)
			}
		})
	}
}

// TestTrackerExternalAddrHandover: the ClusterIP's owner wins whenever it comes (an
// attacker there first loses the address in the Take that sees the owner), the
// refused claim takes effect in the Take that sees the owner go, with the conflict
// reported over; resyncs report nothing; the same for two external claims.
func TestTrackerExternalAddrHandover(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	attacker := extSvc("aaa", "attacker", "10.96.0.99", at(0), []string{"10.96.0.10"})
	good := extSvc("default", "good", "10.96.0.10", at(1), nil)
	var got []ConflictChange
	tr := NewTracker(TrackerOptions{OnConflict: func(c ConflictChange) { got = append(got, c) }})
	take := func(what string, want map[string]string, wantChanged int, wantConflicts ...string) {
		t.Helper()
		snap, changed, _ := tr.Take()
		if s := servedAddrs(snap); !mapsEqual(s, want) {
			t.Fatalf("%s: served %q, want %q", what, s, want)
		}
		if len(changed) != wantChanged {
			t.Fatalf("%s: changed %v, want %d Services", what, changed, wantChanged)
		}
		var texts []string
		for _, c := range got {
			texts = append(texts, addrConflictText(c))
		}
		if !slices.Equal(texts, wantConflicts) {
			t.Fatalf("%s: conflicts %q, want %q", what, texts, wantConflicts)
		}
		got = nil
	}
	const lost = "aaa/attacker: externalIP 10.96.0.10 port 80/TCP, default/good, ClusterIP"
	const over = "aaa/attacker: externalIP 10.96.0.10 port 80/TCP resolved"

	tr.OnServiceAdd(attacker)
	take("the attacker alone has the address", map[string]string{"aaa/attacker": "80/TCP ext=10.96.0.10 lb="}, 1)
	tr.OnServiceAdd(good)
	take("the owner comes: the attacker loses the address", map[string]string{"default/good": "80/TCP ext= lb=", "aaa/attacker": "80/TCP ext= lb="}, 2, lost)

	tr.OnServiceUpdate(good, good)
	tr.OnServiceUpdate(attacker, attacker)
	take("resync", map[string]string{"default/good": "80/TCP ext= lb=", "aaa/attacker": "80/TCP ext= lb="}, 0)

	tr.OnServiceDelete(good)
	take("the owner deleted: the claim takes effect", map[string]string{"aaa/attacker": "80/TCP ext=10.96.0.10 lb="}, 2, over)
	if len(tr.losingAddrs) != 0 {
		t.Fatalf("losingAddrs %v after the conflict ended", tr.losingAddrs)
	}

	tr.OnServiceAdd(good)
	take("the owner back", map[string]string{"default/good": "80/TCP ext= lb=", "aaa/attacker": "80/TCP ext= lb="}, 2, lost)

	moved := good.DeepCopy()
	moved.Spec.ClusterIP, moved.Spec.ClusterIPs = "10.96.0.11", []string{"10.96.0.11"}
	tr.OnServiceUpdate(good, moved)
	take("the owner moves to another ClusterIP", map[string]string{"default/good": "80/TCP ext= lb=", "aaa/attacker": "80/TCP ext=10.96.0.10 lb="}, 2, over)

	// Two external claims: the younger gets the address when the older goes.
	older := extSvc("ns", "older", "10.96.0.20", at(2), []string{"192.0.2.1"})
	younger := extSvc("ns", "younger", "10.96.0.21", at(3), []string{"192.0.2.1"})
	tr.OnServiceAdd(younger)
	tr.OnServiceAdd(older)
	take("two claims", map[string]string{"default/good": "80/TCP ext= lb=", "aaa/attacker": "80/TCP ext=10.96.0.10 lb=",
		"ns/older": "80/TCP ext=192.0.2.1 lb=", "ns/younger": "80/TCP ext= lb="}, 2,
		"ns/younger: externalIP 192.0.2.1 port 80/TCP, ns/older, externalIP 192.0.2.1 port 80/TCP")
	tr.OnServiceDelete(older)
	take("the older deleted", map[string]string{"default/good": "80/TCP ext= lb=", "aaa/attacker": "80/TCP ext=10.96.0.10 lb=",
		"ns/younger": "80/TCP ext=192.0.2.1 lb="}, 2, "ns/younger: externalIP 192.0.2.1 port 80/TCP resolved")
}

// TestTrackerLoadBalancerStatusClaim: a load balancer IP arriving in a status update
// (a controller's write) on a ClusterIP is refused in that Take, and keeps the
// Service's source ranges off when no load balancer IP is left: nothing to program.
func TestTrackerLoadBalancerStatusClaim(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	good := extSvc("default", "good", "10.96.0.10", t0, nil)
	lb := lbSvc("ns", "lb", "10.96.0.99", t0, nil)
	lb.Spec.LoadBalancerSourceRanges = []string{"203.0.113.0/24"}
	var got []string
	tr := NewTracker(TrackerOptions{OnConflict: func(c ConflictChange) { got = append(got, addrConflictText(c)) }})
	tr.OnServiceAdd(good)
	tr.OnServiceAdd(lb)
	tr.Take()
	withStatus := lb.DeepCopy()
	withStatus.Status.LoadBalancer.Ingress = []v1.LoadBalancerIngress{{IP: "10.96.0.10"}}
	tr.OnServiceUpdate(lb, withStatus)
	snap, changed, _ := tr.Take()
	if len(changed) != 0 {
		t.Fatalf("changed %v, want none: the refused IP leaves the Service as it was", changed)
	}
	sp := snap.ServicePortsOf(ServiceKey{"ns", "lb"})[0]
	if sp.LoadBalancerIPs != "" || sp.SourceRanges != "" || sp.External() {
		t.Fatalf("load balancer Service's port %+v, want no load balancer IP nor source ranges", sp)
	}
	if want := []string{"ns/lb: load balancer IP 10.96.0.10 port 80/TCP, default/good, ClusterIP"}; !slices.Equal(got, want) {
		t.Fatalf("conflicts %q, want %q", got, want)
	}
}
