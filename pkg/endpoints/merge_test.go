package endpoints

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestMergeEndpoints(t *testing.T) {
	svc := "svc"
	name := func(port, proto string) ServicePortName {
		return ServicePortName{Namespace: "ns", Name: "svc", Port: port, Protocol: proto}
	}
	sp := func(port, proto string) ServicePort { return ServicePort{Name: name(port, proto), Port: 80} }
	cond := func(ip string, ready, serving, terminating bool, node string) Endpoint {
		return Endpoint{Ready: ready, Serving: serving, Terminating: terminating}.WithAddr(addr(ip)).OnNode(node)
	}
	at := func(e Endpoint, port uint16) Endpoint { e.Port = port; return e }
	ready := func(ip string) Endpoint { return cond(ip, true, true, false, "") }
	sd := func(ports []slicePort, eps ...Endpoint) *sliceData {
		return &sliceData{Service: svc, Ports: ports, Endpoints: eps}
	}
	httpTCP := slicePort{Name: "http", Protocol: "TCP", Port: 8080}

	tests := []struct {
		name   string
		ports  []ServicePort
		slices map[string]*sliceData
		want   map[ServicePortName][]Endpoint
	}{
		{
			name:  "no slices",
			ports: []ServicePort{sp("http", "TCP")},
		},
		{
			name:   "no ports",
			slices: map[string]*sliceData{"a": sd([]slicePort{httpTCP}, ready("10.0.0.1"))},
		},
		{
			name:  "union of three slices, sorted by addr",
			ports: []ServicePort{sp("http", "TCP")},
			slices: map[string]*sliceData{
				"a": sd([]slicePort{httpTCP}, ready("10.0.0.3")),
				"b": sd([]slicePort{httpTCP}, ready("10.0.0.1"), ready("10.0.0.10")),
				"c": sd([]slicePort{httpTCP}, ready("10.0.0.2")),
			},
			want: map[ServicePortName][]Endpoint{name("http", "TCP"): {
				at(ready("10.0.0.1"), 8080), at(ready("10.0.0.2"), 8080), at(ready("10.0.0.3"), 8080), at(ready("10.0.0.10"), 8080),
			}},
		},
		{
			name:  "slices may resolve the target port differently; same addr at two ports is two endpoints",
			ports: []ServicePort{sp("http", "TCP")},
			slices: map[string]*sliceData{
				"a": sd([]slicePort{httpTCP}, ready("10.0.0.1")),
				"b": sd([]slicePort{{Name: "http", Protocol: "TCP", Port: 9090}}, ready("10.0.0.1"), ready("10.0.0.2")),
			},
			want: map[ServicePortName][]Endpoint{name("http", "TCP"): {
				at(ready("10.0.0.1"), 8080), at(ready("10.0.0.1"), 9090), at(ready("10.0.0.2"), 9090),
			}},
		},
		{
			name:  "duplicate addr+port: ready wins over terminating",
			ports: []ServicePort{sp("http", "TCP")},
			slices: map[string]*sliceData{
				"a": sd([]slicePort{httpTCP}, cond("10.0.0.1", false, true, true, "old")),
				"b": sd([]slicePort{httpTCP}, cond("10.0.0.1", true, true, false, "new")),
			},
			want: map[ServicePortName][]Endpoint{name("http", "TCP"): {
				at(cond("10.0.0.1", true, true, false, "new"), 8080),
			}},
		},
		{
			name:  "duplicate addr+port: serving wins when neither ready",
			ports: []ServicePort{sp("http", "TCP")},
			slices: map[string]*sliceData{
				"a": sd([]slicePort{httpTCP}, cond("10.0.0.1", false, false, true, "x")),
				"b": sd([]slicePort{httpTCP}, cond("10.0.0.1", false, true, true, "y")),
			},
			want: map[ServicePortName][]Endpoint{name("http", "TCP"): {
				at(cond("10.0.0.1", false, true, true, "y"), 8080),
			}},
		},
		{
			name:  "duplicate within one slice deduplicated",
			ports: []ServicePort{sp("http", "TCP")},
			slices: map[string]*sliceData{
				"a": sd([]slicePort{httpTCP}, ready("10.0.0.1"), ready("10.0.0.1")),
			},
			want: map[ServicePortName][]Endpoint{name("http", "TCP"): {at(ready("10.0.0.1"), 8080)}},
		},
		{
			name:  "port matched by name and protocol, not number",
			ports: []ServicePort{sp("dns", "UDP"), sp("dns", "TCP"), sp("metrics", "TCP")},
			slices: map[string]*sliceData{
				"a": sd([]slicePort{
					{Name: "dns", Protocol: "UDP", Port: 5353},
					{Name: "dns", Protocol: "TCP", Port: 5354},
					{Name: "other", Protocol: "TCP", Port: 80},   // no such service port
					{Name: "metrics", Protocol: "UDP", Port: 81}, // right name, wrong protocol
				}, ready("10.0.0.1")),
			},
			want: map[ServicePortName][]Endpoint{
				name("dns", "UDP"): {at(ready("10.0.0.1"), 5353)},
				name("dns", "TCP"): {at(ready("10.0.0.1"), 5354)},
			},
		},
		{
			name:  "unnamed service port matches unnamed slice port only",
			ports: []ServicePort{sp("", "TCP")},
			slices: map[string]*sliceData{
				"a": sd([]slicePort{{Name: "", Protocol: "TCP", Port: 80}}, ready("10.0.0.1")),
				"b": sd([]slicePort{{Name: "http", Protocol: "TCP", Port: 81}}, ready("10.0.0.2")),
			},
			want: map[ServicePortName][]Endpoint{name("", "TCP"): {at(ready("10.0.0.1"), 80)}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := byName(t, tt.ports, mergeEndpoints(tt.ports, slicesOf(tt.slices)))
			if len(tt.want) == 0 && len(got) == 0 {
				return
			}
			if diff := cmp.Diff(tt.want, got, cmpOpts...); diff != "" {
				t.Errorf("mergeEndpoints (-want +got):\n%s", diff)
			}
		})
	}
}

