package proxy

import (
	"bufio"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/svcproxy/svcproxy/pkg/endpoints"
)

// kubeProxyMetric is one line of testdata/kubeproxy-metrics.txt.
type kubeProxyMetric struct {
	name, typ, help string
	labels          []string
	buckets         []float64
}

func readKubeProxyMetrics(t *testing.T) map[string]kubeProxyMetric {
	t.Helper()
	f, err := os.Open("testdata/kubeproxy-metrics.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string]kubeProxyMetric{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		f := strings.Split(line, "|")
		for i := range f {
			f[i] = strings.TrimSpace(f[i])
		}
		if len(f) != 6 {
			t.Fatalf("bad line %q", line)
		}
		m := kubeProxyMetric{name: f[0], typ: f[1], help: f[4], buckets: parseBuckets(t, f[3])}
		if f[2] != "" {
			m.labels = strings.Split(f[2], ",")
		}
		out[m.name] = m
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// parseBuckets reads "0,linear(0.25,0.25,2),exponential(0.001,2,15)".
func parseBuckets(t *testing.T, s string) []float64 {
	t.Helper()
	var out []float64
	for s = strings.TrimSpace(s); s != ""; {
		var part string
		if i := strings.IndexByte(s, ')'); i >= 0 && s[0] >= 'a' && s[0] <= 'z' {
			part, s = s[:i+1], strings.TrimPrefix(s[i+1:], ",")
		} else {
			part, s, _ = strings.Cut(s, ",")
		}
		fn, args, ok := strings.Cut(strings.TrimSuffix(part, ")"), "(")
		if !ok {
			v, err := strconv.ParseFloat(part, 64)
			if err != nil {
				t.Fatalf("bucket %q: %v", part, err)
			}
			out = append(out, v)
			continue
		}
		var a [3]float64
		for i, x := range strings.Split(args, ",") {
			v, err := strconv.ParseFloat(x, 64)
			if err != nil || i > 2 {
				t.Fatalf("buckets %q: %v", part, err)
			}
			a[i] = v
		}
		switch fn {
		case "linear":
			out = append(out, prometheus.LinearBuckets(a[0], a[1], int(a[2]))...)
		case "exponential":
			out = append(out, prometheus.ExponentialBuckets(a[0], a[1], int(a[2]))...)
		default:
			t.Fatalf("unknown bucket function %q", fn)
		}
	}
	return out
}

// TestMetricsMatchKubeProxy checks that every metric kube-proxy's nftables mode
// exposes is exposed here with the same name, type, help, labels and buckets, and
// that no kubeproxy_* metric is exposed that kube-proxy does not have.
func TestMetricsMatchKubeProxy(t *testing.T) {
	want := readKubeProxyMetrics(t)
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg)
	// Vectors without a child are not gathered: give the status-code ones one.
	m.HealthzTotal.WithLabelValues("200")
	m.LivezTotal.WithLabelValues("200")
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]*dto.MetricFamily{}
	for _, f := range families {
		got[f.GetName()] = f
	}
	for name, w := range want {
		f, ok := got[name]
		if !ok {
			t.Errorf("%s: not exposed", name)
			continue
		}
		if typ := strings.ToLower(f.GetType().String()); typ != w.typ {
			t.Errorf("%s: type %s, want %s", name, typ, w.typ)
		}
		if f.GetHelp() != w.help {
			t.Errorf("%s: help %q, want %q", name, f.GetHelp(), w.help)
		}
		for _, s := range f.GetMetric() {
			var labels []string
			for _, l := range s.GetLabel() {
				labels = append(labels, l.GetName())
				if l.GetName() == "ip_family" && l.GetValue() != "IPv4" {
					t.Errorf("%s: ip_family=%q, want IPv4", name, l.GetValue())
				}
			}
			slices.Sort(labels)
			wl := slices.Sorted(slices.Values(w.labels))
			if !slices.Equal(labels, wl) {
				t.Errorf("%s: labels %v, want %v", name, labels, wl)
			}
			if h := s.GetHistogram(); h != nil {
				var bs []float64
				for _, b := range h.GetBucket() {
					bs = append(bs, b.GetUpperBound())
				}
				if !slices.Equal(bs, w.buckets) {
					t.Errorf("%s: buckets %v, want %v", name, bs, w.buckets)
				}
			}
		}
	}
	for name := range got {
		if _, ok := want[name]; strings.HasPrefix(name, "kubeproxy_") && !ok {
			t.Errorf("%s: exposed under kube-proxy's prefix but kube-proxy has no such metric", name)
		}
	}
}

