package agent

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestOOMScoreAdj applies oomScoreAdj in a child process (the test binary again),
// so that this process keeps its own score. Raising the score needs no privilege;
// lowering it needs CAP_SYS_RESOURCE, which this machine's root lacks.
func TestOOMScoreAdj(t *testing.T) {
	if os.Getenv("SVCPROXY_OOM_CHILD") != "" {
		v := int32(500)
		applyOOMScoreAdj(&v)
		b, _ := os.ReadFile("/proc/self/oom_score_adj")
		os.Stdout.WriteString("score=" + strings.TrimSpace(string(b)) + "\n")
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestOOMScoreAdj$", "-test.count=1")
	cmd.Env = append(os.Environ(), "SVCPROXY_OOM_CHILD=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "score=500\n") {
		t.Errorf("child's oom_score_adj is not 500:\n%s", out)
	}
}
