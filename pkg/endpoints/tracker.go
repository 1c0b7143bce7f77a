package endpoints

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/client-go/tools/cache"
)

// Kinds passed to TrackerOptions.OnInvalid.
const (
	KindService       = "Service"
	KindEndpointSlice = "EndpointSlice"
)

// TrackerOptions configures a Tracker. The zero value is usable: IPv4, no
// reporting, wall clock.
type TrackerOptions struct {
	// Family selects the cluster IP and EndpointSlices to use.
	Family Family
	// OnInvalid, if set, is told about malformed input that was skipped, so
	// the caller can log, count or record an event. It is called without any
	// Tracker lock held, possibly from informer goroutines, and again on every
	// event that still carries the problem (including resyncs).
	OnInvalid func(kind, namespace, name, reason string)
	// Now stamps events for Take's firstEvent; tests replace it.
	Now func() time.Time
	// OnChange, if set, is called after an event marked a Service changed, so the
	// sync loop can wake up. It is called with the Tracker's lock held and must not
	// block or call back into the Tracker.
	OnChange func()
	// OnConflict, if set, is told once when a Service starts being left unproxied
	// because an older Service has the same cluster IP (or its winner changes), or
	// served without a node port an older Service uses, or without an external
	// address another Service keeps, and once when that ends;
	// see ConflictChange. It is called from Take, after the Tracker's lock is
	// released.
	OnConflict func(ConflictChange)
	// Counts, if set, receives kube-proxy's change counters.
	Counts ChangeCounts
}

// Tracker accumulates informer events and yields snapshots plus what changed.
// It is safe for concurrent use: informer handlers call it from other
// goroutines than the sync loop that calls Take.
//
// Event handlers only record the extracted values of the object and mark its
// Service dirty; the snapshot is brought up to date for dirty Services inside
// Take, so Take's cost is proportional to what changed.
type Tracker struct {
	family     Family
	onInvalid  func(kind, namespace, name, reason string)
	onChange   func()
	onConflict func(ConflictChange)
	counts     ChangeCounts
	now        func() time.Time
	// started bounds the trigger times worth measuring: an older one (the
	// initial list) would measure our own downtime, not network programming.
	started time.Time

	mu sync.Mutex
	// services holds the extracted ports of every proxied Service, before
	// conflicts over cluster IPs are decided.
	services map[ServiceKey]serviceEntry
	// claims lists, per cluster IP, the Services that have it.
	claims map[netip.Addr][]ServiceKey
	// losing holds the conflicts last reported to OnConflict, by loser.
	losing map[ServiceKey]lostTo
	// portClaims lists, per node port and protocol (a health check port is TCP),
	// the Services that use it; losingPorts holds the node port conflicts last
	// reported, by loser and use, and losingPortCount their number.
	portClaims      map[slicePort][]ServiceKey
	losingPorts     map[ServiceKey]map[NodePortUse]portLoss
	losingPortCount int
	// addrClaims lists, per external address, port and protocol, the Services whose
	// externalIPs or load balancer IPs use it; losingAddrs holds the address
	// conflicts last reported, by loser.
	addrClaims  map[netip.Addr]map[slicePort][]ServiceKey
	losingAddrs map[ServiceKey]map[addrKey]addrLoss
	// slicesBySvc holds slices by Service and slice name; kept even when the
	// Service is absent because slices may arrive first.
	slicesBySvc map[ServiceKey]serviceSlices
	// sliceOwner remembers which Service a slice was filed under, so a delete
	// or relabel can find it without trusting the (possibly stale) object.
	sliceOwner map[sliceKey]string // the Service's name; its namespace is the slice's
	// dirty maps Services whose inputs changed since the last Take to the time
	// of the first such change.
	dirty map[ServiceKey]time.Time
	// triggers holds the last-change-trigger-times of the EndpointSlice
	// versions that changed each Service since the last Take.
	triggers map[ServiceKey][]time.Time
	// pendingServices and pendingSliceEvents feed ChangeCounts.Pending.
	pendingServices    map[ServiceKey]struct{}
	pendingSliceEvents int

	// snap is what the last Take made of each proxied Service (Snapshot).
	snap map[ServiceKey]ServiceSnapshot
}

