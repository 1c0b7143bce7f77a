package endpoints

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"time"

	v1 "k8s.io/api/core/v1"
)

// LabelServiceProxyName marks a Service as handled by another proxy. It is
// the same label kube-proxy honours (k8s.io/kubernetes/pkg/proxy/apis), which
// we cannot import without depending on all of k8s.io/kubernetes.
const LabelServiceProxyName = "service.kubernetes.io/service-proxy-name"

const (
	// defaultAffinityTimeout is v1.DefaultClientIPServiceAffinitySeconds.
	defaultAffinityTimeout = time.Duration(v1.DefaultClientIPServiceAffinitySeconds) * time.Second
	// maxAffinityTimeoutSeconds is the API validation limit (one day).
	maxAffinityTimeoutSeconds = 86400
)

// errSkipped marks Services that are legitimately not ours to proxy, as
// opposed to malformed ones, so only the latter reach OnInvalid. It is returned
// as is, never wrapped: no one reads why, and each tracker of a dual-stack node
// skips every Service of the other family, 100k error values at 100k
// single-stack Services.
var errSkipped = errors.New("service not proxied")

// serviceKeyOf returns the key of a Service.
func serviceKeyOf(svc *v1.Service) ServiceKey {
	return ServiceKey{Namespace: svc.Namespace, Name: svc.Name}
}

// servicePorts extracts the proxied ports of svc for family fam, sorted by
// ServicePortName. It returns nil when the Service is to be treated as absent.
// Problems with single ports are passed to report and only that port is
// dropped, so one bad port does not take down the others.
func servicePorts(svc *v1.Service, fam Family, report func(error)) []ServicePort {
	ip, err := serviceClusterIP(svc, fam, report)
	if err != nil {
		if !errors.Is(err, errSkipped) {
			report(err)
		}
		return nil
	}
	affinity, timeout := serviceAffinity(svc, report)
	internalLocal := svc.Spec.InternalTrafficPolicy != nil && *svc.Spec.InternalTrafficPolicy == v1.ServiceInternalTrafficPolicyLocal
	ext := externalOf(svc, fam, report)

	key := serviceKeyOf(svc)
	out := make([]ServicePort, 0, len(svc.Spec.Ports))
	seen := make(map[ServicePortName]bool, len(svc.Spec.Ports))
	// byNumber: which spec.ports entry has each protocol/port; two would render to
	// the same ClusterIP . protocol . port key.
	byNumber := make(map[slicePort]int, len(svc.Spec.Ports))
	byNodePort := make(map[slicePort]int, len(svc.Spec.Ports))
	for i, p := range svc.Spec.Ports {
		proto, err := protocolOf(string(p.Protocol))
		if err != nil {
			report(fmt.Errorf("spec.ports[%d] (%q): %w", i, p.Name, err))
			continue
		}
		port, err := portNumber(p.Port)
		if err != nil {
			report(fmt.Errorf("spec.ports[%d] (%q): %w", i, p.Name, err))
			continue
		}
		name := ServicePortName{Namespace: key.Namespace, Name: key.Name, Port: p.Name, Protocol: proto}
		if seen[name] {
			// Validation forbids this; keeping the first makes the outcome
			// independent of anything but the object itself.
			report(fmt.Errorf("spec.ports[%d]: duplicate port name %q for %s", i, p.Name, proto))
			continue
		}
		num := slicePort{Protocol: proto, Port: port}
		if first, dup := byNumber[num]; dup {
			// Validation forbids this too; the first in spec order is proxied.
			report(fmt.Errorf("spec.ports[%d] (%q): port %d/%s is already spec.ports[%d] (%q), which is used instead",
				i, p.Name, port, proto, first, svc.Spec.Ports[first].Name))
			continue
		}
		byNumber[num] = i
		seen[name] = true
		sp := ServicePort{
			Name:                name,
			ClusterIP:           ip,
			Port:                port,
			SessionAffinity:     affinity,
			AffinityTimeout:     timeout,
			InternalLocal:       internalLocal,
			NodePort:            nodePortOf(svc, ext, i, byNodePort, report),
			ExternalIPs:         ext.externalIPs,
			LoadBalancerIPs:     ext.lbIPs,
			SourceRanges:        ext.sourceRanges,
			HealthCheckNodePort: ext.healthCheckPort,
		}
		if sp.SourceRanges != "" && sp.LoadBalancerIPs == "" {
			sp.SourceRanges = "" // they guard load balancer IPs only, as in kube-proxy
		}
		sp.ExternalLocal = ext.local && sp.External()
		out = append(out, sp)
	}
	if hc := ext.healthCheckPort; hc != 0 {
		// The nodePort's rule would take the load balancer's probes to a pod.
		if i, dup := byNodePort[slicePort{Protocol: string(v1.ProtocolTCP), Port: hc}]; dup {
			report(fmt.Errorf("spec.healthCheckNodePort %d is also spec.ports[%d] (%q)'s nodePort, which keeps it: no health check", hc, i, svc.Spec.Ports[i].Name))
			for j := range out {
				out[j].HealthCheckNodePort = 0
			}
		}
	}
	if len(out) == 0 {
		return nil
	}
	slices.SortFunc(out, func(a, b ServicePort) int { return compareServicePortName(a.Name, b.Name) })
	return out
}

