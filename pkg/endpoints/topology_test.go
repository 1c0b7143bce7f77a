package endpoints

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestClusterEndpoints(t *testing.T) {
	// ep is a ready endpoint at 10.0.0.<n> hinted for zones and nodes.
	ep := func(n string, zones, nodes []string) Endpoint {
		return Endpoint{Port: 80, Ready: true, Serving: true, Topology: NewTopology("", zones, nodes)}.WithAddr(addr("10.0.0." + n))
	}
	zone := func(z ...string) []string { return z }
	node := zone
	draining := func(e Endpoint) Endpoint { e.Ready, e.Terminating = false, true; return e }
	notReady := func(e Endpoint) Endpoint { e.Ready, e.Serving = false, false; return e }

	a1 := ep("1", zone("a"), nil)
	a2 := ep("2", zone("a"), nil)
	b3 := ep("3", zone("b"), nil)
	plain4 := ep("4", nil, nil)
	plain10 := ep("10", nil, nil)
	// PreferSameNode: the controller hints the node and, as a fallback, its zone.
	n1a := ep("5", zone("a"), node("n1"))
	n2a := ep("6", zone("a"), node("n2"))
	n3b := ep("7", zone("b"), node("n3"))
	n1only := ep("8", nil, node("n1"))
	ab9 := ep("9", zone("a", "b"), nil)

	here := Place{Node: "n1", Zone: "a"}
	tests := []struct {
		name        string
		in          []Endpoint
		at          Place
		want        []Endpoint
		mode        TopologyMode
		wantIgnored bool
	}{
		{name: "no endpoints", at: here},
		{name: "no hints: all", in: []Endpoint{plain10, plain4}, at: here, want: []Endpoint{plain4, plain10}},
		{name: "zone hints: this zone only", in: []Endpoint{b3, a2, a1}, at: here, want: []Endpoint{a1, a2}, mode: TopologySameZone},
		{name: "zone hints, other zone's node", in: []Endpoint{b3, a2, a1}, at: Place{Node: "n3", Zone: "b"}, want: []Endpoint{b3}, mode: TopologySameZone},
		{name: "an endpoint hinted for several zones", in: []Endpoint{ab9, a1}, at: Place{Node: "n3", Zone: "b"}, want: []Endpoint{ab9}, mode: TopologySameZone},
		{name: "zone hints but none for this zone: all", in: []Endpoint{b3}, at: here, want: []Endpoint{b3}, wantIgnored: true},
		{name: "zone hints but this node has no zone: all", in: []Endpoint{a1, b3}, at: Place{Node: "n1"}, want: []Endpoint{a1, b3}, wantIgnored: true},
		{name: "one ready endpoint without hints: all", in: []Endpoint{a1, b3, plain4}, at: here, want: []Endpoint{a1, b3, plain4}, wantIgnored: true},
		{name: "a not-ready endpoint without hints does not count", in: []Endpoint{a1, b3, notReady(plain4)}, at: here, want: []Endpoint{a1}, mode: TopologySameZone},
		{name: "draining endpoints are never used while one is ready", in: []Endpoint{a1, draining(a2), b3}, at: here, want: []Endpoint{a1}, mode: TopologySameZone},
		{name: "only draining in this zone: judged on ready ones, none here: all ready", in: []Endpoint{draining(a1), b3}, at: here, want: []Endpoint{b3}, wantIgnored: true},
		{name: "none ready: serving terminating ones, hints ignored", in: []Endpoint{draining(a1), draining(b3), notReady(a2)}, at: here,
			want: []Endpoint{draining(a1), draining(b3)}},
		{name: "node hints: this node only", in: []Endpoint{n3b, n2a, n1a}, at: here, want: []Endpoint{n1a}, mode: TopologySameNode},
		{name: "node hints but none for this node: zone hints", in: []Endpoint{n3b, n2a}, at: here, want: []Endpoint{n2a}, mode: TopologySameZone},
		{name: "node hints, none for this node, none for its zone: all", in: []Endpoint{n3b}, at: here, want: []Endpoint{n3b}, wantIgnored: true},
		{name: "some without node hints: zone hints", in: []Endpoint{n1a, a2, b3}, at: here, want: []Endpoint{a2, n1a}, mode: TopologySameZone},
		{name: "node hints only, one without: all", in: []Endpoint{n1only, plain4}, at: here, want: []Endpoint{plain4, n1only}, wantIgnored: true},
		{name: "node hints only, none for this node: all", in: []Endpoint{n1only}, at: Place{Node: "n2", Zone: "a"}, want: []Endpoint{n1only}, wantIgnored: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := append([]Endpoint(nil), tt.in...)
			got, mode, ignored := ClusterEndpoints(tt.in, tt.at)
			if diff := cmp.Diff(tt.want, got, cmpOpts...); diff != "" {
				t.Errorf("ClusterEndpoints (-want +got):\n%s", diff)
			}
			if mode != tt.mode {
				t.Errorf("mode = %v, want %v", mode, tt.mode)
			}
			if (ignored != "") != tt.wantIgnored {
				t.Errorf("ignored = %q, want a reason: %v", ignored, tt.wantIgnored)
			}
			if diff := cmp.Diff(in, tt.in, cmpOpts...); diff != "" {
				t.Errorf("input was modified (-before +after):\n%s", diff)
			}
		})
	}
}
