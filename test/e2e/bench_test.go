//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/svcproxy/svcproxy/internal/benchworld"
	"github.com/svcproxy/svcproxy/internal/netns"
)

// benchRun is one proxy's side-by-side numbers at one size.
type benchRun struct {
	Proxy     string  `json:"proxy"`
	Services  int     `json:"services"`
	Shape     string  `json:"shape"`                 // E2E_BENCH_SHAPE: disjoint or shared (benchshared_test.go)
	Endpoints int     `json:"endpoints_per_service"` // 0 in the shared shape: sizes vary
	ColdSecs  float64 `json:"cold_sync_s"`
	ColdCPU   float64 `json:"cold_sync_cpu_s"` // the process's (and its children's) user+system CPU until then
	Load      float64 `json:"loadavg"`         // the machine's, when the cold sync ended
	ChangeP50 float64 `json:"change_p50_s"`
	ChangeP99 float64 `json:"change_p99_s"` // nearest rank: of 20 changes, the largest
	ChangeMax float64 `json:"change_max_s"`
	// WriteP50 is how long the EndpointSlice Update took to return (the apiserver's
	// write, etcd's commit included): the part of a change no proxy can shorten.
	WriteP50    float64 `json:"write_p50_s"`
	Changes     int     `json:"changes"`
	RSSMiB      float64 `json:"rss_mib"`
	HWMMiB      float64 `json:"hwm_mib"`
	EndRSSMiB   float64 `json:"rss_end_mib"`
	EndHWMMiB   float64 `json:"hwm_end_mib"`
	Skipped     string  `json:"skipped,omitempty"`
	FinishedUTC string  `json:"finished"`
}

// TestBenchSideBySide is make bench's side by side (E2E_BENCH=1, hack/bench.sh):
// svcproxy and upstream kube-proxy in nftables mode, one after the other, each in
// a fresh node namespace of its own, on the same Services and EndpointSlices
// through the real apiserver. Traffic from a client namespace decides: cold sync is
// from the process's start until every ClusterIP answers from its own endpoints;
// one change is from the EndpointSlice write until the Service answers from the
// new endpoints. RSS is VmRSS and VmHWM of the proxy's process.
//
// E2E_BENCH_SIZES (default "1000"): sizes, ascending; kube-proxy runs at sizes up
// to E2E_BENCH_KUBEPROXY_MAX (default 10000), svcproxy at all.
// E2E_BENCH_CHANGES (default 20): changes timed per proxy and size.
// E2E_BENCH_OUT: a file the runs are appended to as JSON lines.
// E2E_BENCH_WRITE=etcd: the objects are written straight into etcd (benchetcd_test.go).
// E2E_BENCH_SHAPE (default "disjoint"): the objects' shape, "shared" for issue
// 22's (benchshared_test.go, internal/benchshape).
// E2E_BENCH_PROXIES (default "svcproxy kube-proxy-nftables"): which proxies run, in
// order; "svcproxy-before" is svcproxy built from another commit, the binary
// E2E_BENCH_SVCPROXY_BEFORE, to compare two builds on the same objects.
// E2E_BENCH_HEAPPROFILE=DIR: svcproxy runs with --profiling, and its heap profile
// after the cold sync (a collection first) is written to DIR/<kind>-<size>.heap.
// E2E_BENCH_CPUPROFILE=DIR: svcproxy runs with --profiling, and a CPU profile of
// its first benchCPUProfileFor (the cold sync, lists included) is written to
// DIR/<kind>-<size>.cpu, and kube-apiserver's over the same seconds to
// DIR/kube-apiserver-<kind>-<size>.cpu.
func TestBenchSideBySide(t *testing.T) {
	if os.Getenv("E2E_BENCH") == "" {
		t.Skip("E2E_BENCH not set: run by make bench (hack/bench.sh)")
	}
	c := theCluster
	objs, err := benchObjectsFor(os.Getenv("E2E_BENCH_SHAPE"))
	if err != nil {
		t.Fatal(err)
	}
	sizes, err := intList(envOr("E2E_BENCH_SIZES", "1000"))
	if err != nil {
		t.Fatalf("E2E_BENCH_SIZES: %v", err)
	}
	kpMax, _ := strconv.Atoi(envOr("E2E_BENCH_KUBEPROXY_MAX", "10000"))
	changes, _ := strconv.Atoi(envOr("E2E_BENCH_CHANGES", "20"))
	kinds := strings.Fields(envOr("E2E_BENCH_PROXIES", "svcproxy kube-proxy-nftables"))
	kpNote := ""
	if i := slices.Index(kinds, "kube-proxy-nftables"); i >= 0 {
		if _, err := os.Stat(c.bin("kube-proxy")); err != nil {
			kpNote = fmt.Sprintf("kube-proxy not built (%v): hack/build-k8s-bins.sh builds it", err)
			fmt.Fprintln(os.Stderr, "bench: side by side without kube-proxy:", kpNote)
			kinds = slices.Delete(kinds, i, i+1)
		}
	}
	if slices.Contains(kinds, "svcproxy-before") && os.Getenv("E2E_BENCH_SVCPROXY_BEFORE") == "" {
		t.Fatal("E2E_BENCH_PROXIES has svcproxy-before: set E2E_BENCH_SVCPROXY_BEFORE to its binary")
	}
	ctx := ctxFor(t, 2*time.Hour)
	if err := c.registerBenchNode(ctx); err != nil {
		t.Fatalf("bench node: %v", err)
	}
	cl, err := c.benchClient()
	if err != nil {
		t.Fatal(err)
	}
	created := 0
	for _, n := range sizes {
		start := time.Now()
		create := func() error { return createBenchObjects(ctx, cl, objs, created, n) }
		if os.Getenv("E2E_BENCH_WRITE") == "etcd" {
			create = func() error {
				if err := c.createBenchObjectsInEtcd(ctx, cl, objs, created, n); err != nil {
					return err
				}
				return c.restartAPIServer(ctx)
			}
		}
		if err := create(); err != nil {
			t.Fatalf("create objects: %v", err)
		}
		c.logf("bench: %d Services (%s shape) and their EndpointSlices created in %v", n-created, objs.name(), time.Since(start).Round(time.Millisecond))
		created = n
		for _, kind := range kinds {
			if strings.HasPrefix(kind, "kube-proxy") && n > kpMax {
				writeBenchRun(t, benchRun{Proxy: kind, Services: n, Shape: objs.name(), Skipped: fmt.Sprintf("above E2E_BENCH_KUBEPROXY_MAX=%d", kpMax)})
				continue
			}
			r, err := c.benchOne(ctx, cl, objs, kind, n, changes)
			if err != nil {
				t.Fatalf("%s at %d: %v", kind, n, err)
			}
			writeBenchRun(t, *r)
		}
		if kpNote != "" {
			writeBenchRun(t, benchRun{Proxy: "kube-proxy-nftables", Services: n, Shape: objs.name(), Skipped: kpNote})
		}
	}
}

