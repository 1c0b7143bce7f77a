package endpoints

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
)

// stamped sets the EndpointSlice controller's last-change-trigger-time on s.
func stamped(s *discoveryv1.EndpointSlice, at time.Time) *discoveryv1.EndpointSlice {
	if s.Annotations == nil {
		s.Annotations = map[string]string{}
	}
	s.Annotations[v1.EndpointsLastChangeTriggerTime] = at.Format(time.RFC3339Nano)
	return s
}

// Network programming latency is measured, as in kube-proxy, from the trigger time
// the EndpointSlice controller stamps on a slice, not from when the event reached us.
func TestTrackerTriggerTimes(t *testing.T) {
	rec := &invalidRecorder{}
	tr := NewTracker(TrackerOptions{OnInvalid: rec.record})
	now := time.Now()
	t1, t2, t3 := now.Add(time.Second), now.Add(2*time.Second), now.Add(3*time.Second)

	tr.OnServiceAdd(svcA())
	tr.OnServiceAdd(svcB())
	tr.OnEndpointSliceAdd(stamped(sliceA1(readyEP("10.0.0.1")), t1))
	tr.OnEndpointSliceUpdate(nil, stamped(sliceA1(readyEP("10.0.0.2")), t2))
	tr.OnEndpointSliceAdd(stamped(sliceB1(readyEP("10.1.0.1")), t3))
	got := tr.TakeChanges().TriggerTimes
	want := map[ServiceKey][]time.Time{keyA: {t1, t2}, keyB: {t3}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("trigger times (-want +got):\n%s", diff)
	}

	// Taken once; an update that changes nothing rendered has nothing to measure.
	tr.OnEndpointSliceUpdate(nil, stamped(sliceA1(readyEP("10.0.0.2")), t3))
	if got := tr.TakeChanges().TriggerTimes; len(got) != 0 {
		t.Errorf("no-op update: trigger times %v, want none", got)
	}

	// A stamp older than the tracker (the initial list after a restart) would
	// measure our downtime, not programming: kube-proxy skips those too.
	tr.OnEndpointSliceUpdate(nil, stamped(sliceA1(readyEP("10.0.0.3")), now.Add(-time.Hour)))
	if got := tr.TakeChanges().TriggerTimes; len(got) != 0 {
		t.Errorf("old stamp: trigger times %v, want none", got)
	}

	// A deletion's stamp is the last update's, not the deletion's: dropped.
	tr.OnEndpointSliceUpdate(nil, stamped(sliceB1(readyEP("10.1.0.2")), t1))
	tr.OnEndpointSliceDelete(sliceB1())
	if got := tr.TakeChanges().TriggerTimes; len(got) != 0 {
		t.Errorf("deleted slice: trigger times %v, want none", got)
	}

	// No stamp, or one we cannot read: nothing measured, the bad one reported.
	tr.OnEndpointSliceUpdate(nil, sliceA1(readyEP("10.0.0.4")))
	bad := sliceA1(readyEP("10.0.0.5"))
	bad.Annotations = map[string]string{v1.EndpointsLastChangeTriggerTime: "yesterday"}
	tr.OnEndpointSliceUpdate(nil, bad)
	c := tr.TakeChanges()
	if len(c.TriggerTimes) != 0 || len(c.Changed) != 1 {
		t.Errorf("unstamped: trigger times %v, changed %v; want none, a", c.TriggerTimes, c.Changed)
	}
	if r := rec.get(); len(r) != 1 || !strings.Contains(r[0].Reason, "last-change-trigger-time") {
		t.Errorf("reports %q, want one about the unreadable stamp", r)
	}
}

type countRecorder struct {
	services, slices       int
	pendingSvc, pendingEps int
}

func (c *countRecorder) ServiceEvent()       { c.services++ }
func (c *countRecorder) EndpointSliceEvent() { c.slices++ }
func (c *countRecorder) Pending(services, endpointSlices int) {
	c.pendingSvc, c.pendingEps = services, endpointSlices
}

// kube-proxy's change counters: every event counts in the totals; pending counts
// Services whose Service object changed and EndpointSlice events that changed
// something, until the sync takes them.
func TestTrackerChangeCounts(t *testing.T) {
	c := &countRecorder{}
	tr := NewTracker(TrackerOptions{Counts: c})
	tr.OnServiceAdd(svcA())
	tr.OnServiceAdd(svcA()) // no-op: counted, not pending
	tr.OnServiceAdd(svcB())
	tr.OnEndpointSliceAdd(sliceA1(readyEP("10.0.0.1")))
	tr.OnEndpointSliceUpdate(nil, sliceA1(readyEP("10.0.0.1"))) // no-op
	tr.OnEndpointSliceUpdate(nil, sliceA1(readyEP("10.0.0.2")))
	want := countRecorder{services: 3, slices: 3, pendingSvc: 2, pendingEps: 2}
	if *c != want {
		t.Errorf("before Take: %+v, want %+v", *c, want)
	}
	tr.Take()
	want.pendingSvc, want.pendingEps = 0, 0
	if *c != want {
		t.Errorf("after Take: %+v, want %+v", *c, want)
	}
	tr.OnServiceDelete(svcB())
	tr.OnEndpointSliceDeleteObj(sliceA1())
	want = countRecorder{services: 4, slices: 4, pendingSvc: 1, pendingEps: 1}
	if *c != want {
		t.Errorf("after deletes: %+v, want %+v", *c, want)
	}
}
