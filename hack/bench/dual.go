package main

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"runtime"
	"sync"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/svcproxy/svcproxy/internal/benchworld"
	"github.com/svcproxy/svcproxy/internal/netns"
	"github.com/svcproxy/svcproxy/pkg/endpoints"
	"github.com/svcproxy/svcproxy/pkg/nft"
	"github.com/svcproxy/svcproxy/pkg/proxy"
)

// dualResult is the line of -family dual: N dual-stack Services fed to two
// per-family proxies, as cmd/svcproxy runs them on a dual-stack node. The fields
// that have an IPv4 run's name mean the same there (hack/benchreport prints both
// in one table); a sync is done when both families' syncs are.
type dualResult struct {
	Family    string  `json:"family"` // "dual"
	Services  int     `json:"services"`
	Sticky    bool    `json:"sticky,omitempty"`
	External  bool    `json:"external,omitempty"`
	Endpoints int     `json:"endpoints_per_service"`
	Nodes     int     `json:"nodes"`
	ColdSecs  float64 `json:"cold_sync_s"` // both tables programmed
	ColdCPU   float64 `json:"cold_sync_cpu_s"`
	ColdSys   float64 `json:"cold_sync_sys_s"`  // of ColdCPU, in the kernel
	Cold4Secs float64 `json:"cold_sync_ipv4_s"` // when each family's sync returned
	Cold6Secs float64 `json:"cold_sync_ipv6_s"`
	LoadStart float64 `json:"loadavg_start"`
	LoadEnd   float64 `json:"loadavg_end"`
	// One IPv6 endpoint replaced in one Service (the IPv4 proxy gets the slice
	// too, as from the shared informer, and finds nothing to do).
	ChangeP50 float64 `json:"endpoint_change_p50_s"`
	ChangeP99 float64 `json:"endpoint_change_p99_s"`
	ChangeMax float64 `json:"endpoint_change_max_s"`
	Samples   int     `json:"change_samples"`
	// One endpoint replaced in both slices of one Service: both tables change.
	DualChangeP50 float64 `json:"dual_change_p50_s"`
	DualChangeP99 float64 `json:"dual_change_p99_s"`
	DualChangeMax float64 `json:"dual_change_max_s"`
	ScaleSecs     float64 `json:"endpoint_added_s"`   // the IPv6 slice of one Service gains an endpoint
	AddSecs       float64 `json:"add_service_s"`      // one dual-stack Service and its two slices
	ResyncSecs    float64 `json:"resync_s"`           // both proxies, nothing to repair
	FullRead      float64 `json:"resync_full_read_s"` // both tables read back, one after the other
	// Each family's: a resync follows the other family's commits, which move the
	// ruleset generation, so it reads its table back.
	Resync4Secs float64 `json:"resync_ipv4_s"`
	Resync6Secs float64 `json:"resync_ipv6_s"`
	Read4Secs   float64 `json:"full_read_ipv4_s"`
	Read6Secs   float64 `json:"full_read_ipv6_s"`
	RSSMiB      float64 `json:"rss_mib"`
	PeakRSSMiB  float64 `json:"peak_rss_mib"`
	HeapMiB     float64 `json:"heap_after_gc_mib"`
	EndRSSMiB   float64 `json:"rss_end_mib"`
	EndHeapMiB  float64 `json:"heap_end_mib"`
	// The data plane: spread Services whose ClusterIPs, IPv4 and IPv6, each
	// answered from that Service's own endpoints of its family after the cold sync,
	// and how long finding that took.
	Checked   int     `json:"dataplane_checked_services"`
	CheckSecs float64 `json:"dataplane_check_s"`
}

// checkedServices is how many Services the data-plane check probes.
const checkedServices = 64

// dualBench is bench for dual-stack: a tracker and a proxy per family, index 0
// IPv4 (`ip svcproxy`), 1 IPv6 (`ip6 svcproxy`), both in the world's node.
type dualBench struct {
	o       objects
	n       int
	samples int
	world   *benchworld.World
	tr      [2]*endpoints.Tracker
	p       [2]*proxy.Proxy
	kernel  [2]*nft.Netlink
}

var dualFamilies = [2]struct {
	family      endpoints.Family
	table       nft.Family
	clusterCIDR netip.Prefix
}{
	{endpoints.IPv4, nft.FamilyIPv4, netip.MustParsePrefix("10.0.0.0/8")},
	{endpoints.IPv6, nft.FamilyIPv6, netip.MustParsePrefix("fd00::/8")},
}

