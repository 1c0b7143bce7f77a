package main

// kernelRun is one line of hack/bench (the fields the report uses).
type kernelRun struct {
	Services   int     `json:"services"`
	Shape      string  `json:"shape"` // empty: the default shape
	Sticky     bool    `json:"sticky"`
	External   bool    `json:"external"`
	ColdSecs   float64 `json:"cold_sync_s"`
	ColdCPU    float64 `json:"cold_sync_cpu_s"`
	ColdSys    float64 `json:"cold_sync_sys_s"` // of ColdCPU, in the kernel; 0 before 2026-12-07
	LoadStart  float64 `json:"loadavg_start"`
	LoadEnd    float64 `json:"loadavg_end"`
	ChangeP50  float64 `json:"endpoint_change_p50_s"`
	ChangeP99  float64 `json:"endpoint_change_p99_s"`
	Samples    int     `json:"change_samples"`
	AddSecs    float64 `json:"add_service_s"`
	ScaleSecs  float64 `json:"endpoint_added_s"`
	ResyncSecs float64 `json:"resync_s"`
	FullRead   float64 `json:"resync_full_read_s"`
	RSSMiB     float64 `json:"rss_mib"`
	PeakRSSMiB float64 `json:"peak_rss_mib"`
	HeapMiB    float64 `json:"heap_after_gc_mib"`
	dualFields         // -family dual's

	ChurnSeconds   float64 `json:"churn_s"`
	ChurnPerSecond int     `json:"churn_services_per_s"`
	ChurnChanges   int     `json:"churn_changes"`
	ChurnP50       float64 `json:"churn_latency_p50_s"`
	ChurnP99       float64 `json:"churn_latency_p99_s"`
	ChurnMax       float64 `json:"churn_latency_max_s"`
	ChurnCPU       float64 `json:"churn_cpu_s"`
	ChurnMinSync   float64 `json:"churn_min_sync_period_s"`
	ChurnSpacing   string  `json:"churn_sync_spacing"` // "cost" or "fixed"; "" before it was recorded: fixed
	// The "cost" policy's factor and floor; absent before 2026-12-04: 9 and 20 ms.
	ChurnSpacingFactor int     `json:"churn_spacing_factor"`
	ChurnSpacingFloor  float64 `json:"churn_spacing_floor_s"`
	ChurnP90           float64 `json:"churn_latency_p90_s"`
	ChurnSyncs         int     `json:"churn_syncs"`
	ChurnSyncP50       float64 `json:"churn_sync_p50_s"`
	ChurnSyncMax       float64 `json:"churn_sync_max_s"`

	Rounds       int     `json:"dataplane_rounds"`
	PerRound     int     `json:"dataplane_connections_per_round"`
	ClusterIPP50 float64 `json:"connect_clusterip_p50_s"`
	ClusterIPP99 float64 `json:"connect_clusterip_p99_s"`
	DirectP50    float64 `json:"connect_direct_p50_s"`
	DirectP99    float64 `json:"connect_direct_p99_s"`
	RatioP50     float64 `json:"connect_ratio_p50"`
	RatioP99     float64 `json:"connect_ratio_p99"`
}

// sideRun is one line of test/e2e's TestBenchSideBySide.
type sideRun struct {
	Proxy     string  `json:"proxy"`
	Services  int     `json:"services"`
	Shape     string  `json:"shape"` // empty: the default shape
	ColdSecs  float64 `json:"cold_sync_s"`
	ColdCPU   float64 `json:"cold_sync_cpu_s"`
	Load      float64 `json:"loadavg"`
	ChangeP50 float64 `json:"change_p50_s"`
	ChangeP99 float64 `json:"change_p99_s"`
	ChangeMax float64 `json:"change_max_s"`
	WriteP50  float64 `json:"write_p50_s"` // the Update's own return, part of every change
	Changes   int     `json:"changes"`
	RSSMiB    float64 `json:"rss_mib"`
	HWMMiB    float64 `json:"hwm_mib"`
	EndRSSMiB float64 `json:"rss_end_mib"`
	EndHWMMiB float64 `json:"hwm_end_mib"`
	Skipped   string  `json:"skipped"`
}

const (
	svcproxy   = "svcproxy"
	kubeProxyN = "kube-proxy-nftables"
)

// bySize returns the measured side-by-side runs of proxy, in file order.
func bySize(ss []sideRun, proxy string) []sideRun {
	var out []sideRun
	for _, s := range ss {
		if s.Proxy == proxy && s.Skipped == "" {
			out = append(out, s)
		}
	}
	return out
}

// find returns proxy's measured run at n Services.
func find(ss []sideRun, proxy string, n int) (sideRun, bool) {
	for _, s := range bySize(ss, proxy) {
		if s.Services == n {
			return s, true
		}
	}
	return sideRun{}, false
}
