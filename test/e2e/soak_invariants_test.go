//go:build e2e

package e2e

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"
)

// invRow is one invariant's verdict, as the report prints it.
type invRow struct {
	key    string // the results' metric name
	name   string
	ok     bool
	value  string // the measured figure
	detail string // every exception and violation, named
}

// healthTimeout is the proxies' /healthz timeout with the harness's flags:
// 2 x --sync-period (30 s), kube-proxy's rule, which svcproxy keeps.
const healthTimeout = 60 * time.Second

func (s *soak) evaluate() []invRow {
	s.mu.Lock()
	defer s.mu.Unlock()
	tooOldHits := s.logHits(tooOld)
	s.noteExpired(tooOldHits, s.logHits(forbiddenWatch))
	return []invRow{
		s.checkConnections(),
		s.checkLongLived(),
		s.checkChanges(),
		s.checkFlat("rss", "RSS flat after warm-up (end <= 1.2x)", "MiB", func(r resSample) float64 { return float64(r.rssKiB) / 1024 }),
		s.checkFlat("goroutines", "goroutines flat after warm-up (end <= 1.2x)", "", func(r resSample) float64 { return r.goroutines }),
		s.checkPanics(),
		s.checkHealth(),
		s.checkRepaired(),
		s.checkExpiry(tooOldHits, s.logHits(populated)),
		s.checkSticky(),
	}
}

// onPath says whether fault f can touch a request of caller cl to tg: a
// fault of the control plane or the cluster's objects touches everything,
// a node's fault the requests that enter by that node (the client pod's,
// or the node outside traffic is routed to) and, since every Service has
// endpoints on both workers, everything when the node is a worker.
func onPath(f *faultRecord, cl *soakCaller, tg soakTarget) bool {
	n := f.node
	return n == nil || n.worker || n == cl.node || n == tg.via
}

// faultAt returns the fault whose window holds t and that is on the
// request's path, preferring a disruptive one (nil: none).
func (s *soak) faultAt(t time.Time, cl *soakCaller, tg soakTarget) *faultRecord {
	var found *faultRecord
	for _, f := range s.faults {
		if t.Before(f.start.Add(-100*time.Millisecond)) || t.After(f.windowEnd(s.end)) || !onPath(f, cl, tg) {
			continue
		}
		if found == nil || (f.disruptive && !found.disruptive) {
			found = f
		}
	}
	return found
}

func (s *soak) since(t time.Time) string {
	return fmt.Sprintf("+%.1fs", t.Sub(s.start).Seconds())
}

func (s *soak) faultName(f *faultRecord) string {
	return fmt.Sprintf("%s on %s at %s", f.kind, f.where(), s.since(f.start))
}

// failureSplit sorts failures into named exceptions (inside a disruptive
// fault's window: the fault took rules out of the kernel) and violations
// (anything else), each described.
type failureSplit struct {
	exceptions map[*faultRecord][]string
	violations []string
}

func (fs *failureSplit) add(s *soak, at time.Time, cl *soakCaller, tg soakTarget, what string) {
	f := s.faultAt(at, cl, tg)
	switch {
	case f != nil && f.disruptive:
		fs.exceptions[f] = append(fs.exceptions[f], what)
	case f != nil:
		fs.violations = append(fs.violations, what+" [during "+s.faultName(f)+"]")
	default:
		fs.violations = append(fs.violations, what+" [outside every fault]")
	}
}

func (fs *failureSplit) describe(s *soak) (exc int, detail string) {
	var parts []string
	for _, f := range s.faults {
		if l := fs.exceptions[f]; len(l) > 0 {
			exc += len(l)
			cause := f.cause
			if cause == "" {
				cause = "the kernel lost rules"
			}
			parts = append(parts, fmt.Sprintf("%d during %s (%s; %s), first: %s", len(l), s.faultName(f), f.note, cause, l[0]))
		}
	}
	if len(fs.violations) > 0 {
		shown := fs.violations[:min(10, len(fs.violations))]
		parts = append(parts, fmt.Sprintf("VIOLATIONS (%d): %s", len(fs.violations), strings.Join(shown, "; ")))
	}
	return exc, strings.Join(parts, "<br>")
}

