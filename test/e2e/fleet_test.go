//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestBenchFleet is the fleet's view of a rollout (issue 22): a DaemonSet
// rollout restarts every node's proxy at once, and kube-apiserver serves all
// their first lists and watches together. E2E_FLEET_PROXIES (default "50 200")
// simulated proxies (fleetproxy_test.go: svcproxy's informer code, one HTTP
// connection each, no kernel part) start together against
// E2E_FLEET_SERVICES (default 30000) Services x10 endpoints, written straight
// into etcd and the apiserver restarted on them (as E2E_BENCH_WRITE=etcd), once
// per E2E_FLEET_MODES (default "list watch-list"): "list" is svcproxy's first
// List from the watch cache, "watch-list" kube-proxy's first watch-list
// (endpoints.Clients.StreamFirstList), "list-uncompressed" the List asked for
// without gzip (a kubeconfig's disable-compression). Measured: kube-apiserver's
// and etcd's CPU from the start until every proxy synced (and fleetAfter more),
// its peak RSS (VmHWM, reset at the start), the time until the last proxy
// synced, the 429s and other failures the requests got, and the bytes read.
// hack/bench.sh runs it with BENCH_FLEET; E2E_FLEET_OUT is a file the runs are
// appended to as JSON lines.
func TestBenchFleet(t *testing.T) {
	if os.Getenv("E2E_FLEET") == "" {
		t.Skip("E2E_FLEET not set: run by hack/bench.sh with BENCH_FLEET")
	}
	c := theCluster
	sizes, err := intList(envOr("E2E_FLEET_PROXIES", "50 200"))
	if err != nil {
		t.Fatalf("E2E_FLEET_PROXIES: %v", err)
	}
	services, err := strconv.Atoi(envOr("E2E_FLEET_SERVICES", "30000"))
	if err != nil {
		t.Fatalf("E2E_FLEET_SERVICES: %v", err)
	}
	modes := strings.Fields(envOr("E2E_FLEET_MODES", "list watch-list"))
	for _, m := range modes {
		if m != fleetList && m != fleetWatchList && m != fleetListUncompressed {
			t.Fatalf("E2E_FLEET_MODES: %q: want %s, %s or %s", m, fleetList, fleetWatchList, fleetListUncompressed)
		}
	}
	ctx := ctxFor(t, 3*time.Hour)
	cl, err := c.benchClient()
	if err != nil {
		t.Fatal(err)
	}
	objs, err := benchObjectsFor("")
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := c.createBenchObjectsInEtcd(ctx, cl, objs, 0, services); err != nil {
		t.Fatalf("create objects in etcd: %v", err)
	}
	if err := c.restartAPIServer(ctx); err != nil {
		t.Fatal(err)
	}
	c.logf("fleet: %d Services and their EndpointSlices written into etcd, apiserver restarted, in %v", services, time.Since(start).Round(time.Second))
	for _, n := range sizes {
		for _, mode := range modes {
			r, err := c.fleetOne(ctx, mode, n, services)
			if err != nil {
				t.Fatalf("%d proxies, %s: %v", n, mode, err)
			}
			writeFleetRun(t, *r)
		}
	}
}