// serviceClusterIP picks the cluster IP of family fam, or says why there is
// none: errSkipped for a Service that is not ours to proxy (a single-stack
// Service of the other family among them), an error for a malformed one.
func serviceClusterIP(svc *v1.Service, fam Family, report func(error)) (netip.Addr, error) {
	if _, ok := svc.Labels[LabelServiceProxyName]; ok {
		return netip.Addr{}, errSkipped // another proxy's Service
	}
	if svc.Spec.Type == v1.ServiceTypeExternalName {
		return netip.Addr{}, errSkipped // a DNS name, nothing to proxy
	}
	if svc.Spec.ClusterIP == "" || svc.Spec.ClusterIP == v1.ClusterIPNone {
		return netip.Addr{}, errSkipped // headless
	}
	// clusterIPs[0] always equals clusterIP when both are set; older objects
	// may only have clusterIP.
	candidates := svc.Spec.ClusterIPs
	if len(candidates) == 0 {
		candidates = []string{svc.Spec.ClusterIP}
	}
	var parseErrs []error
	for i, s := range candidates {
		addr, err := parseIP(s)
		if err != nil {
			parseErrs = append(parseErrs, fmt.Errorf("spec.clusterIPs[%d]: %w", i, err))
			continue
		}
		if addr.Is4In6() {
			parseErrs = append(parseErrs, fmt.Errorf("spec.clusterIPs[%d]: %s %s: Service not proxied", i, addr, mappedReason))
			continue
		}
		if fam.matches(addr) {
			if why := ReservedReason(addr); why != "" {
				// Capturing it would take the node's own traffic (127.0.0.1:80 is
				// every local client's port 80), even after svcproxy exits.
				return netip.Addr{}, fmt.Errorf("spec.clusterIPs[%d]: %s %s: a node must never capture it; Service not proxied", i, addr, why)
			}
			// A bad secondary entry is still worth reporting even though we
			// found a usable one.
			for _, e := range parseErrs {
				report(e)
			}
			return addr, nil
		}
	}
	if len(parseErrs) > 0 {
		return netip.Addr{}, errors.Join(parseErrs...)
	}
	return netip.Addr{}, errSkipped // the other family's
}

// serviceAffinity returns whether ClientIP affinity is on and its timeout.
func serviceAffinity(svc *v1.Service, report func(error)) (bool, time.Duration) {
	switch svc.Spec.SessionAffinity {
	case "", v1.ServiceAffinityNone:
		return false, 0
	case v1.ServiceAffinityClientIP:
	default:
		report(fmt.Errorf("spec.sessionAffinity %q unknown, using None", svc.Spec.SessionAffinity))
		return false, 0
	}
	cfg := svc.Spec.SessionAffinityConfig
	if cfg == nil || cfg.ClientIP == nil || cfg.ClientIP.TimeoutSeconds == nil {
		return true, defaultAffinityTimeout
	}
	secs := *cfg.ClientIP.TimeoutSeconds
	if secs <= 0 || secs > maxAffinityTimeoutSeconds {
		report(fmt.Errorf("spec.sessionAffinityConfig.clientIP.timeoutSeconds %d out of range (1..%d), using %d",
			secs, maxAffinityTimeoutSeconds, v1.DefaultClientIPServiceAffinitySeconds))
		return true, defaultAffinityTimeout
	}
	return true, time.Duration(secs) * time.Second
}

// nodePortOf returns spec.ports[i].nodePort when the Service's type serves NodePorts,
// 0 otherwise. A bad or repeated one (validation forbids both) is reported and only
// that NodePort dropped, so the port's ClusterIP keeps working.
func nodePortOf(svc *v1.Service, ext external, i int, seen map[slicePort]int, report func(error)) uint16 {
	p := svc.Spec.Ports[i]
	if p.NodePort == 0 {
		return 0 // none asked, or allocateLoadBalancerNodePorts: false
	}
	if !ext.hasNodePorts {
		report(fmt.Errorf("spec.ports[%d] (%q): nodePort %d ignored: type is %q", i, p.Name, p.NodePort, svc.Spec.Type))
		return 0
	}
	n, err := portNumber(p.NodePort)
	if err != nil {
		report(fmt.Errorf("spec.ports[%d] (%q): nodePort: %w", i, p.Name, err))
		return 0
	}
	proto, _ := protocolOf(string(p.Protocol))
	k := slicePort{Protocol: proto, Port: n}
	if first, dup := seen[k]; dup {
		report(fmt.Errorf("spec.ports[%d] (%q): nodePort %d/%s is already spec.ports[%d]'s, which keeps it", i, p.Name, n, proto, first))
		return 0
	}
	seen[k] = i
	return n
}

// protocolOf validates a protocol, applying the API default (TCP) for "".
func protocolOf(p string) (string, error) {
	switch v1.Protocol(p) {
	case "":
		return string(v1.ProtocolTCP), nil
	case v1.ProtocolTCP, v1.ProtocolUDP, v1.ProtocolSCTP:
		return p, nil
	default:
		return "", fmt.Errorf("unknown protocol %q", p)
	}
}

// portNumber validates a port number from the API's int32.
func portNumber(p int32) (uint16, error) {
	if p < 1 || p > 65535 {
		return 0, fmt.Errorf("port %d out of range (1..65535)", p)
	}
	return uint16(p), nil
}
