package proxy

import (
	"net"
	"net/netip"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/utils/ptr"

	"github.com/svcproxy/svcproxy/internal/netns"
	"github.com/svcproxy/svcproxy/internal/sctpprobe"
)

// TestKernelSCTPNodePort: an SCTP INIT from an outside client to a NodePort reaches
// the endpoint pod translated to its port. This kernel has no SCTP sockets
// (CONFIG_IP_SCTP unset: socket(AF_INET, SOCK_STREAM, IPPROTO_SCTP) fails with
// EPROTONOSUPPORT) but has SCTP conntrack and NAT, so the client writes the INIT on
// a raw IP socket and the pod reads what arrives on another. The first INIT, sent
// before the Service exists, leaves an untranslated conntrack entry for the same
// ports: the second reaches the pod only because the conntrack reconciler deletes
// it (without the node's addresses, which its NodePort keys need, it does not).
func TestKernelSCTPNodePort(t *testing.T) {
	e := newKenv(t)
	out := addOutside(t, e, "sctp", "172.18.0.2", "172.18.0.1")
	// The node's addresses, for the conntrack reconciler's NodePort keys.
	e.p.SetNodeAddresses([]netip.Addr{netip.MustParseAddr("172.18.0.2")}, true)
	e.sync(t) // the table, without the Service
	pod, err := netns.ListenPacket(e.w.Pods["pod1"].Name, "ip4:sctp", podIPs["pod1"])
	if err != nil {
		t.Fatal(err)
	}
	defer pod.Close()
	send, err := netns.ListenPacket(out.Name, "ip4:sctp", "172.18.0.1")
	if err != nil {
		t.Fatal(err)
	}
	defer send.Close()
	init := func(tag uint32) {
		t.Helper()
		if _, err := send.WriteTo(sctpprobe.Init(40132, 30132, tag), &net.IPAddr{IP: net.ParseIP("172.18.0.2")}); err != nil {
			t.Fatal(err)
		}
	}

	init(1)
	if _, got, ok := sctpprobe.AwaitInit(pod, 1, 500*time.Millisecond); ok {
		t.Fatalf("an INIT to a NodePort no Service has reached the pod at port %d", got)
	}

	svc := testService("sctp", "10.96.0.50", false, v1.ServicePort{Name: "s", Port: 9, Protocol: v1.ProtocolSCTP, NodePort: 30132})
	svc.Spec.Type = v1.ServiceTypeNodePort
	e.tr.OnServiceAdd(svc)
	slice := testSlice("sctp", readyEP("pod1"))
	slice.Ports = []discoveryv1.EndpointPort{{Name: ptr.To("s"), Protocol: ptr.To(v1.ProtocolSCTP), Port: ptr.To[int32](9)}}
	e.tr.OnEndpointSliceAdd(slice)
	e.sync(t)
	init(2)
	_, port, ok := sctpprobe.AwaitInit(pod, 2, 2*time.Second)
	if !ok {
		t.Fatal("the INIT to the SCTP NodePort did not reach the endpoint pod")
	}
	if port != 9 {
		t.Fatalf("the INIT reached the pod at port %d, want the endpoint's 9", port)
	}
}
