package events

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/svcproxy/svcproxy/internal/poll"
	"github.com/svcproxy/svcproxy/pkg/endpoints"
)

func conflictService(name, uid string, created time.Time) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID(uid), CreationTimestamp: metav1.NewTime(created)},
		Spec: corev1.ServiceSpec{ClusterIP: "10.96.0.10", ClusterIPs: []string{"10.96.0.10"},
			Ports: []corev1.ServicePort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP}}},
	}
}

// TestConflictEventOnTheLoser: a Service left unproxied because an older one has its
// ClusterIP gets one Warning Event (reason ClusterIPConflict, naming the winner,
// involvedObject with its UID, source svcproxy on this node) and the gauge counts it;
// resyncs add no Event, and the gauge drops when the conflict ends.
func TestConflictEventOnTheLoser(t *testing.T) {
	client := fake.NewClientset()
	gauge := prometheus.NewGauge(prometheus.GaugeOpts{Name: "g"})
	events := &Recorder{}
	defer events.Shutdown()
	tr := endpoints.NewTracker(endpoints.TrackerOptions{OnConflict: ConflictReporter(events, gauge, prometheus.NewGauge(prometheus.GaugeOpts{Name: "p"}))})
	events.Connect(client.CoreV1(), client.EventsV1(), "node-a", trackerUID(tr))

	t0 := time.Unix(1_700_000_000, 0)
	old, young := conflictService("old", "u-old", t0), conflictService("young", "u-young", t0.Add(time.Minute))
	tr.OnServiceAdd(young)
	tr.OnServiceAdd(old)
	tr.Take()
	tr.OnServiceUpdate(young, young)
	tr.OnServiceUpdate(old, old)
	tr.Take()

	got := waitForEvents(t, client)
	if len(got) != 1 {
		t.Fatalf("events: %+v, want one", got)
	}
	e := got[0]
	if e.Type != corev1.EventTypeWarning || e.Reason != ReasonClusterIPConflict || !strings.Contains(e.Message, "ns/old") ||
		e.InvolvedObject.Kind != "Service" || e.InvolvedObject.Name != "young" || e.InvolvedObject.UID != "u-young" ||
		e.Source.Component != "svcproxy" || e.Source.Host != "node-a" || e.Count != 1 {
		t.Fatalf("event %+v", e)
	}
	if v := testutil.ToFloat64(gauge); v != 1 {
		t.Fatalf("conflicting services = %v, want 1", v)
	}

	tr.OnServiceDelete(old)
	tr.Take()
	if v := testutil.ToFloat64(gauge); v != 0 {
		t.Fatalf("conflicting services after the winner's deletion = %v, want 0", v)
	}
}

// TestEventsWithoutClusterOnlyLog: in --manifests mode Warn must work without a
// client (and a nil *Events is harmless).
func TestEventsWithoutClusterOnlyLog(t *testing.T) {
	(&Recorder{}).Warn("ns", "svc", "Reason", "message")
	var e *Recorder
	e.Warn("ns", "svc", "Reason", "message")
	e.Shutdown()
}

