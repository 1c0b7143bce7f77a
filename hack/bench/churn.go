package main

import (
	"context"
	"fmt"
	"time"

	"github.com/svcproxy/svcproxy/pkg/proxy"
)

type churnResult struct {
	ChurnSeconds   float64 `json:"churn_s"`
	ChurnPerSecond int     `json:"churn_services_per_s"`
	ChurnChanges   int     `json:"churn_changes"`
	ChurnObserved  int     `json:"churn_observed"`
	ChurnP50       float64 `json:"churn_latency_p50_s"`
	ChurnP90       float64 `json:"churn_latency_p90_s"`
	ChurnP99       float64 `json:"churn_latency_p99_s"`
	ChurnMax       float64 `json:"churn_latency_max_s"`
	ChurnCPU       float64 `json:"churn_cpu_s"`
	ChurnMinSync   float64 `json:"churn_min_sync_period_s"`
	// ChurnSpacing is the sync policy: "cost" (svcproxy's default, syncs spaced by
	// nine times their duration, at most churn_min_sync_period_s apart) or "fixed"
	// (kube-proxy's: at least churn_min_sync_period_s apart).
	ChurnSpacing string `json:"churn_sync_spacing"`
	// ChurnSpacingFactor and ChurnSpacingFloor are the "cost" policy's
	// (proxy.CostSpacing): syncs that many times their cost apart, at least the
	// floor.
	ChurnSpacingFactor int     `json:"churn_spacing_factor,omitempty"`
	ChurnSpacingFloor  float64 `json:"churn_spacing_floor_s,omitempty"`
	ChurnSyncs         int     `json:"churn_syncs"`
	ChurnSyncP50       float64 `json:"churn_sync_p50_s"`
	ChurnSyncMax       float64 `json:"churn_sync_max_s"`
}

// churn runs the real sync loop (Proxy.Run, with svcproxy's default policy, syncs
// spaced by their cost and at most a --min-sync-period of 1 s apart, or with
// -fixed-min-sync-period kube-proxy's, at least 1 s apart) while share of the Services get one endpoint replaced
// every second, one by one as informer events stamped with the EndpointSlice controller's
// trigger time. The programming latency of each change is what svcproxy's
// kubeproxy_network_programming_duration_seconds observes: trigger time to the
// commit of the transaction that programmed it. CPU is this process's user and
// system time over the run, the kernel's work on the transactions included.
func (b *bench) churn(d time.Duration, share float64) (*churnResult, error) {
	perSecond := max(1, int(float64(b.n)*share))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	stopProfile := cpuProfile(b.churnProfile)
	defer stopProfile()
	cpu0 := cpuTime()
	go func() { done <- b.p.Run(ctx, nil) }()

	var lat, syncs []time.Duration
	collect := func() {
		for {
			select {
			case l := <-b.latencies:
				lat = append(lat, l)
			case d := <-b.syncs:
				syncs = append(syncs, d)
			default:
				return
			}
		}
	}
	start := time.Now()
	// Informer events come one by one: the changes of a second are spread over it.
	gap := time.Second / time.Duration(perSecond)
	next := start
	changes, gen := 0, 1000 // generations above oneChanges' samples
	for range max(1, int(d/time.Second)) {
		gen++
		for k := range perSecond {
			time.Sleep(time.Until(next))
			next = next.Add(gap)
			i := (gen*perSecond + k) % b.n
			b.tr.OnEndpointSliceUpdate(nil, b.o.slice(i, gen, time.Now()))
			b.p.Trigger()
			changes++
		}
		collect()
	}
	// Every change committed: wait for the last ones.
	deadline := time.Now().Add(60 * time.Second)
	for len(lat) < changes && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
		collect()
	}
	cpu := cpuTime() - cpu0
	var factor int
	var floor time.Duration
	if b.spaceByCost {
		factor, floor = proxy.CostSpacing()
	}
	cancel()
	if err := <-done; err != nil {
		return nil, err
	}
	if len(lat) < changes {
		return nil, fmt.Errorf("%d of %d changes committed within a minute of the churn's end", len(lat), changes)
	}
	return &churnResult{ChurnSeconds: time.Since(start).Seconds(), ChurnPerSecond: perSecond, ChurnChanges: changes,
		ChurnObserved: len(lat), ChurnP50: quantile(lat, 0.5), ChurnP90: quantile(lat, 0.9), ChurnP99: quantile(lat, 0.99), ChurnMax: quantile(lat, 1),
		ChurnCPU: cpu.Seconds(), ChurnMinSync: 1, ChurnSpacing: spacingName(b.spaceByCost),
		ChurnSpacingFactor: factor, ChurnSpacingFloor: floor.Seconds(),
		ChurnSyncs: len(syncs), ChurnSyncP50: quantile(syncs, 0.5), ChurnSyncMax: quantile(syncs, 1)}, nil
}

func spacingName(byCost bool) string {
	if byCost {
		return "cost"
	}
	return "fixed"
}
