// Command svcproxy is a Kubernetes service proxy that replaces kube-proxy and programs
// nftables over netlink.
//
//	svcproxy [kube-proxy flags]          run against a cluster
//	svcproxy --manifests DIR             run on Service/EndpointSlice YAML, no cluster
//	svcproxy render [-f DIR]             print the ruleset for manifests (default: the seed example)
//	svcproxy trace [-f DIR] SRC DST:PORT[/PROTO] [local]   where a new connection goes
//	svcproxy --cleanup                   remove svcproxy's table and kube-proxy's leftovers, and exit
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"k8s.io/klog/v2"
)

func main() { os.Exit(run(os.Args[1:])) }

func run(args []string) int {
	if len(args) > 0 {
		switch args[0] {
		case "render":
			return renderCmd(args[1:])
		case "trace":
			return traceCmd(args[1:])
		}
	}
	o, err := parseFlags(args)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := serve(ctx, o); err != nil {
		klog.ErrorS(err, "svcproxy failed")
		klog.Flush()
		return 1
	}
	klog.Flush()
	return 0
}
