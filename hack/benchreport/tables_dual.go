package main

import (
	"cmp"
	"fmt"
	"io"
	"slices"
)

// dualFields are what hack/bench -family dual adds to a line; its other fields
// mean what an IPv4 run's do, over both families (see hack/bench/dual.go).
type dualFields struct {
	Family        string  `json:"family"` // "dual"; empty for an IPv4 run
	Cold4Secs     float64 `json:"cold_sync_ipv4_s"`
	Cold6Secs     float64 `json:"cold_sync_ipv6_s"`
	DualChangeP50 float64 `json:"dual_change_p50_s"`
	DualChangeP99 float64 `json:"dual_change_p99_s"`
	Resync4Secs   float64 `json:"resync_ipv4_s"`
	Resync6Secs   float64 `json:"resync_ipv6_s"`
	Read4Secs     float64 `json:"full_read_ipv4_s"`
	Read6Secs     float64 `json:"full_read_ipv6_s"`
	Checked       int     `json:"dataplane_checked_services"`
	CheckSecs     float64 `json:"dataplane_check_s"`
}

func (r kernelRun) dual() bool { return r.Family == "dual" }

// servicesLabel is the first column of the kernel table.
func servicesLabel(r kernelRun) string {
	if r.dual() {
		return fmt.Sprintf("%d dual-stack", r.Services)
	}
	return fmt.Sprint(r.Services)
}

// bySizeDualLast orders runs by size, a dual-stack run after the IPv4 run of its
// size, so the two read side by side; otherwise in file order.
func bySizeDualLast(ks []kernelRun) []kernelRun {
	out := slices.Clone(ks)
	slices.SortStableFunc(out, func(a, b kernelRun) int { return cmp.Compare(a.Services, b.Services) })
	return out
}

// singleStack are the IPv4 runs: the plots' curves are one family's.
func singleStack(ks []kernelRun) []kernelRun {
	var out []kernelRun
	for _, r := range ks {
		if !r.dual() {
			out = append(out, r)
		}
	}
	return out
}

// printDual is the dual-stack runs' own table: each family's cold sync, a change
// in one family and in both, the data-plane check.
func printDual(w io.Writer, ks []kernelRun) {
	var rows []string
	for _, r := range ks {
		if !r.dual() {
			continue
		}
		rows = append(rows, fmt.Sprintf("| %d | %s (IPv4 %s, IPv6 %s) | %s / %s (%d) | %s / %s (%d) | %s / %s | %s / %s | %d Services x 2 ClusterIPs in %s |", r.Services,
			sec(r.ColdSecs), sec(r.Cold4Secs), sec(r.Cold6Secs), ms(r.ChangeP50), ms(r.ChangeP99), r.Samples,
			ms(r.DualChangeP50), ms(r.DualChangeP99), r.Samples, sec(r.Resync4Secs), sec(r.Resync6Secs),
			sec(r.Read4Secs), sec(r.Read6Secs), r.Checked, sec(r.CheckSecs)))
	}
	writeTable(w, "| dual-stack Services x10 eps per family | cold sync, both tables (each family's sync returned) | one IPv6 endpoint replaced p50 / p99 (n) | one endpoint replaced in both families p50 / p99 (n) | resync IPv4 / IPv6 (after the other family's commits) | full table read IPv4 / IPv6 | every ClusterIP answered from its own family's endpoints |", rows)
}
