package endpoints

import (
	"fmt"
	"slices"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
)

// nodePortSvc is a NodePort Service ns/name, created at, with one port of proto on
// nodePort; lbLocal is a LoadBalancer Service with externalTrafficPolicy: Local,
// a TCP nodePort and a health check node port hc.
func nodePortSvc(name, ip string, at time.Time, proto v1.Protocol, nodePort int32) *v1.Service {
	p := v1.ServicePort{Name: "p", Port: 80, Protocol: proto, NodePort: nodePort}
	return makeService("ns", name, ip, []v1.ServicePort{p}, created(at, "u-"+name),
		func(s *v1.Service) { s.Spec.Type = v1.ServiceTypeNodePort })
}

func lbLocal(name, ip string, at time.Time, nodePort, hc int32) *v1.Service {
	p := v1.ServicePort{Name: "p", Port: 80, Protocol: v1.ProtocolTCP, NodePort: nodePort}
	return makeService("ns", name, ip, []v1.ServicePort{p}, created(at, "u-"+name), func(s *v1.Service) {
		s.Spec.Type = v1.ServiceTypeLoadBalancer
		s.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyLocal
		s.Spec.HealthCheckNodePort = hc
	})
}

// servedNodePorts is what the snapshot serves per Service: "nodePort/hc".
func servedNodePorts(snap Snapshot) map[string]string {
	out := map[string]string{}
	for k, ports := range snap.Services() {
		for _, sp := range ports {
			out[k.Name] = fmt.Sprintf("%d/%d", sp.NodePort, sp.HealthCheckNodePort)
		}
	}
	return out
}