// benchOne runs proxy kind in a fresh world against the first n Services of objs.
func (c *cluster) benchOne(ctx context.Context, cl kubernetes.Interface, objs benchObjects, kind string, n, changes int) (*benchRun, error) {
	w, err := benchworld.New(fmt.Sprintf("%sb%d-", c.prefix, n))
	if err != nil {
		return nil, err
	}
	defer w.Close()
	if err := c.plugIntoBridge(w.Node); err != nil {
		return nil, err
	}
	targets := make([]benchworld.Target, n)
	for i := range targets {
		targets[i] = benchworld.Target{IP: benchClusterIP(i), Port: 80, Serves: objs.serves(i, 0)}
	}
	// A probe of a ClusterIP not programmed yet waits out its timeout, and the
	// sentinels are probed round after round by 2 workers: with 200 ms a round
	// took seconds, and the cold sync was measured ~4 s after the last
	// transaction. Answers from the local endpoints take well under a millisecond.
	pr := w.NewProber(50 * time.Millisecond)
	defer pr.Close()

	nd := &node{name: benchNodeName, netns: w.Node, ip: benchNodeIP}
	name := fmt.Sprintf("bench-%s-%d", kind, n)
	c.untilControlPlaneQuiet(ctx)
	cp0 := c.controlPlaneCPUs()
	start := time.Now()
	cmd := c.proxyCommandAs(kind, nd)
	if kind == "svcproxy-before" {
		cmd[0] = os.Getenv("E2E_BENCH_SVCPROXY_BEFORE") // another build, same flags
	}
	cpuDir := os.Getenv("E2E_BENCH_CPUPROFILE")
	profiled := strings.HasPrefix(kind, "svcproxy")
	if profiled && (os.Getenv("E2E_BENCH_HEAPPROFILE") != "" || cpuDir != "") {
		cmd = append(cmd, "--profiling")
	}
	p, err := c.start(name, w.Node, cmd...)
	if err != nil {
		return nil, err
	}
	defer p.stop(5 * time.Second)
	cpuProfiled := make(chan error, 2)
	if profiled && cpuDir != "" {
		go func() {
			cpuProfiled <- benchCPUProfile(ctx, nd, filepath.Join(cpuDir, fmt.Sprintf("%s-%d.cpu", kind, n)), benchCPUProfileFor)
		}()
		go func() {
			cpuProfiled <- apiserverCPUProfile(ctx, cl, filepath.Join(cpuDir, fmt.Sprintf("kube-apiserver-%s-%d.cpu", kind, n)), benchCPUProfileFor)
		}()
	} else {
		cpuProfiled <- nil
		cpuProfiled <- nil
	}
	coldCtx, cancel := context.WithTimeout(ctx, 30*time.Minute)
	defer cancel()
	c.logf("bench: %s at %d Services: waiting for every ClusterIP to answer", kind, n)
	conv, err := benchworld.AllAnswer(coldCtx, pr, targets, 2)
	if err != nil {
		return nil, fmt.Errorf("cold sync (log %s): %w", filepath.Join(c.logDir, name+".log"), err)
	}
	if conv.Stragglers > 0 {
		c.logf("bench: %s at %d Services: the sample answered at %.2f s, the sweep ended at %.2f s and found %d not answering yet (first: %v)",
			kind, n, conv.Sample.Sub(start).Seconds(), conv.SweepEnd.Sub(start).Seconds(), conv.Stragglers, conv.FirstMiss)
	}
	r := &benchRun{Proxy: kind, Services: n, Shape: objs.name(), Endpoints: benchEndpointsPerService, ColdSecs: conv.At.Sub(start).Seconds(), Changes: changes}
	if objs.name() != "disjoint" {
		r.Endpoints = 0
	}
	r.RSSMiB, r.HWMMiB = procMiB(p.pid(), "VmRSS:"), procMiB(p.pid(), "VmHWM:")
	if dir := os.Getenv("E2E_BENCH_HEAPPROFILE"); dir != "" && strings.HasPrefix(kind, "svcproxy") {
		if err := benchHeapProfile(nd, filepath.Join(dir, fmt.Sprintf("%s-%d.heap", kind, n))); err != nil {
			return nil, err
		}
	}
	r.ColdCPU, r.Load = procCPUSeconds(p.pid()), loadAvg()
	cpCPU, cpSplit := c.cpuBetween(cp0, c.controlPlaneCPUs())
	for range 2 {
		if err := <-cpuProfiled; err != nil {
			return nil, err
		}
	}
	c.logf("bench: %s at %d Services: cold sync %.2f s (CPU %.2f s, control plane's %.2f s: %s; load %.1f), RSS %.0f MiB (anonymous %.0f, file %.0f), peak %.0f MiB",
		kind, n, r.ColdSecs, r.ColdCPU, cpCPU, cpSplit, r.Load, r.RSSMiB, procMiB(p.pid(), "RssAnon:"), procMiB(p.pid(), "RssFile:"), r.HWMMiB)

	var took, writes []time.Duration
	for s := 1; s <= changes; s++ {
		// Both proxies sync at most once a second (--min-sync-period, kube-proxy's
		// default and svcproxy's): a change after a quiet second is synced at once.
		time.Sleep(1200 * time.Millisecond)
		d, write, err := benchChange(ctx, cl, pr, objs, objs.changeService(s, n), s)
		if err != nil {
			return nil, fmt.Errorf("change %d: %w", s, err)
		}
		took, writes = append(took, d), append(writes, write)
		if d > 10*time.Millisecond { // the tail: its time, to find in the proxy's log
			c.logf("bench: %s at %d Services: change %d took %.1f ms (the write %.1f ms), written at %s", kind, n, s,
				float64(d)/1e6, float64(write)/1e6, time.Now().Add(-d).UTC().Format("15:04:05.000"))
		}
	}
	if p.exited() {
		return nil, fmt.Errorf("%s exited: %v", kind, p.Err())
	}
	r.EndRSSMiB, r.EndHWMMiB = procMiB(p.pid(), "VmRSS:"), procMiB(p.pid(), "VmHWM:")
	if len(took) > 0 {
		r.ChangeP50, r.ChangeP99, r.ChangeMax = percentile(took, 0.5).Seconds(), percentile(took, 0.99).Seconds(), slices.Max(took).Seconds()
		r.WriteP50 = percentile(writes, 0.5).Seconds()
	}
	c.logf("bench: %s at %d Services: one change p50 %s ms, p99 %s ms, max %s ms (%d); the write returned after %s ms (p50)", kind, n,
		ms(percentile(took, 0.5)), ms(percentile(took, 0.99)), ms(slices.Max(append(took, 0))), len(took), ms(percentile(writes, 0.5)))
	// Put the changed Services back for the next proxy's cold sync.
	for s := 1; s <= changes; s++ {
		if _, err := cl.DiscoveryV1().EndpointSlices(benchNS).Update(ctx, objs.changed(objs.changeService(s, n), 0), metav1.UpdateOptions{}); err != nil {
			return nil, fmt.Errorf("restore: %w", err)
		}
	}
	r.FinishedUTC = time.Now().UTC().Format(time.RFC3339)
	return r, nil
}