// Map iteration order is random, so without a total preference order the
// winner among conflicting duplicates would flip between runs.
func TestMergeEndpointsDeterministic(t *testing.T) {
	port := ServicePort{Name: ServicePortName{Namespace: "ns", Name: "svc", Port: "p", Protocol: "TCP"}}
	slices := map[string]*sliceData{}
	for i := range 8 {
		slices[fmt.Sprintf("s%d", i)] = &sliceData{
			Ports:     []slicePort{{Name: "p", Protocol: "TCP", Port: 80}},
			Endpoints: []Endpoint{Endpoint{Ready: true, Serving: true}.WithAddr(addr("10.0.0.1")).OnNode(fmt.Sprintf("node-%d", 7-i))},
		}
	}
	for range 50 {
		got := byName(t, []ServicePort{port}, mergeEndpoints([]ServicePort{port}, slicesOf(slices)))[port.Name]
		if len(got) != 1 || got[0].NodeName() != "node-0" {
			t.Fatalf("merge picked %+v, want the single endpoint from node-0", got)
		}
	}
}

// byName is merged as a map by port name: only ports with endpoints, as the
// snapshot's lookups see them. The list must end with a port that has some.
func byName(t *testing.T, ports []ServicePort, merged [][]Endpoint) map[ServicePortName][]Endpoint {
	t.Helper()
	if len(merged) > len(ports) || len(merged) > 0 && len(merged[len(merged)-1]) == 0 {
		t.Fatalf("merged %d lists for %d ports, the last empty or too many: %v", len(merged), len(ports), merged)
	}
	out := map[ServicePortName][]Endpoint{}
	for i, eps := range merged {
		if len(eps) > 0 {
			out[ports[i].Name] = eps
		}
	}
	return out
}

// slicesOf lists the slices of a map, in the map's (random) order.
func slicesOf(m map[string]*sliceData) serviceSlices {
	var ss serviceSlices
	for name, d := range m {
		ss = append(ss, namedSlice{name: name, sliceData: d})
	}
	return ss
}
