package agent

import (
	"os"
	"strconv"

	"k8s.io/klog/v2"
)

// applyOOMScoreAdj sets the process's oom_score_adj as kube-proxy does (default
// -999, so that the node's proxy is among the last processes the OOM killer picks).
// Lowering it needs CAP_SYS_RESOURCE; like kube-proxy, a failure is only logged at
// V(2).
func applyOOMScoreAdj(value *int32) {
	if value == nil {
		return
	}
	if err := os.WriteFile("/proc/self/oom_score_adj", []byte(strconv.Itoa(int(*value))), 0o644); err != nil {
		klog.V(2).InfoS("Failed to apply OOMScore", "err", err)
	}
}
