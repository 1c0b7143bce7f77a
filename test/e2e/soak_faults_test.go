//go:build e2e

package e2e

import (
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"

	"github.com/svcproxy/svcproxy/internal/netns"
)

// faultRecord is one fault as it happened.
type faultRecord struct {
	kind        string
	node        *node // nil: the control plane or the cluster's objects
	start, end  time.Time
	repaired    time.Time // kernel faults: the proxy's table seen right again (zero: not within the run)
	kernelWrong bool      // the kernel did not hold the proxy's rules from start to repaired
	// disruptive: the fault takes rules out of the kernel, so connections
	// through its node may fail until the proxy repairs them; such failures
	// are named exceptions, any other failure breaks the invariant.
	disruptive bool
	// blocksChanges: the node's proxy (every proxy, for a fault of the
	// control plane) cannot learn of a change meanwhile (down, partitioned,
	// refused by the kernel, the API server down): the change probe's
	// samples from its node are reported apart, not in the 2 s p99.
	blocksChanges bool
	// dropsNew: the node refuses every new connection that crosses it (its
	// conntrack table is full): on a worker, the change probe's samples
	// from every node are apart (the probe's new pod may sit on it).
	dropsNew bool
	// cause names, for the failures in a disruptive fault's window, why
	// they failed ("" : the kernel lost rules).
	cause string
	// restarts: the proxy process was started again (its /healthz is
	// absent, then 503 until its first sync: not a wrong answer).
	restarts bool
	// unrepaired: a kernel fault the proxy had not repaired after
	// repairWait (the soak may have undone it since).
	unrepaired bool
	// apiDown: kube-apiserver was killed and not ready again during this
	// span (zero: it was not): no proxy could learn of a change then, so
	// every node's change samples near it are apart, whatever f.node.
	apiDown span
	// expiry: what the watch-expiry fault saw (nil for other kinds).
	expiry *watchExpiry
	note   string
	err    error
}

// windowEnd is the end of the span failures are attributed to: until the
// fault is over (and repaired), plus one client timeout and a second.
func (f *faultRecord) windowEnd(runEnd time.Time) time.Time {
	e := f.end
	if f.kernelWrong {
		e = f.repaired
		if e.IsZero() {
			e = runEnd
		}
	}
	return e.Add(requestTimeout + time.Second)
}

func (f *faultRecord) where() string {
	if f.node == nil {
		return "control plane"
	}
	return f.node.short
}

// faultKind is one kind of fault: its name, roughly how long it takes (so
// that the schedule only starts what fits), whether it applies to the
// run's proxy, and what it does.
type faultKind struct {
	name  string
	takes time.Duration
	// skip says why the kind does not apply to this run ("" if it does).
	skip func(s *soak) string
	run  func(s *soak, f *faultRecord)
	// onNode: the fault hits one node, chosen by the seed.
	onNode bool
}

// faultKinds in the priority order.
func faultKinds() []faultKind {
	return []faultKind{
		{name: "kill -9 proxy", takes: 5 * time.Second, onNode: true, run: (*soak).killProxy},
		{name: "SIGTERM proxy", takes: 5 * time.Second, onNode: true, run: (*soak).termProxy},
		{name: "table deleted", takes: 3 * time.Second, onNode: true, skip: needsNftTable, run: (*soak).deleteTable},
		{name: "map flushed", takes: 3 * time.Second, onNode: true, skip: needsNftTable, run: (*soak).flushMap},
		{name: "rule forged", takes: 3 * time.Second, onNode: true, skip: needsNftTable, run: (*soak).forgeRule},
		{name: "kube-apiserver restart", takes: 10 * time.Second, run: (*soak).restartAPI},
		{name: "partition from apiserver 30s", takes: 31 * time.Second, onNode: true, run: (*soak).partition},
		{name: "EndpointSlice burst 200/s 10s", takes: 11 * time.Second, run: (*soak).sliceBurst},
		{name: "Service type changes", takes: 10 * time.Second, run: (*soak).typeChanges},
		{name: "watch expiry (410)", takes: expiryTakes, onNode: true, run: (*soak).expireWatches},
		{name: "foreign table held", takes: 17 * time.Second, onNode: true, skip: needsNftTable, run: (*soak).holdForeign},
		{name: "node address added/removed", takes: 9 * time.Second, onNode: true, run: (*soak).addressChange},
		{name: "memory limit 2x RSS", takes: 25 * time.Second, onNode: true, skip: needsCgroupMemory, run: (*soak).memoryLimit},
		{name: "conntrack table full", takes: 30 * time.Second, onNode: true, run: (*soak).conntrackFull},
	}
}

