package proxy

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strings"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/svcproxy/svcproxy/internal/netns"
	"github.com/svcproxy/svcproxy/internal/netnstest"
)

// TestKernelInvalidDropped proves filter-forward's "ct state invalid drop" with the
// packet it exists for (kubernetes #74839, #117924): on an established connection
// from an outside client through a Local NodePort (not masqueraded, so the pod's
// packets are forwarded to the client), the pod sends a segment out of the TCP
// window, crafted on a raw socket. Conntrack marks it invalid, so it is not
// translated back: without the rule it reaches the client from the pod's own
// address, the client's kernel knows no such connection and answers with a reset
// whose sequence number is the one the pod expects, and that reset (invalid too)
// kills the pod's end of the real connection. With the rule the packet is dropped
// and the connection lives.
func TestKernelInvalidDropped(t *testing.T) {
	e := newKenv(t)
	e.p.cfg.NodeName = "node-a"
	e.p.desired = NewRuleset(e.p.cfg.Options)
	out := addOutside(t, e, "inv", "172.18.0.2", "172.18.0.1")
	if v := strings.TrimSpace(e.w.Node.MustRun(t, "sysctl", "-n", "net.netfilter.nf_conntrack_tcp_be_liberal")); v != "0" {
		t.Fatalf("nf_conntrack_tcp_be_liberal = %s in the node's namespace: out-of-window packets would not be invalid", v)
	}
	e.tr.OnServiceAdd(externalService("local", "10.96.0.40", v1.ServiceTypeNodePort, 30090, true))
	e.tr.OnEndpointSliceAdd(sliceOnNodes("local", map[string]string{"pod1": "node-a"}))
	e.sync(t)
	pod := e.w.Pods["pod1"]

	t.Run("with the rule the invalid segment is dropped and the connection lives", func(t *testing.T) {
		if err := outOfWindowThenAsk(t, out, pod); err != nil {
			t.Fatalf("connection after the out-of-window segment: %v", err)
		}
	})
	t.Run("without the rule it reaches the client and the reset kills the connection", func(t *testing.T) {
		e.w.Node.MustRun(t, "nft", "flush", "chain", "ip", TableName, chainFilterForward)
		defer func() { e.p.RequestResync(); e.sync(t) }()
		err := outOfWindowThenAsk(t, out, pod)
		if !errors.Is(err, syscall.ECONNRESET) {
			t.Fatalf("connection after the out-of-window segment: %v, want a reset (the probe does not show the harm)", err)
		}
	})
}

// outOfWindowThenAsk opens a connection from out to the Local NodePort, makes pod
// send an out-of-window segment on it (acknowledging exactly what the client sent,
// so that a reset the client answers with is in the pod's window), then asks for a
// page on the connection: nil if answered.
func outOfWindowThenAsk(t *testing.T, out, pod *netnstest.NS) error {
	t.Helper()
	podAddr := netip.MustParseAddr(podIPs["pod1"])
	raw, err := netns.ListenPacket(pod.Name, "ip4:tcp", podAddr.String())
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	// The handshake as the client sees it tells both sides' sequence numbers.
	seen, err := netns.ListenPacket(out.Name, "ip4:tcp", "0.0.0.0")
	if err != nil {
		t.Fatal(err)
	}
	defer seen.Close()
	c, err := out.Dial("tcp", "172.18.0.2:30090", 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	client := c.LocalAddr().(*net.TCPAddr).AddrPort()
	podNext, clientNext, err := synAck(seen, client.Port(), 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	// 16 MiB ahead of what the pod sent: beyond the client's window, so conntrack
	// finds it invalid (a segment far behind would be ignored and let through
	// translated, as an old retransmission, since Linux 6.1).
	seg := tcpSegment(netip.AddrPortFrom(podAddr, 80), client, podNext+1<<24, clientNext, []byte("stale"))
	if _, err := raw.WriteTo(seg, &net.IPAddr{IP: client.Addr().AsSlice()}); err != nil {
		t.Fatal(err)
	}
	// Give the segment, and the reset it may cause, time to arrive: until the pod's
	// end of the connection is gone, or for a second.
	for deadline := time.Now().Add(time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if !strings.Contains(pod.MustRun(t, "ss", "-Htn", "state", "established"), fmt.Sprintf("%s]:%d", client.Addr(), client.Port())) {
			break
		}
	}
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := io.WriteString(c, "GET / HTTP/1.0\r\nHost: x\r\n\r\n"); err != nil {
		return err
	}
	b, err := io.ReadAll(c)
	if err != nil {
		return err
	}
	if !strings.Contains(string(b), "pod1") {
		return fmt.Errorf("answer %q, want pod1's", b)
	}
	return nil
}

// synAck reads the raw TCP socket until the SYN-ACK to the client's port arrives
// and returns the next sequence number of each side: the server's (its sequence
// number + 1) and the client's (what it acknowledges).
func synAck(c net.PacketConn, clientPort uint16, timeout time.Duration) (server, client uint32, err error) {
	buf := make([]byte, 1500)
	_ = c.SetReadDeadline(time.Now().Add(timeout))
	for {
		n, _, err := c.ReadFrom(buf)
		if err != nil {
			return 0, 0, fmt.Errorf("no SYN-ACK to port %d: %w", clientPort, err)
		}
		const syn, ack = 0x02, 0x10
		if n >= 20 && binary.BigEndian.Uint16(buf[2:]) == clientPort && buf[13]&(syn|ack) == syn|ack {
			return binary.BigEndian.Uint32(buf[4:]) + 1, binary.BigEndian.Uint32(buf[8:]), nil
		}
	}
}

// tcpSegment builds a TCP segment (PSH|ACK, no options) with its checksum.
func tcpSegment(src, dst netip.AddrPort, seq, ack uint32, payload []byte) []byte {
	seg := make([]byte, 20+len(payload))
	binary.BigEndian.PutUint16(seg[0:], src.Port())
	binary.BigEndian.PutUint16(seg[2:], dst.Port())
	binary.BigEndian.PutUint32(seg[4:], seq)
	binary.BigEndian.PutUint32(seg[8:], ack)
	seg[12] = 5 << 4      // data offset: 20 bytes
	seg[13] = 0x08 | 0x10 // PSH, ACK
	binary.BigEndian.PutUint16(seg[14:], 64240)
	copy(seg[20:], payload)
	s, d := src.Addr().As4(), dst.Addr().As4()
	pseudo := append(append(append([]byte{}, s[:]...), d[:]...), 0, syscall.IPPROTO_TCP, byte(len(seg)>>8), byte(len(seg)))
	binary.BigEndian.PutUint16(seg[16:], netnstest.Checksum(append(pseudo, seg...)))
	return seg
}
