package main

import (
	"fmt"
	"io"
	"strings"
)

func ms(s float64) string  { return fmt.Sprintf("%.1f ms", s*1000) }
func us(s float64) string  { return fmt.Sprintf("%.0f µs", s*1e6) }
func sec(s float64) string { return fmt.Sprintf("%.2f s", s) }
func mib(m float64) string { return fmt.Sprintf("%.0f MiB", m) }

func printKernel(w io.Writer, shape string, ks []kernelRun) {
	if len(ks) == 0 {
		return
	}
	kind := ""
	if ks[0].Sticky {
		kind += ", ClientIP affinity"
	}
	if ks[0].External {
		kind += ", a third with a NodePort"
	}
	fmt.Fprintf(w, "| %s%s | cold full sync (CPU; of it in the kernel) | one endpoint replaced p50 / p99 (n) | one endpoint added | add one Service | resync, nothing committed | full table read | heap after sync | RSS after sync | peak RSS | load avg |\n", servicesColumn(shape), kind)
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|---|---|")
	for _, r := range bySizeDualLast(ks) {
		fmt.Fprintf(w, "| %s | %s (%s; %s) | %s / %s (%d) | %s | %s | %s | %s | %s | %s | %s | %.0f-%.0f |\n", servicesLabel(r), sec(r.ColdSecs), sec(r.ColdCPU), sec(r.ColdSys),
			ms(r.ChangeP50), ms(r.ChangeP99), r.Samples, ms(r.ScaleSecs), ms(r.AddSecs), ms(r.ResyncSecs), sec(r.FullRead),
			mib(r.HeapMiB), mib(r.RSSMiB), mib(r.PeakRSSMiB), r.LoadStart, r.LoadEnd)
	}
	fmt.Fprintln(w)
}

func printChurn(w io.Writer, ks []kernelRun) {
	var rows []string
	for _, r := range ks {
		if r.ChurnChanges == 0 {
			continue
		}
		rows = append(rows, fmt.Sprintf("| %d | %s | %d/s for %.0f s | %d | %s / %s / %s / %s | %d, %s / %s | %.1f s (%.0f%% of one core) |", r.Services, spacing(r),
			r.ChurnPerSecond, r.ChurnSeconds, r.ChurnChanges, ms(r.ChurnP50), ms(r.ChurnP90), ms(r.ChurnP99), ms(r.ChurnMax),
			r.ChurnSyncs, ms(r.ChurnSyncP50), ms(r.ChurnSyncMax), r.ChurnCPU, 100*r.ChurnCPU/r.ChurnSeconds))
	}
	writeTable(w, "| Services | sync spacing | endpoint changes (one Service each, spread over each second) | changes | programming latency p50 / p90 / p99 / max (trigger time to commit) | syncs, duration p50 / max | CPU used |", rows)
}

// spacing names a churn run's sync policy (proxy.Config.SpaceByCost).
func spacing(r kernelRun) string {
	if r.ChurnSpacing == "cost" {
		factor, floor := r.ChurnSpacingFactor, r.ChurnSpacingFloor
		if factor == 0 {
			factor, floor = 9, 0.020
		}
		return fmt.Sprintf("by cost (%dx, %.0f ms to %.0f s)", factor, 1000*floor, r.ChurnMinSync)
	}
	return fmt.Sprintf("fixed, %.0f s (kube-proxy's)", r.ChurnMinSync)
}

func printDataplane(w io.Writer, ks []kernelRun) {
	var rows []string
	for _, r := range ks {
		if r.Rounds == 0 {
			continue
		}
		rows = append(rows, fmt.Sprintf("| %d | %d x %d + %d | %s / %s | %s / %s | x%.2f / x%.2f |", r.Services, r.Rounds, r.PerRound, r.PerRound,
			us(r.ClusterIPP50), us(r.ClusterIPP99), us(r.DirectP50), us(r.DirectP99), r.RatioP50, r.RatioP99))
	}
	writeTable(w, "| Services | interleaved rounds x connections (ClusterIP + direct) | new connection through the ClusterIP p50 / p99 | straight to the pod p50 / p99 | ratio p50 / p99 |", rows)
}

func printSide(w io.Writer, shape string, ss []sideRun) {
	if len(ss) == 0 {
		return
	}
	fmt.Fprintln(w, "| "+servicesColumn(shape)+" | proxy | cold sync, start to every ClusterIP answering (CPU used) | one change, write to answer p50 / p99 / max (n); the write returned p50 | RSS after cold sync | peak RSS (VmHWM) | RSS / peak after the changes | load avg |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|")
	var notes []string
	for _, s := range ss {
		if s.Skipped != "" {
			notes = append(notes, fmt.Sprintf("%s at %d not run: %s", s.Proxy, s.Services, s.Skipped))
			continue
		}
		fmt.Fprintf(w, "| %d | %s | %s (%s) | %s / %s / %s (%d); %s | %s | %s | %s / %s | %.0f |\n", s.Services, s.Proxy, sec(s.ColdSecs), sec(s.ColdCPU),
			ms(s.ChangeP50), ms(s.ChangeP99), ms(s.ChangeMax), s.Changes, ms(s.WriteP50), mib(s.RSSMiB), mib(s.HWMMiB), mib(s.EndRSSMiB), mib(s.EndHWMMiB), s.Load)
	}
	fmt.Fprintln(w)
	for _, s := range bySize(ss, svcproxy) {
		k, ok := find(ss, kubeProxyN, s.Services)
		if !ok {
			continue
		}
		fmt.Fprintf(w, "- %d Services, svcproxy / kube-proxy: cold sync x%.2f (CPU x%.2f), one change p50 x%.2f, RSS after cold sync x%.2f, peak RSS x%.2f\n",
			s.Services, s.ColdSecs/k.ColdSecs, s.ColdCPU/k.ColdCPU, s.ChangeP50/k.ChangeP50, s.RSSMiB/k.RSSMiB, s.HWMMiB/k.HWMMiB)
	}
	for _, n := range notes {
		fmt.Fprintf(w, "- %s\n", n)
	}
	fmt.Fprintln(w)
}

// writeTable writes a Markdown table of header and rows (nothing when there are
// no rows), with the separator line made from the header's columns.
func writeTable(w io.Writer, header string, rows []string) {
	if len(rows) == 0 {
		return
	}
	fmt.Fprintln(w, header)
	fmt.Fprintln(w, "|"+strings.Repeat("---|", strings.Count(header, "|")-1))
	fmt.Fprintln(w, strings.Join(rows, "\n"))
	fmt.Fprintln(w)
}
