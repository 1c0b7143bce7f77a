//go:build e2e

package main

import (
	"errors"
	"fmt"
	"log"
	"net/http"
	"net/netip"
	"sync"

	corev1 "k8s.io/api/core/v1"

	"github.com/svcproxy/svcproxy/internal/echoserver"
	"github.com/svcproxy/svcproxy/internal/netns"
)

// Ports every pod serves besides those its containers declare.
const (
	defaultTCPPort = 80
	defaultUDPPort = 5005
)

type pod struct {
	name        string
	netns       string
	ips         []netip.Addr // one per family, primary first
	idx         int
	terminating bool
	stopped     bool

	mu      sync.Mutex
	closers []func()
}

// serve starts an HTTP server on every TCP port and a UDP echo on every UDP
// port of the pod (internal/echoserver): each answers with the pod's name
// (HTTP /clientip with the source address of the request instead; UDP
// with "NAME MESSAGE").
func (p *pod) serve(in *corev1.Pod) error {
	tcp := map[int32]bool{defaultTCPPort: true}
	udp := map[int32]bool{defaultUDPPort: true}
	for _, c := range in.Spec.Containers {
		for _, cp := range c.Ports {
			switch cp.Protocol {
			case corev1.ProtocolUDP:
				udp[cp.ContainerPort] = true
			case corev1.ProtocolTCP, "":
				tcp[cp.ContainerPort] = true
			}
		}
	}
	tcpNet, udpNet := p.networks()
	for port := range tcp {
		l, err := netns.Listen(p.netns, tcpNet, fmt.Sprintf(":%d", port))
		if err != nil {
			p.close()
			return fmt.Errorf("listen tcp %d: %w", port, err)
		}
		srv := echoserver.HTTPServer(p.name)
		go func() {
			if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
				log.Printf("pod %s: http: %v", p.name, err)
			}
		}()
		p.add(func() { _ = srv.Close() })
	}
	for port := range udp {
		c, err := netns.ListenPacket(p.netns, udpNet, fmt.Sprintf(":%d", port))
		if err != nil {
			p.close()
			return fmt.Errorf("listen udp %d: %w", port, err)
		}
		go func() {
			if err := echoserver.EchoUDP(c, p.name); err != nil {
				log.Printf("pod %s: udp: %v", p.name, err)
			}
		}()
		p.add(func() { _ = c.Close() })
	}
	return nil
}

func (p *pod) add(f func()) {
	p.mu.Lock()
	p.closers = append(p.closers, f)
	p.mu.Unlock()
}

func (p *pod) close() {
	p.mu.Lock()
	cs := p.closers
	p.closers = nil
	p.mu.Unlock()
	for _, c := range cs {
		c()
	}
}