// NewTracker returns an empty Tracker.
func NewTracker(opts TrackerOptions) *Tracker {
	now := opts.Now
	if now == nil {
		now = time.Now
	}
	return &Tracker{
		family:          opts.Family,
		onInvalid:       opts.OnInvalid,
		onChange:        opts.OnChange,
		onConflict:      opts.OnConflict,
		counts:          opts.Counts,
		now:             now,
		started:         time.Now(),
		triggers:        make(map[ServiceKey][]time.Time),
		pendingServices: make(map[ServiceKey]struct{}),
		services:        make(map[ServiceKey]serviceEntry),
		claims:          make(map[netip.Addr][]ServiceKey),
		losing:          make(map[ServiceKey]lostTo),
		portClaims:      make(map[slicePort][]ServiceKey),
		losingPorts:     make(map[ServiceKey]map[NodePortUse]portLoss),
		addrClaims:      make(map[netip.Addr]map[slicePort][]ServiceKey),
		losingAddrs:     make(map[ServiceKey]map[addrKey]addrLoss),
		slicesBySvc:     make(map[ServiceKey]serviceSlices),
		sliceOwner:      make(map[sliceKey]string),
		dirty:           make(map[ServiceKey]time.Time),
		snap:            make(map[ServiceKey]ServiceSnapshot),
	}
}

func (t *Tracker) reporter(kind, namespace, name string) func(error) {
	return func(err error) {
		if t.onInvalid != nil {
			t.onInvalid(kind, namespace, name, err.Error())
		}
	}
}

// OnServiceAdd records a new Service. Like every handler here it keeps nothing
// of the object once it returns: the list decoder unmarshals the next item
// into the same one (TestListedObjectsReusedLeaveTheTrackerWhole).
func (t *Tracker) OnServiceAdd(svc *v1.Service) { t.upsertService(svc) }

// OnServiceUpdate records a changed Service. Only svc matters: the tracker
// compares against what it extracted before, not against old, so a missed
// event cannot leave it confused.
func (t *Tracker) OnServiceUpdate(old, svc *v1.Service) { t.upsertService(svc) }

// OnServiceDelete forgets a Service. Its slices are kept, in case the Service
// comes back.
func (t *Tracker) OnServiceDelete(svc *v1.Service) {
	if svc == nil {
		return
	}
	t.setService(serviceKeyOf(svc), nil)
}

// OnServiceDeleteObj is OnServiceDelete for informer delete notifications,
// which may be a cache.DeletedFinalStateUnknown tombstone instead of the
// object.
func (t *Tracker) OnServiceDeleteObj(obj any) {
	ns, name, ok := deletedKey[*v1.Service](obj)
	if !ok {
		t.reportUnexpected(KindService, obj)
		return
	}
	t.setService(ServiceKey{Namespace: ns, Name: name}, nil)
}

func (t *Tracker) upsertService(svc *v1.Service) {
	if svc == nil {
		return
	}
	ports := servicePorts(svc, t.family, t.reporter(KindService, svc.Namespace, svc.Name))
	var e *serviceEntry
	if ports != nil {
		e = &serviceEntry{ports: ports, created: svc.CreationTimestamp.Unix(), uid: svc.UID}
	}
	t.setService(serviceKeyOf(svc), e)
}

// setService stores e (nil: absent) and marks the Service dirty unless nothing
// that affects rendering changed; Services sharing its old or new cluster IP are
// marked too, as the winner among them may change.
func (t *Tracker) setService(key ServiceKey, e *serviceEntry) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.counts != nil {
		t.counts.ServiceEvent()
	}
	old, had := t.services[key]
	if e == nil {
		if !had {
			return
		}
		delete(t.services, key)
		t.claimLocked(key, old.clusterIP(), netip.Addr{})
		t.claimPortsLocked(key, old.nodePortUses(), nil)
		t.claimAddrsLocked(key, addrUses(old.ports), nil)
	} else {
		if had && old.equal(*e) {
			return
		}
		t.services[key] = *e
		t.claimLocked(key, old.clusterIP(), e.clusterIP())
		t.claimPortsLocked(key, old.nodePortUses(), e.nodePortUses())
		t.claimAddrsLocked(key, addrUses(old.ports), addrUses(e.ports))
	}
	t.pendingServices[key] = struct{}{}
	t.markDirtyLocked(key)
	t.countsLocked()
}