func runDual(o objects, n, samples int, monitor bool) (*dualResult, error) {
	w, err := benchworld.NewDual(fmt.Sprintf("spbench%d-", os.Getpid()))
	if err != nil {
		return nil, err
	}
	defer w.Close()
	f, err := os.Open(netns.Path(w.Node))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b := &dualBench{o: o, n: n, samples: samples, world: w}
	m := proxy.NewMetrics(nil) // one registry for both, as in cmd/svcproxy
	ledger, gate := &proxy.CommitLedger{}, &nft.NotifyGate{}
	watch, stopWatching := context.WithCancel(context.Background())
	defer stopWatching()
	for k, fam := range dualFamilies {
		b.tr[k] = endpoints.NewTracker(endpoints.TrackerOptions{Family: fam.family})
		b.kernel[k] = &nft.Netlink{NetNSFd: int(f.Fd()), Notifications: gate}
		b.p[k] = proxy.New(proxy.Config{Tracker: b.tr[k], Kernel: b.kernel[k], Metrics: m, Ledger: ledger,
			Options:       proxy.Options{Family: fam.family, ClusterCIDR: fam.clusterCIDR, NodeName: benchNode},
			MinSyncPeriod: time.Second, SyncPeriod: time.Hour})
		if monitor {
			go b.p[k].WatchForeignChanges(watch)
		}
	}
	for i := 0; i < n; i++ {
		b.addService(i)
	}
	heapMiB()

	ctx := context.Background()
	load := loadAvg()
	cpu0, sys0 := cpuTime(), sysTime()
	each, all, err := b.syncBoth(ctx)
	if err != nil {
		return nil, fmt.Errorf("cold sync: %w", err)
	}
	r := &dualResult{Family: "dual", Services: n, Sticky: o.sticky, External: o.external, Endpoints: o.endpoints, Nodes: o.nodes,
		ColdSecs: all.Seconds(), ColdCPU: (cpuTime() - cpu0).Seconds(), ColdSys: (sysTime() - sys0).Seconds(), Cold4Secs: each[0].Seconds(), Cold6Secs: each[1].Seconds(),
		LoadStart: load, Samples: samples}
	r.RSSMiB, r.PeakRSSMiB = procStatusMiB("VmRSS:"), procStatusMiB("VmHWM:")
	r.HeapMiB = heapMiB()

	t := time.Now()
	if r.Checked, err = b.checkDataplane(ctx); err != nil {
		return nil, fmt.Errorf("data plane: %w", err)
	}
	r.CheckSecs = time.Since(t).Seconds()

	if err := b.changes(ctx, r); err != nil {
		return nil, err
	}
	if err := b.others(ctx, r); err != nil {
		return nil, err
	}
	r.EndRSSMiB, r.EndHeapMiB = procStatusMiB("VmRSS:"), heapMiB()
	r.LoadEnd = loadAvg()
	runtime.KeepAlive(b.p) // what the end's heap measured
	runtime.KeepAlive(b.tr)
	return r, nil
}

// feed gives both trackers the object, as the shared informers do: each keeps
// what belongs to its family.
func (b *dualBench) addService(i int) {
	for _, tr := range b.tr {
		tr.OnServiceAdd(b.o.dualService(i))
		tr.OnEndpointSliceAdd(b.o.slice(i, 0, time.Time{}))
		tr.OnEndpointSliceAdd(b.o.slice6(i, 0, time.Time{}))
	}
}

func (b *dualBench) updateSlice(s *discoveryv1.EndpointSlice) {
	for _, tr := range b.tr {
		tr.OnEndpointSliceUpdate(nil, s)
	}
}

// syncBoth runs both proxies' syncs at once, as their loops run in svcproxy, and
// returns when each returned and when both had.
func (b *dualBench) syncBoth(ctx context.Context) (each [2]time.Duration, all time.Duration, err error) {
	var wg sync.WaitGroup
	var errs [2]error
	start := time.Now()
	for k := range b.p {
		wg.Go(func() {
			errs[k] = b.p[k].Sync(ctx)
			each[k] = time.Since(start)
		})
	}
	wg.Wait()
	return each, time.Since(start), errors.Join(errs[0], errors.Join(errs[1]))
}

