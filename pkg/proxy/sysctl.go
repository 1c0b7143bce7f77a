package proxy

import (
	"fmt"
	"os"
	"strings"
)

// Sysctls svcproxy reads or writes, in the network namespace of the calling thread.
const (
	sysctlRouteLocalnet  = "/proc/sys/net/ipv4/conf/all/route_localnet"
	sysctlTCPBeLiberal   = "/proc/sys/net/netfilter/nf_conntrack_tcp_be_liberal"
	routeLocalnetEnabled = "1"
	tcpBeLiberalDisabled = "0"
)

// ReadConntrackTCPLiberal reports whether nf_conntrack_tcp_be_liberal is set in the
// caller's network namespace (for Options.ConntrackTCPLiberal). A missing sysctl
// (conntrack not loaded yet) reads as not set, as kube-proxy reads it.
func ReadConntrackTCPLiberal() bool {
	b, err := os.ReadFile(sysctlTCPBeLiberal)
	if err != nil {
		return false
	}
	return strings.TrimSpace(string(b)) != tcpBeLiberalDisabled
}

// ensureRouteLocalnet sets net.ipv4.conf.all.route_localnet=1, which localhost
// NodePorts need: without it the kernel drops a packet from 127.0.0.1 that a DNAT
// sends out of a non-loopback interface. Called before every sync that programs
// localhost NodePorts; set is Config.SetSysctl (nil: nothing is written).
func ensureRouteLocalnet(set func(path, value string) error) error {
	if set == nil {
		return nil
	}
	if err := set(sysctlRouteLocalnet, routeLocalnetEnabled); err != nil {
		return fmt.Errorf("set route_localnet=1 for localhost NodePorts: %w", err)
	}
	return nil
}

// WriteProcSysUnder is WriteProcSys with /proc/sys found at dir instead: a pod
// that is not privileged has /proc/sys mounted read-only, and svcproxy's
// DaemonSet mounts the node's /proc/sys/net writable elsewhere (a /proc/sys/net
// file answers for the network namespace of whoever opens it, so this is still
// the node's). dir "" or "/proc/sys" is WriteProcSys.
func WriteProcSysUnder(dir string) func(path, value string) error {
	dir = strings.TrimSuffix(dir, "/")
	if dir == "" || dir == procSys {
		return WriteProcSys
	}
	return func(path, value string) error {
		rel, ok := strings.CutPrefix(path, procSys+"/")
		if !ok {
			return fmt.Errorf("sysctl %s is not under %s", path, procSys)
		}
		return WriteProcSys(dir+"/"+rel, value)
	}
}

const procSys = "/proc/sys"

// WriteProcSys writes value to a /proc/sys path unless it holds it already, in the
// network namespace of the calling process: Config.SetSysctl for a Proxy that
// programs its own namespace.
func WriteProcSys(path, value string) error {
	if b, err := os.ReadFile(path); err == nil && strings.TrimSpace(string(b)) == value {
		return nil
	}
	return os.WriteFile(path, []byte(value), 0o644)
}
