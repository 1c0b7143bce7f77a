//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	typeddiscoveryv1 "k8s.io/client-go/kubernetes/typed/discovery/v1"
	typednetworkingv1 "k8s.io/client-go/kubernetes/typed/networking/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/svcproxy/svcproxy/internal/netns"
	"github.com/svcproxy/svcproxy/pkg/endpoints"
	nodewatch "github.com/svcproxy/svcproxy/pkg/node"
)

// fleetProxy is one simulated svcproxy of TestBenchFleet: svcproxy's own
// informer code (the Service and EndpointSlice reflectors with pagedLister,
// streamList and the feed, the ServiceCIDR informer and the own-Node watch, as
// pkg/agent starts them) on an HTTP client of its own, as a separate process
// would have, feeding counters instead of trackers: a tracker per proxy at 30k
// Services would not fit 200 times in memory, and the point is what the API
// server pays.
type fleetProxy struct {
	name    string
	http    *http.Client
	stats   *fleetHTTPStats // shared by the fleet
	dials   atomic.Int64    // TCP connections this proxy opened
	objects atomic.Int64    // Services and EndpointSlices delivered
	synced  func() bool
	// syncedAt is set by the fleet's poll once synced returns true.
	syncedAt time.Time

	core       typedcorev1.CoreV1Interface
	discovery  typeddiscoveryv1.DiscoveryV1Interface
	networking typednetworkingv1.NetworkingV1Interface
	inf        endpoints.Informers
	cidrs      *endpoints.ServiceCIDRInformer
}

// fleetHTTPStats count what the fleet's requests got, at the transport: a
// 429 that client-go retries by itself shows here and nowhere else.
type fleetHTTPStats struct {
	requests, lists, watchLists, watches atomic.Int64
	tooMany, serverErr, otherErr, failed atomic.Int64
	// gzipped counts the responses the transport decompressed; wire the bytes
	// read from the API server's connections (TLS records, so what crossed the
	// network).
	gzipped, wire atomic.Int64
}

func (s *fleetHTTPStats) String() string {
	return fmt.Sprintf("%d requests (%d lists, %d watch-lists, %d watches; %d gzipped, %.0f MiB read), %d 429s, %d 5xx, %d other 4xx, %d failed",
		s.requests.Load(), s.lists.Load(), s.watchLists.Load(), s.watches.Load(), s.gzipped.Load(), float64(s.wire.Load())/(1<<20),
		s.tooMany.Load(), s.serverErr.Load(), s.otherErr.Load(), s.failed.Load())
}

type countingRT struct {
	rt    http.RoundTripper
	stats *fleetHTTPStats
}

// WrappedRoundTripper lets CloseIdleConnectionsFor reach the transport.
func (c countingRT) WrappedRoundTripper() http.RoundTripper { return c.rt }

func (c countingRT) RoundTrip(req *http.Request) (*http.Response, error) {
	s, q := c.stats, req.URL.Query()
	s.requests.Add(1)
	switch {
	case q.Get("sendInitialEvents") == "true":
		s.watchLists.Add(1)
	case q.Get("watch") == "true":
		s.watches.Add(1)
	default:
		s.lists.Add(1)
	}
	resp, err := c.rt.RoundTrip(req)
	switch {
	case err != nil:
		s.failed.Add(1)
	case resp.StatusCode == http.StatusTooManyRequests:
		s.tooMany.Add(1)
	case resp.StatusCode >= 500:
		s.serverErr.Add(1)
	case resp.StatusCode >= 400:
		s.otherErr.Add(1)
	}
	if err == nil && resp.Uncompressed {
		s.gzipped.Add(1)
	}
	return resp, err
}

