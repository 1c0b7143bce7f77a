package endpoints

import (
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
)

func TestExtractSlice(t *testing.T) {
	http := slicePortOf("http", v1.ProtocolTCP, 8080)
	svc := "svc"
	httpPort := slicePort{Name: "http", Protocol: "TCP", Port: 8080}

	tests := []struct {
		name    string
		slice   *discoveryv1.EndpointSlice
		fam     Family
		want    *sliceData
		wantErr []string
	}{
		{
			name:  "no service-name label ignored",
			slice: makeSlice("ns", "s1", "", []discoveryv1.EndpointPort{http}, readyEP("10.0.0.1")),
		},
		{
			name: "FQDN ignored",
			slice: func() *discoveryv1.EndpointSlice {
				s := makeSlice("ns", "s1", "svc", []discoveryv1.EndpointPort{http}, readyEP("example.com"))
				s.AddressType = discoveryv1.AddressTypeFQDN
				return s
			}(),
		},
		{
			name: "IPv6 slice ignored by IPv4 tracker",
			slice: func() *discoveryv1.EndpointSlice {
				s := makeSlice("ns", "s1", "svc", []discoveryv1.EndpointPort{http}, readyEP("fd00::1"))
				s.AddressType = discoveryv1.AddressTypeIPv6
				return s
			}(),
		},
		{
			name: "IPv6 slice used by IPv6 tracker",
			fam:  IPv6,
			slice: func() *discoveryv1.EndpointSlice {
				s := makeSlice("ns", "s1", "svc", []discoveryv1.EndpointPort{http}, readyEP("fd00::1"))
				s.AddressType = discoveryv1.AddressTypeIPv6
				return s
			}(),
			want: &sliceData{Service: svc, Ports: []slicePort{httpPort},
				Endpoints: []Endpoint{Endpoint{Ready: true, Serving: true}.WithAddr(addr("fd00::1"))}},
		},
		{
			name: "condition defaults: ready unset => true, serving unset => true, terminating unset => false",
			slice: makeSlice("ns", "s1", "svc", []discoveryv1.EndpointPort{http},
				ep("10.0.0.1", nil, nil, nil),
				ep("10.0.0.2", ptr(false), nil, ptr(true)),
				ep("10.0.0.3", ptr(false), ptr(false), nil),
				ep("10.0.0.4", nil, ptr(false), ptr(true)),
			),
			want: &sliceData{Service: svc, Ports: []slicePort{httpPort}, Endpoints: []Endpoint{
				Endpoint{Ready: true, Serving: true}.WithAddr(addr("10.0.0.1")),
				Endpoint{Serving: true, Terminating: true}.WithAddr(addr("10.0.0.2")),
				Endpoint{}.WithAddr(addr("10.0.0.3")),
				Endpoint{Ready: true, Terminating: true}.WithAddr(addr("10.0.0.4")),
			}},
		},
		{
			name: "node name and first address only",
			slice: makeSlice("ns", "s1", "svc", []discoveryv1.EndpointPort{http}, func() discoveryv1.Endpoint {
				e := readyEP("10.0.0.1")
				e.Addresses = append(e.Addresses, "10.0.0.99")
				e.NodeName = ptr("node-a")
				return e
			}()),
			want: &sliceData{Service: svc, Ports: []slicePort{httpPort}, Endpoints: []Endpoint{
				Endpoint{Ready: true, Serving: true}.WithAddr(addr("10.0.0.1")).OnNode("node-a"),
			}},
		},
		{
			name: "zone and hints kept; an endpoint without them has the zero Topology",
			slice: makeSlice("ns", "s1", "svc", []discoveryv1.EndpointPort{http}, func() discoveryv1.Endpoint {
				e := readyEP("10.0.0.1")
				e.Zone = ptr("zone-a")
				e.Hints = &discoveryv1.EndpointHints{
					ForZones: []discoveryv1.ForZone{{Name: "zone-b"}, {Name: "zone-a"}},
					ForNodes: []discoveryv1.ForNode{{Name: "node-a"}},
				}
				return e
			}(), readyEP("10.0.0.2")),
			want: &sliceData{Service: svc, Ports: []slicePort{httpPort}, Endpoints: []Endpoint{
				Endpoint{Ready: true, Serving: true,
					Topology: NewTopology("zone-a", []string{"zone-a", "zone-b"}, []string{"node-a"})}.WithAddr(addr("10.0.0.1")),
				Endpoint{Ready: true, Serving: true}.WithAddr(addr("10.0.0.2")),
			}},
		},
		{
			name: "port defaults: nil name => \"\", nil protocol => TCP; nil port skipped silently",
			slice: makeSlice("ns", "s1", "svc", []discoveryv1.EndpointPort{
				{Port: ptr[int32](80)},
				{Name: ptr("all"), Protocol: ptr(v1.ProtocolUDP)},
			}, readyEP("10.0.0.1")),
			want: &sliceData{Service: svc, Ports: []slicePort{{Name: "", Protocol: "TCP", Port: 80}},
				Endpoints: []Endpoint{Endpoint{Ready: true, Serving: true}.WithAddr(addr("10.0.0.1"))}},
		},
		{
			name: "malformed ports and endpoints reported and dropped",
			slice: makeSlice("ns", "s1", "svc", []discoveryv1.EndpointPort{
				slicePortOf("zero", v1.ProtocolTCP, 0),
				slicePortOf("big", v1.ProtocolTCP, 65536),
				slicePortOf("weird", "ICMP", 1),
				http,
			},
				discoveryv1.Endpoint{},
				readyEP("10.0.0.999"),
				readyEP("fd00::1"),
				readyEP("10.0.0.1"),
			),
			want: &sliceData{Service: svc, Ports: []slicePort{httpPort},
				Endpoints: []Endpoint{Endpoint{Ready: true, Serving: true}.WithAddr(addr("10.0.0.1"))}},
			wantErr: []string{
				`ports[0] ("zero"): port 0 out of range`,
				`ports[1] ("big"): port 65536 out of range`,
				`ports[2] ("weird"): unknown protocol "ICMP"`,
				`endpoints[0]: no addresses`,
				`endpoints[1]: parse IP "10.0.0.999"`,
				`endpoints[2]: IP "fd00::1" is not IPv4`,
			},
		},
		{
			name: "addresses a node must never send to are skipped, as the API server refuses them",
			slice: makeSlice("ns", "s1", "svc", []discoveryv1.EndpointPort{http},
				readyEP("127.0.0.1"),
				readyEP("169.254.169.254"),
				readyEP("224.0.0.5"),
				readyEP("255.255.255.255"),
				readyEP("0.1.2.3"),
				readyEP("10.0.0.1"),
			),
			want: &sliceData{Service: svc, Ports: []slicePort{httpPort},
				Endpoints: []Endpoint{Endpoint{Ready: true, Serving: true}.WithAddr(addr("10.0.0.1"))}},
			wantErr: []string{
				`endpoints[0]: address 127.0.0.1 is loopback`,
				`endpoints[1]: address 169.254.169.254 is link-local`,
				`endpoints[2]: address 224.0.0.5 is multicast`,
				`endpoints[3]: address 255.255.255.255 is the broadcast address`,
				`endpoints[4]: address 0.1.2.3 is in 0.0.0.0/8`,
			},
		},
		{
			name: "IPv6 loopback, link-local and multicast skipped",
			fam:  IPv6,
			slice: func() *discoveryv1.EndpointSlice {
				s := makeSlice("ns", "s1", "svc", []discoveryv1.EndpointPort{http},
					readyEP("::1"), readyEP("fe80::1"), readyEP("ff02::1"), readyEP("fd00::1"))
				s.AddressType = discoveryv1.AddressTypeIPv6
				return s
			}(),
			want: &sliceData{Service: svc, Ports: []slicePort{httpPort},
				Endpoints: []Endpoint{Endpoint{Ready: true, Serving: true}.WithAddr(addr("fd00::1"))}},
			wantErr: []string{`address ::1 is loopback`, `address fe80::1 is link-local`, `address ff02::1 is multicast`},
		},
		{
			name: "IPv4-mapped and unspecified IPv6 endpoints skipped",
			fam:  IPv6,
			slice: func() *discoveryv1.EndpointSlice {
				s := makeSlice("ns", "s1", "svc", []discoveryv1.EndpointPort{http},
					readyEP("::ffff:10.0.0.1"), readyEP("::"), readyEP("fd00::1"))
				s.AddressType = discoveryv1.AddressTypeIPv6
				return s
			}(),
			want: &sliceData{Service: svc, Ports: []slicePort{httpPort},
				Endpoints: []Endpoint{Endpoint{Ready: true, Serving: true}.WithAddr(addr("fd00::1"))}},
			wantErr: []string{`"::ffff:10.0.0.1" is IPv4-mapped`, `unspecified`},
		},
		{
			name:  "slice with no ports still records its service",
			slice: makeSlice("ns", "s1", "svc", nil, readyEP("10.0.0.1")),
			want: &sliceData{Service: svc,
				Endpoints: []Endpoint{Endpoint{Ready: true, Serving: true}.WithAddr(addr("10.0.0.1"))}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var errs errCollector
			got := extractSlice(tt.slice, tt.fam, errs.report)
			if diff := cmp.Diff(withOnlyPort(tt.want), got, cmpOpts...); diff != "" {
				t.Errorf("sliceData (-want +got):\n%s", diff)
			}
			if len(errs) != len(tt.wantErr) {
				t.Fatalf("reports = %v, want %d matching %q", errs, len(tt.wantErr), tt.wantErr)
			}
			for i, e := range errs {
				if !strings.Contains(e.Error(), tt.wantErr[i]) {
					t.Errorf("report[%d] = %q, want it to contain %q", i, e, tt.wantErr[i])
				}
			}
		})
	}
}