// benchChange writes Service i's slice of generation gen (the disjoint shape
// replaces every endpoint, the shared one the one endpoint of a one-endpoint
// Service), and returns the time until the ClusterIP answers from a new endpoint
// (all old ones are gone: the first new answer is the change programmed, with no
// sampling delay), and the time the write took to return.
func benchChange(ctx context.Context, cl kubernetes.Interface, pr *benchworld.Prober, objs benchObjects, i, gen int) (took, write time.Duration, err error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	start := time.Now()
	if _, err := cl.DiscoveryV1().EndpointSlices(benchNS).Update(ctx, objs.changed(i, gen), metav1.UpdateOptions{}); err != nil {
		return 0, 0, err
	}
	write = time.Since(start)
	t := benchworld.Target{IP: benchClusterIP(i), Port: 80}
	at, err := benchworld.Until(ctx, pr, t, 200*time.Microsecond, objs.serves(i, gen))
	if err != nil {
		return 0, 0, err
	}
	return at.Sub(start), write, nil
}

// untilControlPlaneQuiet waits, up to 3 minutes, until the control plane's
// processes (etcd, kube-apiserver, the controllers) together use under a
// quarter of a core for 2 seconds running: a proxy's cold sync is timed
// against an apiserver that is not still digesting the objects just written
// (its watch caches, the controllers' informers), as a node agent that
// restarts in a running cluster finds it. Not lower: at 100k Services they
// idle at ~0.2 CPU s a second, still 3 minutes after kube-apiserver's restart
// (a tenth of a core was tried, 2026-12-07). The log gives what they used in
// those quiet seconds, per process: the background to subtract from their
// share of a cold sync.
func (c *cluster) untilControlPlaneQuiet(ctx context.Context) {
	const quietFor, busy = 2, 0.25 // seconds; CPU seconds per second
	start, quiet := time.Now(), 0
	window := [][]float64{c.controlPlaneCPUs()} // one sample a second, the last quietFor+1
	for quiet < quietFor && time.Since(start) < 3*time.Minute && ctx.Err() == nil {
		time.Sleep(time.Second)
		now := c.controlPlaneCPUs()
		if used, _ := c.cpuBetween(window[len(window)-1], now); used < busy {
			quiet++
		} else {
			quiet = 0
		}
		window = append(window, now)
		if len(window) > quietFor+1 {
			window = window[1:]
		}
	}
	state := "quiet"
	if quiet < quietFor {
		state = "still busy, timing anyway,"
	}
	used, split := c.cpuBetween(window[0], window[len(window)-1])
	c.logf("bench: control plane %s after %v (%.2f CPU s in its last %d s: %s)", state, time.Since(start).Round(time.Second), used, len(window)-1, split)
}

