package main

import (
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestJSONLogging: --logging-format=json (component-base) puts every line in JSON,
// the warnings found while parsing included.
func TestJSONLogging(t *testing.T) {
	out := filepath.Join(t.TempDir(), "effective.yaml")
	log, err := exec.Command(svcproxyBin(t), "--logging-format=json", "--proxy-mode=ipvs", "--write-config-to="+out).CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, log)
	}
	var sawWarning bool
	for _, line := range strings.Split(strings.TrimSpace(string(log)), "\n") {
		var entry map[string]any
		if err := json.Unmarshal([]byte(line), &entry); err != nil {
			t.Errorf("not a JSON line: %q", line)
			continue
		}
		if entry["msg"] == "Configuration field has no effect in svcproxy" && entry["field"] == "mode" {
			sawWarning = true
		}
	}
	if !sawWarning {
		t.Errorf("no JSON warning about mode ipvs in:\n%s", log)
	}
}

// TestVersionFlag: --version prints component-base's version line, as kube-proxy's.
func TestVersionFlag(t *testing.T) {
	// --init-only: should --version be ignored, the binary exits without serving
	// in this (root) namespace.
	out, err := exec.Command(svcproxyBin(t), "--version", "--init-only").CombinedOutput()
	if err != nil || !strings.HasPrefix(string(out), "Kubernetes v") || strings.Count(string(out), "\n") != 1 {
		t.Errorf("--version: %v %q, want one line \"Kubernetes v...\"", err, out)
	}
}
