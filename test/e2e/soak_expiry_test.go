//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/svcproxy/svcproxy/internal/netns"
	"github.com/svcproxy/svcproxy/internal/poll"
)

// The watch-expiry fault: one proxy's watches made to expire (410 Gone),
// with changes it can only learn of by listing again, and the proxies'
// reflector lines that show it.
//
// A watch resumes from the resource version of the last event (or bookmark)
// its reflector saw. kube-apiserver serves it from its watch cache, whose
// history starts, after a (re)start, at the revision it listed from etcd
// (k8s.io/apiserver pkg/storage/cacher, watchCacheHistory.GetIntervalLocked:
// "too old resource version: <asked> (<oldest>)"). Within a running API
// server the history keeps every event younger than 75 s (up to 100k events
// a resource), so no write rate the soak can afford pushes a watch out of it
// in a fault's 35 s, and compacting etcd alone does not touch it (the cache
// does not read etcd back). What does: an API server restart. So the node is
// cut off from the API server, kube-apiserver killed, etcd's revision
// bumped past every resource version a proxy holds and etcd compacted
// (where the watch cache is off, watches go to etcd, which then refuses the
// old revision too), kube-apiserver started again, a Service the node
// serves deleted and a new one created; then the node is let through. Its
// reflectors resume their watches at revisions older than the new cache's
// first one: 410, a relist, and only the relist can tell the proxy that
// the old Service is gone (its deletion is in the new cache's history, but
// past a watch the API server refuses).

const (
	expiryPartition = 15 * time.Second // the node cut off from the API server
	expiryWait      = 12 * time.Second // after the lift, for the node to serve what changed
	expiryTakes     = 33 * time.Second // the whole fault at most, for the schedule
	expiryOld       = "soak-expiry-old"
	expiryNew       = "soak-expiry-new"
)

// watchExpiry is what one watch-expiry fault did and saw; durations are -1
// when the thing was not seen within its wait.
type watchExpiry struct {
	lifted    time.Time     // the partition lifted
	served    time.Duration // from the lift: the new Service's NodePort answers on the node
	gone      time.Duration // from the lift: the deleted Service's NodePort no longer answers there
	refServed time.Duration // from its creation: the new Service answers on refNode (not partitioned)
	refNode   string
	reused    bool   // the new Service got the deleted one's NodePort: gone is not measurable
	stale     bool   // a second before the lift the node still answered on the deleted Service's NodePort
	last      string // the last outcomes asked on the node, when something was not seen
}

// soakProxyArgs are added to the harness's proxy command for the soak:
// client-go's reflector logs an expired watch ("Watch closed" ... "too old
// resource version") only at V(4), which -v=2 hides; this shows its V(3) and
// V(4) lines (start, list and watch, watch closed: a few lines per watch
// restart) and no other file's.
var soakProxyArgs = []string{"--vmodule=reflector=4"}

// startProxy starts the node's proxy as the harness does, with
// soakProxyArgs.
func (s *soak) startProxy(n *node) error { return s.startProxyIn(n, "") }

// startProxyIn is startProxy with the proxy put, before it runs, into the
// cgroup whose cgroup.procs is procs (none if ""): a shell writes its own
// pid there and execs `ip netns exec`, which execs the proxy, so the pid is
// the proxy's. The shell runs outside the node's namespace: `ip netns exec`
// mounts a sysfs of its own, without the cgroup hierarchies.
func (s *soak) startProxyIn(n *node, procs string) error {
	c := s.c
	argv := append(c.proxyCommandAs(c.proxyKind, n), soakProxyArgs...)
	ns := n.netns
	if procs != "" {
		argv = append([]string{"sh", "-c", `echo $$ > "$0" && exec ip netns exec "$@"`, procs, n.netns}, argv...)
		ns = ""
	}
	p, err := c.start("proxy-"+n.short, ns, argv...)
	if err != nil {
		return err
	}
	n.mu.Lock()
	n.proxy, n.proxyKind = p, c.proxyKind
	n.mu.Unlock()
	return nil
}

