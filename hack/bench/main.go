// Command bench measures svcproxy against the real kernel, in a network namespace it
// creates and removes: a cold full sync of N Services x E endpoints, one incremental
// endpoint change, one added Service, and the process's RSS. It prints one JSON line;
// hack/bench.sh runs it at several sizes and prints the table.
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
	"sort"
	"strconv"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"k8s.io/klog/v2"

	"github.com/svcproxy/svcproxy/internal/netns"
	"github.com/svcproxy/svcproxy/pkg/endpoints"
	"github.com/svcproxy/svcproxy/pkg/nft"
	"github.com/svcproxy/svcproxy/pkg/proxy"
)

var (
	profile string
	// sticky gives every Service ClientIP affinity (BENCH_STICKY=1 make bench).
	sticky bool
)

type result struct {
	Services       int     `json:"services"`
	Sticky         bool    `json:"sticky,omitempty"`
	Endpoints      int     `json:"endpoints_per_service"`
	ColdSeconds    float64 `json:"cold_sync_s"`
	ChangeSeconds  float64 `json:"endpoint_change_s"`
	AddSeconds     float64 `json:"add_service_s"`
	ScaleSeconds   float64 `json:"endpoint_added_s"`
	ResyncSeconds  float64 `json:"resync_s"`
	FullReadSecs   float64 `json:"resync_full_read_s"`
	RSSMiB         float64 `json:"rss_mib"`
	PeakRSSMiB     float64 `json:"peak_rss_mib"`
	HeapMiB        float64 `json:"heap_after_gc_mib"`
	KernelRules    int     `json:"service7_endpoints_in_kernel"`
	ChangeSamples  int     `json:"change_samples"`
	ColdTxObjects  int     `json:"cold_tx_objects"`
	ChangeTxObject int     `json:"change_tx_objects"`
}

