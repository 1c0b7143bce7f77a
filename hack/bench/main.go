// Command bench measures svcproxy against the real kernel, in network namespaces it
// creates and removes (internal/benchworld): a cold full sync of N Services x E
// endpoints, one endpoint change (p50/p99 over many), a count change, one added
// Service, resyncs, heap and RSS, churn (a share of the Services changing every
// second through the real sync loop: programming latency and CPU seconds), and the
// data plane (new-connection latency through a ClusterIP and straight to the pod).
// -shape shared runs all of it on Services shaped like a real cluster's
// (internal/benchshape) instead of disjoint ones.
// It prints one JSON line; hack/bench.sh runs it at several sizes and
// hack/benchreport turns the lines into tables and plots.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net/netip"
	"os"
	"runtime"
	"runtime/pprof"
	"strings"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/klog/v2"

	"github.com/svcproxy/svcproxy/internal/benchworld"
	"github.com/svcproxy/svcproxy/internal/netns"
	"github.com/svcproxy/svcproxy/pkg/conntrack"
	"github.com/svcproxy/svcproxy/pkg/endpoints"
	"github.com/svcproxy/svcproxy/pkg/nft"
	"github.com/svcproxy/svcproxy/pkg/proxy"
)

type result struct {
	Services  int     `json:"services"`
	Shape     string  `json:"shape"` // "disjoint" or "shared" (objects_shared.go)
	Sticky    bool    `json:"sticky,omitempty"`
	External  bool    `json:"external,omitempty"`
	Endpoints int     `json:"endpoints_per_service"` // 0 in the shared shape: sizes vary
	Total     int     `json:"endpoints_total"`
	Nodes     int     `json:"nodes"` // the endpoints' nodes (objects.nodes)
	ColdSecs  float64 `json:"cold_sync_s"`
	ColdCPU   float64 `json:"cold_sync_cpu_s"`
	ColdSys   float64 `json:"cold_sync_sys_s"` // of ColdCPU, in the kernel
	// Load is the machine's 1-minute load average at the start and the end: the
	// durations stretch with it on a shared machine, the CPU seconds much less.
	LoadStart  float64 `json:"loadavg_start"`
	LoadEnd    float64 `json:"loadavg_end"`
	ChangeP50  float64 `json:"endpoint_change_p50_s"`
	ChangeP99  float64 `json:"endpoint_change_p99_s"`
	ChangeMax  float64 `json:"endpoint_change_max_s"`
	Samples    int     `json:"change_samples"`
	AddSecs    float64 `json:"add_service_s"`
	ScaleSecs  float64 `json:"endpoint_added_s"`
	ResyncSecs float64 `json:"resync_s"`
	FullRead   float64 `json:"resync_full_read_s"`
	RSSMiB     float64 `json:"rss_mib"`
	PeakRSSMiB float64 `json:"peak_rss_mib"`
	HeapMiB    float64 `json:"heap_after_gc_mib"`
	// The pointer-holding part of the heap before the cold sync (the tracker)
	// and after it: what each collection marks.
	ScanBeforeMiB float64 `json:"heap_scan_before_mib"`
	ScanMiB       float64 `json:"heap_scan_mib"`
	EndRSSMiB     float64 `json:"rss_end_mib"`
	EndHeapMiB    float64 `json:"heap_end_mib"`
	*churnResult
	*dataplaneResult
}

