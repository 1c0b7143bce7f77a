package offline

import (
	"fmt"
	"io"

	"github.com/svcproxy/svcproxy/deploy"
	"github.com/svcproxy/svcproxy/pkg/endpoints"
	"github.com/svcproxy/svcproxy/pkg/manifests"
	"github.com/svcproxy/svcproxy/pkg/nft"
	"github.com/svcproxy/svcproxy/pkg/node"
	"github.com/svcproxy/svcproxy/pkg/nodeaddr"
	"github.com/svcproxy/svcproxy/pkg/proxy"
)

// Table is one family's rendered table.
type Table struct {
	Family   endpoints.Family
	Ruleset  *nft.Ruleset
	Services int // service ports of this family in the manifests
}

// Render renders objs once per IP family this build renders (IPv4 first), with
// the proxy.Options options gives each family and NodePorts on what sel selects,
// as the running proxies would program them. What it skips (parts of objects
// that are invalid, a family it does not render) is said on stderr.
func Render(objs *manifests.Objects, options func(endpoints.Family) proxy.Options, sel nodeaddr.Selection, stderr io.Writer) []Table {
	var tables []Table
	for _, f := range []endpoints.Family{endpoints.IPv4, endpoints.IPv6} {
		opts := options(f)
		tr := endpoints.NewTracker(endpoints.TrackerOptions{Family: f, OnInvalid: func(kind, ns, name, reason string) {
			fmt.Fprintf(stderr, "skipping part of %s %s/%s (%s): %s\n", kind, ns, name, f, reason)
		}})
		manifests.Feed(tr, objs, nil)
		snap, _, _ := tr.Take()
		if f != endpoints.IPv4 && !node.Renders(f) {
			if snap.PortCount() > 0 {
				fmt.Fprintf(stderr, "not rendering %d %s service ports: this build of svcproxy renders no %s table\n", snap.PortCount(), f, proxy.TableFamily(f))
			}
			continue
		}
		r := proxy.RenderAll(snap, opts)
		na := proxy.NodeAddresses{}
		if f == endpoints.IPv6 {
			na.Addrs, na.All = sel.IPv6()
		} else {
			na.Addrs, na.All = sel.IPv4()
		}
		proxy.ServeNodePortsOn(r, opts, na)
		tables = append(tables, Table{Family: f, Ruleset: r, Services: snap.PortCount()})
	}
	return tables
}

// LoadManifests reads dir (default: the embedded seed example): the usable objects,
// and the documents that are not.
func LoadManifests(dir string) (*manifests.Objects, []manifests.Problem, error) {
	if dir == "" {
		return manifests.Read(deploy.Examples, "examples")
	}
	return manifests.ReadDir(dir)
}