// TestMetricsPerFamily: each ip_family-labelled field of a family's view updates the
// child of its own metric with its own family, and the views share one registry.
func TestMetricsPerFamily(t *testing.T) {
	reg := prometheus.NewRegistry()
	m4 := NewMetrics(reg)
	m6 := m4.ForFamily(endpoints.IPv6)
	fields := map[string]func(m *Metrics, v float64){
		"kubeproxy_sync_proxy_rules_duration_seconds":                func(m *Metrics, v float64) { m.SyncDuration.Observe(v) },
		"kubeproxy_sync_full_proxy_rules_duration_seconds":           func(m *Metrics, v float64) { m.FullSyncDuration.Observe(v) },
		"kubeproxy_sync_partial_proxy_rules_duration_seconds":        func(m *Metrics, v float64) { m.PartialSyncDuration.Observe(v) },
		"kubeproxy_network_programming_duration_seconds":             func(m *Metrics, v float64) { m.ProgrammingLatency.Observe(v) },
		"kubeproxy_conntrack_reconciler_sync_duration_seconds":       func(m *Metrics, v float64) { m.ConntrackSyncDuration.Observe(v) },
		"kubeproxy_sync_proxy_rules_last_timestamp_seconds":          func(m *Metrics, v float64) { m.LastSync.Set(v) },
		"kubeproxy_sync_proxy_rules_last_queued_timestamp_seconds":   func(m *Metrics, v float64) { m.LastQueued.Set(v) },
		"kubeproxy_sync_proxy_rules_nftables_sync_failures_total":    func(m *Metrics, v float64) { m.SyncFailures.Add(v) },
		"kubeproxy_sync_proxy_rules_nftables_cleanup_failures_total": func(m *Metrics, v float64) { m.CleanupFailures.Add(v) },
		"kubeproxy_conntrack_reconciler_deleted_entries_total":       func(m *Metrics, v float64) { m.ConntrackDeletedEntries.Add(v) },
		"kubeproxy_sync_proxy_rules_no_local_endpoints_total":        func(m *Metrics, v float64) { m.NoLocalEndpointsInternal.Set(v) },
	}
	// A distinct value per metric and family: a field wired to another metric's
	// child shows as a wrong value there.
	value := map[string]float64{}
	i := 1.0
	for name, set := range fields {
		value[name+"/IPv4"], value[name+"/IPv6"] = i, i+0.5
		set(m4, i)
		set(m6, i+0.5)
		i++
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	for _, mf := range mfs {
		if fields[mf.GetName()] == nil {
			continue
		}
		for _, m := range mf.GetMetric() {
			family := ""
			for _, l := range m.GetLabel() {
				if l.GetName() == "ip_family" {
					family = l.GetValue()
				}
			}
			var got float64
			switch {
			case m.Histogram != nil:
				got = m.Histogram.GetSampleSum()
			case m.Gauge != nil:
				got = m.Gauge.GetValue()
			case m.Counter != nil:
				got = m.Counter.GetValue()
			}
			if want := value[mf.GetName()+"/"+family]; got != want && got != 0 {
				t.Errorf("%s{ip_family=%q} = %v, want %v", mf.GetName(), family, got, want)
			}
			if got != 0 {
				seen++
			}
		}
	}
	if seen != 2*len(fields) {
		t.Errorf("%d labelled children set, want %d (one per metric and family)", seen, 2*len(fields))
	}
}

// The benchmark replaces the programming latency observer to keep every sample;
// Proxy.New's ForFamily must not put the histogram back (it did, and the churn
// benchmark saw none of its changes committed).
func TestForFamilyKeepsAViewOfThatFamily(t *testing.T) {
	var seen []float64
	m := NewMetrics(nil)
	m.ProgrammingLatency = observerFunc(func(v float64) { seen = append(seen, v) })
	m.ForFamily(endpoints.IPv4).ProgrammingLatency.Observe(1)
	m6 := m.ForFamily(endpoints.IPv6)
	m6.ProgrammingLatency.Observe(2)
	m6.ForFamily(endpoints.IPv4).ProgrammingLatency.Observe(3)
	if !slices.Equal(seen, []float64{1}) {
		t.Errorf("own observer saw %v, want [1]: only the IPv4 view keeps it", seen)
	}
}

type observerFunc func(float64)

func (f observerFunc) Observe(v float64) { f(v) }
