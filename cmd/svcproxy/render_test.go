package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/svcproxy/svcproxy/pkg/endpoints"
	"github.com/svcproxy/svcproxy/pkg/node"
)

// TestRenderSkipsBadDocuments: a document that does not decode is reported on
// stderr with its file and index, and the rest of the directory is rendered.
func TestRenderSkipsBadDocuments(t *testing.T) {
	dir := t.TempDir()
	seed := string(mustReadSeed(t))
	bad := strings.NewReplacer("my-nginx", "other", "10.96.0.10", "10.96.0.11", "port: 80", `port: "80"`).Replace(seed)
	for name, data := range map[string]string{"seed.yaml": seed, "bad.yaml": bad, "nokind.yaml": "metadata: {name: x}\n"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	stderr := silenceStderr(t)
	restore, read := capture(t, &os.Stdout)
	code := run([]string{"render", "-f", dir})
	restore()
	out, errOut := read(), stderr()
	if code != 0 {
		t.Fatalf("render = %d, want 0; stderr:\n%s", code, errOut)
	}
	if !strings.Contains(out, ": 10.244.1.2 . 80") || strings.Contains(out, "10.96.0.11") {
		t.Errorf("want the seed Service rendered and not the bad one:\n%s", out)
	}
	for _, s := range []string{"skipping bad.yaml: document 0: Service default/other: ", "skipping nokind.yaml: document 0: no kind"} {
		if !strings.Contains(errOut, s) {
			t.Errorf("stderr lacks %q:\n%s", s, errOut)
		}
	}
}

// TestRenderDualStack: render prints a table per family the manifests use,
// each with its own family's ClusterIP and endpoints; trace picks the table of
// the destination's family.
func TestRenderDualStack(t *testing.T) {
	const dir = "testdata/dualstack"
	runOut := func(args ...string) (int, string, string) {
		stderr := silenceStderr(t)
		restore, read := capture(t, &os.Stdout)
		code := run(args)
		restore()
		return code, read(), stderr()
	}
	code, out, errOut := runOut("render", "-f", dir, "--cluster-cidr", "10.244.0.0/16,fd00:244::/56")
	if code != 0 {
		t.Fatalf("render = %d; stderr:\n%s", code, errOut)
	}
	v4, v6, _ := strings.Cut(out, "table ip6 svcproxy")
	for _, s := range []string{"table ip svcproxy", "10.96.0.20", "10.96.0.21", ": 10.244.1.2 . 80", "10.244.0.0/16"} {
		if !strings.Contains(v4, s) {
			t.Errorf("IPv4 table lacks %q:\n%s", s, v4)
		}
	}
	if strings.Contains(v4, "fd00:") {
		t.Errorf("IPv4 table has IPv6 addresses:\n%s", v4)
	}
	if !node.Renders(endpoints.IPv6) {
		// Until pkg/proxy renders ip6 tables, render says what it left out.
		if !strings.Contains(errOut, "not rendering 1 IPv6 service ports") || v6 != "" {
			t.Errorf("want the IPv6 port reported on stderr and no ip6 table; stderr:\n%s\nstdout:\n%s", errOut, out)
		}
		t.Skip("pkg/proxy renders no ip6 table in this build (wip/v6core): IPv6 render and trace not checked")
	}
	for _, s := range []string{"fd00:96::20", "fd00:244::2", "fd00:244::/56"} {
		if !strings.Contains(v6, s) {
			t.Errorf("IPv6 table lacks %q:\n%s", s, v6)
		}
	}
	if strings.Contains(v6, "10.96.0.2") || strings.Contains(v6, "10.244.") {
		t.Errorf("IPv6 table has IPv4 addresses:\n%s", v6)
	}

	// Single-stack IPv4 manifests print the ip table only, as before.
	if _, out, _ := runOut("render"); strings.Contains(out, "table ip6") {
		t.Errorf("the seed example rendered an ip6 table:\n%s", out)
	}

	code, out, errOut = runOut("trace", "-f", dir, "fd00:244::9", "[fd00:96::20]:80")
	if code != 0 || !strings.Contains(out, "dnat") || !strings.Contains(out, "fd00:244::2") || strings.Contains(out, "10.244.1.2") {
		t.Errorf("trace of an IPv6 packet = %d:\n%s\nstderr:\n%s", code, out, errOut)
	}
	code, out, _ = runOut("trace", "-f", dir, "10.244.2.9", "10.96.0.20:80")
	if code != 0 || !strings.Contains(out, "dnat 10.244.1.2:80") {
		t.Errorf("trace of an IPv4 packet = %d:\n%s", code, out)
	}
}