func (s *soak) checkConnections() invRow {
	tr := s.traffic
	tr.mu.Lock()
	defer tr.mu.Unlock()
	fs := &failureSplit{exceptions: map[*faultRecord][]string{}}
	failed := 0
	for _, r := range tr.reqs {
		if r.err == nil {
			continue
		}
		failed++
		fs.add(s, r.start, r.caller, r.tg, fmt.Sprintf("%s %s -> %s %s: %v", s.since(r.start), r.caller.name, r.tg.svc, r.tg.addr(), r.err))
	}
	exc, detail := fs.describe(s)
	return invRow{
		key:    "failed_connections",
		name:   "0 failed connections to unchanged Services",
		ok:     len(fs.violations) == 0,
		value:  fmt.Sprintf("%d of %d failed: %d named exceptions, %d violations", failed, len(tr.reqs), exc, len(fs.violations)),
		detail: detail,
	}
}

func (s *soak) checkLongLived() invRow {
	tr := s.traffic
	tr.mu.Lock()
	defer tr.mu.Unlock()
	fs := &failureSplit{exceptions: map[*faultRecord][]string{}}
	for _, b := range tr.broken {
		fs.add(s, b.broke, b.caller, b.tg, fmt.Sprintf("%s %s -> %s %s after %d requests: %v", s.since(b.broke), b.caller.name, b.tg.svc, b.tg.addr(), b.requests, b.err))
	}
	exc, detail := fs.describe(s)
	return invRow{
		key:    "longlived_broken",
		name:   "long-lived connections live",
		ok:     len(fs.violations) == 0,
		value:  fmt.Sprintf("%d lived to the end, %d broke: %d named exceptions, %d violations", tr.longOK, len(tr.broken), exc, len(fs.violations)),
		detail: detail,
	}
}

// checkChanges: the change probe's p99, leaving apart the samples taken
// while the measuring client's node could not learn of the change (its
// proxy down, partitioned or refused by the kernel) or no proxy could (the
// API server down: restarted, alone or in the watch-expiry fault; its
// /readyz plus one client timeout and a second).
func (s *soak) checkChanges() invRow {
	p := s.probe
	p.mu.Lock()
	defer p.mu.Unlock()
	var in []time.Duration
	var failed, slow []string
	type apartOf struct {
		n   int
		max time.Duration
	}
	apart := map[*faultRecord]*apartOf{}
	napart := 0
	changes := map[time.Time]bool{}
	for _, c := range p.samples {
		changes[c.at] = true
		took := c.took
		if c.err != nil {
			took = 30 * time.Second
		}
		var blocked *faultRecord
		for _, f := range s.faults {
			if f.blocksChanges && (f.node == nil || f.node == c.caller.node || f.dropsNew && f.node.worker) && c.at.Add(took).After(f.start) && c.at.Before(f.windowEnd(s.end)) {
				blocked = f
			}
			// The API server down (the watch-expiry fault on one node
			// restarts it too): every node's samples near it.
			if !f.apiDown.from.IsZero() && c.at.Add(took).After(f.apiDown.from) && c.at.Before(f.apiDown.to.Add(requestTimeout+time.Second)) {
				blocked = f
			}
		}
		if blocked != nil {
			a := apart[blocked]
			if a == nil {
				a = &apartOf{}
				apart[blocked] = a
			}
			a.n++
			a.max = max(a.max, took)
			napart++
			continue
		}
		in = append(in, took)
		if c.err != nil {
			failed = append(failed, fmt.Sprintf("%s %s from %s: %v", s.since(c.at), c.ip, c.caller.name, c.err))
			continue
		}
		if c.took > 2*time.Second {
			// Each judged sample over 2 s, with the fault (anywhere) whose
			// window it overlaps: the cause to look at first.
			why := "outside every fault"
			for _, f := range s.faults {
				if c.at.Add(c.took).After(f.start) && c.at.Before(f.windowEnd(s.end)) {
					why = "during " + s.faultName(f)
				}
			}
			slow = append(slow, fmt.Sprintf("%s %s from %s %v (%s)", s.since(c.at), c.ip, c.caller.name, c.took.Round(time.Millisecond), why))
		}
	}
	row := invRow{key: "change_latency", name: "every change served within 2 s p99 (traffic-measured)"}
	if len(in) == 0 {
		row.value = "no sample"
		return row
	}
	p99 := percentile(in, 0.99)
	row.ok = p99 <= 2*time.Second
	row.value = fmt.Sprintf("p50 %s ms, p99 %s ms, max %s ms over %d samples of %d changes (%d over 2 s; %d write rounds failed, %d samples apart)",
		ms(percentile(in, 0.5)), ms(p99), ms(maxDuration(in)), len(in), len(changes), len(slow)+len(failed), p.writeErrs, napart)
	var d []string
	if len(failed) > 0 {
		d = append(d, "not served within 30 s: "+strings.Join(failed, "; "))
	}
	if len(apart) > 0 {
		var l []string
		for _, f := range s.faults {
			if a := apart[f]; a != nil {
				l = append(l, fmt.Sprintf("%d during %s (max %v)", a.n, s.faultName(f), a.max.Round(time.Millisecond)))
			}
		}
		d = append(d, "apart (the client's proxy could not learn of it): "+strings.Join(l, "; "))
	}
	if len(slow) > 0 {
		d = append(d, "over 2 s: "+strings.Join(slow, "; "))
	}
	row.detail = strings.Join(d, "<br>")
	return row
}