// Reordering a slice's ports or endpoints is not a change; the canonical form
// is what makes no-op detection work.
func TestExtractSliceCanonicalOrder(t *testing.T) {
	a := makeSlice("ns", "s1", "svc",
		[]discoveryv1.EndpointPort{slicePortOf("a", v1.ProtocolTCP, 1), slicePortOf("b", v1.ProtocolUDP, 2)},
		readyEP("10.0.0.2"), readyEP("10.0.0.1"))
	b := makeSlice("ns", "s1", "svc",
		[]discoveryv1.EndpointPort{slicePortOf("b", v1.ProtocolUDP, 2), slicePortOf("a", v1.ProtocolTCP, 1)},
		readyEP("10.0.0.1"), readyEP("10.0.0.2"))
	da, db := extractSlice(a, IPv4, func(error) {}), extractSlice(b, IPv4, func(error) {})
	if !da.equal(db) {
		t.Errorf("reordered slices differ:\n%+v\n%+v", da, db)
	}
	c := makeSlice("ns", "s1", "svc",
		[]discoveryv1.EndpointPort{slicePortOf("b", v1.ProtocolUDP, 2), slicePortOf("a", v1.ProtocolTCP, 1)},
		readyEP("10.0.0.1"), ep("10.0.0.2", ptr(false), nil, nil))
	if da.equal(extractSlice(c, IPv4, func(error) {})) {
		t.Error("a condition change must make slices unequal")
	}
}

// withOnlyPort is want as extractSlice gives it: the endpoints of a slice with one
// port carry that port (see sliceData).
func withOnlyPort(want *sliceData) *sliceData {
	if want == nil || len(want.Ports) != 1 {
		return want
	}
	w := *want
	w.Endpoints = slices.Clone(want.Endpoints)
	for i := range w.Endpoints {
		w.Endpoints[i].Port = w.Ports[0].Port
	}
	return &w
}

// A slice of two ports leaves the port to mergeEndpoints: an endpoint serves both.
func TestExtractSliceTwoPortsNoEndpointPort(t *testing.T) {
	s := makeSlice("ns", "s1", "svc",
		[]discoveryv1.EndpointPort{slicePortOf("a", v1.ProtocolTCP, 1), slicePortOf("b", v1.ProtocolUDP, 2)},
		readyEP("10.0.0.1"))
	d := extractSlice(s, IPv4, func(error) {})
	mustEqualf(t, d.Endpoints[0].Port, 0, "port of an endpoint of a two-port slice")
}