func main() {
	n := flag.Int("services", 1000, "number of Services")
	var o objects
	flag.IntVar(&o.endpoints, "endpoints", 10, "endpoints per Service")
	samples := flag.Int("samples", 50, "one-endpoint changes to time (p50 and p99 reported)")
	churn := flag.Duration("churn", 0, "run the churn for this long (0: no churn)")
	churnShare := flag.Float64("churn-share", 0.01, "share of the Services changing their endpoints every second")
	// 50 rounds: a p99 of 10000 connections of each kind, not 2000, whose 20 slowest
	// swung the ratio by x0.9-x1.2 between runs of one build.
	rounds := flag.Int("dataplane-rounds", 50, "rounds of 200 new connections through a ClusterIP and 200 straight to the pod, alternating (0: none)")
	fixedSpacing := flag.Bool("fixed-min-sync-period", false, "churn with kube-proxy's policy, syncs at least --min-sync-period (1 s) apart, instead of svcproxy's default: spaced by their cost, at most 1 s apart")
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile of the incremental changes to this file")
	churnProfile := flag.String("churn-cpuprofile", "", "write a CPU profile of the churn to this file")
	withMonitor := flag.Bool("monitor", true, "follow the kernel's nftables notifications during the run, as svcproxy does (false: the figures before 2026-12-05, which had none)")
	withConntrack := flag.Bool("conntrack", true, "give the proxy a conntrack cleaner in the node namespace, as svcproxy runs (false: the figures before 2026-12-04, which had none)")
	flag.IntVar(&o.nodes, "nodes", 100, "nodes the endpoints are spread over (the proxy is one of them; 0: endpoints name no node)")
	flag.BoolVar(&o.sticky, "sticky", false, "give every Service ClientIP affinity")
	flag.BoolVar(&o.external, "external", false, "give a third of the Services a NodePort (some LoadBalancer), and some an externalIP")
	flag.StringVar(&o.shape, "shape", shapeDisjoint, "the objects: disjoint (every Service its own 10 endpoints) or shared (internal/benchshape: pods behind 3 Services, mixed sizes, named ports, some slices without nodeName, some NodePort and LoadBalancer Services)")
	family := flag.String("family", "ipv4", "ipv4, or dual: every Service dual-stack, fed to an IPv4 and an IPv6 proxy (dual.go; no churn, no latency rounds)")
	klog.InitFlags(nil)
	flag.Parse()
	if err := checkShape(o.shape); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(2)
	}
	if o.shared() && (o.external || *family != "ipv4") {
		// The shared shape has NodePort and LoadBalancer Services of its own, and
		// one family: its slices are IPv4 ones.
		fmt.Fprintln(os.Stderr, "bench: -shape shared goes with neither -external nor -family dual")
		os.Exit(2)
	}
	if *family == "dual" {
		r, err := runDual(o, *n, *samples, *withMonitor)
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
		_ = json.NewEncoder(os.Stdout).Encode(r)
		return
	}
	if *family != "ipv4" {
		fmt.Fprintf(os.Stderr, "bench: -family %q: want ipv4 or dual\n", *family)
		os.Exit(2)
	}
	b := &bench{o: o, n: *n, samples: *samples, profile: *cpuprofile, churnProfile: *churnProfile, conntrack: *withConntrack, monitor: *withMonitor, spaceByCost: !*fixedSpacing}
	r, err := b.run(*churn, *churnShare, *rounds)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
	_ = json.NewEncoder(os.Stdout).Encode(r)
}

type bench struct {
	o       objects
	n       int
	samples int
	profile string
	// churnProfile is the file the churn's CPU profile goes to ("": none).
	churnProfile string
	// conntrack: the proxy deletes stale and unanswered conntrack entries after its
	// syncs, as the agent's does: the walk of the node's table is part of a sync's
	// cost, and so of the spacing by cost under churn.
	conntrack bool
	// monitor: the proxy follows nftables notifications (Proxy.WatchForeignChanges),
	// as svcproxy does; the kernel then builds one for every element written.
	monitor bool
	// spaceByCost is the churn's sync policy (proxy.Config.SpaceByCost).
	spaceByCost bool
	tr          *endpoints.Tracker
	p           *proxy.Proxy
	kernel      *nft.Netlink
	world       *benchworld.World
	// latencies receives the programming latency of every committed change (trigger
	// time to commit), as kubeproxy_network_programming_duration_seconds would.
	latencies chan time.Duration
	// syncs receives the duration of every sync (kubeproxy_sync_proxy_rules_duration_seconds).
	syncs chan time.Duration
}

