//go:build e2e

package e2e

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/svcproxy/svcproxy/internal/netns"
)

// The faults on the proxy's own nftables table, in one node's namespace
// only: the table deleted, a map flushed, a rule forged, the table taken
// by another program. Each is a window in which the kernel is known wrong,
// from the fault until the table is seen right again (polled every 100 ms);
// the proxy's repair time is that window's length.

func (s *soak) proxyTable() string {
	if s.c.proxyKind == "kube-proxy-nftables" {
		return "kube-proxy"
	}
	return "svcproxy"
}

func needsNftTable(s *soak) string {
	if s.c.proxyKind == "kube-proxy-iptables" {
		return "iptables mode has no nftables table of its own"
	}
	return ""
}

// pickFamily is one of the cluster's nft families, chosen by the seed.
func (s *soak) pickFamily() string {
	fams := s.c.family.pick("ip", "ip6")
	return fams[s.rng.Intn(len(fams))]
}

func (s *soak) listTable(n *node, fam string) (string, error) {
	return netns.Exec(n.netns, "nft", "list", "table", fam, s.proxyTable())
}

func lineCount(text string) int { return strings.Count(text, "\n") }

// repairWait is how long the schedule waits for the proxy's repair of a
// kernel fault before going on (and undoing the fault itself if it can).
const repairWait = time.Minute