// fleetOne starts n simulated proxies at once and measures the control plane
// until every one has synced, then stops them and waits until their
// connections are gone.
func (c *cluster) fleetOne(ctx context.Context, mode string, n, services int) (*fleetRun, error) {
	stats := &fleetHTTPStats{}
	base, err := c.apiServerConns()
	if err != nil {
		return nil, err
	}
	proxies := make([]*fleetProxy, n)
	for i := range proxies {
		if proxies[i], err = c.newFleetProxy(i, mode, stats); err != nil {
			return nil, err
		}
	}
	// The previous run's garbage stays out of this one's client CPU.
	runtime.GC()
	debug.FreeOSMemory()
	c.untilControlPlaneQuiet(ctx)
	api, etcd := c.apiserver.pid(), c.etcd.pid()
	if err := resetPeakRSS(api); err != nil {
		return nil, err
	}
	r := &fleetRun{Mode: mode, Proxies: n, Services: services, APIRSSStartMiB: procMiB(api, "VmRSS:")}
	api0, etcd0, self0 := procCPUSeconds(api), procCPUSeconds(etcd), selfCPU()

	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	start := time.Now()
	for _, p := range proxies {
		p.start(runCtx)
	}
	c.logf("fleet: %d proxies (%s) started against %d Services", n, mode, services)
	deadline, remaining := start.Add(30*time.Minute), n
	for remaining > 0 {
		if time.Now().After(deadline) || ctx.Err() != nil {
			return nil, fmt.Errorf("%d of %d proxies synced after %v (%s)", n-remaining, n, time.Since(start).Round(time.Second), stats)
		}
		time.Sleep(20 * time.Millisecond)
		now := time.Now()
		for _, p := range proxies {
			if p.syncedAt.IsZero() && p.synced() {
				p.syncedAt, remaining = now, remaining-1
			}
		}
	}
	r.SyncLastS, r.APICPU, r.Load = time.Since(start).Seconds(), procCPUSeconds(api)-api0, loadAvg()
	var took []time.Duration
	for _, p := range proxies {
		took = append(took, p.syncedAt.Sub(start))
		if got := p.objects.Load(); got < int64(2*services) {
			return nil, fmt.Errorf("%s synced with %d objects delivered, want at least %d Services and as many EndpointSlices", p.name, got, services)
		}
		if p.dials.Load() == 0 {
			return nil, fmt.Errorf("%s synced without dialling: it shares another's connection", p.name)
		}
		r.Dials += p.dials.Load()
	}
	r.SyncP50S = percentile(took, 0.5).Seconds()
	// Every proxy has its own connection, as separate processes would: HTTP/2
	// multiplexes one proxy's lists and watches, never two proxies'.
	conns, err := c.apiServerConns()
	if err != nil {
		return nil, err
	}
	if r.Conns = conns - base; r.Conns < n {
		return nil, fmt.Errorf("%d proxies on %d connections to the API server (%d before), want one each at least", n, r.Conns, base)
	}
	time.Sleep(fleetAfter)
	r.APICPUAfter, r.EtcdCPU = procCPUSeconds(api)-api0, procCPUSeconds(etcd)-etcd0
	r.APIPeakMiB, r.ClientCPU = procMiB(api, "VmHWM:"), selfCPU()-self0
	r.Requests, r.TooMany, r.ServerErr = stats.requests.Load(), stats.tooMany.Load(), stats.serverErr.Load()
	r.OtherErr, r.Failed = stats.otherErr.Load(), stats.failed.Load()
	// The mode must be what was measured: a first list per proxy and kind.
	if first := map[string]int64{fleetList: stats.lists.Load(), fleetListUncompressed: stats.lists.Load(), fleetWatchList: stats.watchLists.Load()}[mode]; first < int64(2*n) {
		return nil, fmt.Errorf("mode %s, but %s: want 2 first lists per proxy of that kind", mode, stats)
	}
	// Every proxy's two big first lists come gzipped, or, uncompressed, none.
	r.Gzipped = stats.gzipped.Load()
	if gzip := mode != fleetListUncompressed; gzip && r.Gzipped < int64(2*n) || !gzip && r.Gzipped > 0 {
		return nil, fmt.Errorf("mode %s, but %s", mode, stats)
	}
	r.WireMiB = float64(stats.wire.Load()) / (1 << 20)
	r.Finished = time.Now().UTC().Format(time.RFC3339)
	c.logf("fleet: %d proxies (%s): last synced at %.1f s (p50 %.1f s), apiserver CPU %.1f s (%.1f s with %v after), etcd %.1f s, apiserver RSS %.0f MiB -> peak %.0f MiB, fleet's own CPU %.1f s, %d connections, load %.1f; %s",
		n, mode, r.SyncLastS, r.SyncP50S, r.APICPU, r.APICPUAfter, fleetAfter, r.EtcdCPU, r.APIRSSStartMiB, r.APIPeakMiB, r.ClientCPU, r.Conns, r.Load, stats)

	stop()
	waitFor := time.Now().Add(time.Minute)
	for {
		for _, p := range proxies {
			p.close() // the watches ended with runCtx; their connections idle
		}
		now, err := c.apiServerConns()
		if err == nil && now <= base {
			break
		}
		if time.Now().After(waitFor) {
			c.logf("fleet: %d connections to the API server a minute after the proxies stopped (%d before)", now, base)
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	return r, nil
}

func writeFleetRun(t *testing.T, r fleetRun) {
	b, _ := json.Marshal(r)
	t.Logf("FLEET %s", b)
	out := os.Getenv("E2E_FLEET_OUT")
	if out == "" {
		return
	}
	f, err := os.OpenFile(out, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Errorf("fleet out: %v", err)
		return
	}
	defer f.Close()
	fmt.Fprintf(f, "%s\n", b)
}