// controlPlaneCPUs is the CPU seconds each control plane process used so far,
// in c.control's order.
func (c *cluster) controlPlaneCPUs() []float64 {
	out := make([]float64, len(c.control))
	for i, p := range c.control {
		out[i] = procCPUSeconds(p.pid())
	}
	return out
}

// cpuBetween is the control plane's CPU seconds between two controlPlaneCPUs
// samples, in all and process by process ("etcd 0.41, kube-apiserver 5.20, ...").
func (c *cluster) cpuBetween(before, after []float64) (sum float64, split string) {
	parts := make([]string, 0, len(after))
	for i := range min(len(before), len(after)) {
		d := after[i] - before[i]
		sum += d
		parts = append(parts, fmt.Sprintf("%s %.2f", c.control[i].Name, d))
	}
	return sum, strings.Join(parts, ", ")
}

// plugIntoBridge gives namespace nsName an eth0 on the cluster's bridge with the
// bench node's address: the proxies reach the apiserver through it.
func (c *cluster) plugIntoBridge(nsName string) error {
	// The previous world's veth goes with its namespace, but asynchronously: a
	// second proxy at the same size found it still there ("File exists").
	_ = netns.IP("-n", c.bridgeNetns, "link", "del", "vbench")
	for _, a := range [][]string{
		{"-n", c.bridgeNetns, "link", "add", "vbench", "type", "veth", "peer", "name", "eth0", "netns", nsName},
		{"-n", c.bridgeNetns, "link", "set", "vbench", "master", "br0"},
		{"-n", c.bridgeNetns, "link", "set", "vbench", "up"},
		{"-n", nsName, "addr", "add", benchNodeIP + bridgeBits, "dev", "eth0"},
		{"-n", nsName, "link", "set", "eth0", "up"},
	} {
		if err := netns.IP(a...); err != nil {
			return err
		}
	}
	return nil
}