// changes times b.samples syncs of one replaced IPv6 endpoint, then as many of one
// endpoint replaced in both families of one Service.
func (b *dualBench) changes(ctx context.Context, r *dualResult) error {
	var one, dual []time.Duration
	for s := 1; s <= b.samples; s++ {
		t := time.Now()
		b.updateSlice(b.o.slice6((s*7+3)%b.n, s, time.Time{}))
		if _, _, err := b.syncBoth(ctx); err != nil {
			return fmt.Errorf("IPv6 endpoint change: %w", err)
		}
		one = append(one, time.Since(t))
	}
	for s := 1; s <= b.samples; s++ {
		i := (s*13 + 5) % b.n
		gen := b.samples + s // new addresses in IPv6 too, not the first loop's
		t := time.Now()
		b.updateSlice(b.o.slice(i, gen, time.Time{}))
		b.updateSlice(b.o.slice6(i, gen, time.Time{}))
		if _, _, err := b.syncBoth(ctx); err != nil {
			return fmt.Errorf("dual endpoint change: %w", err)
		}
		dual = append(dual, time.Since(t))
	}
	r.ChangeP50, r.ChangeP99, r.ChangeMax = quantile(one, 0.5), quantile(one, 0.99), quantile(one, 1)
	r.DualChangeP50, r.DualChangeP99, r.DualChangeMax = quantile(dual, 0.5), quantile(dual, 0.99), quantile(dual, 1)
	return nil
}

// others times a count change (IPv6), an added dual-stack Service, a resync and
// a full read of both tables.
func (b *dualBench) others(ctx context.Context, r *dualResult) error {
	scaled := b.o.slice6(11%b.n, 0, time.Time{})
	scaled.Endpoints = append(scaled.Endpoints, discoveryv1.Endpoint{Addresses: []string{endpoint6(1<<22 + 11).String()}})
	b.updateSlice(scaled)
	_, d, err := b.syncBoth(ctx)
	if err != nil {
		return fmt.Errorf("scale sync: %w", err)
	}
	r.ScaleSecs = d.Seconds()

	b.addService(b.n)
	if _, d, err = b.syncBoth(ctx); err != nil {
		return fmt.Errorf("add service: %w", err)
	}
	r.AddSecs = d.Seconds()

	for _, p := range b.p {
		p.RequestResync()
	}
	stop := cpuProfile(os.Getenv("BENCH_RESYNC_CPUPROFILE"))
	each, d, err := b.syncBoth(ctx)
	stop()
	if err != nil {
		return fmt.Errorf("resync: %w", err)
	}
	r.ResyncSecs, r.Resync4Secs, r.Resync6Secs = d.Seconds(), each[0].Seconds(), each[1].Seconds()

	var read [2]float64
	for k, fam := range dualFamilies {
		t := time.Now()
		if _, err := b.kernel[k].Read(ctx, fam.table, proxy.TableName); err != nil {
			return fmt.Errorf("read %s table: %w", fam.table, err)
		}
		read[k] = time.Since(t).Seconds()
	}
	r.FullRead, r.Read4Secs, r.Read6Secs = read[0]+read[1], read[0], read[1]
	return nil
}

// checkDataplane probes the ClusterIPs of both families of Services spread over
// the table from the client namespace until each has answered from one of that
// Service's own endpoints of its family, and returns how many Services it checked.
func (b *dualBench) checkDataplane(ctx context.Context) (int, error) {
	pr := b.world.NewProber(time.Second)
	defer pr.Close()
	seen := map[int]bool{}
	var targets []benchworld.Target
	for k := range checkedServices {
		i := k * (b.n - 1) / (checkedServices - 1)
		if seen[i] {
			continue
		}
		seen[i] = true
		v4, v6 := map[netip.Addr]bool{}, map[netip.Addr]bool{}
		for j := range b.o.endpoints {
			v4[netip.MustParseAddr(addr(128, endpointNumber(i, j, 0, b.o.endpoints)))] = true
			v6[endpoint6(endpointNumber(i, j, 0, b.o.endpoints))] = true
		}
		targets = append(targets,
			benchworld.Target{IP: netip.MustParseAddr(addr(96, i)), Port: 80, Serves: func(a netip.Addr) bool { return v4[a] }},
			benchworld.Target{IP: clusterIP6(i), Port: 80, Serves: func(a netip.Addr) bool { return v6[a] }})
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if _, err := benchworld.AllAnswer(ctx, pr, targets, 4); err != nil {
		return 0, err
	}
	return len(seen), nil
}
