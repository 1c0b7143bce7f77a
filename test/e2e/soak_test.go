//go:build e2e

package e2e

import (
	"fmt"
	"math/rand"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"
)

// The chaos soak (issue 23, docs/soak.md): ~50 Services of every kind the
// suite supports under steady traffic from pods and from the outside, while
// seeded random faults hit the proxies, their kernel state and the control
// plane for SOAK_DURATION. The files, one job each:
//
//	soak_test.go            settings and the run's timeline
//	soak_workload_test.go   the pods and Services, and what is asked of them
//	soak_traffic_test.go    new connections, long-lived ones, the change probe
//	soak_faults_test.go     the fault schedule and the process/control-plane faults
//	soak_kernel_test.go     the faults on the proxy's nftables table
//	soak_expiry_test.go     the watch-expiry fault (410 Gone); the proxies' logs read
//	soak_observe_test.go    /healthz, RSS and goroutines sampled; logs scanned
//	soak_invariants_test.go what must hold, judged from the records
//	soak_report_test.go     the table, printed and written to docs/soak.md

// soakConfig is the run's settings, all from the environment so that a
// failed run is repeated with the seed it printed.
type soakConfig struct {
	duration time.Duration // SOAK_DURATION: the whole load, warm-up and cool-down included
	warmup   time.Duration // before the first fault: the reference for RSS and goroutines
	cooldown time.Duration // after the last fault: the end values
	seed     int64         // SOAK_SEED: the fault schedule (kinds, nodes, gaps, targets)
	rate     int           // SOAK_RATE: new connections a second from each caller
	long     int           // SOAK_LONGLIVED: long-lived connections per caller
	report   string        // SOAK_REPORT: the markdown file whose section this run rewrites
}

// command is the make command that repeats this run's faults, with the
// duration as given (hack/soak.sh takes a whole number of h, m or s).
func (cfg soakConfig) command(c *cluster) string {
	first := ""
	if v := os.Getenv("SOAK_FIRST"); v != "" {
		first = fmt.Sprintf("SOAK_FIRST=%q ", v)
	}
	return fmt.Sprintf("%sSOAK_SEED=%d SOAK_DURATION=%s PROXY=%s E2E_FAMILY=%s make soak", first, cfg.seed, os.Getenv("SOAK_DURATION"), c.proxyKind, c.family)
}

func soakSettings(t *testing.T) soakConfig {
	t.Helper()
	if os.Getenv("SOAK_DURATION") == "" {
		t.Skip("the soak runs with make soak (SOAK_DURATION set)")
	}
	cfg := soakConfig{
		duration: envDuration(t, "SOAK_DURATION", 15*time.Minute),
		seed:     time.Now().UnixNano() % 1_000_000,
		rate:     envInt(t, "SOAK_RATE", 40),
		long:     envInt(t, "SOAK_LONGLIVED", 2),
		report:   os.Getenv("SOAK_REPORT"),
	}
	if v := os.Getenv("SOAK_SEED"); v != "" {
		s, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			t.Fatalf("SOAK_SEED=%q: %v", v, err)
		}
		cfg.seed = s
	}
	// A tenth of the run, at least 30 s: the proxies have synced every
	// Service, served thousands of connections and their GC has settled,
	// so that "flat after warm-up" compares like with like.
	cfg.warmup = max(30*time.Second, cfg.duration/10)
	cfg.cooldown = max(20*time.Second, cfg.duration/30)
	if cfg.duration < cfg.warmup+cfg.cooldown+30*time.Second {
		t.Fatalf("SOAK_DURATION=%v leaves no time for faults (warm-up %v, cool-down %v)", cfg.duration, cfg.warmup, cfg.cooldown)
	}
	return cfg
}

// soak is one run: the cluster, what it serves, what was done to it and
// what was seen.
type soak struct {
	t   *testing.T
	c   *cluster
	cfg soakConfig
	rng *rand.Rand // the fault schedule only: the same seed gives the same faults

	w       *soakWorkload
	traffic *soakTraffic
	probe   *changeProbe
	health  map[string]*healthLog // node name ->
	res     *resourceSampler

	start, warmEnd, faultsEnd, end time.Time

	over     chan struct{}  // closed when the load ends: background repair watches stop
	repairWG sync.WaitGroup // those watches
	stopObs  func()

	mu     sync.Mutex
	faults []*faultRecord
	skips  []string // fault kinds that did not apply, with why
}

// TestSoak is the chaos soak. Skipped unless SOAK_DURATION is set (make
// soak). It fails, for svcproxy, when an invariant breaks; for kube-proxy
// it only reports (the anchor figures).
func TestSoak(t *testing.T) {
	r := track(t)
	cfg := soakSettings(t)
	c := theCluster
	s := &soak{t: t, c: c, cfg: cfg, rng: rand.New(rand.NewSource(cfg.seed)), over: make(chan struct{})}
	t.Logf("SOAK seed=%d duration=%v proxy=%s family=%s rate=%d/s per caller (reproduce: %s)",
		cfg.seed, cfg.duration, c.proxyKind, c.family, cfg.rate, cfg.command(c))

	if err := s.restartProxiesForSoak(); err != nil {
		t.Fatalf("start the proxies with %v: %v", soakProxyArgs, err)
	}
	s.w = setupSoakWorkload(t, c)
	s.observe()
	s.start = time.Now()
	s.traffic = startSoakTraffic(s.w, cfg.rate, cfg.long)
	defer s.traffic.finish()
	s.probe = startChangeProbe(s.w)
	defer s.probe.finish()

	time.Sleep(cfg.warmup)
	s.warmEnd = time.Now()
	s.runFaults(s.start.Add(cfg.duration - cfg.cooldown))
	s.faultsEnd = time.Now()
	time.Sleep(time.Until(s.start.Add(cfg.duration)))
	s.end = time.Now()

	// The load first: the probe may still wait up to 30 s for a change a
	// proxy never served, and requests made meanwhile would fall after
	// every fault's window (an unrepaired fault's window ends with the
	// run): violations that are the soak's, not the proxy's.
	s.traffic.finish()
	s.probe.finish()
	s.stopObserving()
	close(s.over)
	s.repairWG.Wait()

	rows := s.evaluate()
	s.report(r, rows)
	if c.proxyKind != "svcproxy" {
		return // anchor figures only
	}
	for _, row := range rows {
		if !row.ok {
			t.Errorf("invariant %q broken: %s", row.name, row.detail)
		}
	}
}