// OnEndpointSliceAdd records a new EndpointSlice.
func (t *Tracker) OnEndpointSliceAdd(s *discoveryv1.EndpointSlice) { t.upsertSlice(s) }

// OnEndpointSliceUpdate records a changed EndpointSlice; like
// OnServiceUpdate it only looks at the new object.
func (t *Tracker) OnEndpointSliceUpdate(old, s *discoveryv1.EndpointSlice) { t.upsertSlice(s) }

// OnEndpointSliceDelete forgets an EndpointSlice.
func (t *Tracker) OnEndpointSliceDelete(s *discoveryv1.EndpointSlice) {
	if s == nil {
		return
	}
	t.setSlice(sliceKeyOf(s), nil, time.Time{})
}

// OnEndpointSliceDeleteObj is OnEndpointSliceDelete for informer delete
// notifications, which may be a cache.DeletedFinalStateUnknown tombstone.
func (t *Tracker) OnEndpointSliceDeleteObj(obj any) {
	ns, name, ok := deletedKey[*discoveryv1.EndpointSlice](obj)
	if !ok {
		t.reportUnexpected(KindEndpointSlice, obj)
		return
	}
	t.setSlice(sliceKey{Namespace: ns, Name: name}, nil, time.Time{})
}

func (t *Tracker) upsertSlice(s *discoveryv1.EndpointSlice) {
	if s == nil {
		return
	}
	report := t.reporter(KindEndpointSlice, s.Namespace, s.Name)
	d := extractSlice(s, t.family, report)
	trigger, err := lastChangeTriggerTime(s.Annotations)
	if err != nil {
		report(err)
	}
	t.setSlice(sliceKeyOf(s), d, trigger)
}

// setSlice stores d (nil: absent) and marks the affected Services dirty —
// both the old and the new one if the slice was relabelled. trigger is the
// slice's last-change-trigger-time (zero: none).
func (t *Tracker) setSlice(key sliceKey, d *sliceData, trigger time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.counts != nil {
		t.counts.EndpointSliceEvent()
	}
	ownerName, had := t.sliceOwner[key]
	owner := ServiceKey{Namespace: key.Namespace, Name: ownerName}
	if had && d != nil && t.slicesBySvc[owner].get(key.Name).equal(d) {
		return
	}
	if had || d != nil {
		t.pendingSliceEvents++
		defer t.countsLocked()
	}
	if had {
		if rest := t.slicesBySvc[owner].without(key.Name); len(rest) > 0 {
			t.slicesBySvc[owner] = rest
		} else {
			delete(t.slicesBySvc, owner)
		}
		delete(t.sliceOwner, key)
		t.markDirtyLocked(owner)
	}
	if d == nil {
		// Like kube-proxy: a deleted slice's stamp is its last update's time,
		// not the deletion's, so this Service's pending times say nothing.
		if had {
			delete(t.triggers, owner)
		}
		return
	}
	svc := ServiceKey{Namespace: key.Namespace, Name: d.Service}
	if !trigger.IsZero() && trigger.After(t.started) {
		t.triggers[svc] = append(t.triggers[svc], trigger)
	}
	t.slicesBySvc[svc] = t.slicesBySvc[svc].with(key.Name, d)
	t.sliceOwner[key] = d.Service
	t.markDirtyLocked(svc)
}

func (t *Tracker) markDirtyLocked(key ServiceKey) {
	if _, ok := t.dirty[key]; !ok {
		t.dirty[key] = t.now()
	}
	if t.onChange != nil {
		t.onChange()
	}
}

// Pending reports whether anything changed since the last Take. It may be
// true while Take then reports nothing changed, when later events undid
// earlier ones.
func (t *Tracker) Pending() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.dirty) > 0
}

// Take returns the current full snapshot and the set of Services whose
// rendered result may differ from the previous Take, plus the time of the
// earliest event behind those changes (zero when nothing changed), for
// programming-latency metrics.
//
// The snapshot's maps are shared with the Tracker and updated in place by the
// next Take; see Snapshot. A Service is reported changed only if its ports or
// endpoints as extracted actually differ, so resyncs, status-only updates and
// changes undone before Take cost nothing.
func (t *Tracker) Take() (snap Snapshot, changed map[ServiceKey]struct{}, firstEvent time.Time) {
	c := t.TakeChanges()
	return c.Snapshot, c.Changed, c.FirstEvent
}

