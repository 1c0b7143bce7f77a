// Package healthcheck serves the health check node ports of Services with
// externalTrafficPolicy: Local (spec.healthCheckNodePort), the way kube-proxy's
// service health server does: one HTTP listener per port on the NodePort
// addresses, 200 while this node has local endpoints for the Service and the
// proxy is healthy, 503 otherwise, so that a cloud load balancer sends
// traffic only to nodes that can serve it without a second hop.
package healthcheck

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/klog/v2"

	"github.com/svcproxy/svcproxy/pkg/endpoints"
	"github.com/svcproxy/svcproxy/pkg/nodeaddr"
)

// Service is what the server needs of one Local Service.
type Service struct {
	NodePort       uint16 // spec.healthCheckNodePort
	LocalEndpoints int    // usable endpoints on this node
}

// Config wires a Server.
type Config struct {
	// Healthy is the proxy's own health (kube-proxy's serviceProxyHealthy: no
	// change waiting past the health timeout); nil: always healthy.
	Healthy func() bool
	// Listen opens a listener (nil: net.Listen); tests open them in a namespace.
	Listen func(network, addr string) (net.Listener, error)
	// OnListenError is called once per Service, port and error when a port
	// cannot be bound (kube-proxy posts a FailedToStartServiceHealthcheck
	// Event); the server retries on every Sync.
	OnListenError func(svc endpoints.ServiceKey, port uint16, err error)
	// ListenFailures counts those failures (nil: not counted).
	ListenFailures prometheus.Counter
}

// Server holds one instance per Service with a health check node port.
type Server struct {
	cfg Config

	mu        sync.RWMutex
	binds     []bind // where every port listens; see Binds
	desired   map[endpoints.ServiceKey]Service
	instances map[endpoints.ServiceKey]*instance
	failed    map[endpoints.ServiceKey]string // port and error last reported
}

type instance struct {
	port      uint16
	servers   []*http.Server
	listeners []net.Listener
}

// addrs are the addresses the instance listens on (for tests and logs).
func (inst *instance) addrs() []string {
	out := make([]string, len(inst.listeners))
	for i, l := range inst.listeners {
		out[i] = l.Addr().String()
	}
	return out
}

// New returns a Server that listens on every address until SetAddresses says otherwise.
func New(cfg Config) *Server {
	if cfg.Listen == nil {
		cfg.Listen = net.Listen
	}
	return &Server{
		cfg:       cfg,
		binds:     []bind{{network: "tcp"}},
		desired:   map[endpoints.ServiceKey]Service{},
		instances: map[endpoints.ServiceKey]*instance{},
		failed:    map[endpoints.ServiceKey]string{},
	}
}

// Sync makes the listeners match services: new ports open, gone or changed ones
// close, and the local endpoint counts the handlers answer with are updated.
// A port that could not be bound before is tried again.
func (s *Server) Sync(services map[endpoints.ServiceKey]Service) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.desired = make(map[endpoints.ServiceKey]Service, len(services))
	for k, v := range services {
		s.desired[k] = v
	}
	s.reconcile()
}

// SetAddresses changes the addresses the ports listen on to the NodePort
// addresses (see Binds); every open port is reopened there.
func (s *Server) SetAddresses(sel nodeaddr.Selection) {
	binds := Binds(sel)
	s.mu.Lock()
	defer s.mu.Unlock()
	if equalBinds(binds, s.binds) {
		return
	}
	s.binds = binds
	for k, inst := range s.instances {
		inst.close()
		delete(s.instances, k)
	}
	s.reconcile()
}

// Close closes every listener.
func (s *Server) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, inst := range s.instances {
		inst.close()
		delete(s.instances, k)
	}
	s.desired = map[endpoints.ServiceKey]Service{}
}

// Ports returns the open ports by Service (for tests and logs).
func (s *Server) Ports() map[endpoints.ServiceKey]uint16 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make(map[endpoints.ServiceKey]uint16, len(s.instances))
	for k, inst := range s.instances {
		out[k] = inst.port
	}
	return out
}

// reconcile runs with mu held.
func (s *Server) reconcile() {
	for k, inst := range s.instances {
		if want, ok := s.desired[k]; !ok || want.NodePort != inst.port {
			klog.V(2).InfoS("Closing health check node port", "service", k, "port", inst.port)
			inst.close()
			delete(s.instances, k)
		}
	}
	for k := range s.failed {
		if _, ok := s.desired[k]; !ok {
			delete(s.failed, k)
		}
	}
	for k, want := range s.desired {
		if s.instances[k] != nil || want.NodePort == 0 {
			continue
		}
		inst, err := s.open(k, want.NodePort)
		if err != nil {
			s.reportFailure(k, want.NodePort, err)
			continue
		}
		if _, was := s.failed[k]; was {
			klog.InfoS("Health check node port open after all", "service", k, "port", want.NodePort)
			delete(s.failed, k)
		}
		klog.V(2).InfoS("Opened health check node port", "service", k, "port", want.NodePort)
		s.instances[k] = inst
	}
}

// reportFailure logs, counts and reports a failure once per Service, port and
// error, not on every retry.
func (s *Server) reportFailure(k endpoints.ServiceKey, port uint16, err error) {
	what := strconv.Itoa(int(port)) + " " + err.Error()
	if s.failed[k] == what {
		return
	}
	s.failed[k] = what
	klog.ErrorS(err, "Failed to open the health check node port; retrying every sync", "service", k, "port", port)
	if s.cfg.ListenFailures != nil {
		s.cfg.ListenFailures.Inc()
	}
	if s.cfg.OnListenError != nil {
		s.cfg.OnListenError(k, port, err)
	}
}

// open listens on every bind address; all or nothing, so that a retry can
// bind them all.
func (s *Server) open(k endpoints.ServiceKey, port uint16) (*instance, error) {
	inst := &instance{port: port}
	for _, b := range s.binds {
		l, err := s.cfg.Listen(b.network, net.JoinHostPort(b.host, strconv.Itoa(int(port))))
		if err != nil {
			inst.close()
			return nil, err
		}
		srv := &http.Server{Handler: handler{svc: k, s: s}, ReadHeaderTimeout: 5 * time.Second}
		inst.servers = append(inst.servers, srv)
		inst.listeners = append(inst.listeners, l)
		go func() {
			if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
				klog.ErrorS(err, "Health check node port stopped", "service", k, "address", l.Addr().String())
			}
		}()
	}
	return inst, nil
}

func (inst *instance) close() {
	for _, srv := range inst.servers {
		// Close, not Shutdown: the port must be free when this returns so that
		// a new instance (or another program) can take it.
		_ = srv.Close()
	}
	// http.Server.Close only closes listeners its Serve goroutine has already
	// registered; one that has not run yet would close its listener later, with
	// the port still taken when the instance is reopened elsewhere.
	for _, l := range inst.listeners {
		_ = l.Close()
	}
	inst.servers, inst.listeners = nil, nil
}

// answer is what the handler of svc says now.
func (s *Server) answer(svc endpoints.ServiceKey) (localEndpoints int, open bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.instances[svc] == nil {
		return 0, false
	}
	return s.desired[svc].LocalEndpoints, true
}

func (s *Server) proxyHealthy() bool { return s.cfg.Healthy == nil || s.cfg.Healthy() }

// CloseOnDone closes every listener when ctx ends.
func (s *Server) CloseOnDone(ctx context.Context) {
	go func() {
		<-ctx.Done()
		s.Close()
	}()
}