func main() {
	n := flag.Int("services", 1000, "number of Services")
	e := flag.Int("endpoints", 10, "endpoints per Service")
	samples := flag.Int("samples", 7, "incremental changes to time (median reported)")
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile of the incremental changes to this file")
	flag.BoolVar(&sticky, "sticky", false, "give every Service ClientIP affinity")
	klog.InitFlags(nil)
	flag.Parse()
	profile = *cpuprofile
	if err := run(*n, *e, *samples); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func run(n, e, samples int) error {
	ns := fmt.Sprintf("spbench%d", os.Getpid())
	if err := netns.IP("netns", "add", ns); err != nil {
		return err
	}
	defer netns.Delete(ns)
	f, err := os.Open(netns.Path(ns))
	if err != nil {
		return err
	}
	defer f.Close()
	kernel := &nft.Netlink{NetNSFd: int(f.Fd())}

	tr := endpoints.NewTracker(endpoints.TrackerOptions{})
	for i := 0; i < n; i++ {
		tr.OnServiceAdd(service(i))
		tr.OnEndpointSliceAdd(slice(i, e, 0))
	}
	p := proxy.New(proxy.Config{Tracker: tr, Kernel: kernel, Options: proxy.Options{ClusterCIDR: netip.MustParsePrefix("10.0.0.0/8")}})
	runtime.GC()

	stopProfile := cpuProfile(os.Getenv("BENCH_COLD_CPUPROFILE"))
	start := time.Now()
	if err := p.Sync(context.Background()); err != nil {
		return fmt.Errorf("cold sync: %w", err)
	}
	stopProfile()
	r := result{Services: n, Sticky: sticky, Endpoints: e, ColdSeconds: time.Since(start).Seconds(), ChangeSamples: samples}
	r.RSSMiB, r.PeakRSSMiB = procStatusMiB("VmRSS:"), procStatusMiB("VmHWM:")
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	r.HeapMiB = float64(ms.HeapInuse) / (1 << 20)
	if hp := os.Getenv("BENCH_HEAPPROFILE"); hp != "" {
		f, _ := os.Create(hp)
		_ = pprof.WriteHeapProfile(f)
		f.Close()
	}

	stopProfile = cpuProfile(profile)
	var changes []float64
	for s := 1; s <= samples; s++ {
		tr.OnEndpointSliceUpdate(nil, slice(s*7%n, e, s)) // one endpoint of one Service replaced
		t := time.Now()
		if err := p.Sync(context.Background()); err != nil {
			return fmt.Errorf("incremental sync: %w", err)
		}
		changes = append(changes, time.Since(t).Seconds())
	}
	stopProfile()
	sort.Float64s(changes)
	r.ChangeSeconds = changes[len(changes)/2]

	// Scaling: one Service gains an endpoint (its endpoint count changes).
	scaled := slice(11, e, 0)
	scaled.Endpoints = append(scaled.Endpoints, discoveryv1.Endpoint{Addresses: []string{addr(200, 11)}})
	tr.OnEndpointSliceUpdate(nil, scaled)
	t0 := time.Now()
	if err := p.Sync(context.Background()); err != nil {
		return fmt.Errorf("scale sync: %w", err)
	}
	r.ScaleSeconds = time.Since(t0).Seconds()

	tr.OnServiceAdd(service(n))
	tr.OnEndpointSliceAdd(slice(n, e, 0))
	t := time.Now()
	if err := p.Sync(context.Background()); err != nil {
		return fmt.Errorf("add service: %w", err)
	}
	r.AddSeconds = time.Since(t).Seconds()

	p.RequestResync() // what --sync-period does: re-read the kernel, find nothing to repair
	t = time.Now()
	if err := p.Sync(context.Background()); err != nil {
		return fmt.Errorf("resync: %w", err)
	}
	r.ResyncSeconds = time.Since(t).Seconds()

	// After another program's commit a drift check must read the whole table back
	// (svcproxy spaces such reads out to ten times their duration).
	stopProfile = cpuProfile(os.Getenv("BENCH_RESYNC_CPUPROFILE"))
	t = time.Now()
	if _, err := kernel.Read(context.Background(), nft.FamilyIPv4, proxy.TableName); err != nil {
		return fmt.Errorf("read table: %w", err)
	}
	r.FullReadSecs = time.Since(t).Seconds()
	stopProfile()

	// The kernel holds service 7's endpoints (the shape of the table aside).
	out, err := netns.Exec(ns, "nft", "list", "map", "ip", proxy.TableName, "endpoints-07") // 10.96.0.7's shard
	if err != nil {
		return fmt.Errorf("nft list map: %w", err)
	}
	r.KernelRules = strings.Count(out, addr(96, 7)+" . tcp . 80 . ")
	if r.KernelRules != e {
		return fmt.Errorf("kernel holds %d endpoints of service 7, want %d", r.KernelRules, e)
	}
	return json.NewEncoder(os.Stdout).Encode(r)
}

func addr(base byte, i int) string {
	return fmt.Sprintf("10.%d.%d.%d", base+byte(i>>16), (i>>8)&0xff, i&0xff)
}

func service(i int) *v1.Service {
	ip := addr(96, i)
	s := &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "bench", Name: "svc-" + strconv.Itoa(i)},
		Spec: v1.ServiceSpec{ClusterIP: ip, ClusterIPs: []string{ip}, Type: v1.ServiceTypeClusterIP,
			Ports: []v1.ServicePort{{Name: "http", Port: 80, Protocol: v1.ProtocolTCP, TargetPort: intstr.FromInt32(8080)}}},
	}
	if sticky {
		s.Spec.SessionAffinity = v1.ServiceAffinityClientIP
	}
	return s
}

// slice returns Service i's endpoints; gen shifts one endpoint to a new address.
func slice(i, e, gen int) *discoveryv1.EndpointSlice {
	name, proto, port := "http", v1.ProtocolTCP, int32(8080)
	s := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: "bench", Name: "svc-" + strconv.Itoa(i) + "-x", Labels: map[string]string{discoveryv1.LabelServiceName: "svc-" + strconv.Itoa(i)}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: &name, Protocol: &proto, Port: &port}},
	}
	for j := 0; j < e; j++ {
		k := i*e + j
		if j == 0 && gen > 0 {
			k = 1<<20 + gen*4096 + i%4096
		}
		s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{Addresses: []string{addr(128, k)}})
	}
	return s
}

func procStatusMiB(field string) float64 {
	b, _ := os.ReadFile("/proc/self/status")
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, field) {
			f := strings.Fields(l)
			kb, _ := strconv.ParseFloat(f[1], 64)
			return kb / 1024
		}
	}
	return 0
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
