//go:build e2e

package e2e

import (
	"fmt"
	"net"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/svcproxy/svcproxy/internal/netns"
	"github.com/svcproxy/svcproxy/internal/poll"
	"github.com/svcproxy/svcproxy/internal/sctpprobe"
)

// TestNodePortSCTP: an SCTP NodePort reached from outside through worker 1,
// its endpoint on worker 2, in every family of the cluster (the Service is
// dual-stack in a dual-stack cluster). This machine's kernel has SCTP
// conntrack and NAT but no SCTP sockets (CONFIG_IP_SCTP unset:
// socket(AF_INET, SOCK_STREAM, IPPROTO_SCTP) fails with EPROTONOSUPPORT), so
// no echo server can listen on SCTP: the outside sends INIT chunks on a raw
// socket and the test reads, on a raw socket in the pod's namespace, what
// arrives there and at which port.
func TestNodePortSCTP(t *testing.T) {
	r := track(t)
	c := theCluster
	w1, w2 := c.workers()[0], c.workers()[1]
	lbl := map[string]string{"app": "np-sctp"}
	pod(t, "np-sctp-1", w2.name, lbl, corev1.ContainerPort{ContainerPort: 9, Protocol: corev1.ProtocolSCTP})
	svc := service(t, c.bothFamilies(nodePortService("np-sctp", 9, corev1.ProtocolSCTP, lbl)))
	np := uint16(svc.Spec.Ports[0].NodePort)
	p := waitPods(t, lbl, 1)[0]
	waitEndpoints(t, "np-sctp", []corev1.Pod{p})
	// Tags and source ports stay distinct across families: an INIT of one
	// family is never taken for the other's.
	attempt := uint32(0)
	eachFamily(t, r, "reached_after_ms", func(f corev1.IPFamily) string {
		return sctpNodePort(t, f, &p, w1, np, &attempt)
	})
	r.metric(t, "attempts", "%d", attempt)
}

// sctpNodePort sends INITs from the outside's address of family f to worker
// 1's NodePort np until one reaches pod p at its port 9, checks it was
// masqueraded to worker 1's address (externalTrafficPolicy Cluster) and
// returns how long that took in ms.
func sctpNodePort(t *testing.T, f corev1.IPFamily, p *corev1.Pod, w1 *node, np uint16, attempt *uint32) string {
	t.Helper()
	c := theCluster
	network := "ip4:sctp"
	if f == corev1.IPv6Protocol {
		network = "ip6:sctp"
	}
	podIP, outIP, nodeAddr := ofFamily(podIPStrings(*p), f), ofFamily([]string{outsideIPv4, outsideIP6}, f), nodeIP(w1, f)
	recv, err := netns.ListenPacket(podNetns(p), network, podIP)
	if err != nil {
		t.Fatalf("raw SCTP socket in the pod (%s): %v", f, err)
	}
	defer recv.Close()
	send, err := netns.ListenPacket(c.outsideNetns(), network, outIP)
	if err != nil {
		t.Fatalf("raw SCTP socket outside (%s): %v", f, err)
	}
	defer send.Close()

	// A new source port and tag per attempt: an INIT that came before the
	// rules left an untranslated conntrack entry for its ports.
	start := time.Now()
	var from net.Addr
	poll.Eventually(t, 30*time.Second, fmt.Sprintf("an SCTP INIT to the NodePort on %s reaches the pod at its port", nodeAddr), func() (bool, string) {
		*attempt++
		if _, err := send.WriteTo(sctpprobe.Init(uint16(41000+*attempt), np, *attempt), &net.IPAddr{IP: net.ParseIP(nodeAddr)}); err != nil {
			return false, err.Error()
		}
		src, dport, ok := sctpprobe.AwaitInit(recv, *attempt, 300*time.Millisecond)
		switch {
		case !ok:
			return false, fmt.Sprintf("%d INITs, none arrived", *attempt)
		case dport != 9:
			return false, fmt.Sprintf("arrived at port %d, want 9", dport)
		}
		from = src
		return true, ""
	})
	took := time.Since(start)
	// externalTrafficPolicy Cluster: masqueraded to worker 1's address.
	if from.String() != nodeAddr {
		t.Errorf("the INIT over %s arrived from %s, want worker 1's %s (masqueraded)", f, from, nodeAddr)
	}
	return ms(took)
}