// newFleetProxy builds proxy i's clients from the proxies' kubeconfig
// (system:kube-proxy, as the e2e proxies authenticate) with svcproxy's
// default client settings (protobuf, QPS 5, burst 10). Its Dial is a closure
// of its own: client-go shares one transport (so one HTTP/2 connection) among
// configs it finds equal, and a distinct Dial makes them unequal, so every
// proxy has its own connection; TestBenchFleet counts them.
func (c *cluster) newFleetProxy(i int, mode string, stats *fleetHTTPStats) (*fleetProxy, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", c.proxyKC)
	if err != nil {
		return nil, fmt.Errorf("fleet proxy %d: kubeconfig: %w", i, err)
	}
	p := &fleetProxy{name: fmt.Sprintf("fleet-node-%d", i), stats: stats}
	dial := netns.DialFunc(c.cp().netns, 10*time.Second)
	cfg.Dial = func(ctx context.Context, network, addr string) (net.Conn, error) {
		p.dials.Add(1)
		conn, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return wireCountingConn{Conn: conn, read: &stats.wire}, nil
	}
	// What a kubeconfig's disable-compression sets.
	cfg.DisableCompression = mode == fleetListUncompressed
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper { return countingRT{rt: rt, stats: stats} }
	cfg.UserAgent = "svcproxy"
	cfg.ContentType = "application/vnd.kubernetes.protobuf"
	cfg.QPS, cfg.Burst = 5, 10
	if p.http, err = rest.HTTPClientFor(cfg); err != nil {
		return nil, fmt.Errorf("fleet proxy %d: http client: %w", i, err)
	}
	if p.core, err = typedcorev1.NewForConfigAndClient(cfg, p.http); err != nil {
		return nil, fmt.Errorf("fleet proxy %d: %w", i, err)
	}
	if p.discovery, err = typeddiscoveryv1.NewForConfigAndClient(cfg, p.http); err != nil {
		return nil, fmt.Errorf("fleet proxy %d: %w", i, err)
	}
	if p.networking, err = typednetworkingv1.NewForConfigAndClient(cfg, p.http); err != nil {
		return nil, fmt.Errorf("fleet proxy %d: %w", i, err)
	}
	clients := endpoints.Clients{Core: p.core, Discovery: p.discovery,
		CoreREST: p.core.RESTClient(), DiscoveryREST: p.discovery.RESTClient(), StreamFirstList: mode == fleetWatchList}
	// pkg/agent's selector: Services of other proxies and headless ones are left out.
	p.inf = endpoints.NewInformers(clients, func(lo *metav1.ListOptions) {
		lo.LabelSelector = "!service.kubernetes.io/service-proxy-name,!service.kubernetes.io/headless"
	}, endpoints.RetryOptions{})
	p.synced = endpoints.RegisterFuncs(p.inf, func(any) { p.objects.Add(1) }, func(any) {})
	tr := endpoints.NewServiceCIDRTracker(endpoints.ServiceCIDRTrackerOptions{})
	p.cidrs = endpoints.NewServiceCIDRInformer(p.networking, tr, endpoints.ServiceCIDROptions{})
	return p, nil
}

// start runs the informers until ctx ends, as pkg/agent's watchCluster,
// watchServiceCIDRs and node.Watch do at a proxy's start.
func (p *fleetProxy) start(ctx context.Context) {
	p.inf.Start(ctx.Done())
	p.cidrs.Start(ctx.Done())
	// Its Node does not exist: one object less to list, the same requests.
	// wait 0: node.Watch returns at once and leaves the informer running.
	go nodewatch.Watch(ctx, p.core, nil, p.name, 0)
}

// wireCountingConn counts the bytes read from the API server.
type wireCountingConn struct {
	net.Conn
	read *atomic.Int64
}

func (c wireCountingConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	c.read.Add(int64(n))
	return n, err
}

// close drops the proxy's idle connections once its informers stopped.
func (p *fleetProxy) close() { utilnet.CloseIdleConnectionsFor(p.http.Transport) }

// apiServerConns counts the established TCP connections to the API server's
// address on the bridge (where the proxies' kubeconfig points; the control
// plane's own clients use 127.0.0.1), seen from the client side inside the
// control-plane namespace, where the fleet dials from.
func (c *cluster) apiServerConns() (int, error) {
	out, err := netns.Exec(c.cp().netns, "ss", "-Htn", "state", "established", "dst", net.JoinHostPort(c.cp().ip, fmt.Sprint(apiPort)))
	if err != nil {
		return 0, err
	}
	n := 0
	for _, l := range strings.Split(out, "\n") {
		if strings.TrimSpace(l) != "" {
			n++
		}
	}
	return n, nil
}