func (b *bench) run(churn time.Duration, churnShare float64, rounds int) (*result, error) {
	w, err := benchworld.New(fmt.Sprintf("spbench%d-", os.Getpid()))
	if err != nil {
		return nil, err
	}
	defer w.Close()
	b.world = w
	f, err := os.Open(netns.Path(w.Node))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b.kernel = &nft.Netlink{NetNSFd: int(f.Fd())}
	b.latencies, b.syncs = make(chan time.Duration, 1<<16), make(chan time.Duration, 1<<12)
	m := proxy.NewMetrics(nil)
	m.ProgrammingLatency, m.SyncDuration = sendTo(b.latencies), sendTo(b.syncs)

	b.tr = endpoints.NewTracker(endpoints.TrackerOptions{})
	total := 0
	for i := 0; i < b.n; i++ {
		total += b.o.size(i)
		b.tr.OnServiceAdd(b.o.service(i))
		for _, s := range b.o.slices(i) {
			b.tr.OnEndpointSliceAdd(s)
		}
	}
	cfg := proxy.Config{Tracker: b.tr, Kernel: b.kernel, Metrics: m,
		Options:       proxy.Options{ClusterCIDR: netip.MustParsePrefix("10.0.0.0/8"), NodeName: benchNode},
		MinSyncPeriod: time.Second, SpaceByCost: b.spaceByCost, SyncPeriod: time.Hour}
	if b.conntrack {
		ct, err := conntrack.New(int(f.Fd()))
		if err != nil {
			return nil, err
		}
		defer ct.Close()
		cfg.Conntrack = ct
	}
	b.p = proxy.New(cfg)
	if b.monitor {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		go b.p.WatchForeignChanges(ctx)
	}
	heapMiB()
	scanBefore := scanMiB()

	load := loadAvg()
	stopProfile := cpuProfile(os.Getenv("BENCH_COLD_CPUPROFILE"))
	cpu0, sys0, start := cpuTime(), sysTime(), time.Now()
	if err := b.p.Sync(context.Background()); err != nil {
		return nil, fmt.Errorf("cold sync: %w", err)
	}
	stopProfile()
	r := &result{Services: b.n, Shape: b.o.shape, Sticky: b.o.sticky, External: b.o.external, Endpoints: b.o.endpoints, Total: total, Nodes: b.o.nodes,
		ColdSecs: time.Since(start).Seconds(), ColdCPU: (cpuTime() - cpu0).Seconds(), ColdSys: (sysTime() - sys0).Seconds(),
		Samples: b.samples, LoadStart: load}
	if b.o.shared() {
		r.Endpoints = 0
	}
	r.RSSMiB, r.PeakRSSMiB = procStatusMiB("VmRSS:"), procStatusMiB("VmHWM:")
	r.HeapMiB = heapMiB()
	r.ScanBeforeMiB, r.ScanMiB = scanBefore, scanMiB()
	if hp := os.Getenv("BENCH_HEAPPROFILE"); hp != "" {
		f, _ := os.Create(hp)
		_ = pprof.WriteHeapProfile(f)
		f.Close()
	}
	drain(b.latencies)
	drain(b.syncs)
	if err := b.answers(); err != nil {
		return nil, fmt.Errorf("after the cold sync: %w", err)
	}

	if err := b.oneChanges(r); err != nil {
		return nil, err
	}
	if err := b.others(r); err != nil {
		return nil, err
	}
	if err := b.check(); err != nil {
		return nil, err
	}
	if rounds > 0 {
		if r.dataplaneResult, err = b.dataplane(rounds); err != nil {
			return nil, fmt.Errorf("data plane: %w", err)
		}
	}
	if churn > 0 {
		if r.churnResult, err = b.churn(churn, churnShare); err != nil {
			return nil, fmt.Errorf("churn: %w", err)
		}
	}
	r.EndRSSMiB, r.EndHeapMiB = procStatusMiB("VmRSS:"), heapMiB()
	r.LoadEnd = loadAvg()
	// The proxy and its tracker are what the end's heap measured: keep them alive
	// until then.
	runtime.KeepAlive(b.p)
	runtime.KeepAlive(b.tr)
	return r, nil
}

