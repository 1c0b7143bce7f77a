package endpoints

import (
	"fmt"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/client-go/tools/cache"
)

var (
	keyA = ServiceKey{"ns", "a"}
	keyB = ServiceKey{"ns", "b"}
)

func spnOf(key ServiceKey, port, proto string) ServicePortName {
	return ServicePortName{Namespace: key.Namespace, Name: key.Name, Port: port, Protocol: proto}
}

func svcA() *v1.Service {
	return makeService("ns", "a", "10.96.0.1", []v1.ServicePort{tcpPort("http", 80)})
}

func svcB() *v1.Service {
	return makeService("ns", "b", "10.96.0.2", []v1.ServicePort{udpPort("dns", 53)})
}

func sliceA1(eps ...discoveryv1.Endpoint) *discoveryv1.EndpointSlice {
	return makeSlice("ns", "a-1", "a", []discoveryv1.EndpointPort{slicePortOf("http", v1.ProtocolTCP, 8080)}, eps...)
}

func sliceA2(eps ...discoveryv1.Endpoint) *discoveryv1.EndpointSlice {
	return makeSlice("ns", "a-2", "a", []discoveryv1.EndpointPort{slicePortOf("http", v1.ProtocolTCP, 8080)}, eps...)
}

func sliceB1(eps ...discoveryv1.Endpoint) *discoveryv1.EndpointSlice {
	return makeSlice("ns", "b-1", "b", []discoveryv1.EndpointPort{slicePortOf("dns", v1.ProtocolUDP, 5353)}, eps...)
}

var (
	portA = ServicePort{Name: spnOf(keyA, "http", "TCP"), ClusterIP: addr("10.96.0.1"), Port: 80}
	portB = ServicePort{Name: spnOf(keyB, "dns", "UDP"), ClusterIP: addr("10.96.0.2"), Port: 53}
)

func readyAt(ip string, port uint16) Endpoint {
	return Endpoint{Port: port, Ready: true, Serving: true}.WithAddr(addr(ip))
}

// step is one batch of events followed by a Take.
type step struct {
	name          string
	do            func(tr *Tracker)
	wantPending   bool
	wantChanged   []ServiceKey
	wantServices  []ServicePort
	wantEndpoints map[ServicePortName][]Endpoint
	wantInvalid   []string // substrings of reasons reported during this step
}

func runSteps(t *testing.T, steps []step) {
	t.Helper()
	rec := &invalidRecorder{}
	tr := NewTracker(TrackerOptions{OnInvalid: rec.record})
	for i, st := range steps {
		before := len(rec.get())
		st.do(tr)
		if got := tr.Pending(); got != st.wantPending {
			t.Errorf("step %d (%s): Pending() = %v, want %v", i, st.name, got, st.wantPending)
		}
		snap, changed, first := tr.Take()
		if tr.Pending() {
			t.Errorf("step %d (%s): Pending() after Take = true", i, st.name)
		}

		wantChanged := map[ServiceKey]bool{}
		for _, k := range st.wantChanged {
			wantChanged[k] = true
		}
		if diff := cmp.Diff(wantChanged, keysOf(changed)); diff != "" {
			t.Errorf("step %d (%s): changed (-want +got):\n%s", i, st.name, diff)
		}
		if (len(changed) == 0) != first.IsZero() {
			t.Errorf("step %d (%s): firstEvent %v inconsistent with %d changed", i, st.name, first, len(changed))
		}

		wantServices := map[ServicePortName]ServicePort{}
		for _, sp := range st.wantServices {
			wantServices[sp.Name] = sp
		}
		gotServices := map[ServicePortName]ServicePort{}
		for _, ports := range snap.Services() {
			for _, sp := range ports {
				gotServices[sp.Name] = sp
			}
		}
		if diff := cmp.Diff(wantServices, gotServices, cmpOpts...); diff != "" {
			t.Errorf("step %d (%s): Services (-want +got):\n%s", i, st.name, diff)
		}
		wantEndpoints := st.wantEndpoints
		if wantEndpoints == nil {
			wantEndpoints = map[ServicePortName][]Endpoint{}
		}
		if diff := cmp.Diff(wantEndpoints, endpointsByName(snap), cmpOpts...); diff != "" {
			t.Errorf("step %d (%s): Endpoints (-want +got):\n%s", i, st.name, diff)
		}

		reports := rec.get()[before:]
		if len(reports) != len(st.wantInvalid) {
			t.Errorf("step %d (%s): OnInvalid calls = %+v, want %d matching %q", i, st.name, reports, len(st.wantInvalid), st.wantInvalid)
			continue
		}
		for j, r := range reports {
			if !strings.Contains(r.Reason, st.wantInvalid[j]) {
				t.Errorf("step %d (%s): OnInvalid[%d] = %+v, want reason containing %q", i, st.name, j, r, st.wantInvalid[j])
			}
		}
	}
}

