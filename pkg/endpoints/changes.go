package endpoints

import (
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
)

// ChangeCounts receives kube-proxy's change counters
// (kubeproxy_sync_proxy_rules_{service,endpoint}_changes_{total,pending}). Its
// methods are called with the Tracker's lock held and must not block or call back
// into the Tracker.
type ChangeCounts interface {
	// ServiceEvent is called for every Service event, no-op updates included.
	ServiceEvent()
	// EndpointSliceEvent is called for every EndpointSlice event.
	EndpointSliceEvent()
	// Pending reports the Services whose Service object changed and the
	// EndpointSlice events that changed something, since the last Take.
	Pending(services, endpointSlices int)
}

// Changes is what Take hands to a sync.
type Changes struct {
	Snapshot Snapshot
	// Changed holds the Services whose rendered result may differ from the
	// previous Take.
	Changed map[ServiceKey]struct{}
	// FirstEvent is when the earliest event behind Changed reached the Tracker
	// (zero when nothing changed).
	FirstEvent time.Time
	// TriggerTimes holds, per changed Service, the last-change-trigger-time of
	// each EndpointSlice version behind the change: the network programming
	// latency is measured from them to the commit that programs the change.
	TriggerTimes map[ServiceKey][]time.Time
}

// lastChangeTriggerTime reads the time the EndpointSlice controller stamps on a
// slice: when the Pod or Service change that this slice version reflects
// happened. Zero without the annotation.
func lastChangeTriggerTime(annotations map[string]string) (time.Time, error) {
	v, ok := annotations[v1.EndpointsLastChangeTriggerTime]
	if !ok {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		return time.Time{}, fmt.Errorf("annotation %s: %w", v1.EndpointsLastChangeTriggerTime, err)
	}
	return t, nil
}

// countsLocked reports the pending counters after an event or a Take.
func (t *Tracker) countsLocked() {
	if t.counts != nil {
		t.counts.Pending(len(t.pendingServices), t.pendingSliceEvents)
	}
}
