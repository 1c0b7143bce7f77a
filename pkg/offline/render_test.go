package offline

import (
	"bytes"
	"strings"
	"testing"

	"github.com/svcproxy/svcproxy/pkg/endpoints"
	"github.com/svcproxy/svcproxy/pkg/nodeaddr"
	"github.com/svcproxy/svcproxy/pkg/proxy"
)

// TestRenderSeed: the embedded seed example renders to the IPv4 table, with the
// options each family is given and nothing said on stderr.
func TestRenderSeed(t *testing.T) {
	objs, problems, err := LoadManifests("")
	if err != nil || len(problems) > 0 {
		t.Fatalf("seed example: %v %v", problems, err)
	}
	var stderr bytes.Buffer
	var asked []endpoints.Family
	options := func(f endpoints.Family) proxy.Options {
		asked = append(asked, f)
		return proxy.Options{Family: f, NodeName: "me"}
	}
	tables := Render(objs, options, nodeaddr.Selection{AllIPv4: true, AllIPv6: true}, &stderr)
	if len(tables) == 0 || tables[0].Family != endpoints.IPv4 || tables[0].Services == 0 {
		t.Fatalf("tables %+v, want the IPv4 one first, with the seed's Services", tables)
	}
	if text := tables[0].Ruleset.Text(); !strings.Contains(text, "table ip svcproxy") || !strings.Contains(text, "10.96.0.10") {
		t.Errorf("IPv4 ruleset lacks the table or the seed's ClusterIP:\n%s", text)
	}
	if len(asked) == 0 || asked[0] != endpoints.IPv4 {
		t.Errorf("options asked for %v, want IPv4 first", asked)
	}
	if stderr.Len() > 0 {
		t.Errorf("stderr: %s", stderr.String())
	}
}
