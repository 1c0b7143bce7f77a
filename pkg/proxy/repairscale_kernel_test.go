package proxy

import (
	"fmt"
	"os"
	"runtime/pprof"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/google/nftables"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"

	"github.com/svcproxy/svcproxy/internal/poll"
	"github.com/svcproxy/svcproxy/pkg/nft"
)

// scaleRepairLimit is how long, at SVCPROXY_REPAIR_SERVICES Services, a fault
// may leave the web Service broken when it comes right after a full read of the
// table (issue 23: "repair within 1 s of any foreign change"). A deleted table is
// not held to it: its repair rewrites every Service, a cold sync.
const scaleRepairLimit = time.Second

// scaleRepairServices is SVCPROXY_REPAIR_SERVICES; the test is skipped when it is
// unset or when not root.
func scaleRepairServices(t *testing.T) int {
	t.Helper()
	n, _ := strconv.Atoi(os.Getenv("SVCPROXY_REPAIR_SERVICES"))
	if n <= 0 {
		t.Skip("a measurement: set SVCPROXY_REPAIR_SERVICES=10000 to run it")
	}
	if os.Geteuid() != 0 {
		t.Skip("kernel test: needs root for network namespaces and nftables")
	}
	return n
}

// TestKernelRepairAfterReadAtScale measures, with traffic, the repair of a
// foreign change at SVCPROXY_REPAIR_SERVICES Services x 10 endpoints (a third
// NodePorts, every sixth with an external IP) plus the web Service, when the
// fault comes right after svcproxy read its whole table back (a resync after
// another program's commit): past the repair's rate limit (minRepairInterval),
// but inside ten times that read's duration, the window in which refreshView
// defers another full read. Each fault must be repaired within scaleRepairLimit,
// but the deleted table, which is only measured; after each, the kernel must hold
// the desired table. Skipped unless asked for:
//
//	SVCPROXY_REPAIR_SERVICES=10000 go test -count=1 -run 'TestKernelRepairAfterReadAtScale$' -v ./pkg/proxy/
func TestKernelRepairAfterReadAtScale(t *testing.T) {
	n := scaleRepairServices(t)
	e, m, p := scaleRepairEnv(t, n)
	// reads is how many full reads svcproxy made, and how long they took in all.
	reads := func() (uint64, time.Duration) {
		var d dto.Metric
		if err := m.KernelReadDuration.(prometheus.Metric).Write(&d); err != nil {
			t.Fatal(err)
		}
		h := d.GetHistogram()
		return h.GetSampleCount(), time.Duration(h.GetSampleSum() * float64(time.Second))
	}
	tb := &nftables.Table{Family: nftables.TableFamilyIPv4, Name: TableName}
	faults := []struct {
		repairFault
		limit time.Duration // 0: measured only
	}{
		{repairFault{"clusterip-map-flushed", func(t *testing.T, c *nftables.Conn) {
			c.FlushSet(&nftables.Set{Table: tb, Name: mapServiceIPs})
		}}, scaleRepairLimit},
		{repairFault{"services-rule-forged-accept", func(t *testing.T, c *nftables.Conn) { queueForgery(t, c, forgeries[1]) }}, scaleRepairLimit},
		{repairFault{"services-chain-flushed", func(t *testing.T, c *nftables.Conn) {
			c.FlushChain(&nftables.Chain{Table: tb, Name: chainServices})
		}}, scaleRepairLimit},
		{repairFault{"table-deleted", func(t *testing.T, c *nftables.Conn) { c.DelTable(tb) }}, 0},
	}
	probes := newProber(t, e)
	probes.giveUp = time.Minute // a deferred repair waits up to 10x a read
	var failures []string
	for _, f := range faults {
		// A full read: another program commits (to another table), and a resync
		// must read ours back to know it was not touched.
		n0, sum0 := reads()
		seen0 := testutil.ToFloat64(m.ForeignChanges)
		e.w.Node.MustRun(t, "nft", "add table ip other; delete table ip other")
		p.RequestRepair()
		poll.Eventually(t, time.Minute, f.name+": a full read", func() (bool, string) {
			n, _ := reads()
			return n > n0, fmt.Sprintf("%d reads", n)
		})
		readEnd := time.Now()
		n1, sum1 := reads()
		read := (sum1 - sum0) / time.Duration(n1-n0)
		// Past the repair's rate limit, inside the old read backoff (10x read).
		time.Sleep(repairQuiet)
		since := time.Since(readEnd)
		r := probes.fault(t, f.repairFault)
		poll.Eventually(t, time.Minute, f.name+": the kernel holds the desired table", func() (bool, string) {
			out, err := e.w.Node.Run("nft", "list", "table", "ip", TableName)
			if err != nil {
				return false, err.Error()
			}
			got, want := nft.NormalizeListing(out), p.Desired().Text()
			return got == want, fmt.Sprintf("listing of %d bytes, desired %d", len(got), len(want))
		})
		nAfter, _ := reads()
		seen := testutil.ToFloat64(m.ForeignChanges) - seen0
		t.Logf("repair-at-scale services=%d kind=%s restored_ms=%.1f failed_probes=%d flush_ms=%.1f fault_after_read_ms=%.1f read_ms=%.1f old_window_ms=%.1f full_reads_during_repair=%d foreign_changes=%.0f load=%s",
			n, f.name, ms(r.restored), r.failed, ms(r.flush), ms(since), ms(read), ms(10*read), nAfter-n1, seen, loadAverage())
		// A repair often lands before the first probe after the fault (see
		// TestKernelRepairTime); the fault must at least have been seen.
		if seen == 0 {
			failures = append(failures, fmt.Sprintf("%s: no foreign change was seen: the fault does not work", f.name))
		}
		if f.limit > 0 && r.restored > f.limit {
			failures = append(failures, fmt.Sprintf("%s: repaired in %v, %v after a read of %v, want at most %v", f.name, r.restored, since, read, f.limit))
		}
	}

	// What a program that rewrites the table in a loop costs: one repair per
	// minRepairInterval, each of what changed. The flushes run in nft processes,
	// whose CPU is not the test process's.
	const loop = 10 * time.Second
	n0, _ := reads()
	seen0 := testutil.ToFloat64(m.ForeignChanges)
	cpu0, start := processCPU(), time.Now()
	for time.Since(start) < loop {
		e.w.Node.MustRun(t, "nft", "flush map ip "+TableName+" "+mapServiceIPs)
		time.Sleep(100 * time.Millisecond)
	}
	cpu, wall := processCPU()-cpu0, time.Since(start)
	n1, _ := reads()
	t.Logf("repair-loop services=%d flushes_every_ms=100 wall_s=%.1f cpu_s=%.2f cpu_share=%.2f foreign_changes=%.0f full_reads=%d load=%s",
		n, wall.Seconds(), cpu.Seconds(), cpu.Seconds()/wall.Seconds(), testutil.ToFloat64(m.ForeignChanges)-seen0, n1-n0, loadAverage())
	poll.Eventually(t, time.Minute, "the Service after the loop", func() (bool, string) {
		body, err := e.client.Get("10.96.0.10:80", 500*time.Millisecond)
		return err == nil && body == "pod1", fmt.Sprintf("answer %q, %v", body, err)
	})
	for _, s := range failures {
		t.Error(s)
	}
}

