package agent

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/flowcontrol"

	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	typeddiscoveryv1 "k8s.io/client-go/kubernetes/typed/discovery/v1"
	typedeventsv1 "k8s.io/client-go/kubernetes/typed/events/v1"
	typednetworkingv1 "k8s.io/client-go/kubernetes/typed/networking/v1"

	"github.com/svcproxy/svcproxy/pkg/endpoints"
)

// cluster holds the typed clients of the API groups svcproxy calls, and no
// others: client-go's Clientset (k8s.io/client-go/kubernetes) and informer
// factory would make every build compile the clients, informers and listers
// of every API group, doubling a fresh clone's first build.
// cmd/svcproxy's TestNoWholeClientset keeps it that way.
type cluster struct {
	core      typedcorev1.CoreV1Interface           // Services, Nodes, core/v1 Events
	discovery typeddiscoveryv1.DiscoveryV1Interface // EndpointSlices
	events    typedeventsv1.EventsV1Interface       // the start-up Event
	// networking serves ServiceCIDRs (the service CIDRs whose unallocated
	// addresses are dropped).
	networking typednetworkingv1.NetworkingV1Interface
	// watchList is asked by the reflectors whether the client can stream
	// lists; nil (it can) for a real client, the fake Clientset in tests.
	watchList any
	// coreREST and discoveryREST stream the Service and EndpointSlice lists
	// and decode their watches trimmed (endpoints.Clients,
	// endpoints.TrimmingRESTClient); nil for the fake Clientset.
	coreREST, discoveryREST rest.Interface
}

// endpointsClients are the clients the Service and EndpointSlice informers use.
func (c cluster) endpointsClients() endpoints.Clients {
	return endpoints.Clients{Core: c.core, Discovery: c.discovery, WatchList: c.watchList, CoreREST: c.coreREST, DiscoveryREST: c.discoveryREST}
}

// clusterClient connects to the cluster as kube-proxy does: in-cluster config, or
// --kubeconfig/--master; clientConnection's content types (protobuf by default),
// QPS and burst.
func clusterClient(o *Options) (cluster, error) {
	var cfg *rest.Config
	var err error
	if o.Kubeconfig == "" && o.Master == "" {
		cfg, err = rest.InClusterConfig()
	} else {
		cfg, err = clientcmd.BuildConfigFromFlags(o.Master, o.Kubeconfig)
	}
	if err != nil {
		return cluster{}, fmt.Errorf("kubernetes client config: %w", err)
	}
	cfg.UserAgent = "svcproxy"
	// clientConnection's settings, as kube-proxy's createClient sets them.
	cc := o.Config.ClientConnection
	cfg.AcceptContentTypes, cfg.ContentType, cfg.QPS, cfg.Burst = cc.AcceptContentTypes, cc.ContentType, cc.QPS, int(cc.Burst)
	c, err := newCluster(cfg)
	if err != nil {
		return cluster{}, fmt.Errorf("kubernetes client: %w", err)
	}
	return c, nil
}

// newCluster is kubernetes.NewForConfig for our four groups: one HTTP client
// (one connection pool) and one QPS/burst rate limiter shared by all of them.
func newCluster(cfg *rest.Config) (cluster, error) {
	cfg = rest.CopyConfig(cfg)
	if cfg.RateLimiter == nil && cfg.QPS > 0 {
		if cfg.Burst <= 0 {
			return cluster{}, fmt.Errorf("burst must be greater than 0 when QPS is set")
		}
		cfg.RateLimiter = flowcontrol.NewTokenBucketRateLimiter(cfg.QPS, cfg.Burst)
	}
	httpClient, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return cluster{}, fmt.Errorf("http client: %w", err)
	}
	var c cluster
	if c.core, err = typedcorev1.NewForConfigAndClient(cfg, httpClient); err != nil {
		return cluster{}, fmt.Errorf("core/v1 client: %w", err)
	}
	if c.discovery, err = typeddiscoveryv1.NewForConfigAndClient(cfg, httpClient); err != nil {
		return cluster{}, fmt.Errorf("discovery/v1 client: %w", err)
	}
	if c.events, err = typedeventsv1.NewForConfigAndClient(cfg, httpClient); err != nil {
		return cluster{}, fmt.Errorf("events/v1 client: %w", err)
	}
	if c.networking, err = typednetworkingv1.NewForConfigAndClient(cfg, httpClient); err != nil {
		return cluster{}, fmt.Errorf("networking.k8s.io/v1 client: %w", err)
	}
	if c.coreREST, err = endpoints.TrimmingRESTClient(cfg, httpClient, corev1.SchemeGroupVersion, "/api"); err != nil {
		return cluster{}, fmt.Errorf("core/v1 REST client: %w", err)
	}
	if c.discoveryREST, err = endpoints.TrimmingRESTClient(cfg, httpClient, discoveryv1.SchemeGroupVersion, "/apis"); err != nil {
		return cluster{}, fmt.Errorf("discovery/v1 REST client: %w", err)
	}
	return c, nil
}