// runFaults injects faults until deadline: rounds of every applicable
// kind in a seeded random order (the first round led by the kinds named in
// SOAK_FIRST, comma-separated), each on a seeded random node, with a
// seeded 2-4 s pause between them; a fault starts only if it fits before
// the deadline.
func (s *soak) runFaults(deadline time.Time) {
	kinds := faultKinds()
	var usable []faultKind
	for _, k := range kinds {
		if k.skip != nil {
			if why := k.skip(s); why != "" {
				s.skips = append(s.skips, k.name+": "+why)
				continue
			}
		}
		usable = append(usable, k)
	}
	first := strings.Split(os.Getenv("SOAK_FIRST"), ",")
	for round := 0; ; round++ {
		order := s.rng.Perm(len(usable))
		if round == 0 {
			// SOAK_FIRST: the kinds named lead the first round, so that a
			// short run is sure to inject them; the rest keep the seed's order.
			slices.SortStableFunc(order, func(a, b int) int {
				fa, fb := slices.Contains(first, usable[a].name), slices.Contains(first, usable[b].name)
				switch {
				case fa && !fb:
					return -1
				case fb && !fa:
					return 1
				}
				return 0
			})
		}
		started := 0
		for _, i := range order {
			k := usable[i]
			pause := time.Duration(2000+s.rng.Intn(2000)) * time.Millisecond
			var n *node
			if k.onNode {
				n = s.c.nodes[s.rng.Intn(len(s.c.nodes))]
			}
			if time.Now().Add(pause + k.takes).After(deadline) {
				continue
			}
			time.Sleep(pause)
			f := &faultRecord{kind: k.name, node: n, start: time.Now()}
			s.c.logf("soak: fault %q on %s", k.name, f.where())
			k.run(s, f)
			if f.end.IsZero() {
				f.end = time.Now()
			}
			s.c.logf("soak: fault %q on %s over after %v %s %v", k.name, f.where(), f.end.Sub(f.start).Round(time.Millisecond), f.note, errString(f.err))
			s.mu.Lock()
			s.faults = append(s.faults, f)
			s.mu.Unlock()
			started++
		}
		if started == 0 {
			return
		}
	}
}

// restartProxy starts the node's proxy again as the harness does and waits
// until its /healthz says 200.
func (s *soak) restartProxy(n *node, f *faultRecord) {
	f.restarts = true
	if err := s.startProxy(n); err != nil {
		f.err = err
		return
	}
	if err := s.c.waitProxyHealthy(context.Background(), n, 60*time.Second); err != nil {
		f.err = err
	}
	f.note = strings.TrimSpace(fmt.Sprintf("%s healthy %v after the fault began", f.note, time.Since(f.start).Round(time.Millisecond)))
}

func (s *soak) killProxy(f *faultRecord) {
	f.blocksChanges = true
	s.c.killProxy(f.node)
	s.restartProxy(f.node, f)
}

func (s *soak) termProxy(f *faultRecord) {
	f.blocksChanges = true
	f.node.mu.Lock()
	p := f.node.proxy
	f.node.mu.Unlock()
	p.stop(10 * time.Second)
	s.restartProxy(f.node, f)
}

// restartAPI kills kube-apiserver (SIGKILL, as the outage scenario does:
// a graceful stop would remove its own endpoint, a real change) and starts
// it again with the same flags; etcd stays.
func (s *soak) restartAPI(f *faultRecord) {
	// No proxy learns of a change from the kill until the new API server
	// answers their watches again.
	f.blocksChanges = true
	ready, err := s.bounceAPI(f, nil)
	f.err = err
	f.note = fmt.Sprintf("ready %v after the kill", ready.Round(time.Millisecond))
}

// bounceAPI kills kube-apiserver, calls down (if not nil) while it is
// down, starts it again and waits until it is ready; f.apiDown is the span
// from the kill. It returns how long that took.
func (s *soak) bounceAPI(f *faultRecord, down func() error) (time.Duration, error) {
	c := s.c
	killed := time.Now()
	c.apiserver.kill()
	<-c.apiserver.Done()
	var downErr error
	if down != nil {
		downErr = down() // started again all the same: the run needs it
	}
	api, err := c.restartControl(c.apiserver)
	if err != nil {
		f.apiDown = span{killed, time.Now()}
		return time.Since(killed), err
	}
	c.apiserver = api
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	err = c.waitAPIReady(ctx)
	f.apiDown = span{killed, time.Now()}
	if err == nil {
		err = downErr
	}
	return time.Since(killed), err
}

