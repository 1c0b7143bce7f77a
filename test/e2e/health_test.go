//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/svcproxy/svcproxy/internal/netns"
	"github.com/svcproxy/svcproxy/internal/poll"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// sideNode adds a network namespace on the cluster's bridge at ips (one per family; a "node" with
// no Node object and no pods) and removes it when the test ends.
func (c *cluster) sideNode(t *testing.T, short string, ips ...string) string {
	t.Helper()
	name := c.prefix + short
	br := c.bridgeNetns
	port := "vs" + short
	cmds := [][]string{
		{"netns", "add", name},
		{"-n", name, "link", "set", "lo", "up"},
		{"-n", br, "link", "add", port, "type", "veth", "peer", "name", "eth0", "netns", name},
		{"-n", br, "link", "set", port, "master", "br0"},
		{"-n", br, "link", "set", port, "up"},
	}
	for _, ip := range ips {
		if isIPv6(ip) {
			cmds = append(cmds, []string{"-n", name, "addr", "add", ip + bridgeBits6, "dev", "eth0", "nodad"})
		} else {
			cmds = append(cmds, []string{"-n", name, "addr", "add", ip + bridgeBits, "dev", "eth0"})
		}
	}
	cmds = append(cmds, []string{"-n", name, "link", "set", "eth0", "up"})
	for _, ip := range ips {
		gw := gatewayIP
		if isIPv6(ip) {
			gw = gatewayIP6
		}
		cmds = append(cmds, []string{"-n", name, "route", "add", "default", "via", gw})
	}
	for _, a := range cmds {
		if err := netns.IP(a...); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		if err := netns.Delete(name); err != nil {
			t.Logf("remove %s: %v", name, err)
		}
	})
	return name
}

// healthAnswer is one answer of /healthz or /livez: its code (0: no answer) and the
// shape of its JSON body (each field's path and kind of value).
type healthAnswer struct {
	code  int
	shape string
	body  string
}

func getHealth(hc *http.Client, path string) healthAnswer {
	resp, err := hc.Get(fmt.Sprintf("http://127.0.0.1:%d%s", healthzPort, path))
	if err != nil {
		return healthAnswer{}
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	a := healthAnswer{code: resp.StatusCode, body: string(b)}
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		a.shape = "not JSON"
		return a
	}
	var fields []string
	shapeOf("", v, &fields)
	sort.Strings(fields)
	a.shape = resp.Header.Get("Content-Type") + " " + strings.Join(fields, " ")
	return a
}

// shapeOf lists the fields of v as path:kind, where a string that is an RFC 3339
// time is "time". Left out: svcproxy's refusedServices fields (kube-proxy's clients
// ignore them and they only appear when the kernel refuses a Service), and
// kube-proxy's status.IPv6, which it has because it also proxies IPv6 on a node
// that supports it; svcproxy proxies IPv4 only and does not claim IPv6 health.
func shapeOf(path string, v any, out *[]string) {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			if k == "refusedServices" || k == "refusedServicesTotal" || (path == "status" && k == "IPv6") {
				continue
			}
			shapeOf(strings.TrimPrefix(path+"."+k, "."), e, out)
		}
	case string:
		kind := "string"
		if _, err := time.Parse(time.RFC3339Nano, x); err == nil {
			kind = "time"
		}
		*out = append(*out, path+":"+kind)
	case bool:
		*out = append(*out, path+":bool")
	default:
		*out = append(*out, fmt.Sprintf("%s:%T", path, v))
	}
}

// healthWatch polls /healthz and /livez of one proxy and keeps the distinct
// answers in order (codes and shapes; consecutive repeats collapsed).
type healthWatch struct {
	hc   *http.Client
	mu   sync.Mutex
	seen map[string][]healthAnswer // by path
	stop chan struct{}
	done chan struct{}
}