func TestTrackerScenarios(t *testing.T) {
	epsA := map[ServicePortName][]Endpoint{portA.Name: {readyAt("10.0.0.1", 8080)}}
	epsAB := map[ServicePortName][]Endpoint{
		portA.Name: {readyAt("10.0.0.1", 8080)},
		portB.Name: {readyAt("10.1.0.1", 5353)},
	}
	base := step{
		name: "service a with one slice",
		do: func(tr *Tracker) {
			tr.OnServiceAdd(svcA())
			tr.OnEndpointSliceAdd(sliceA1(readyEP("10.0.0.1")))
		},
		wantPending: true, wantChanged: []ServiceKey{keyA},
		wantServices: []ServicePort{portA}, wantEndpoints: epsA,
	}
	baseAB := step{
		name: "services a and b with slices",
		do: func(tr *Tracker) {
			tr.OnServiceAdd(svcA())
			tr.OnEndpointSliceAdd(sliceA1(readyEP("10.0.0.1")))
			tr.OnServiceAdd(svcB())
			tr.OnEndpointSliceAdd(sliceB1(readyEP("10.1.0.1")))
		},
		wantPending: true, wantChanged: []ServiceKey{keyA, keyB},
		wantServices: []ServicePort{portA, portB}, wantEndpoints: epsAB,
	}

	tests := []struct {
		name  string
		steps []step
	}{
		{"empty take", []step{{name: "nothing", do: func(*Tracker) {}}}},
		{"slice before service", []step{
			{
				name:        "slice alone renders nothing",
				do:          func(tr *Tracker) { tr.OnEndpointSliceAdd(sliceA1(readyEP("10.0.0.1"))) },
				wantPending: true,
			},
			{
				name:        "service arrives and picks the slice up",
				do:          func(tr *Tracker) { tr.OnServiceAdd(svcA()) },
				wantPending: true, wantChanged: []ServiceKey{keyA},
				wantServices: []ServicePort{portA}, wantEndpoints: epsA,
			},
		}},
		{"service without endpoints", []step{{
			name:        "ports present, endpoints absent",
			do:          func(tr *Tracker) { tr.OnServiceAdd(svcA()) },
			wantPending: true, wantChanged: []ServiceKey{keyA}, wantServices: []ServicePort{portA},
		}}},
		{"merge across slices", []step{base, {
			name: "second slice adds endpoints, first slice's duplicate is terminating",
			do: func(tr *Tracker) {
				tr.OnEndpointSliceAdd(sliceA2(readyEP("10.0.0.2"), ep("10.0.0.1", ptr(false), ptr(true), ptr(true))))
			},
			wantPending: true, wantChanged: []ServiceKey{keyA}, wantServices: []ServicePort{portA},
			wantEndpoints: map[ServicePortName][]Endpoint{portA.Name: {readyAt("10.0.0.1", 8080), readyAt("10.0.0.2", 8080)}},
		}, {
			name:        "first slice deleted: the terminating copy from the second remains",
			do:          func(tr *Tracker) { tr.OnEndpointSliceDelete(sliceA1()) },
			wantPending: true, wantChanged: []ServiceKey{keyA}, wantServices: []ServicePort{portA},
			wantEndpoints: map[ServicePortName][]Endpoint{portA.Name: {
				Endpoint{Port: 8080, Serving: true, Terminating: true}.WithAddr(addr("10.0.0.1")), readyAt("10.0.0.2", 8080),
			}},
		}}},
		{"service deleted and re-added", []step{base, {
			name:        "delete",
			do:          func(tr *Tracker) { tr.OnServiceDelete(svcA()) },
			wantPending: true, wantChanged: []ServiceKey{keyA},
		}, {
			name:        "re-add finds the kept slices",
			do:          func(tr *Tracker) { tr.OnServiceAdd(svcA()) },
			wantPending: true, wantChanged: []ServiceKey{keyA},
			wantServices: []ServicePort{portA}, wantEndpoints: epsA,
		}}},
		{"service becomes labelled, headless-like skips and back", []step{base, {
			name: "service-proxy-name label removes the ports",
			do: func(tr *Tracker) {
				s := svcA()
				s.Labels = map[string]string{LabelServiceProxyName: "other-proxy"}
				tr.OnServiceUpdate(svcA(), s)
			},
			wantPending: true, wantChanged: []ServiceKey{keyA},
		}, {
			name:        "label removed again",
			do:          func(tr *Tracker) { tr.OnServiceUpdate(nil, svcA()) },
			wantPending: true, wantChanged: []ServiceKey{keyA},
			wantServices: []ServicePort{portA}, wantEndpoints: epsA,
		}, {
			name: "turned ExternalName",
			do: func(tr *Tracker) {
				s := svcA()
				s.Spec.Type = v1.ServiceTypeExternalName
				tr.OnServiceUpdate(svcA(), s)
			},
			wantPending: true, wantChanged: []ServiceKey{keyA},
		}}},
		{"headless service never rendered", []step{{
			name: "headless with slices",
			do: func(tr *Tracker) {
				tr.OnServiceAdd(makeService("ns", "a", v1.ClusterIPNone, []v1.ServicePort{tcpPort("http", 80)}))
				tr.OnEndpointSliceAdd(sliceA1(readyEP("10.0.0.1")))
			},
			wantPending: true, // the slice dirtied a, but nothing renders
		}}},
		{"no-op updates are not changes", []step{base, {
			name: "resourceVersion, annotations and status only",
			do: func(tr *Tracker) {
				s := svcA()
				s.ResourceVersion = "2"
				s.Annotations = map[string]string{"x": "y"}
				s.Status.LoadBalancer.Ingress = []v1.LoadBalancerIngress{{IP: "1.2.3.4"}}
				tr.OnServiceUpdate(svcA(), s)
				sl := sliceA1(readyEP("10.0.0.1"))
				sl.ResourceVersion = "2"
				sl.Endpoints[0].TargetRef = &v1.ObjectReference{Kind: "Pod", Name: "p"}
				tr.OnEndpointSliceUpdate(sliceA1(readyEP("10.0.0.1")), sl)
				tr.OnServiceAdd(svcA()) // resync
			},
			wantServices: []ServicePort{portA}, wantEndpoints: epsA,
		}, {
			name: "affinity timeout edited on a service without affinity",
			do: func(tr *Tracker) {
				s := svcA()
				s.Spec.SessionAffinityConfig = &v1.SessionAffinityConfig{ClientIP: &v1.ClientIPConfig{TimeoutSeconds: ptr[int32](5)}}
				tr.OnServiceUpdate(svcA(), s)
			},
			wantServices: []ServicePort{portA}, wantEndpoints: epsA,
		}, {
			name: "deleting unknown objects",
			do: func(tr *Tracker) {
				tr.OnServiceDelete(svcB())
				tr.OnEndpointSliceDelete(sliceB1())
			},
			wantServices: []ServicePort{portA}, wantEndpoints: epsA,
		}, {
			name: "change reverted before Take: pending but nothing changed",
			do: func(tr *Tracker) {
				s := svcA()
				s.Spec.Ports[0].Port = 81
				tr.OnServiceUpdate(svcA(), s)
				tr.OnServiceUpdate(s, svcA())
				tr.OnEndpointSliceDelete(sliceA1())
				tr.OnEndpointSliceAdd(sliceA1(readyEP("10.0.0.1")))
			},
			wantPending:  true,
			wantServices: []ServicePort{portA}, wantEndpoints: epsA,
		}, {
			name: "slice port nobody uses changes",
			do: func(tr *Tracker) {
				sl := sliceA1(readyEP("10.0.0.1"))
				sl.Ports = append(sl.Ports, slicePortOf("unused", v1.ProtocolTCP, 9999))
				tr.OnEndpointSliceUpdate(nil, sl)
			},
			wantPending:  true, // the slice's content did change
			wantServices: []ServicePort{portA}, wantEndpoints: epsA,
		}}},
		{"changed set contains exactly what changed", []step{baseAB, {
			name: "endpoint of a becomes not ready",
			do: func(tr *Tracker) {
				tr.OnEndpointSliceUpdate(nil, sliceA1(ep("10.0.0.1", ptr(false), ptr(false), nil)))
			},
			wantPending: true, wantChanged: []ServiceKey{keyA}, wantServices: []ServicePort{portA, portB},
			wantEndpoints: map[ServicePortName][]Endpoint{
				portA.Name: {Endpoint{Port: 8080}.WithAddr(addr("10.0.0.1"))},
				portB.Name: {readyAt("10.1.0.1", 5353)},
			},
		}, {
			name:        "b's slice deleted",
			do:          func(tr *Tracker) { tr.OnEndpointSliceDelete(sliceB1()) },
			wantPending: true, wantChanged: []ServiceKey{keyB}, wantServices: []ServicePort{portA, portB},
			wantEndpoints: map[ServicePortName][]Endpoint{portA.Name: {Endpoint{Port: 8080}.WithAddr(addr("10.0.0.1"))}},
		}, {
			name: "b's port number and a's target port change",
			do: func(tr *Tracker) {
				s := svcB()
				s.Spec.Ports[0].Port = 5300
				tr.OnServiceUpdate(svcB(), s)
				sl := sliceA1(readyEP("10.0.0.1"))
				sl.Ports[0].Port = ptr[int32](9000)
				tr.OnEndpointSliceUpdate(nil, sl)
			},
			wantPending: true, wantChanged: []ServiceKey{keyA, keyB},
			wantServices:  []ServicePort{portA, func() ServicePort { p := portB; p.Port = 5300; return p }()},
			wantEndpoints: map[ServicePortName][]Endpoint{portA.Name: {readyAt("10.0.0.1", 9000)}},
		}}},
		{"slice relabelled to another service", []step{baseAB, {
			name: "a-1 now belongs to b",
			do: func(tr *Tracker) {
				sl := makeSlice("ns", "a-1", "b", []discoveryv1.EndpointPort{slicePortOf("dns", v1.ProtocolUDP, 5353)}, readyEP("10.0.0.1"))
				tr.OnEndpointSliceUpdate(sliceA1(), sl)
			},
			wantPending: true, wantChanged: []ServiceKey{keyA, keyB}, wantServices: []ServicePort{portA, portB},
			wantEndpoints: map[ServicePortName][]Endpoint{portB.Name: {readyAt("10.0.0.1", 5353), readyAt("10.1.0.1", 5353)}},
		}, {
			name: "label removed: slice forgotten",
			do: func(tr *Tracker) {
				sl := makeSlice("ns", "a-1", "", []discoveryv1.EndpointPort{slicePortOf("dns", v1.ProtocolUDP, 5353)}, readyEP("10.0.0.1"))
				tr.OnEndpointSliceUpdate(nil, sl)
			},
			wantPending: true, wantChanged: []ServiceKey{keyB}, wantServices: []ServicePort{portA, portB},
			wantEndpoints: map[ServicePortName][]Endpoint{portB.Name: {readyAt("10.1.0.1", 5353)}},
		}}},
		{"FQDN and other-family slices ignored", []step{base, {
			name: "FQDN and IPv6 slices for a",
			do: func(tr *Tracker) {
				f := sliceA2(readyEP("backend.example.com"))
				f.AddressType = discoveryv1.AddressTypeFQDN
				tr.OnEndpointSliceAdd(f)
				six := makeSlice("ns", "a-3", "a", []discoveryv1.EndpointPort{slicePortOf("http", v1.ProtocolTCP, 8080)}, readyEP("fd00::1"))
				six.AddressType = discoveryv1.AddressTypeIPv6
				tr.OnEndpointSliceAdd(six)
			},
			wantServices: []ServicePort{portA}, wantEndpoints: epsA,
		}, {
			name: "a-1 turned into FQDN acts as a delete",
			do: func(tr *Tracker) {
				f := sliceA1(readyEP("backend.example.com"))
				f.AddressType = discoveryv1.AddressTypeFQDN
				tr.OnEndpointSliceUpdate(nil, f)
			},
			wantPending: true, wantChanged: []ServiceKey{keyA}, wantServices: []ServicePort{portA},
		}}},
		{"tombstone deletes", []step{baseAB, {
			name: "service tombstone with object, slice tombstone with key only",
			do: func(tr *Tracker) {
				tr.OnServiceDeleteObj(cache.DeletedFinalStateUnknown{Key: "ns/a", Obj: svcA()})
				tr.OnEndpointSliceDeleteObj(cache.DeletedFinalStateUnknown{Key: "ns/b-1"})
			},
			wantPending: true, wantChanged: []ServiceKey{keyA, keyB}, wantServices: []ServicePort{portB},
		}, {
			name: "plain objects through the Obj variants",
			do: func(tr *Tracker) {
				tr.OnServiceDeleteObj(svcB())
				tr.OnEndpointSliceDeleteObj(sliceA1())
			},
			wantPending: true, wantChanged: []ServiceKey{keyB},
		}, {
			name: "garbage is reported, never panics",
			do: func(tr *Tracker) {
				tr.OnServiceDeleteObj("nonsense")
				tr.OnServiceDeleteObj(nil)
				tr.OnServiceDeleteObj((*v1.Service)(nil))
				tr.OnEndpointSliceDeleteObj(svcA())
				tr.OnEndpointSliceDeleteObj(cache.DeletedFinalStateUnknown{Key: ""})
				tr.OnServiceAdd(nil)
				tr.OnServiceDelete(nil)
				tr.OnEndpointSliceAdd(nil)
				tr.OnEndpointSliceDelete(nil)
			},
			wantInvalid: []string{
				"unexpected object of type string",
				"unexpected object of type <nil>",
				"unexpected object of type *v1.Service",
				"unexpected object of type *v1.Service",
				"unexpected object of type cache.DeletedFinalStateUnknown",
			},
		}}},
		{"malformed input reported, valid parts kept", []step{base, {
			name: "service gains a bad port and a good one",
			do: func(tr *Tracker) {
				s := svcA()
				s.Spec.Ports = append(s.Spec.Ports, tcpPort("bad", 0), tcpPort("metrics", 9090))
				tr.OnServiceUpdate(svcA(), s)
			},
			wantPending: true, wantChanged: []ServiceKey{keyA},
			wantServices:  []ServicePort{portA, {Name: spnOf(keyA, "metrics", "TCP"), ClusterIP: addr("10.96.0.1"), Port: 9090}},
			wantEndpoints: epsA,
			wantInvalid:   []string{`spec.ports[1] ("bad"): port 0 out of range`},
		}, {
			name: "cluster IP becomes unparsable: service dropped",
			do: func(tr *Tracker) {
				s := svcA()
				s.Spec.ClusterIP, s.Spec.ClusterIPs = "10.96.0.x", []string{"10.96.0.x"}
				tr.OnServiceUpdate(svcA(), s)
			},
			wantPending: true, wantChanged: []ServiceKey{keyA},
			wantInvalid: []string{`parse IP "10.96.0.x"`},
		}, {
			name: "slice with a bad address keeps the good one",
			do: func(tr *Tracker) {
				tr.OnServiceAdd(svcA())
				tr.OnEndpointSliceUpdate(nil, sliceA1(readyEP("10.0.0.1"), readyEP("bogus")))
			},
			wantPending: true, wantChanged: []ServiceKey{keyA},
			wantServices: []ServicePort{portA}, wantEndpoints: epsA,
			wantInvalid: []string{`endpoints[1]: parse IP "bogus"`},
		}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { runSteps(t, tt.steps) })
	}
}

func TestTrackerOnInvalidIdentifiesObject(t *testing.T) {
	rec := &invalidRecorder{}
	tr := NewTracker(TrackerOptions{OnInvalid: rec.record})
	tr.OnServiceAdd(makeService("ns", "a", "nope", []v1.ServicePort{tcpPort("http", 80)}))
	tr.OnEndpointSliceAdd(makeSlice("ns", "a-1", "a", nil, readyEP("nope")))
	got := rec.get()
	if len(got) != 2 {
		t.Fatalf("OnInvalid calls = %+v, want 2", got)
	}
	mustEqualf(t, [3]string{got[0].Kind, got[0].Namespace, got[0].Name}, [3]string{KindService, "ns", "a"}, "service report")
	mustEqualf(t, [3]string{got[1].Kind, got[1].Namespace, got[1].Name}, [3]string{KindEndpointSlice, "ns", "a-1"}, "slice report")

	// Without a callback, malformed input must still be harmless.
	quiet := NewTracker(TrackerOptions{})
	quiet.OnServiceAdd(makeService("ns", "a", "nope", []v1.ServicePort{tcpPort("http", 80)}))
	quiet.OnServiceDeleteObj(42)
	if snap, _, _ := quiet.Take(); snap.PortCount() != 0 {
		t.Errorf("%d service ports, want none", snap.PortCount())
	}
}

func TestTrackerFirstEvent(t *testing.T) {
	clock := newFakeClock()
	tr := NewTracker(TrackerOptions{Now: clock.Now})
	tr.OnServiceAdd(svcA()) // t+1
	tr.OnServiceAdd(svcB()) // t+2
	tr.OnServiceAdd(svcA()) // no-op, no clock read
	_, changed, first := tr.Take()
	mustEqualf(t, len(changed), 2, "changed count")
	mustEqualf(t, first, time.Unix(1001, 0), "firstEvent")

	// A no-op dirty marker earlier than the real change must not count.
	s := svcA()
	s.Spec.Ports[0].Port = 81
	tr.OnServiceUpdate(svcA(), s)                       // t+3: a dirty
	tr.OnServiceUpdate(s, svcA())                       // reverted
	tr.OnEndpointSliceAdd(sliceB1(readyEP("10.1.0.1"))) // t+4: b dirty for real
	_, changed, first = tr.Take()
	if diff := cmp.Diff(map[ServiceKey]bool{keyB: true}, keysOf(changed)); diff != "" {
		t.Errorf("changed (-want +got):\n%s", diff)
	}
	mustEqualf(t, first, time.Unix(1004, 0), "firstEvent ignores the reverted change")

	// The second event for a dirty service keeps the first one's time.
	tr.OnEndpointSliceAdd(sliceA1(readyEP("10.0.0.1"))) // t+5
	tr.OnEndpointSliceAdd(sliceA2(readyEP("10.0.0.2"))) // a already dirty
	_, _, first = tr.Take()
	mustEqualf(t, first, time.Unix(1005, 0), "firstEvent is the first of several")

	_, changed, first = tr.Take()
	if len(changed) != 0 || !first.IsZero() {
		t.Errorf("idle Take = %v, %v; want nothing", changed, first)
	}
}

// Take must be O(changed): the maps are reused and an unchanged service's
// data is the very same memory as before.
func TestTrackerTakeSharesUnchangedData(t *testing.T) {
	tr := NewTracker(TrackerOptions{})
	tr.OnServiceAdd(svcA())
	tr.OnEndpointSliceAdd(sliceA1(readyEP("10.0.0.1")))
	tr.OnServiceAdd(svcB())
	tr.OnEndpointSliceAdd(sliceB1(readyEP("10.1.0.1")))
	snap1, _, _ := tr.Take()
	epsB := snap1.Endpoints(portB.Name)

	tr.OnEndpointSliceUpdate(nil, sliceA1(readyEP("10.0.0.1"), readyEP("10.0.0.2")))
	snap2, changed, _ := tr.Take()
	if diff := cmp.Diff(map[ServiceKey]bool{keyA: true}, keysOf(changed)); diff != "" {
		t.Errorf("changed (-want +got):\n%s", diff)
	}
	if &snap2.Endpoints(portB.Name)[0] != &epsB[0] {
		t.Error("unchanged service b's endpoints were copied")
	}
	if fmt.Sprintf("%p", snap1.services) != fmt.Sprintf("%p", snap2.services) {
		t.Error("the snapshot's map was rebuilt instead of updated in place")
	}
	mustEqualf(t, len(snap2.Endpoints(portA.Name)), 2, "a's endpoints after update")
}

func TestSnapshotServicePortsOf(t *testing.T) {
	tr := NewTracker(TrackerOptions{})
	tr.OnServiceAdd(makeService("ns", "a", "10.96.0.1", []v1.ServicePort{tcpPort("z", 2), tcpPort("b", 1), udpPort("b", 1)}))
	tr.OnServiceAdd(svcB())
	snap, _, _ := tr.Take()
	got := snap.ServicePortsOf(keyA)
	var names []string
	for _, p := range got {
		names = append(names, p.Name.String())
	}
	if diff := cmp.Diff([]string{"ns/a:b/TCP", "ns/a:b/UDP", "ns/a:z/TCP"}, names); diff != "" {
		t.Errorf("ServicePortsOf(a) (-want +got):\n%s", diff)
	}
	if got := snap.ServicePortsOf(ServiceKey{"ns", "nope"}); got != nil {
		t.Errorf("ServicePortsOf(missing) = %v", got)
	}

	tr.OnServiceDelete(svcA())
	snap, _, _ = tr.Take()
	if got := snap.ServicePortsOf(keyA); got != nil {
		t.Errorf("ServicePortsOf(deleted) = %v", got)
	}
	mustEqualf(t, len(snap.ServicePortsOf(keyB)), 1, "b's ports")
}

// Informer handlers run on other goroutines than Take; -race checks this.
func TestTrackerConcurrentUse(t *testing.T) {
	tr := NewTracker(TrackerOptions{OnInvalid: func(string, string, string, string) {}})
	const workers, events = 4, 200
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range events {
				name := fmt.Sprintf("svc-%d", w)
				ip := fmt.Sprintf("10.96.%d.%d", w, i%250+1)
				tr.OnServiceAdd(makeService("ns", name, ip, []v1.ServicePort{tcpPort("http", 80)}))
				tr.OnEndpointSliceAdd(makeSlice("ns", name+"-1", name,
					[]discoveryv1.EndpointPort{slicePortOf("http", v1.ProtocolTCP, 8080)}, readyEP(fmt.Sprintf("10.0.%d.%d", w, i%250+1))))
				if i%7 == 0 {
					tr.OnEndpointSliceDeleteObj(cache.DeletedFinalStateUnknown{Key: "ns/" + name + "-1"})
				}
			}
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	for running := true; running; {
		select {
		case <-done:
			running = false
		default:
		}
		snap, _, _ := tr.Take()
		for range snap.Services() { // read while handlers write
		}
	}
	snap, _, _ := tr.Take()
	mustEqualf(t, snap.PortCount(), workers, "services after the storm")
	for w := range workers {
		name := spnOf(ServiceKey{"ns", fmt.Sprintf("svc-%d", w)}, "http", "TCP")
		want := fmt.Sprintf("10.96.%d.%d", w, (events-1)%250+1)
		mustEqualf(t, snap.Port(name).ClusterIP.String(), want, "final cluster IP of %s", name)
		eps := snap.Endpoints(name)
		wantEP := fmt.Sprintf("10.0.%d.%d", w, (events-1)%250+1)
		if len(eps) != 1 || eps[0].Addr().String() != wantEP {
			t.Errorf("final endpoints of %s = %v, want [%s]", name, eps, wantEP)
		}
	}
}

func TestTrackerOnChangeWakesTheLoop(t *testing.T) {
	calls := 0
	tr := NewTracker(TrackerOptions{OnChange: func() { calls++ }})
	svc := makeService("ns", "web", "10.96.0.1", []v1.ServicePort{tcpPort("http", 80)})
	tr.OnServiceAdd(svc)
	if calls != 1 {
		t.Fatalf("OnChange called %d times after a new Service, want 1", calls)
	}
	tr.OnEndpointSliceAdd(makeSlice("ns", "web-1", "web", []discoveryv1.EndpointPort{slicePortOf("http", v1.ProtocolTCP, 8080)}, readyEP("10.244.1.2")))
	if calls != 2 {
		t.Fatalf("OnChange called %d times after a slice, want 2", calls)
	}
}

// The common Service (one port, one slice) keeps its endpoints once: the snapshot's
// list is the slice's own (issue 10: at 30k Services x 10 endpoints a merged copy
// per port cost ~15 MiB), capped so that an append by a reader cannot write into it.
// A Service with two slices still gets a merged list of its own.
func TestTrackerOneSliceEndpointsNotCopied(t *testing.T) {
	tr := NewTracker(TrackerOptions{})
	tr.OnServiceAdd(svcA())
	tr.OnEndpointSliceAdd(sliceA1(readyEP("10.0.0.2"), readyEP("10.0.0.1")))
	snap, _, _ := tr.Take()
	got := snap.Endpoints(portA.Name)
	kept := tr.slicesBySvc[keyA].get("a-1").Endpoints
	mustEqualf(t, len(got), 2, "endpoints")
	if len(kept) == 0 || &got[0] != &kept[0] {
		t.Error("the snapshot holds a copy of the only slice's endpoints")
	}
	mustEqualf(t, cap(got), len(got), "capacity of the shared list")
	mustEqualf(t, got[0].AddrPort(), netip.MustParseAddrPort("10.0.0.1:8080"), "first endpoint")

	tr.OnEndpointSliceAdd(sliceA2(readyEP("10.0.0.3")))
	snap, _, _ = tr.Take()
	merged := snap.Endpoints(portA.Name)
	mustEqualf(t, len(merged), 3, "endpoints of two slices")
	if &merged[0] == &kept[0] {
		t.Error("two slices' endpoints merged into the first slice's memory")
	}
}

// endpointsByName is every port's endpoints in snap, by port name: only ports
// that have some.
func endpointsByName(snap Snapshot) map[ServicePortName][]Endpoint {
	out := map[ServicePortName][]Endpoint{}
	for k, ports := range snap.Services() {
		for _, sp := range ports {
			if eps := snap.Service(k).Endpoints(sp.Name); len(eps) > 0 {
				out[sp.Name] = eps
			}
		}
	}
	return out
}