// tooOld is how an expired watch (410 Gone) shows in a proxy's log:
// client-go's reflector logs "Watch closed" with the API server's message,
// "too old resource version: <asked> (<oldest it has>)" from the watch
// cache, or etcd's "The resourceVersion for the provided watch is too old"
// without it. The reflector logs it at V(4) only: the soak runs the
// proxies with --vmodule=reflector=4 (soakProxyArgs).
var tooOld = regexp.MustCompile(`too old resource version|resourceVersion for the provided watch is too old`)

// forbiddenWatch is the reflector's line for a watch the API server
// refused with 403 (kube-proxy's and svcproxy's alike): after a restart the
// new kube-apiserver answers before its authorizer is warm.
var forbiddenWatch = regexp.MustCompile(`"Failed to watch" err=.*is forbidden`)

// populated is the reflector's line after every list and watch-list, the
// first and every relist (V(2)).
var populated = regexp.MustCompile(`"Caches populated"`)

// bumpAndCompactEtcd writes a key of its own into etcd (outside
// /registry: no API object), so that etcd's revision is past every
// resource version a proxy holds, and compacts etcd at that revision,
// through its gRPC gateway (from the control-plane namespace). It returns
// the revision.
func (s *soak) bumpAndCompactEtcd() (string, error) {
	c := s.c
	hc := &http.Client{Transport: &http.Transport{DialContext: netns.DialFunc(c.cp().netns, 2*time.Second)}, Timeout: 10 * time.Second}
	post := func(path, body string) (string, error) {
		resp, err := hc.Post("http://127.0.0.1:2379"+path, "application/json", strings.NewReader(body))
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			return "", fmt.Errorf("%s: %s", resp.Status, b)
		}
		return string(b), nil
	}
	key := base64.StdEncoding.EncodeToString([]byte("/soak/expiry"))
	val := base64.StdEncoding.EncodeToString([]byte(time.Now().String()))
	out, err := post("/v3/kv/put", `{"key":"`+key+`","value":"`+val+`"}`)
	if err != nil {
		return "", fmt.Errorf("etcd put: %w", err)
	}
	m := regexp.MustCompile(`"revision":"(\d+)"`).FindStringSubmatch(out)
	if m == nil {
		return "", fmt.Errorf("no revision in %s", out)
	}
	if _, err := post("/v3/kv/compaction", `{"revision":"`+m[1]+`","physical":true}`); err != nil {
		return m[1], fmt.Errorf("compact: %w", err)
	}
	return m[1], nil
}

// partition drops, in the node's namespace only, its packets to the API
// server's port for 30 s (the proxy's watches stall, as behind a broken
// link; its table must keep serving), then lifts it.
func (s *soak) partition(f *faultRecord) {
	f.blocksChanges = true
	n := f.node
	var rules []string
	for _, ip := range s.c.cp().ips {
		kw := "ip"
		if isIPv6(ip) {
			kw = "ip6"
		}
		rules = append(rules, fmt.Sprintf("add rule inet soak-partition out %s daddr %s tcp dport %d drop", kw, ip, apiPort))
	}
	file := filepath.Join(s.c.dir, "soak-partition-"+n.short+".nft")
	script := "add table inet soak-partition\nadd chain inet soak-partition out { type filter hook output priority -300; }\n" + strings.Join(rules, "\n") + "\n"
	if err := os.WriteFile(file, []byte(script), 0o644); err != nil {
		f.err = err
		return
	}
	if out, err := netns.Exec(n.netns, "nft", "-f", file); err != nil {
		f.err = fmt.Errorf("%v: %s", err, out)
		return
	}
	time.Sleep(30 * time.Second)
	if out, err := netns.Exec(n.netns, "nft", "delete", "table", "inet", "soak-partition"); err != nil {
		f.err = fmt.Errorf("lift: %v: %s", err, out)
	}
}

