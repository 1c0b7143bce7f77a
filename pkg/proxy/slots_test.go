package proxy

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/svcproxy/svcproxy/pkg/endpoints"
	"github.com/svcproxy/svcproxy/pkg/nft"
)

func TestKeepSlots(t *testing.T) {
	// Endpoints named by the last octet of 10.0.0.x, port 80.
	eps := func(octets ...byte) []endpoints.Endpoint {
		var out []endpoints.Endpoint
		for _, o := range octets {
			out = append(out, endpoints.Endpoint{Port: 80}.WithAddr(netip.AddrFrom4([4]byte{10, 0, 0, o})))
		}
		return out
	}
	had := func(octets ...byte) []netip.AddrPort {
		var out []netip.AddrPort
		for _, e := range eps(octets...) {
			out = append(out, e.AddrPort())
		}
		return out
	}
	for _, tc := range []struct {
		name string
		eps  []endpoints.Endpoint // sorted, as the snapshot gives them
		had  []netip.AddrPort
		want []endpoints.Endpoint
	}{
		{"no last rendering: the endpoints' order", eps(1, 2, 3), nil, eps(1, 2, 3)},
		{"unchanged", eps(1, 2, 3), had(1, 2, 3), eps(1, 2, 3)},
		{"one replaced: only its slot changes", eps(2, 3, 4, 9), had(1, 2, 3, 4), eps(9, 2, 3, 4)},
		{"one removed: the last moves into its slot", eps(1, 3, 4, 5), had(1, 2, 3, 4, 5), eps(1, 5, 3, 4)},
		{"the last removed", eps(1, 2), had(1, 2, 3), eps(1, 2)},
		{"one added: a new slot", eps(1, 2, 3, 4), had(4, 1, 3), eps(4, 1, 3, 2)},
		{"several replaced: the new ones fill the free slots in their order", eps(2, 7, 8, 9), had(1, 2, 3, 4), eps(7, 2, 8, 9)},
		{"all replaced", eps(5, 6), had(1, 2), eps(5, 6)},
		{"a slot's history that repeats an endpoint is used once", eps(1, 2), had(2, 2), eps(2, 1)},
		{"an endpoint held a slot the port no longer has", eps(1, 2), had(1, 3, 2), eps(1, 2)},
		{"none left", nil, had(1), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := slices.Clone(tc.eps)
			got := keepSlots(tc.eps, tc.had)
			if !slices.Equal(got, tc.want) {
				t.Fatalf("keepSlots = %v, want %v", got, tc.want)
			}
			if !slices.Equal(tc.eps, in) {
				t.Fatalf("keepSlots changed its input: %v, was %v", tc.eps, in)
			}
		})
	}
}

// TestReplacedEndpointKeepsSlots: one pod of ten replaced by another rewrites one
// slot of each endpoints map part the Service has (its ClusterIP's; its NodePort's
// cluster-wide and, under externalTrafficPolicy: Local, local slots), whatever the
// addresses between the two, and traffic goes to the nine and the new one.
func TestReplacedEndpointKeepsSlots(t *testing.T) {
	k := nft.NewFake()
	tr := endpoints.NewTracker(endpoints.TrackerOptions{})
	p := New(Config{Tracker: tr, Kernel: k, Metrics: NewMetrics(nil), Options: Options{NodeName: "node-a"}})
	slice := func(octets ...int) *discoveryv1.EndpointSlice {
		s := &discoveryv1.EndpointSlice{
			ObjectMeta:  metav1.ObjectMeta{Namespace: "ns", Name: "web-abc", Labels: map[string]string{discoveryv1.LabelServiceName: "web"}},
			AddressType: discoveryv1.AddressTypeIPv4,
			Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http"), Protocol: ptr.To(v1.ProtocolTCP), Port: ptr.To[int32](80)}},
		}
		for _, o := range octets {
			s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{Addresses: []string{fmt.Sprintf("10.244.1.%d", o)}, NodeName: ptr.To("node-a")})
		}
		return s
	}
	svc := testService("web", "10.96.0.10", false, v1.ServicePort{Name: "http", Port: 80, Protocol: v1.ProtocolTCP, NodePort: 30080})
	svc.Spec.Type = v1.ServiceTypeNodePort
	svc.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyLocal
	tr.OnServiceAdd(svc)
	tr.OnEndpointSliceAdd(slice(10, 11, 12, 13, 14, 15, 16, 17, 18, 19))
	if err := p.Sync(t.Context()); err != nil {
		t.Fatal(err)
	}
	ip := netip.MustParseAddr("10.96.0.10")
	parts := []struct {
		name, set string
		key       []nft.Datum
		first     int
	}{
		{"ClusterIP", endpointsMap(ip), []nft.Datum{nft.IP(ip), nft.Proto(nft.ProtoTCP), nft.Port(80)}, 0},
		{"NodePort", nodePortMap(30080), []nft.Datum{nft.Proto(nft.ProtoTCP), nft.Port(30080)}, 0},
		{"NodePort, local", nodePortMap(30080), []nft.Datum{nft.Proto(nft.ProtoTCP), nft.Port(30080)}, localSlots},
	}
	last := lastRendering{p.Desired(), ServiceOwner(endpoints.ServiceKey{Namespace: "ns", Name: "web"})}
	var before [][]netip.AddrPort
	for _, part := range parts {
		before = append(before, last.slots(part.set, part.key, part.first))
	}
	// 10.244.1.10 goes, 10.244.1.30 comes: in address order every other endpoint
	// would move down a slot.
	tr.OnEndpointSliceUpdate(nil, slice(11, 12, 13, 14, 15, 16, 17, 18, 19, 30))
	if err := p.Sync(t.Context()); err != nil {
		t.Fatal(err)
	}
	for i, part := range parts {
		after := last.slots(part.set, part.key, part.first)
		if len(before[i]) != 10 || len(after) != 10 {
			t.Fatalf("%s: %d slots before, %d after, want 10", part.name, len(before[i]), len(after))
		}
		var changed []string
		for slot, ep := range after {
			if ep != before[i][slot] {
				changed = append(changed, fmt.Sprintf("slot %d: %s -> %s", part.first+slot, before[i][slot], ep))
			}
		}
		if want := []string{fmt.Sprintf("slot %d: 10.244.1.10:80 -> 10.244.1.30:80", part.first)}; !slices.Equal(changed, want) {
			t.Fatalf("%s: changed slots %q, want %q", part.name, changed, want)
		}
	}
	got := route(t, k, "10.96.0.10")
	for o := 10; o <= 30; o++ {
		want := fmt.Sprintf("dnat 10.244.1.%d:80", o)
		if in := strings.Contains(got, want); in != (o >= 11 && o <= 19 || o == 30) {
			t.Fatalf("route %q: %s present = %v", got, want, in)
		}
	}
}
