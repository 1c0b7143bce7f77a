package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
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