// TestStartedEventOnTheNode: kube-proxy's start-up Event, through events.k8s.io/v1,
// on this node's Node object.
func TestStartedEventOnTheNode(t *testing.T) {
	client := fake.NewClientset()
	events := &Recorder{}
	defer events.Shutdown()
	events.Connect(client.CoreV1(), client.EventsV1(), "node-a", nil)
	events.Started(t.Context())

	var got []eventsv1.Event
	poll.Eventually(t, 10*time.Second, "the start-up Event", func() (bool, string) {
		list, err := client.EventsV1().Events("").List(t.Context(), metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		got = list.Items
		return len(got) > 0, "no Event"
	})
	e := got[0]
	if len(got) != 1 || e.Type != corev1.EventTypeNormal || e.Reason != "Starting" || e.Action != "StartKubeProxy" || e.Note != "" ||
		e.Regarding.Kind != "Node" || e.Regarding.APIVersion != "v1" || e.Regarding.Name != "node-a" ||
		e.ReportingController != "svcproxy" {
		t.Fatalf("events %+v", got)
	}
	// What client-go's tools/events recorder also set, which svcproxy now does itself.
	hostname, _ := os.Hostname()
	if e.Namespace != "default" || !strings.HasPrefix(e.Name, "node-a.") || e.ReportingInstance != "svcproxy-"+hostname ||
		e.EventTime.IsZero() || e.Series != nil {
		t.Fatalf("event %+v", e)
	}
}

// TestServiceWarningsAreRateLimited: a Service whose refusal reason keeps changing
// gets at most the recorder's burst of API writes (25 per Service, then one per
// five minutes), not one per Warn.
func TestServiceWarningsAreRateLimited(t *testing.T) {
	client := fake.NewClientset()
	events := &Recorder{}
	defer events.Shutdown()
	events.Connect(client.CoreV1(), client.EventsV1(), "node-a", nil)
	const warns = 60
	for i := range warns {
		events.Warn("ns", "web", ReasonKernelRefused, fmt.Sprintf("the kernel refuses this Service's rules: error %d", i))
	}
	writes := func() int {
		n := 0
		for _, a := range client.Actions() {
			if a.GetResource().Resource == "events" && (a.GetVerb() == "create" || a.GetVerb() == "patch") {
				n++
			}
		}
		return n
	}
	poll.Eventually(t, 10*time.Second, "some Events written", func() (bool, string) { return writes() > 0, "none" })
	time.Sleep(500 * time.Millisecond) // let the broadcaster drain what it will write
	t.Logf("%d Warns, %d API writes", warns, writes())
	if n := writes(); n > 25 {
		t.Fatalf("%d Warns made %d API writes, want at most 25", warns, n)
	}
	list, err := client.CoreV1().Events("ns").List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range list.Items {
		if e.Reason != ReasonKernelRefused || e.Type != corev1.EventTypeWarning || e.InvolvedObject.Name != "web" {
			t.Errorf("event %+v", e)
		}
	}
}

// TestNodePortConflictEvents: a Service served without one of its node ports
// because an older Service uses it gets one Warning Event NodePortConflict naming
// the port, how the older Service uses it and that Service; the node port gauge
// counts it (the Services gauge does not: the Service is still proxied), and drops
// when the conflict ends.
func TestNodePortConflictEvents(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	nodePort := func(name, ip string, at time.Time, port int32) *corev1.Service {
		s := conflictService(name, "u-"+name, at)
		s.Spec.ClusterIP, s.Spec.ClusterIPs = ip, []string{ip}
		s.Spec.Type = corev1.ServiceTypeNodePort
		s.Spec.Ports[0].NodePort = port
		return s
	}
	lbLocal := func(name, ip string, at time.Time, port, hc int32) *corev1.Service {
		s := nodePort(name, ip, at, port)
		s.Spec.Type = corev1.ServiceTypeLoadBalancer
		s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
		s.Spec.HealthCheckNodePort = hc
		return s
	}
	for _, tc := range []struct {
		name        string
		old, young  *corev1.Service
		wantMessage string
	}{
		{name: "a health check port on an older Service's nodePort",
			old: nodePort("old", "10.96.0.1", t0, 30080), young: lbLocal("young", "10.96.0.2", t0.Add(time.Minute), 30081, 30080),
			wantMessage: "healthCheckNodePort 30080 is also nodePort 30080/TCP of the older Service ns/old, which keeps it: svcproxy serves no health check for this Service (its load balancer's probes would reach the other Service) until one of them is deleted or changes that port"},
		{name: "a nodePort on an older Service's health check port",
			old: lbLocal("old", "10.96.0.1", t0, 30081, 30080), young: nodePort("young", "10.96.0.2", t0.Add(time.Minute), 30080),
			wantMessage: "nodePort 30080/TCP is also healthCheckNodePort 30080 of the older Service ns/old, which keeps it: svcproxy does not serve this Service on that nodePort until one of them is deleted or changes that port"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			checkConflictEvent(t, tc.old, tc.young, ReasonNodePortConflict, tc.wantMessage, 0, 1)
		})
	}
}

