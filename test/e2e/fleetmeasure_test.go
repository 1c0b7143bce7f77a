//go:build e2e

package e2e

import (
	"fmt"
	"os"
	"time"
)

// The ways a fleet's proxies take their first lists.
const (
	fleetList             = "list"              // svcproxy's first List, gzipped as client-go asks by default
	fleetWatchList        = "watch-list"        // kube-proxy's streamed first list
	fleetListUncompressed = "list-uncompressed" // the List, with a kubeconfig's disable-compression
)

// fleetRun is one rollout of TestBenchFleet: n simulated proxies starting
// their list+watch together, and what the control plane paid for it.
type fleetRun struct {
	Mode     string `json:"mode"` // fleetList, fleetWatchList or fleetListUncompressed
	Proxies  int    `json:"proxies"`
	Services int    `json:"services"`
	// Until the last proxy synced (Services and EndpointSlices both listed).
	SyncLastS float64 `json:"sync_last_s"`
	SyncP50S  float64 `json:"sync_p50_s"`
	// kube-apiserver's and etcd's user+system CPU from the start until the
	// last proxy synced, and until fleetAfter later (the watches settling).
	APICPU      float64 `json:"apiserver_cpu_s"`
	APICPUAfter float64 `json:"apiserver_cpu_after_s"`
	EtcdCPU     float64 `json:"etcd_cpu_after_s"`
	// kube-apiserver's RSS at the start and its peak (VmHWM, reset at the start).
	APIRSSStartMiB float64 `json:"apiserver_rss_start_mib"`
	APIPeakMiB     float64 `json:"apiserver_peak_mib"`
	// The fleet's own process (the test binary): its CPU competes with the
	// API server's on this machine's cores.
	ClientCPU float64 `json:"client_cpu_s"`
	Conns     int     `json:"conns"` // established connections to the API server, the fleet's
	Dials     int64   `json:"dials"`
	Requests  int64   `json:"requests"`
	TooMany   int64   `json:"status_429"`
	ServerErr int64   `json:"status_5xx"`
	OtherErr  int64   `json:"status_other_4xx"`
	Failed    int64   `json:"failed"`
	Load      float64 `json:"loadavg"` // 1-minute, when the last proxy synced
	// Gzipped counts the responses that came compressed; WireMiB is what the
	// fleet read from its connections until fleetAfter past the last sync.
	Gzipped  int64   `json:"gzipped"`
	WireMiB  float64 `json:"wire_mib"`
	Finished string  `json:"finished"`
}

// fleetAfter is how long the CPU is still counted after the last sync: the
// watches the proxies start after their lists, and the API server's work
// that trails the responses (freeing, encoding caches).
const fleetAfter = 10 * time.Second

// resetPeakRSS makes VmHWM start again from the current RSS (clear_refs 5).
func resetPeakRSS(pid int) error {
	if err := os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0); err != nil {
		return fmt.Errorf("reset peak RSS of %d: %w", pid, err)
	}
	return nil
}

// selfCPU is the test process's user+system CPU seconds.
func selfCPU() float64 { return procCPUSeconds(os.Getpid()) }
