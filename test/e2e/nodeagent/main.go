//go:build e2e

// Command nodeagent is a test-only stand-in for kubelet in the svcproxy
// end-to-end cluster. It watches the Pods bound to its node and runs each one
// as a network namespace with a veth to the node namespace, an address from
// the node's pod CIDR and a tiny server that answers with the Pod's name
// (HTTP on every TCP port, echo on every UDP port). It reports podIP and
// Ready through the status subresource, and on graceful deletion keeps
// serving for the grace period before it stops and removes the Pod.
//
// The agent runs in the root network namespace but never touches it: every
// network change is made with `ip -n <namespace>`, every socket is opened
// inside a namespace (see package netns).
package main

import (
	"context"
	"flag"
	"log"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/svcproxy/svcproxy/internal/netns"
)

func main() { os.Exit(run()) }

func run() int {
	var a agent
	var kubeconfig, apiNetns, podCIDRs, nodeIPs string
	flag.StringVar(&kubeconfig, "kubeconfig", "", "kubeconfig for the API server")
	flag.StringVar(&apiNetns, "api-netns", "", "network namespace from which the API server is dialled")
	flag.StringVar(&a.node, "node", "", "name of the Node object")
	flag.StringVar(&a.nodeNetns, "node-netns", "", "network namespace of the node")
	flag.StringVar(&nodeIPs, "node-ip", "", "IP addresses of the node, one per family, primary first")
	flag.StringVar(&podCIDRs, "pod-cidr", "", "pod CIDRs of the node, one per family (an IPv4 /24, an IPv6 /64), primary first")
	flag.StringVar(&a.podNetnsPrefix, "pod-netns-prefix", "", "name prefix of the pod network namespaces")
	flag.Parse()
	log.SetFlags(log.Ltime | log.Lmicroseconds)
	if a.node == "" || a.nodeNetns == "" || a.podNetnsPrefix == "" || apiNetns == "" {
		log.Print("--node, --node-netns, --pod-netns-prefix and --api-netns are required")
		return 2
	}
	var err error
	if a.podCIDRs, err = parsePodCIDRs(podCIDRs); err != nil {
		log.Printf("--pod-cidr: %v", err)
		return 2
	}
	a.nodeIPs = strings.Split(nodeIPs, ",")

	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		log.Printf("load kubeconfig: %v", err)
		return 1
	}
	cfg.Dial = netns.DialFunc(apiNetns, 5*time.Second)
	cfg.QPS, cfg.Burst = 100, 200
	a.client, err = kubernetes.NewForConfig(cfg)
	if err != nil {
		log.Printf("client: %v", err)
		return 1
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := a.run(ctx); err != nil {
		log.Printf("agent: %v", err)
		return 1
	}
	return 0
}