// restartProxiesForSoak starts every proxy again (SIGTERM, then
// startProxy) before the load, so that their logs show expired watches.
func (s *soak) restartProxiesForSoak() error {
	for _, n := range s.c.nodes {
		n.mu.Lock()
		p := n.proxy
		n.mu.Unlock()
		p.stop(10 * time.Second)
		if err := s.startProxy(n); err != nil {
			return err
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, n := range s.c.nodes {
		if err := s.c.waitProxyHealthy(ctx, n, 60*time.Second); err != nil {
			return err
		}
	}
	return nil
}

// expireWatches is the watch-expiry fault on f.node (see the top of the
// file): cut off for expiryPartition, then given expiryWait to serve the
// Service created and stop serving the one deleted meanwhile.
func (s *soak) expireWatches(f *faultRecord) {
	c, n := s.c, f.node
	f.blocksChanges = true
	x := &watchExpiry{served: -1, gone: -1, refServed: -1}
	f.expiry = x
	svcs := c.client.CoreV1().Services(ns)
	var notes []string
	defer func() {
		if f.end.IsZero() {
			f.end = time.Now()
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		for _, name := range []string{expiryOld, expiryNew} {
			if err := svcs.Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) && f.err == nil {
				f.err = fmt.Errorf("delete %s: %w", name, err)
			}
		}
		f.note = strings.Join(notes, "; ")
	}()
	create := func(name string) (*corev1.Service, error) {
		var out *corev1.Service
		err := poll.Until(context.Background(), 10*time.Second, 200*time.Millisecond, func() (bool, string) {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			got, err := svcs.Create(ctx, c.bothFamilies(nodePortService(name, 80, tcp, map[string]string{"app": "soak"})), metav1.CreateOptions{})
			if apierrors.IsAlreadyExists(err) { // left by a round that failed
				_ = svcs.Delete(ctx, name, metav1.DeleteOptions{})
			}
			if err != nil {
				return false, err.Error()
			}
			out = got
			return true, ""
		})
		return out, err
	}
	// answers asks the Service's NodePort on every address of m from the
	// outside, once each.
	answers := func(m *node, svc *corev1.Service) (bool, string) {
		var outs []string
		ok := true
		for _, ip := range m.ips {
			_, err := c.outside().who(hostPort(ip, svc.Spec.Ports[0].NodePort), time.Second)
			ok = ok && err == nil
			outs = append(outs, ip+" "+outcomeOf(err))
		}
		return ok, strings.Join(outs, ", ")
	}

	old, err := create(expiryOld)
	if err != nil {
		f.err = fmt.Errorf("create %s: %w", expiryOld, err)
		return
	}
	if err := poll.Until(context.Background(), 5*time.Second, 100*time.Millisecond, func() (bool, string) { return answers(n, old) }); err != nil {
		f.err = fmt.Errorf("%s never served on %s before the partition: %w", expiryOld, n.short, err)
		return
	}

	// The cut: reject (a TCP reset), not drop as the partition fault does,
	// so that the proxy's connection attempts fail at once and it retries
	// every 250 ms: it reconnects right after the lift instead of at its
	// next SYN retransmission (1, 3, 7, 15 s after a dial began), which
	// would measure the kernel's backoff, not the proxy's relist.
	var rules []string
	for _, ip := range c.cp().ips {
		kw := "ip"
		if isIPv6(ip) {
			kw = "ip6"
		}
		rules = append(rules, fmt.Sprintf("add rule inet soak-expiry out %s daddr %s tcp dport %d reject with tcp reset", kw, ip, apiPort))
	}
	file := filepath.Join(c.dir, "soak-expiry-"+n.short+".nft")
	script := "add table inet soak-expiry\nadd chain inet soak-expiry out { type filter hook output priority -300; }\n" + strings.Join(rules, "\n") + "\n"
	if err := os.WriteFile(file, []byte(script), 0o644); err != nil {
		f.err = err
		return
	}
	if out, err := netns.Exec(n.netns, "nft", "-f", file); err != nil {
		f.err = fmt.Errorf("cut: %v: %s", err, out)
		return
	}
	cut := time.Now()
	lifted := false
	lift := func() {
		lifted = true
		if out, err := netns.Exec(n.netns, "nft", "delete", "table", "inet", "soak-expiry"); err != nil && f.err == nil {
			f.err = fmt.Errorf("lift: %v: %s", err, out)
		}
	}
	defer func() {
		if !lifted {
			lift()
		}
	}()

	// The kill closes the node's connections too (its FIN comes in; only
	// what the node sends is refused): until then they carry events, so
	// the changes are made once the new API server is up.
	var rev string
	ready, err := s.bounceAPI(f, func() (err error) {
		rev, err = s.bumpAndCompactEtcd()
		return err
	})
	if err != nil {
		f.err = err
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	err = svcs.Delete(ctx, expiryOld, metav1.DeleteOptions{})
	cancel()
	if err != nil {
		f.err = fmt.Errorf("delete %s: %w", expiryOld, err)
		return
	}
	notes = append(notes, fmt.Sprintf("%s cut off from the API server for %v; meanwhile kube-apiserver killed, etcd's revision bumped and compacted at %s, the API server ready %v after the kill, %s deleted and %s created",
		n.short, expiryPartition, rev, ready.Round(time.Millisecond), expiryOld, expiryNew))
	nw, err := create(expiryNew)
	if err != nil {
		f.err = fmt.Errorf("create %s: %w", expiryNew, err)
		return
	}
	created := time.Now()
	x.reused = nw.Spec.Ports[0].NodePort == old.Spec.Ports[0].NodePort
	// A node that was never cut off serves it: the change is in the API.
	ref := c.nodes[0]
	if ref == n {
		ref = c.nodes[1]
	}
	x.refNode = ref.short
	if poll.Until(context.Background(), time.Until(cut.Add(expiryPartition)), 100*time.Millisecond, func() (bool, string) { return answers(ref, nw) }) == nil {
		x.refServed = time.Since(created)
	}
	time.Sleep(time.Until(cut.Add(expiryPartition - time.Second)))
	// The premise: the cut-off node still serves what was deleted.
	x.stale, _ = answers(n, old)
	time.Sleep(time.Until(cut.Add(expiryPartition)))
	lift()
	x.lifted = time.Now()

	goneTwice := 0
	for time.Since(x.lifted) < expiryWait && (x.served < 0 || (x.gone < 0 && !x.reused)) {
		var outs []string
		if x.served < 0 {
			ok, out := answers(n, nw)
			if ok {
				x.served = time.Since(x.lifted)
			}
			outs = append(outs, expiryNew+": "+out)
		}
		if x.gone < 0 && !x.reused {
			ok, out := answers(n, old)
			if ok {
				goneTwice = 0
			} else if goneTwice++; goneTwice == 2 {
				x.gone = time.Since(x.lifted)
			}
			outs = append(outs, expiryOld+": "+out)
		}
		x.last = strings.Join(outs, "; ")
		time.Sleep(100 * time.Millisecond)
	}
	f.end = time.Now()
}

// logHit is one matching line of a proxy's log: the node and klog's time.
type logHit struct {
	node string // short name
	at   time.Time
}

// logHits returns the lines of every node's proxy log (restarts append to
// the same file) that match re, with the time klog's header gives
// ("I1204 21:50:49.456161 ..."; local time, no year: the run's).
func (s *soak) logHits(re *regexp.Regexp) []logHit {
	var hits []logHit
	for _, n := range s.c.nodes {
		b, err := os.ReadFile(filepath.Join(s.c.logDir, "proxy-"+n.short+".log"))
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n") {
			if len(line) < 21 || !re.MatchString(line) {
				continue
			}
			t, err := time.ParseInLocation("0102 15:04:05.000000", line[1:21], time.Local)
			if err != nil {
				continue
			}
			hits = append(hits, logHit{node: n.short, at: time.Date(s.start.Year(), t.Month(), t.Day(), t.Hour(), t.Minute(), t.Second(), t.Nanosecond(), time.Local)})
		}
	}
	return hits
}

// hitsIn counts hits per node between from and to, and describes them
// ("w1 2, cp 1"; "none").
func hitsIn(hits []logHit, from, to time.Time) (map[string]int, string) {
	per := map[string]int{}
	for _, h := range hits {
		if !h.at.Before(from) && !h.at.After(to) {
			per[h.node]++
		}
	}
	if len(per) == 0 {
		return per, "none"
	}
	var l []string
	for node, k := range per {
		l = append(l, fmt.Sprintf("%s %d", node, k))
	}
	sort.Strings(l)
	return per, strings.Join(l, ", ")
}

// noteExpired adds to the note of every fault that restarted the API
// server, and of any other during which a proxy logged one, how many
// expired watches the proxies logged in its window; and, for the
// restarts, how many watches the new API server refused with 403 (its
// authorizer not warm yet: the reflector relists then, without a 410).
func (s *soak) noteExpired(tooOldHits, forbiddenHits []logHit) {
	for _, f := range s.faults {
		per, desc := hitsIn(tooOldHits, f.start, f.windowEnd(s.end))
		if f.apiDown.from.IsZero() && len(per) == 0 {
			continue
		}
		f.note = strings.TrimPrefix(f.note+"; expired watches (\"too old resource version\") in the proxies' logs: "+desc, "; ")
		if !f.apiDown.from.IsZero() {
			_, desc := hitsIn(forbiddenHits, f.start, f.windowEnd(s.end))
			f.note += "; watches refused 403 (\"Failed to watch\" ... forbidden): " + desc
		}
	}
}

// checkExpiry: after each watch-expiry fault the cut-off node served the
// Service created while it was cut off and stopped serving the one deleted
// (which only a relist can tell it) within expiryWait of the lift. Also
// measured, from the proxy's log: its 410 and its relists after the lift,
// and the failed connections in the fault's window (judged with the rest
// by the first invariant).
func (s *soak) checkExpiry(tooOldHits, listHits []logHit) invRow {
	row := invRow{key: "watch_expiry", name: "changes missed behind an expired watch (410) served after the relist", ok: true}
	var runs, recovered, saw410 int
	var notes []string
	for _, f := range s.faults {
		x := f.expiry
		if x == nil {
			continue
		}
		runs++
		end := f.windowEnd(s.end)
		if f.err != nil || x.lifted.IsZero() {
			notes = append(notes, fmt.Sprintf("%s: not judged, the fault failed: %v", s.faultName(f), f.err))
			continue
		}
		n := f.node.short
		var first time.Time
		for _, h := range tooOldHits {
			if h.node == n && !h.at.Before(x.lifted.Add(-time.Second)) && !h.at.After(end) && (first.IsZero() || h.at.Before(first)) {
				first = h.at
			}
		}
		lists, _ := hitsIn(listHits, x.lifted.Add(-time.Second), end)
		var parts []string
		if first.IsZero() {
			parts = append(parts, fmt.Sprintf("NO 410 in %s's proxy log after the lift (the fault did not expire its watches)", n))
		} else {
			saw410++
			parts = append(parts, fmt.Sprintf("%s's proxy logged 410 %v after the lift, then %d lists", n, first.Sub(x.lifted).Round(time.Millisecond), lists[n]))
		}
		seen := func(d time.Duration) string {
			if d < 0 {
				return fmt.Sprintf("NOT within %v", expiryWait)
			}
			return fmt.Sprintf("after %v", d.Round(time.Millisecond))
		}
		if !x.stale {
			parts = append(parts, fmt.Sprintf("(%s no longer answered on %s's NodePort a second before the lift: the deletion reached it some other way)", n, expiryOld))
		}
		ok := x.served >= 0 && (x.gone >= 0 || x.reused)
		parts = append(parts, fmt.Sprintf("%s served %s, %s gone %s", expiryNew, seen(x.served), expiryOld, seen(x.gone)))
		if x.reused {
			parts[len(parts)-1] = fmt.Sprintf("%s served %s, %s gone unmeasured (its NodePort reused)", expiryNew, seen(x.served), expiryOld)
		}
		if x.refServed >= 0 {
			parts = append(parts, fmt.Sprintf("(%s, not cut off, served %s %v after its creation)", x.refNode, expiryNew, x.refServed.Round(time.Millisecond)))
		}
		if !ok {
			row.ok = false
			parts = append(parts, "last asked: "+x.last)
		} else {
			recovered++
		}
		failed := 0
		s.traffic.mu.Lock()
		for _, r := range s.traffic.reqs {
			if r.err != nil && !r.start.Before(f.start) && !r.start.After(end) {
				failed++
			}
		}
		s.traffic.mu.Unlock()
		parts = append(parts, fmt.Sprintf("%d failed connections in its window", failed))
		notes = append(notes, s.faultName(f)+": "+strings.Join(parts, ", "))
	}
	if runs == 0 {
		row.value = "not run"
		return row
	}
	row.value = fmt.Sprintf("%d of %d served within %v of the lift; the cut-off proxy logged a 410 in %d of %d", recovered, runs, expiryWait, saw410, runs)
	row.detail = strings.Join(notes, "<br>")
	return row
}