// oneChanges times samples syncs of one replaced endpoint of one Service each: the
// tracker change, render, plan and the transaction's commit. In the shared shape
// the endpoint removed and the one added are pods that other Services share.
func (b *bench) oneChanges(r *result) error {
	stop := cpuProfile(b.profile)
	defer stop()
	var changes []time.Duration
	for s := 1; s <= b.samples; s++ {
		t := time.Now()
		b.tr.OnEndpointSliceUpdate(nil, b.o.slice((s*7+3)%b.n, s, time.Time{}))
		if err := b.p.Sync(context.Background()); err != nil {
			return fmt.Errorf("incremental sync: %w", err)
		}
		changes = append(changes, time.Since(t))
	}
	r.ChangeP50, r.ChangeP99, r.ChangeMax = quantile(changes, 0.5), quantile(changes, 0.99), quantile(changes, 1)
	drain(b.latencies)
	return nil
}

// others times a count change, an added Service, a resync and a full read.
func (b *bench) others(r *result) error {
	ctx := context.Background()
	// Scaling: one Service gains an endpoint (its endpoint count changes).
	scaled := b.o.slice(11%b.n, 0, time.Time{})
	scaled.Endpoints = append(scaled.Endpoints, discoveryv1.Endpoint{Addresses: []string{addr(150, 11)}})
	b.tr.OnEndpointSliceUpdate(nil, scaled)
	t := time.Now()
	if err := b.p.Sync(ctx); err != nil {
		return fmt.Errorf("scale sync: %w", err)
	}
	r.ScaleSecs = time.Since(t).Seconds()

	b.tr.OnServiceAdd(b.o.service(b.n))
	for _, s := range b.o.slices(b.n) {
		b.tr.OnEndpointSliceAdd(s)
	}
	t = time.Now()
	if err := b.p.Sync(ctx); err != nil {
		return fmt.Errorf("add service: %w", err)
	}
	r.AddSecs = time.Since(t).Seconds()

	b.p.RequestResync() // what --sync-period does: re-read the kernel, find nothing to repair
	t = time.Now()
	if err := b.p.Sync(ctx); err != nil {
		return fmt.Errorf("resync: %w", err)
	}
	r.ResyncSecs = time.Since(t).Seconds()

	// After another program's commit a drift check must read the whole table back
	// (svcproxy spaces such reads out to ten times their duration).
	stop := cpuProfile(os.Getenv("BENCH_RESYNC_CPUPROFILE"))
	t = time.Now()
	if _, err := b.kernel.Read(ctx, nft.FamilyIPv4, proxy.TableName); err != nil {
		return fmt.Errorf("read table: %w", err)
	}
	r.FullRead = time.Since(t).Seconds()
	stop()
	drain(b.latencies)
	drain(b.syncs)
	return nil
}

// check: the kernel holds Service 7's endpoints (the shape of the table aside).
func (b *bench) check() error {
	out, err := netns.Exec(b.world.Node, "nft", "list", "map", "ip", proxy.TableName, "endpoints-07") // 10.96.0.7's shard
	if err != nil {
		return fmt.Errorf("nft list map: %w", err)
	}
	if got, want := strings.Count(out, addr(96, 7)+" . tcp . 80 . "), b.o.size(7); got != want {
		return fmt.Errorf("kernel holds %d endpoints of service 7, want %d", got, want)
	}
	return nil
}

type observer func(float64)

func (o observer) Observe(v float64) { o(v) }

// sendTo observes seconds into c, dropping what does not fit.
func sendTo(c chan time.Duration) observer {
	return func(s float64) {
		select {
		case c <- time.Duration(s * float64(time.Second)):
		default:
		}
	}
}

func drain(c chan time.Duration) {
	for {
		select {
		case <-c:
		default:
			return
		}
	}
}

// cpuProfile profiles the CPU into file until the returned function is called; an
// empty file name profiles nothing.
func cpuProfile(file string) (stop func()) {
	if file == "" {
		return func() {}
	}
	f, err := os.Create(file)
	if err == nil {
		err = pprof.StartCPUProfile(f)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench: cpu profile:", err)
		return func() {}
	}
	return func() { pprof.StopCPUProfile(); f.Close() }
}