// checkFlat compares, per node, the median of the samples of warm-up's
// last 20 s with the median of the last three samples (the cool-down,
// after every fault).
func (s *soak) checkFlat(key, name, unit string, val func(resSample) float64) invRow {
	s.res.mu.Lock()
	defer s.res.mu.Unlock()
	row := invRow{key: key, name: name, ok: true}
	var vals []string
	for _, n := range s.c.nodes {
		var warm, all []float64
		for _, r := range s.res.samples {
			if r.node != n.name || val(r) < 0 {
				continue
			}
			if !r.at.After(s.warmEnd) && r.at.After(s.warmEnd.Add(-20*time.Second)) {
				warm = append(warm, val(r))
			}
			all = append(all, val(r))
		}
		end := percentile(all[max(0, len(all)-3):], 0.5)
		w := percentile(warm, 0.5)
		vals = append(vals, fmt.Sprintf("%s %.0f -> %.0f%s", n.short, w, end, unit))
		if w == 0 || end > 1.2*w {
			row.ok = false
			row.detail += fmt.Sprintf("%s: warm-up %.1f, end %.1f (%d warm-up samples); ", n.short, w, end, len(warm))
		}
	}
	row.value = strings.Join(vals, ", ")
	return row
}

func (s *soak) checkPanics() invRow {
	p := s.panics()
	row := invRow{key: "panics", name: "no panic in any proxy log", ok: len(p) == 0, value: fmt.Sprintf("%d", len(p))}
	row.detail = strings.Join(p[:min(5, len(p))], "<br>")
	return row
}

// span is a stretch of time.
type span struct{ from, to time.Time }

func (a span) overlaps(b span) bool { return a.from.Before(b.to) && b.from.Before(a.to) }