// TakeChanges is Take with the trigger times of the changes (see Changes).
func (t *Tracker) TakeChanges() Changes {
	t.mu.Lock()
	c := Changes{Changed: make(map[ServiceKey]struct{}), TriggerTimes: make(map[ServiceKey][]time.Time)}
	var conflicts []ConflictChange
	for key, at := range t.dirty {
		if !t.refreshLocked(key, &conflicts) {
			continue
		}
		c.Changed[key] = struct{}{}
		if c.FirstEvent.IsZero() || at.Before(c.FirstEvent) {
			c.FirstEvent = at
		}
		if tt := t.triggers[key]; len(tt) > 0 {
			c.TriggerTimes[key] = tt
		}
	}
	t.dirty = emptied(t.dirty)
	t.triggers = emptied(t.triggers)
	t.pendingServices = emptied(t.pendingServices)
	t.pendingSliceEvents = 0
	t.countsLocked()
	active, activePorts := len(t.losing)+len(t.losingAddrs), t.losingPortCount
	c.Snapshot = Snapshot{services: t.snap}
	t.mu.Unlock()

	if t.onConflict != nil {
		slices.SortFunc(conflicts, func(a, b ConflictChange) int {
			return cmp.Or(compareServiceKeys(a.Service.Key, b.Service.Key), compareNodePortUses(a.NodePort, b.NodePort),
				compareAddrUses(a.External, b.External))
		})
		for _, cc := range conflicts {
			cc.Active, cc.ActiveNodePorts = active, activePorts
			t.onConflict(cc)
		}
	}
	return c
}

// refreshLocked recomputes one Service's snapshot entries and reports whether
// they changed; conflict changes are appended to conflicts.
func (t *Tracker) refreshLocked(key ServiceKey, conflicts *[]ConflictChange) bool {
	ports := t.resolveLocked(key, conflicts)
	eps := mergeEndpoints(ports, t.slicesBySvc[key])
	prev := t.snap[key]
	same := slices.Equal(prev.ports, ports) && slices.EqualFunc(prev.eps, eps, slices.Equal)
	if same {
		return false
	}
	if len(ports) == 0 {
		delete(t.snap, key)
		return true
	}
	// The Service entry's own list: it is replaced, never changed, when the
	// Service changes, so the snapshot may share it.
	t.snap[key] = ServiceSnapshot{ports: ports, eps: eps}
	return true
}

func (t *Tracker) reportUnexpected(kind string, obj any) {
	if t.onInvalid != nil {
		t.onInvalid(kind, "", "", fmt.Sprintf("unexpected object of type %T in delete notification", obj))
	}
}

// deletedKey extracts namespace/name from an informer delete notification:
// either the object itself or a tombstone. A tombstone's Key is used when its
// Obj is unusable, since the key alone is enough to forget an object.
func deletedKey[T interface {
	*v1.Service | *discoveryv1.EndpointSlice | *networkingv1.ServiceCIDR
	GetNamespace() string
	GetName() string
}](obj any) (namespace, name string, ok bool) {
	if tomb, isTomb := obj.(cache.DeletedFinalStateUnknown); isTomb {
		if o, isT := tomb.Obj.(T); isT && o != nil {
			return o.GetNamespace(), o.GetName(), true
		}
		ns, n, err := cache.SplitMetaNamespaceKey(tomb.Key)
		if err != nil || n == "" {
			return "", "", false
		}
		return ns, n, true
	}
	if o, isT := obj.(T); isT && o != nil {
		return o.GetNamespace(), o.GetName(), true
	}
	return "", "", false
}

// emptied returns m without entries. A map that held many (the cold start's
// Take marks every Service) is replaced rather than cleared: clear keeps its
// buckets, megabytes at 30k Services, for the rest of the process's life.
func emptied[K comparable, V any](m map[K]V) map[K]V {
	if len(m) > 1024 {
		return make(map[K]V)
	}
	clear(m)
	return m
}