func procMiB(pid int, field string) float64 {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == field {
			kb, _ := strconv.ParseFloat(f[1], 64)
			return kb / 1024
		}
	}
	return 0
}

// procCPUSeconds is the user and system CPU time process pid and its waited-for
// children used so far.
func procCPUSeconds(pid int) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// Fields after the command's closing parenthesis: state is the first, then
	// utime, stime, cutime and cstime are the 12th to the 15th, in clock ticks
	// (USER_HZ, 100 on Linux). The children's count: kube-proxy's work is partly
	// its nft processes' (the kernel's transaction work included).
	_, rest, _ := strings.Cut(string(b), ") ")
	f := strings.Fields(rest)
	if len(f) < 15 {
		return 0
	}
	var ticks float64
	for _, v := range f[11:15] {
		t, _ := strconv.ParseFloat(v, 64)
		ticks += t
	}
	return ticks / 100
}

func loadAvg() float64 {
	b, _ := os.ReadFile("/proc/loadavg")
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0
	}
	v, _ := strconv.ParseFloat(f[0], 64)
	return v
}

func intList(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Fields(s) {
		v, err := strconv.Atoi(f)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

func writeBenchRun(t *testing.T, r benchRun) {
	b, _ := json.Marshal(r)
	t.Logf("BENCH %s", b)
	out := os.Getenv("E2E_BENCH_OUT")
	if out == "" {
		return
	}
	f, err := os.OpenFile(out, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Errorf("bench out: %v", err)
		return
	}
	defer f.Close()
	fmt.Fprintf(f, "%s\n", b)
}

// benchCPUProfileFor is how long the CPU profile of a cold start runs.
const benchCPUProfileFor = 15 * time.Second

// benchCPUProfile writes a CPU profile of the proxy on nd (run with --profiling)
// over its first d to path: it asks as soon as the proxy serves its metrics port.
func benchCPUProfile(ctx context.Context, nd *node, path string, d time.Duration) error {
	hc := &http.Client{
		Transport: &http.Transport{DialContext: netns.DialFunc(nd.netns, time.Second), DisableKeepAlives: true},
		Timeout:   d + time.Minute,
	}
	url := fmt.Sprintf("http://127.0.0.1:%d/debug/pprof/profile?seconds=%d", metricsPort, int(d.Seconds()))
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := hc.Get(url)
		if err != nil {
			if time.Now().After(deadline) || ctx.Err() != nil {
				return fmt.Errorf("CPU profile: %w", err)
			}
			time.Sleep(5 * time.Millisecond)
			continue
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK {
			return fmt.Errorf("CPU profile: status %d, %v", resp.StatusCode, err)
		}
		return os.WriteFile(path, b, 0o644)
	}
}

// apiserverCPUProfile writes a CPU profile of kube-apiserver over the next d to
// path: what serving a proxy's lists and watches costs it.
func apiserverCPUProfile(ctx context.Context, cl kubernetes.Interface, path string, d time.Duration) error {
	b, err := cl.CoreV1().RESTClient().Get().AbsPath("/debug/pprof/profile").
		Param("seconds", strconv.Itoa(int(d.Seconds()))).Timeout(d + time.Minute).DoRaw(ctx)
	if err != nil {
		return fmt.Errorf("kube-apiserver's CPU profile: %w", err)
	}
	return os.WriteFile(path, b, 0o644)
}

// benchHeapProfile writes the heap profile of the proxy on nd (run with
// --profiling) to path, and its text form, which ends with the runtime's
// MemStats, to path.txt.
func benchHeapProfile(nd *node, path string) error {
	hc := &http.Client{
		Transport: &http.Transport{DialContext: netns.DialFunc(nd.netns, 2*time.Second), DisableKeepAlives: true},
		Timeout:   time.Minute,
	}
	for file, query := range map[string]string{path: "gc=1", path + ".txt": "debug=1"} {
		resp, err := hc.Get(fmt.Sprintf("http://127.0.0.1:%d/debug/pprof/heap?%s", metricsPort, query))
		if err != nil {
			return fmt.Errorf("heap profile: %w", err)
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK {
			return fmt.Errorf("heap profile: status %d, %v", resp.StatusCode, err)
		}
		if err := os.WriteFile(file, b, 0o644); err != nil {
			return err
		}
	}
	return nil
}