// sliceBurst rewrites the churn Services' slices at 200 updates a second
// for 10 s (20 writers, one Service each), the load of the churn scenario
// on top of everything else.
func (s *soak) sliceBurst(f *faultRecord) {
	c := s.c
	cfg := rest.CopyConfig(c.rest)
	cfg.QPS, cfg.Burst = 400, 800
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		f.err = err
		return
	}
	esc := client.DiscoveryV1().EndpointSlices(ns)
	var sent, failed atomic.Int64
	var firstErr atomic.Value
	stop := time.Now().Add(10 * time.Second)
	var wg sync.WaitGroup
	for _, ch := range s.w.churn {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tick := time.NewTicker(100 * time.Millisecond) // 10/s per Service, 200/s for 20
			defer tick.Stop()
			for u := 1; time.Now().Before(stop); u++ {
				<-tick.C
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				_, err := esc.Update(ctx, churnSlice(ch.i, churnEndpoints(ch.i, int(f.start.UnixNano()/1e6)+u, ch.f), ch.f), metav1.UpdateOptions{})
				cancel()
				if err != nil {
					failed.Add(1)
					firstErr.CompareAndSwap(nil, err)
					continue
				}
				sent.Add(1)
			}
		}()
	}
	wg.Wait()
	took := time.Since(f.start)
	f.note = fmt.Sprintf("%d updates in %.1fs (%.0f/s), %d failed", sent.Load(), took.Seconds(), float64(sent.Load())/took.Seconds(), failed.Load())
	if e, _ := firstErr.Load().(error); e != nil {
		f.note += "; first: " + e.Error()
	}
}

// typeChanges moves the type-change Service through NodePort,
// LoadBalancer and back to ClusterIP, 3 s apart: its ClusterIP and
// endpoints never change, so its traffic must not notice.
func (s *soak) typeChanges(f *faultRecord) {
	svcs := s.c.client.CoreV1().Services(ns)
	var seq []string
	for _, typ := range []corev1.ServiceType{corev1.ServiceTypeNodePort, corev1.ServiceTypeLoadBalancer, corev1.ServiceTypeClusterIP} {
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			cur, err := svcs.Get(ctx, s.w.typeSvc, metav1.GetOptions{})
			if err != nil {
				return err
			}
			cur.Spec.Type = typ
			if typ == corev1.ServiceTypeClusterIP {
				for i := range cur.Spec.Ports {
					cur.Spec.Ports[i].NodePort = 0
				}
				cur.Spec.ExternalTrafficPolicy = ""
				cur.Spec.AllocateLoadBalancerNodePorts = nil
			}
			_, err = svcs.Update(ctx, cur, metav1.UpdateOptions{})
			return err
		})
		if err != nil {
			f.err = fmt.Errorf("to %s: %w", typ, err)
			return
		}
		seq = append(seq, string(typ))
		time.Sleep(3 * time.Second)
	}
	f.note = "ClusterIP -> " + strings.Join(seq, " -> ")
}

// addressChange adds an address of each family to the node's eth0, asks
// the first NodePort on the new IPv4 (or IPv6) address from the outside
// (svcproxy serves NodePorts on every local address, kube-proxy nftables
// on the node's primary ones: reported, not judged), and removes it.
func (s *soak) addressChange(f *faultRecord) {
	n := f.node
	idx := 0
	for i, m := range s.c.nodes {
		if m == n {
			idx = i
		}
	}
	var added []string
	for _, ip := range s.c.family.pick(fmt.Sprintf("172.18.0.%d", 70+idx), fmt.Sprintf("fd00:172:18::%d", 70+idx)) {
		args := []string{"-n", n.netns, "addr", "add", ip + bridgeBits, "dev", "eth0"}
		if isIPv6(ip) {
			args = []string{"-n", n.netns, "addr", "add", ip + bridgeBits6, "dev", "eth0", "nodad"}
		}
		if err := netns.IP(args...); err != nil {
			f.err = err
			break
		}
		added = append(added, ip)
	}
	time.Sleep(3 * time.Second)
	var outcomes []string
	np, err := s.c.client.CoreV1().Services(ns).Get(context.Background(), "soak-np-00", metav1.GetOptions{})
	if err == nil {
		for _, ip := range added {
			_, err := s.c.outside().who(hostPort(ip, np.Spec.Ports[0].NodePort), 2*time.Second)
			outcomes = append(outcomes, fmt.Sprintf("NodePort on %s %s", ip, outcomeOf(err)))
		}
	}
	time.Sleep(3 * time.Second)
	for _, ip := range added {
		bits := bridgeBits
		if isIPv6(ip) {
			bits = bridgeBits6
		}
		if err := netns.IP("-n", n.netns, "addr", "del", ip+bits, "dev", "eth0"); err != nil && f.err == nil {
			f.err = err
		}
	}
	f.note = strings.Join(outcomes, ", ")
}