// awaitRepair marks f as a kernel-wrong window and polls ok until it
// holds, up to repairWait here and then in the background until the run
// ends (a proxy that never repairs keeps the window open). If the proxy
// has not repaired it by then and undo is given, the soak undoes the
// fault itself (kube-proxy never removes a rule forged in its table), so
// that the window closes and the rest of the schedule runs on a right
// kernel; f.unrepaired records it either way (an invariant of its own).
func (s *soak) awaitRepair(f *faultRecord, ok func() bool, undo func() error) {
	f.kernelWrong, f.disruptive = true, true
	done := make(chan struct{})
	s.repairWG.Add(1)
	go func() {
		defer s.repairWG.Done()
		defer close(done)
		for {
			if ok() {
				s.mu.Lock()
				f.repaired = time.Now()
				s.mu.Unlock()
				return
			}
			select {
			case <-s.over:
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	select {
	case <-done:
		s.mu.Lock()
		f.note = strings.TrimSpace(fmt.Sprintf("%s repaired after %v", f.note, f.repaired.Sub(f.start).Round(time.Millisecond)))
		s.mu.Unlock()
	case <-time.After(repairWait):
		s.mu.Lock()
		f.unrepaired = true
		s.mu.Unlock()
		if undo == nil {
			f.note = strings.TrimSpace(f.note + " not repaired within 60 s (watched until the run ends)")
			return
		}
		if err := undo(); err != nil {
			f.note = strings.TrimSpace(f.note + " not repaired within 60 s; the soak's undo failed: " + err.Error() + " (watched until the run ends)")
			return
		}
		select {
		case <-done:
			f.note = strings.TrimSpace(fmt.Sprintf("%s not repaired within 60 s: undone by the soak after %v", f.note, f.repaired.Sub(f.start).Round(time.Millisecond)))
		case <-time.After(5 * time.Second):
			f.note = strings.TrimSpace(f.note + " not repaired within 60 s; undone by the soak but not seen right 5 s later (watched until the run ends)")
		}
	}
}

// wholeAgain: the table lists again with at least 90% of the lines it had
// (the churn Services change its size a little).
func (s *soak) wholeAgain(n *node, fam string, before int) func() bool {
	return func() bool {
		out, err := s.listTable(n, fam)
		return err == nil && !strings.Contains(out, "flags owner") && lineCount(out)*10 >= before*9
	}
}

func (s *soak) deleteTable(f *faultRecord) {
	fam := s.pickFamily()
	before, err := s.listTable(f.node, fam)
	if err != nil {
		f.err = err
		return
	}
	if out, err := netns.Exec(f.node.netns, "nft", "delete", "table", fam, s.proxyTable()); err != nil {
		f.err = fmt.Errorf("%v: %s", err, out)
		return
	}
	f.note = fam
	f.end = time.Now()
	s.awaitRepair(f, s.wholeAgain(f.node, fam, lineCount(before)), nil)
}

// mapsWithElements lists the maps of an `nft list table` text that hold
// elements, sorted.
func mapsWithElements(text string) []string {
	var cur string
	var out []string
	for _, l := range strings.Split(text, "\n") {
		t := strings.TrimSpace(l)
		switch {
		case strings.HasPrefix(t, "map ") && strings.HasSuffix(t, "{"):
			cur = strings.Fields(t)[1]
		case strings.HasPrefix(t, "set ") || strings.HasPrefix(t, "chain "):
			cur = ""
		case cur != "" && strings.HasPrefix(t, "elements = {") && !slices.Contains(out, cur):
			out = append(out, cur)
		}
	}
	slices.Sort(out)
	return out
}

func (s *soak) flushMap(f *faultRecord) {
	fam := s.pickFamily()
	text, err := s.listTable(f.node, fam)
	if err != nil {
		f.err = err
		return
	}
	maps := mapsWithElements(text)
	if len(maps) == 0 {
		f.err = fmt.Errorf("no map with elements in %s %s", fam, s.proxyTable())
		return
	}
	m := maps[s.rng.Intn(len(maps))]
	if out, err := netns.Exec(f.node.netns, "nft", "flush", "map", fam, s.proxyTable(), m); err != nil {
		f.err = fmt.Errorf("%v: %s", err, out)
		return
	}
	f.note = fam + " map " + m
	f.end = time.Now()
	s.awaitRepair(f, func() bool {
		out, err := s.listTable(f.node, fam)
		return err == nil && slices.Contains(mapsWithElements(out), m)
	}, nil)
}

// baseChains lists the chains of an `nft list table` text that hook into
// the kernel, with their hook.
func baseChains(text string) map[string]string {
	out := map[string]string{}
	var cur string
	for _, l := range strings.Split(text, "\n") {
		t := strings.TrimSpace(l)
		if strings.HasPrefix(t, "chain ") {
			cur = strings.Fields(t)[1]
			continue
		}
		if cur != "" && strings.HasPrefix(t, "type ") {
			f := strings.Fields(t)
			for i := range f {
				if f[i] == "hook" && i+1 < len(f) {
					out[cur] = f[i+1]
				}
			}
		}
		cur = ""
	}
	return out
}

const forgedComment = "soak-forged"

// forgeRule inserts, first in the table's prerouting base chain (where a
// pod's connection to a ClusterIP is decided), a rule that drops one
// stable Service's ClusterIP: a foreign rule in our table, which the
// proxy must notice and remove.
func (s *soak) forgeRule(f *faultRecord) {
	fam := s.pickFamily()
	text, err := s.listTable(f.node, fam)
	if err != nil {
		f.err = err
		return
	}
	var chain string
	var names []string
	for name, hook := range baseChains(text) {
		names = append(names, name+"/"+hook)
		if hook == "prerouting" && (chain == "" || name < chain) {
			chain = name
		}
	}
	if chain == "" {
		f.err = fmt.Errorf("no prerouting base chain in %s %s (%v)", fam, s.proxyTable(), names)
		return
	}
	var victims []soakTarget
	for _, tg := range s.w.callers[0].targets {
		if tg.kind == "tcp" && isIPv6(tg.ip) == (fam == "ip6") {
			victims = append(victims, tg)
		}
	}
	v := victims[s.rng.Intn(len(victims))]
	rule := fmt.Sprintf("%s daddr %s tcp dport %d drop comment %q", fam, v.ip, v.port, forgedComment)
	if out, err := netns.Exec(f.node.netns, "nft", "insert", "rule", fam, s.proxyTable(), chain, rule); err != nil {
		f.err = fmt.Errorf("%v: %s", err, out)
		return
	}
	f.note = fmt.Sprintf("%s chain %s: drop %s (%s)", fam, chain, v.ip, v.svc)
	f.end = time.Now()
	s.awaitRepair(f, func() bool {
		out, err := s.listTable(f.node, fam)
		return err == nil && !strings.Contains(out, forgedComment)
	}, func() error { return s.removeForged(f.node, fam, chain) })
}

// forgedHandle finds the forged rule's handle in `nft -a list chain` text.
var forgedHandle = regexp.MustCompile(`comment "` + forgedComment + `" # handle (\d+)`)

// removeForged deletes the forged rule, by its handle: the soak's undo when
// the proxy leaves it.
func (s *soak) removeForged(n *node, fam, chain string) error {
	out, err := netns.Exec(n.netns, "nft", "-a", "list", "chain", fam, s.proxyTable(), chain)
	if err != nil {
		return fmt.Errorf("%v: %s", err, out)
	}
	m := forgedHandle.FindStringSubmatch(out)
	if m == nil {
		return nil // gone meanwhile
	}
	if out, err := netns.Exec(n.netns, "nft", "delete", "rule", fam, s.proxyTable(), chain, "handle", m[1]); err != nil {
		return fmt.Errorf("%v: %s", err, out)
	}
	return nil
}

// holdForeign swaps the proxy's IPv4 table for an empty one owned by a
// socket the soak holds (ownedtable_test.go): the kernel refuses the
// proxy every change to it. Held 15 s, or 70 s in runs of 10 minutes or
// more, longer than the proxies' /healthz timeout (2 x --sync-period,
// 60 s) so that a 503 is due; then released and the repair watched.
func (s *soak) holdForeign(f *faultRecord) {
	f.blocksChanges = true
	hold := 15 * time.Second
	if s.cfg.duration >= 10*time.Minute {
		hold = 70 * time.Second
	}
	if !s.c.family.hasV4() {
		f.err = fmt.Errorf("holdTable holds IPv4 tables only")
		return
	}
	before, err := s.listTable(f.node, "ip")
	if err != nil {
		f.err = err
		return
	}
	release, err := holdTable(f.node.netns, s.proxyTable())
	if err != nil {
		f.err = err
		return
	}
	f.kernelWrong, f.disruptive = true, true
	time.Sleep(hold)
	release()
	f.end = time.Now()
	f.note = fmt.Sprintf("ip table held %v;", hold)
	s.awaitRepair(f, s.wholeAgain(f.node, "ip", lineCount(before)), nil)
}
