//go:build e2e

package e2e

import (
	"fmt"
	"os"
	"strings"
	"time"
)

// report prints the run's summary and rewrites its section of
// cfg.report (docs/soak.md from make soak): one section per proxy and
// family, so that the svcproxy run and the kube-proxy anchor stand side
// by side and a new run replaces only its own.
func (s *soak) report(r *result, rows []invRow) {
	c := s.c
	var b strings.Builder
	tag := fmt.Sprintf("%s %s", c.proxyKind, c.family)
	fmt.Fprintf(&b, "<!-- soak: %s begin -->\n", tag)
	fmt.Fprintf(&b, "### %s, E2E_FAMILY=%s, %v, seed %d (%s)\n\n", c.proxyKind, c.family, s.cfg.duration, s.cfg.seed, s.start.UTC().Format("2006-01-02 15:04 UTC"))
	fmt.Fprintf(&b, "`%s`\n\n", s.cfg.command(c))
	s.traffic.mu.Lock()
	nreq, nbroken, nlong := len(s.traffic.reqs), len(s.traffic.broken), s.traffic.longOK
	s.traffic.mu.Unlock()
	load := fmt.Sprintf("%d stable Services + the probe + %d churn Services; %d callers (client pods on both workers, the outside) asking %d addresses round robin, %d new connections/s each; %d long-lived keep-alive connections per caller (%d lived, %d broke); %d requests in %v (warm-up %v, faults until %s, cool-down %v)",
		len(s.w.services), len(s.w.churn), len(s.w.callers), s.w.targetCount(), s.cfg.rate, s.cfg.long, nlong, nbroken, nreq,
		s.end.Sub(s.start).Round(time.Second), s.cfg.warmup, s.since(s.faultsEnd), s.cfg.cooldown)
	fmt.Fprintf(&b, "Load: %s.\n\n", load)
	fmt.Fprintf(&b, "| invariant | holds | measured | exceptions and violations |\n|---|---|---|---|\n")
	for _, row := range rows {
		verdict := "yes"
		if !row.ok {
			verdict = "**NO**"
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", row.name, verdict, row.value, cell(row.detail))
		r.metric(s.t, "soak_"+row.key, "%s (%s)", verdict, row.value)
	}
	fmt.Fprintf(&b, "\nFaults (%d):\n\n| at | fault | node | lasted | window | note |\n|---|---|---|---|---|---|\n", len(s.faults))
	ran := map[string]int{}
	for _, f := range s.faults {
		ran[f.kind]++
		note := f.note
		if f.err != nil {
			note += " ERROR: " + f.err.Error()
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %v | %v | %s |\n", s.since(f.start), f.kind, f.where(), f.end.Sub(f.start).Round(time.Millisecond),
			f.windowEnd(s.end).Sub(f.start).Round(time.Millisecond), cell(note))
	}
	var notRun []string
	for _, k := range faultKinds() {
		if ran[k.name] == 0 {
			notRun = append(notRun, k.name)
		}
	}
	if len(notRun) > 0 {
		fmt.Fprintf(&b, "\nNot run this time (no time left in the schedule, or skipped): %s.\n", strings.Join(notRun, ", "))
	}
	if len(s.skips) > 0 {
		fmt.Fprintf(&b, "\nSkipped for this proxy: %s.\n", strings.Join(s.skips, "; "))
	}
	fmt.Fprintf(&b, "<!-- soak: %s end -->\n", tag)
	section := b.String()
	fmt.Println(section)
	if s.cfg.report != "" {
		if err := replaceSection(s.cfg.report, tag, section); err != nil {
			s.t.Errorf("write %s: %v", s.cfg.report, err)
		}
	}
}

// cell makes text fit a markdown table cell.
func cell(s string) string {
	s = strings.ReplaceAll(s, "|", "\\|")
	return strings.ReplaceAll(s, "\n", " ")
}

// replaceSection puts section in place of the file's section with the
// same tag, or at its end.
func replaceSection(path, tag, section string) error {
	b, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		return err
	}
	text := string(b)
	begin, end := fmt.Sprintf("<!-- soak: %s begin -->", tag), fmt.Sprintf("<!-- soak: %s end -->\n", tag)
	if i := strings.Index(text, begin); i >= 0 {
		if j := strings.Index(text[i:], end); j >= 0 {
			text = text[:i] + section + text[i+j+len(end):]
			return os.WriteFile(path, []byte(text), 0o644)
		}
	}
	if text != "" && !strings.HasSuffix(text, "\n\n") {
		text += "\n"
	}
	return os.WriteFile(path, []byte(text+section), 0o644)
}