// checkHealth compares each node's /healthz with what the kernel held:
// 503 is due within the timeout of a kernel-wrong window's start (if it
// lasts that long) and 200 once it is repaired; 503 is wrong while the
// kernel is right and the proxy is not restarting. Measured: how long
// /healthz disagreed with the kernel.
func (s *soak) checkHealth() invRow {
	row := invRow{key: "healthz", name: "/healthz 503 while the kernel is wrong, 200 otherwise", ok: true}
	var notes []string
	var wrongTotal, wrong503, right503 time.Duration
	for _, n := range s.c.nodes {
		h := s.health[n.name]
		h.mu.Lock()
		changes := slices.Clone(h.changes)
		h.mu.Unlock()
		var wrong, excused []span
		for _, f := range s.faults {
			if f.node != n {
				continue
			}
			if f.kernelWrong {
				e := f.repaired
				if e.IsZero() {
					e = s.end
				}
				wrong = append(wrong, span{f.start, e})
				excused = append(excused, span{f.start, e.Add(5 * time.Second)})
			}
			if f.restarts {
				excused = append(excused, span{f.start, f.end.Add(2 * time.Second)})
			}
		}
		// /healthz's intervals of 503 from the first answer on.
		var bad []span
		for i, ch := range changes {
			to := s.end
			if i+1 < len(changes) {
				to = changes[i+1].at
			}
			if ch.code == 503 && to.After(s.start) {
				bad = append(bad, span{ch.at, to})
			}
		}
		for _, w := range wrong {
			wrongTotal += w.to.Sub(w.from)
			var first time.Time
			for _, b := range bad {
				if b.overlaps(w) {
					from, to := maxTime(b.from, w.from), minTime(b.to, w.to)
					wrong503 += to.Sub(from)
					if first.IsZero() {
						first = from
					}
				}
			}
			if first.IsZero() {
				notes = append(notes, fmt.Sprintf("%s: kernel wrong %v from %s, no 503", n.short, w.to.Sub(w.from).Round(time.Millisecond), s.since(w.from)))
				if w.to.Sub(w.from) > healthTimeout+10*time.Second {
					row.ok = false
				}
			} else {
				notes = append(notes, fmt.Sprintf("%s: kernel wrong %v from %s, 503 after %v", n.short, w.to.Sub(w.from).Round(time.Millisecond), s.since(w.from), first.Sub(w.from).Round(time.Millisecond)))
			}
		}
		for _, b := range bad {
			ok := false
			for _, e := range excused {
				if b.overlaps(e) {
					ok = true
				}
			}
			if !ok && b.from.After(s.start) {
				right503 += b.to.Sub(b.from)
				row.ok = false
				notes = append(notes, fmt.Sprintf("%s: 503 for %v from %s while the kernel was right", n.short, b.to.Sub(b.from).Round(time.Millisecond), s.since(b.from)))
			}
		}
	}
	row.value = fmt.Sprintf("kernel wrong %v in all, 503 for %v of it; 503 while right %v", wrongTotal.Round(time.Millisecond), wrong503.Round(time.Millisecond), right503.Round(time.Millisecond))
	sort.Strings(notes)
	row.detail = strings.Join(notes, "; ")
	return row
}

// checkRepaired: every kernel fault the proxy could repair (its table
// deleted, a map flushed, a rule forged, the table back after a hold) was
// repaired by the proxy within repairWait. One it left is named, with
// whether the soak undid it (the forged rule) so that the schedule went
// on; for svcproxy it breaks the invariant, whatever the undo.
func (s *soak) checkRepaired() invRow {
	row := invRow{key: "kernel_repaired", name: "every kernel fault repaired by the proxy within 60 s", ok: true}
	var n, left int
	var notes []string
	for _, f := range s.faults {
		if !f.kernelWrong {
			continue
		}
		n++
		if f.unrepaired {
			left++
			row.ok = false
			notes = append(notes, fmt.Sprintf("%s: %s", s.faultName(f), f.note))
		}
	}
	row.value = fmt.Sprintf("%d of %d repaired by the proxy", n-left, n)
	row.detail = strings.Join(notes, "; ")
	return row
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// checkSticky reports (does not judge: the issue names no such invariant)
// ClientIP-affinity pairs of caller and address that were answered by more
// than one pod, and when the switch came.
func (s *soak) checkSticky() invRow {
	tr := s.traffic
	tr.mu.Lock()
	defer tr.mu.Unlock()
	type key struct{ caller, ip string }
	last := map[key]string{}
	var moves []string
	pairs := 0
	for _, r := range tr.reqs {
		if !r.tg.sticky || r.err != nil {
			continue
		}
		k := key{r.caller.name, r.tg.ip}
		prev, seen := last[k]
		if !seen {
			pairs++
		}
		if seen && prev != r.pod {
			why := "outside every fault"
			if f := s.faultAt(r.start, r.caller, r.tg); f != nil {
				why = s.faultName(f)
			}
			moves = append(moves, fmt.Sprintf("%s %s %s: %s -> %s (%s)", s.since(r.start), r.caller.name, r.tg.svc, prev, r.pod, why))
		}
		last[k] = r.pod
	}
	return invRow{key: "affinity_moves", name: "ClientIP affinity kept (reported only)", ok: true,
		value:  fmt.Sprintf("%d moves over %d caller/address pairs", len(moves), pairs),
		detail: strings.Join(moves[:min(10, len(moves))], "; ")}
}