func watchHealth(ns string) *healthWatch {
	w := &healthWatch{
		hc: &http.Client{
			Transport: &http.Transport{DialContext: netns.DialFunc(ns, 200*time.Millisecond), DisableKeepAlives: true},
			Timeout:   500 * time.Millisecond,
		},
		seen: map[string][]healthAnswer{},
		stop: make(chan struct{}),
		done: make(chan struct{}),
	}
	go func() {
		defer close(w.done)
		for {
			for _, p := range []string{"/healthz", "/livez"} {
				a := getHealth(w.hc, p)
				w.mu.Lock()
				s := w.seen[p]
				if len(s) == 0 || s[len(s)-1].code != a.code || s[len(s)-1].shape != a.shape {
					w.seen[p] = append(s, a)
				}
				w.mu.Unlock()
			}
			select {
			case <-w.stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	return w
}

// finish stops polling and returns the sequence of answers per path, with
// (code, shape) only.
func (w *healthWatch) finish() map[string][]string {
	close(w.stop)
	<-w.done
	out := map[string][]string{}
	for p, s := range w.seen {
		for _, a := range s {
			out[p] = append(out[p], fmt.Sprintf("%d %s", a.code, a.shape))
		}
	}
	return out
}

func (w *healthWatch) last(path string) healthAnswer {
	w.mu.Lock()
	defer w.mu.Unlock()
	s := w.seen[path]
	if len(s) == 0 {
		return healthAnswer{}
	}
	return s[len(s)-1]
}

// TestHealthMatchesKubeProxy runs kube-proxy (nftables mode) and svcproxy side by
// side, each alone in a namespace of its own on the cluster network, on the same
// Node name and flags, and compares what /healthz and /livez answer: status codes
// and JSON (field names, kinds of values) from start to the first sync, in steady
// state, and through shutdown (SIGTERM).
func TestHealthMatchesKubeProxy(t *testing.T) {
	track(t)
	c := theCluster
	svcproxy := c.svcproxyBin
	if svcproxy == "" {
		if _, err := os.Stat("../../bin/svcproxy"); err != nil {
			t.Skip("needs bin/svcproxy (PROXY=svcproxy builds it)")
		}
		svcproxy = "../../bin/svcproxy"
	}
	args := []string{
		"--kubeconfig=" + c.proxyKC,
		"--hostname-override=" + c.workers()[0].name,
		"--cluster-cidr=" + clusterCIDR,
		fmt.Sprintf("--metrics-bind-address=127.0.0.1:%d", metricsPort),
		fmt.Sprintf("--healthz-bind-address=0.0.0.0:%d", healthzPort),
		"--conntrack-max-per-core=0",
		"--conntrack-tcp-timeout-established=0",
		"--conntrack-tcp-timeout-close-wait=0",
		"-v=2",
	}
	type side struct {
		name  string
		ns    string
		table string
		argv  []string
		proc  *proc
		watch *healthWatch
	}
	sides := []*side{
		{name: "kube-proxy", table: "kube-proxy", ns: c.sideNode(t, "hk", "172.18.0.20"), argv: append([]string{c.bin("kube-proxy"), "--proxy-mode=nftables",
			// A health timeout of 10 s (twice the sync period) for the stuck
			// sync; kube-proxy's flag for it is --iptables-sync-period, in
			// nftables mode too.
			"--iptables-sync-period=5s"}, args...)},
		{name: "svcproxy", table: "svcproxy", ns: c.sideNode(t, "hs", "172.18.0.21"), argv: append([]string{svcproxy, "--sync-period=5s"}, args...)},
	}

	// Start: from before the server listens to steady state after the first sync.
	for _, s := range sides {
		s.watch = watchHealth(s.ns)
		p, err := c.start("health-"+s.name, s.ns, s.argv...)
		if err != nil {
			t.Fatal(err)
		}
		s.proc = p
		t.Cleanup(func() { p.stop(5 * time.Second) })
	}
	time.Sleep(15 * time.Second)
	start := map[string]map[string][]string{}
	steady := map[string]healthAnswer{}
	for _, s := range sides {
		steady[s.name] = s.watch.last("/healthz")
		start[s.name] = s.watch.finish()
		t.Logf("%s from start: %q", s.name, start[s.name])
		t.Logf("%s steady /healthz: %d %s", s.name, steady[s.name].code, steady[s.name].body)
	}
	for name, a := range steady {
		if a.code != http.StatusOK || !strings.Contains(a.body, `"nodeEligible":true,"healthy":true`) {
			t.Errorf("%s steady /healthz: %d %s", name, a.code, a.body)
		}
	}
	for _, p := range []string{"/healthz", "/livez"} {
		if k, s := withoutPreLoop(start["kube-proxy"][p]), withoutPreLoop(start["svcproxy"][p]); !slices.Equal(k, s) {
			t.Errorf("%s from start differs:\nkube-proxy %q\nsvcproxy   %q", p, k, s)
		}
	}

	// A stuck sync: another program holds each proxy's table (an empty table of
	// the same name owned by a netlink socket of this test), so that every
	// transaction on it fails with EPERM, for kube-proxy's nft as for svcproxy's
	// netlink; then an endpoint change is queued. Both must go unhealthy once the
	// change has waited 10 s, and healthy again once the table is free.
	svc := service(t, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "health-stuck"},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80, Protocol: tcp}}},
	})
	slice := createSlice(t, stuckSlice(svc.Name, "10.244.1.250"))
	time.Sleep(3 * time.Second) // both program it
	var releases []func()
	for _, s := range sides {
		release, err := holdTable(s.ns, s.table)
		if err != nil {
			t.Fatal(err)
		}
		releases = append(releases, release)
		s.watch = watchHealth(s.ns)
	}
	slice.Endpoints[0].Addresses = []string{"10.244.1.251"}
	if _, err := c.client.DiscoveryV1().EndpointSlices(ns).Update(ctxFor(t, 30*time.Second), slice, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	queued := time.Now()
	poll.Eventually(t, 30*time.Second, "both /healthz to say 503", func() (bool, string) {
		var got []string
		for _, s := range sides {
			got = append(got, fmt.Sprintf("%s %d", s.name, s.watch.last("/healthz").code))
		}
		return !slices.ContainsFunc(sides, func(s *side) bool { return s.watch.last("/healthz").code != http.StatusServiceUnavailable }),
			strings.Join(got, ", ")
	})
	t.Logf("both unhealthy %v after the change was written", time.Since(queued).Round(time.Millisecond))
	for _, s := range sides {
		t.Logf("%s stuck /healthz: %s", s.name, s.watch.last("/healthz").body)
	}
	for _, release := range releases {
		release()
	}
	freed := time.Now()
	poll.Eventually(t, 60*time.Second, "both /healthz to say 200 again", func() (bool, string) {
		var got []string
		for _, s := range sides {
			got = append(got, fmt.Sprintf("%s %d", s.name, s.watch.last("/healthz").code))
		}
		return !slices.ContainsFunc(sides, func(s *side) bool { return s.watch.last("/healthz").code != http.StatusOK }),
			strings.Join(got, ", ")
	})
	t.Logf("both healthy %v after the tables were freed", time.Since(freed).Round(time.Millisecond))
	stuck := map[string]map[string][]string{}
	for _, s := range sides {
		stuck[s.name] = s.watch.finish()
		t.Logf("%s through the stuck sync: %q", s.name, stuck[s.name])
	}
	for _, p := range []string{"/healthz", "/livez"} {
		if k, s := stuck["kube-proxy"][p], stuck["svcproxy"][p]; !slices.Equal(k, s) {
			t.Errorf("%s through the stuck sync differs:\nkube-proxy %q\nsvcproxy   %q", p, k, s)
		}
	}

	// Shutdown: both get SIGTERM at once; answers until they are gone.
	for _, s := range sides {
		s.watch = watchHealth(s.ns)
	}
	time.Sleep(200 * time.Millisecond)
	for _, s := range sides {
		_ = s.proc.Cmd.Process.Signal(syscall.SIGTERM)
	}
	for _, s := range sides {
		select {
		case <-s.proc.Done():
		case <-time.After(10 * time.Second):
			t.Errorf("%s still runs 10 s after SIGTERM", s.name)
		}
	}
	time.Sleep(200 * time.Millisecond)
	shutdown := map[string]map[string][]string{}
	for _, s := range sides {
		shutdown[s.name] = s.watch.finish()
		t.Logf("%s through shutdown: %q", s.name, shutdown[s.name])
	}
	for _, p := range []string{"/healthz", "/livez"} {
		if k, s := shutdown["kube-proxy"][p], shutdown["svcproxy"][p]; !slices.Equal(k, s) {
			t.Errorf("%s through shutdown differs:\nkube-proxy %q\nsvcproxy   %q", p, k, s)
		}
	}
}

// withoutPreLoop drops a healthy answer without "status" that is followed by one
// with it: both proxies answer so between the start of their health server and
// the start of their sync loop (kube-proxy's Health() has no status entry before
// its SyncLoop's first Updated), a window of milliseconds that a poll sometimes
// catches and sometimes not.
func withoutPreLoop(answers []string) []string {
	var out []string
	for i, a := range answers {
		if i+1 < len(answers) && strings.HasPrefix(a, "200 ") && !strings.Contains(a, "status.") &&
			strings.HasPrefix(answers[i+1], "200 ") && strings.Contains(answers[i+1], "status.") {
			continue
		}
		out = append(out, a)
	}
	return out
}

func stuckSlice(svc, addr string) *discoveryv1.EndpointSlice {
	return &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: svc + "-1", Labels: map[string]string{discoveryv1.LabelServiceName: svc}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ref("http"), Port: ref(int32(80)), Protocol: ref(tcp)}},
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{addr}, Conditions: discoveryv1.EndpointConditions{Ready: ref(true)}}},
	}
}
