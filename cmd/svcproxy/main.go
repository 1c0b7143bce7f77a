// Command svcproxy is a Kubernetes service proxy that replaces kube-proxy and programs
// nftables over netlink.
//
//	svcproxy [kube-proxy flags]          run against a cluster
//	svcproxy --manifests DIR             run on Service/EndpointSlice YAML, no cluster
//	svcproxy render [-f DIR]             print the ruleset for manifests (default: the seed example)
//	svcproxy trace [-f DIR] SRC DST:PORT[/PROTO] [local]   where a new connection goes
//	svcproxy --cleanup                   remove svcproxy's tables and kube-proxy's leftovers, and exit
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"k8s.io/component-base/version/verflag"
	"k8s.io/klog/v2"

	"github.com/svcproxy/svcproxy/pkg/agent"
	"github.com/svcproxy/svcproxy/pkg/config"
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
	verflag.PrintAndExitIfRequested()
	if err := startLogging(o); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	if o.writeConfigTo != "" {
		if err := config.Write(o.Config, o.writeConfigTo); err != nil {
			klog.ErrorS(err, "Writing the configuration failed")
			klog.Flush()
			return 1
		}
		klog.InfoS("Wrote configuration", "file", o.writeConfigTo)
		klog.Flush()
		return 0
	}
	if o.initOnly {
		klog.InfoS("svcproxy needs no privileged initialization; --init-only exits")
		klog.Flush()
		return 0
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	if o.configFile != "" && !o.Cleanup {
		config.WatchFile(ctx, cancel, o.configFile, o.configStamp, 2*time.Second)
	}
	err = agent.Run(ctx, &o.Options)
	if cause := context.Cause(ctx); errors.Is(cause, config.ErrChanged) {
		err = cause // exit non-zero, as kube-proxy, so that the pod restarts with the new file
	}
	if err != nil {
		klog.ErrorS(err, "svcproxy failed")
		klog.Flush()
		return 1
	}
	klog.Flush()
	return 0
}
