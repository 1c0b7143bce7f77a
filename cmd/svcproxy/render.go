package main

import (
	"fmt"
	"os"

	"github.com/spf13/pflag"

	"github.com/svcproxy/svcproxy/deploy"
	"github.com/svcproxy/svcproxy/pkg/endpoints"
	"github.com/svcproxy/svcproxy/pkg/manifests"
	"github.com/svcproxy/svcproxy/pkg/proxy"
)

// renderCmd prints the nft ruleset for a directory of manifests: no cluster, no root.
func renderCmd(args []string) int {
	fs := pflag.NewFlagSet("render", pflag.ContinueOnError)
	dir := fs.StringP("filename", "f", "", "Directory of Service and EndpointSlice YAML files (default: the embedded seed example).")
	cidr := fs.String("cluster-cidr", "", "Pod CIDR; service traffic from outside it is masqueraded.")
	masqAll := fs.Bool("masquerade-all", false, "Masquerade all service traffic.")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	objs, err := loadManifests(*dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	o := &options{clusterCIDR: *cidr}
	if err := o.validateClusterCIDR(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	opts := proxy.Options{MasqueradeAll: *masqAll, ClusterCIDR: o.ipv4ClusterCIDR()}
	tr := endpoints.NewTracker(endpoints.TrackerOptions{OnInvalid: func(kind, ns, name, reason string) {
		fmt.Fprintf(os.Stderr, "skipping part of %s %s/%s: %s\n", kind, ns, name, reason)
	}})
	feed(tr, objs, nil)
	snap, _, _ := tr.Take()
	fmt.Print(proxy.RenderAll(snap, opts).Text())
	return 0
}

func loadManifests(dir string) (*manifests.Objects, error) {
	if dir == "" {
		return manifests.Load(deploy.Examples, "examples")
	}
	return manifests.Load(os.DirFS(dir), ".")
}

// feed applies the difference between prev and cur manifests to the tracker.
func feed(tr *endpoints.Tracker, cur, prev *manifests.Objects) {
	keep := map[string]bool{}
	for _, s := range cur.Services {
		keep["svc/"+s.Namespace+"/"+s.Name] = true
		tr.OnServiceAdd(s)
	}
	for _, s := range cur.EndpointSlices {
		keep["eps/"+s.Namespace+"/"+s.Name] = true
		tr.OnEndpointSliceAdd(s)
	}
	if prev == nil {
		return
	}
	for _, s := range prev.Services {
		if !keep["svc/"+s.Namespace+"/"+s.Name] {
			tr.OnServiceDelete(s)
		}
	}
	for _, s := range prev.EndpointSlices {
		if !keep["eps/"+s.Namespace+"/"+s.Name] {
			tr.OnEndpointSliceDelete(s)
		}
	}
}