// TestTrackerNodePortConflicts: of two Services that use one node port (a nodePort
// of one protocol, or a health check node port, which is TCP), the older keeps it
// and the other is served without it, with a conflict reported; otherwise a load
// balancer's health probes would reach the other Service's pods (the nftables
// nodePort rule takes the packet before the health check server sees it).
func TestTrackerNodePortConflicts(t *testing.T) {
	t0, t1 := time.Unix(1_700_000_000, 0), time.Unix(1_700_000_100, 0)
	tests := []struct {
		name     string
		services []*v1.Service // added in this order, then reversed
		want     map[string]string
		// conflicts: "loser: use lost, winner, winner's use"
		conflicts []string
	}{
		{name: "a health check port on an older Service's nodePort: no health check",
			services:  []*v1.Service{nodePortSvc("old", "10.96.0.1", t0, v1.ProtocolTCP, 30080), lbLocal("young", "10.96.0.2", t1, 30081, 30080)},
			want:      map[string]string{"old": "30080/0", "young": "30081/0"},
			conflicts: []string{"ns/young: healthCheckNodePort 30080, ns/old, nodePort 30080/TCP"}},
		{name: "a nodePort on an older Service's health check port: no nodePort",
			services:  []*v1.Service{lbLocal("old", "10.96.0.1", t0, 30081, 30080), nodePortSvc("young", "10.96.0.2", t1, v1.ProtocolTCP, 30080)},
			want:      map[string]string{"old": "30081/30080", "young": "0/0"},
			conflicts: []string{"ns/young: nodePort 30080/TCP, ns/old, healthCheckNodePort 30080"}},
		{name: "a UDP nodePort and a health check port (TCP) do not collide",
			services: []*v1.Service{lbLocal("old", "10.96.0.1", t0, 30081, 30080), nodePortSvc("young", "10.96.0.2", t1, v1.ProtocolUDP, 30080)},
			want:     map[string]string{"old": "30081/30080", "young": "30080/0"}},
		{name: "one nodePort and protocol for two Services: the older keeps it",
			services:  []*v1.Service{nodePortSvc("old", "10.96.0.1", t0, v1.ProtocolTCP, 30080), nodePortSvc("young", "10.96.0.2", t1, v1.ProtocolTCP, 30080)},
			want:      map[string]string{"old": "30080/0", "young": "0/0"},
			conflicts: []string{"ns/young: nodePort 30080/TCP, ns/old, nodePort 30080/TCP"}},
		{name: "one health check port for two Services",
			services:  []*v1.Service{lbLocal("old", "10.96.0.1", t0, 30081, 30080), lbLocal("young", "10.96.0.2", t1, 30082, 30080)},
			want:      map[string]string{"old": "30081/30080", "young": "30082/0"},
			conflicts: []string{"ns/young: healthCheckNodePort 30080, ns/old, healthCheckNodePort 30080"}},
		{name: "same age (manifests): namespace/name decides",
			services:  []*v1.Service{nodePortSvc("b", "10.96.0.2", time.Time{}, v1.ProtocolTCP, 30080), lbLocal("a", "10.96.0.1", time.Time{}, 30081, 30080)},
			want:      map[string]string{"a": "30081/30080", "b": "0/0"},
			conflicts: []string{"ns/b: nodePort 30080/TCP, ns/a, healthCheckNodePort 30080"}},
	}
	for _, tc := range tests {
		takeInBothOrders(t, tc.name, tc.services, func(t *testing.T, snap Snapshot, conflicts []ConflictChange) {
			if got := servedNodePorts(snap); !mapsEqual(got, tc.want) {
				t.Fatalf("served (nodePort/healthCheckNodePort) %v, want %v", got, tc.want)
			}
			var got []string
			for _, c := range conflicts {
				got = append(got, conflictText(c))
			}
			if !slices.Equal(got, tc.conflicts) {
				t.Fatalf("conflicts %q, want %q", got, tc.conflicts)
			}
		})
	}
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// conflictText describes a node port conflict as the tests list them.
func conflictText(c ConflictChange) string {
	if c.Resolved {
		return fmt.Sprintf("%s: %s resolved", c.Service.Key, c.NodePort)
	}
	return fmt.Sprintf("%s: %s, %s, %s", c.Service.Key, c.NodePort, c.Winner, c.WinnerUse)
}

// TestTrackerNodePortHandover: the loser gets its node port back in the Take that
// sees the winner go, with the conflict reported over; resyncs report nothing; a
// Service that lost its cluster IP holds none of its node ports, so a younger one
// keeps them until the older one is proxied again.
func TestTrackerNodePortHandover(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	ipOwner := nodePortSvc("ip-owner", "10.96.0.10", at(0), v1.ProtocolTCP, 30090)
	older := lbLocal("older", "10.96.0.10", at(1), 30081, 30080) // loses 10.96.0.10 to ip-owner
	younger := nodePortSvc("younger", "10.96.0.20", at(2), v1.ProtocolTCP, 30080)
	var got []ConflictChange
	tr := NewTracker(TrackerOptions{OnConflict: func(c ConflictChange) { got = append(got, c) }})
	take := func(what string, want map[string]string, wantChanged int) {
		t.Helper()
		snap, changed, _ := tr.Take()
		if s := servedNodePorts(snap); !mapsEqual(s, want) {
			t.Fatalf("%s: served %v, want %v", what, s, want)
		}
		if len(changed) != wantChanged {
			t.Fatalf("%s: changed %v, want %d Services", what, changed, wantChanged)
		}
	}
	tr.OnServiceAdd(ipOwner)
	tr.OnServiceAdd(older)
	tr.OnServiceAdd(younger)
	take("older is not proxied: younger keeps 30080", map[string]string{"ip-owner": "30090/0", "younger": "30080/0"}, 2)
	if len(got) != 1 || got[0].NodePort != (NodePortUse{}) || got[0].Service.Key.Name != "older" {
		t.Fatalf("conflicts %+v, want only older's ClusterIP conflict", got)
	}

	tr.OnServiceDelete(ipOwner)
	take("older proxied again takes 30080 from younger", map[string]string{"older": "30081/30080", "younger": "0/0"}, 3)
	if len(got) != 3 || conflictText(got[2]) != "ns/younger: nodePort 30080/TCP, ns/older, healthCheckNodePort 30080" ||
		got[2].Service.UID != "u-younger" || got[2].Active != 0 || got[2].ActiveNodePorts != 1 {
		t.Fatalf("conflicts %+v, want the ClusterIP one over, then younger losing 30080", got)
	}

	tr.OnServiceUpdate(older, older)
	tr.OnServiceUpdate(younger, younger)
	take("resync", map[string]string{"older": "30081/30080", "younger": "0/0"}, 0)
	if len(got) != 3 {
		t.Fatalf("resync reported %+v", got[3:])
	}

	moved := younger.DeepCopy()
	moved.Spec.Ports[0].NodePort = 30082
	tr.OnServiceUpdate(younger, moved)
	take("younger moves to another nodePort", map[string]string{"older": "30081/30080", "younger": "30082/0"}, 1)
	if len(got) != 4 || conflictText(got[3]) != "ns/younger: nodePort 30080/TCP resolved" || got[3].ActiveNodePorts != 0 {
		t.Fatalf("conflicts %+v, want younger's over", got)
	}

	tr.OnServiceUpdate(moved, younger)
	take("back on 30080", map[string]string{"older": "30081/30080", "younger": "0/0"}, 1)
	tr.OnServiceDelete(older)
	take("the winner deleted", map[string]string{"younger": "30080/0"}, 2)
	if n := len(got); n != 6 || conflictText(got[5]) != "ns/younger: nodePort 30080/TCP resolved" || got[5].ActiveNodePorts != 0 {
		t.Fatalf("conflicts %+v, want younger's over after the winner's deletion", got)
	}
}
