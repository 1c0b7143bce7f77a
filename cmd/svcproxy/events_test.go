package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"

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
	events := &Events{}
	defer events.Shutdown()
	tr := endpoints.NewTracker(endpoints.TrackerOptions{OnConflict: conflictReporter(events, gauge)})
	events.connect(client, "node-a", trackerUID(tr))

	t0 := time.Unix(1_700_000_000, 0)
	old, young := conflictService("old", "u-old", t0), conflictService("young", "u-young", t0.Add(time.Minute))
	tr.OnServiceAdd(young)
	tr.OnServiceAdd(old)
	tr.Take()
	tr.OnServiceUpdate(young, young)
	tr.OnServiceUpdate(old, old)
	tr.Take()

	var got []corev1.Event
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		list, err := client.CoreV1().Events("ns").List(context.Background(), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got = list.Items; len(got) > 0 {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
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
	(&Events{}).Warn("ns", "svc", "Reason", "message")
	var e *Events
	e.Warn("ns", "svc", "Reason", "message")
	e.Shutdown()
}