// checkConflictEvent adds loser then winner to a tracker that reports to a fake
// cluster, resyncs the loser, and checks the one Warning Event on the loser and the
// gauges of conflicting Services and node ports; both are 0 after the winner's
// deletion.
func checkConflictEvent(t *testing.T, winner, loser *corev1.Service, reason, wantMessage string, wantServices, wantPorts float64) {
	t.Helper()
	client := fake.NewClientset()
	services := prometheus.NewGauge(prometheus.GaugeOpts{Name: "s"})
	ports := prometheus.NewGauge(prometheus.GaugeOpts{Name: "p"})
	events := &Recorder{}
	defer events.Shutdown()
	tr := endpoints.NewTracker(endpoints.TrackerOptions{OnConflict: ConflictReporter(events, services, ports)})
	events.Connect(client.CoreV1(), client.EventsV1(), "node-a", trackerUID(tr))
	tr.OnServiceAdd(loser)
	tr.OnServiceAdd(winner)
	tr.Take()
	tr.OnServiceUpdate(loser, loser)
	tr.Take()

	got := waitForEvents(t, client)
	if len(got) != 1 {
		t.Fatalf("events: %+v, want one", got)
	}
	if e := got[0]; e.Type != corev1.EventTypeWarning || e.Reason != reason || e.Message != wantMessage ||
		e.InvolvedObject.Name != loser.Name || e.InvolvedObject.UID != loser.UID {
		t.Fatalf("event %+v\nwant message %q", e, wantMessage)
	}
	if s, p := testutil.ToFloat64(services), testutil.ToFloat64(ports); s != wantServices || p != wantPorts {
		t.Fatalf("conflicting services = %v, node ports = %v; want %v, %v", s, p, wantServices, wantPorts)
	}
	tr.OnServiceDelete(winner)
	tr.Take()
	if s, p := testutil.ToFloat64(services), testutil.ToFloat64(ports); s != 0 || p != 0 {
		t.Fatalf("after the winner's deletion: conflicting services = %v, node ports = %v; want 0", s, p)
	}
}

// waitForEvents returns the Events in namespace ns once there are any (the
// broadcaster writes them in the background), or none after 10 s.
func waitForEvents(t *testing.T, client *fake.Clientset) []corev1.Event {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		list, err := client.CoreV1().Events("ns").List(context.Background(), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(list.Items) > 0 {
			return list.Items
		}
		time.Sleep(20 * time.Millisecond)
	}
	return nil
}

// TestExternalIPConflictEvents: a Service served without an externalIP or load
// balancer IP on a port, because it is another Service's ClusterIP or an older
// Service's external address there, gets one Warning Event ExternalIPConflict
// naming the address, port and the Service that keeps it; the conflicting-Services
// gauge counts it and drops when the conflict ends.
func TestExternalIPConflictEvents(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	svc := func(name, ip string, at time.Time, externalIPs ...string) *corev1.Service {
		s := conflictService(name, "u-"+name, at)
		s.Spec.ClusterIP, s.Spec.ClusterIPs = ip, []string{ip}
		s.Spec.ExternalIPs = externalIPs
		return s
	}
	for _, tc := range []struct {
		name          string
		winner, loser *corev1.Service
		wantMessage   string
	}{
		{name: "an externalIP on another Service's ClusterIP, the claimant older",
			winner: svc("good", "10.96.0.10", t0.Add(time.Minute)), loser: svc("attacker", "10.96.0.99", t0, "10.96.0.10"),
			wantMessage: "externalIP 10.96.0.10 port 80/TCP is the ClusterIP of Service ns/good, which always keeps it: svcproxy does not serve this Service on that address until that Service is deleted or changes its ClusterIP"},
		{name: "one externalIP and port in two Services",
			winner: svc("old", "10.96.0.1", t0, "192.0.2.1"), loser: svc("young", "10.96.0.2", t0.Add(time.Minute), "192.0.2.1"),
			wantMessage: "externalIP 192.0.2.1 port 80/TCP is also externalIP 192.0.2.1 port 80/TCP of the older Service ns/old, which keeps it: svcproxy does not serve this Service on that address and port until one of them is deleted or changes it"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			checkConflictEvent(t, tc.winner, tc.loser, ReasonExternalIPConflict, tc.wantMessage, 1, 0)
		})
	}
}

// trackerUID looks a Service's UID up in the tracker, for Events.
func trackerUID(tr *endpoints.Tracker) func(namespace, name string) types.UID {
	return func(namespace, name string) types.UID {
		uid, _ := tr.ServiceUID(endpoints.ServiceKey{Namespace: namespace, Name: name})
		return uid
	}
}