// scaleRepairEnv is n scale Services (see TestKernelRepairAfterReadAtScale) and
// the web Service, programmed by a proxy that follows foreign changes, once the
// web Service answers.
func scaleRepairEnv(t *testing.T, n int) (*kenv, *Metrics, *Proxy) {
	t.Helper()
	e := newKenv(t)
	// From 256: scaleService(10) would take the web Service's 10.96.0.10.
	for i := 256; i < 256+n; i++ {
		e.tr.OnServiceAdd(scaleService(i, true))
		e.tr.OnEndpointSliceAdd(scaleSlice(i, 0))
	}
	addWeb(e.tr, "web", "10.96.0.10", "pod1")
	m := NewMetrics(nil)
	p := watchingProxy(t, e, m)
	poll.Eventually(t, 5*time.Minute, "the Service", func() (bool, string) {
		body, err := e.client.Get("10.96.0.10:80", 500*time.Millisecond)
		return err == nil && body == "pod1", fmt.Sprintf("answer %q, %v", body, err)
	})
	return e, m, p
}

// TestKernelTableDeletedRepairAtScale measures, with traffic, how long our table
// deleted by another program leaves the web Service broken at
// SVCPROXY_REPAIR_SERVICES Services (see TestKernelRepairAfterReadAtScale for
// their shape), SVCPROXY_REPAIR_TRIES times (20 unless set), each try spaced by
// more than the repair's rate limit; it fails when the p99 exceeds
// scaleRepairLimit. The web Service sorts after every other owner, so it is
// restored by the repair's last transaction: the time is that of the whole
// table's. With SVCPROXY_REPAIR_CPUPROFILE=FILE, a CPU profile of the process
// from each fault to its repair, in FILE.1, FILE.2, ... Skipped unless asked for:
//
//	SVCPROXY_REPAIR_SERVICES=10000 go test -count=1 -run 'TestKernelTableDeletedRepairAtScale$' -v ./pkg/proxy/
func TestKernelTableDeletedRepairAtScale(t *testing.T) {
	n := scaleRepairServices(t)
	tries, _ := strconv.Atoi(os.Getenv("SVCPROXY_REPAIR_TRIES"))
	if tries <= 0 {
		tries = 20
	}
	e, m, p := scaleRepairEnv(t, n)
	// profile profiles the process from a fault to the Service's repair, not
	// the test's checks after it (a listing of the whole table, compared as
	// text), into one file per try: go tool pprof reads them together.
	profile := func(try int) (stop func()) {
		path := os.Getenv("SVCPROXY_REPAIR_CPUPROFILE")
		if path == "" {
			return func() {}
		}
		f, err := os.Create(fmt.Sprintf("%s.%d", path, try))
		if err != nil {
			t.Fatal(err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			t.Fatal(err)
		}
		return func() { pprof.StopCPUProfile(); f.Close() }
	}
	tb := &nftables.Table{Family: nftables.TableFamilyIPv4, Name: TableName}
	fault := repairFault{"table-deleted", func(t *testing.T, c *nftables.Conn) { c.DelTable(tb) }}
	probes := newProber(t, e)
	var restored []time.Duration
	for i := range tries {
		time.Sleep(repairQuiet)
		seen0 := testutil.ToFloat64(m.ForeignChanges)
		cpu0 := processCPU()
		stop := profile(i + 1)
		r := probes.fault(t, fault)
		cpu := processCPU() - cpu0
		stop()
		poll.Eventually(t, time.Minute, "the kernel holds the desired table", func() (bool, string) {
			out, err := e.w.Node.Run("nft", "list", "table", "ip", TableName)
			if err != nil {
				return false, err.Error()
			}
			got, want := nft.NormalizeListing(out), p.Desired().Text()
			return got == want, fmt.Sprintf("listing of %d bytes, desired %d", len(got), len(want))
		})
		if testutil.ToFloat64(m.ForeignChanges) == seen0 {
			t.Fatalf("try %d: no foreign change was seen: the fault does not work", i+1)
		}
		restored = append(restored, r.restored)
		t.Logf("table-deleted-at-scale services=%d try=%d restored_ms=%.1f failed_probes=%d flush_ms=%.1f cpu_ms=%.1f load=%s",
			n, i+1, ms(r.restored), r.failed, ms(r.flush), ms(cpu), loadAverage())
	}
	slices.Sort(restored)
	p50, p99 := nearestRank(restored, 0.50), nearestRank(restored, 0.99)
	t.Logf("table-deleted-at-scale services=%d tries=%d p50_ms=%.1f p99_ms=%.1f max_ms=%.1f load=%s",
		n, tries, ms(p50), ms(p99), ms(restored[len(restored)-1]), loadAverage())
	if p99 > scaleRepairLimit {
		t.Errorf("a deleted table was repaired in %v at p99 over %d tries, want at most %v", p99, tries, scaleRepairLimit)
	}
}
