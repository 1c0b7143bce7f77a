package agent

import (
	"errors"
	"sync"
	"syscall"

	"k8s.io/klog/v2"
)

// tolerateReadOnlyProcSys wraps the sysctl writer svcproxy uses for
// route_localnet (localhost NodePorts) and the conntrack timeouts. In a pod
// that is not privileged (CAP_NET_ADMIN only) the runtime mounts /proc/sys
// read-only: without deploy/'s writable mount of the node's /proc/sys/net
// (--sysctl-dir) the write fails with EROFS on every sync, and returning that
// error would fail every sync, so that no Service at all is served. A
// read-only /proc/sys is warned about once and the sync goes on: only
// localhost NodePorts (127.0.0.1:<nodePort>) do not answer, as in kube-proxy's
// nftables mode, which has none, and the conntrack timeouts stay the
// kernel's. Any other error still fails the sync.
func tolerateReadOnlyProcSys(write func(path, value string) error) func(path, value string) error {
	var once sync.Once
	return func(path, value string) error {
		err := write(path, value)
		if errors.Is(err, syscall.EROFS) {
			once.Do(func() {
				klog.InfoS("Warning: cannot set a sysctl, /proc/sys is read-only (a pod that is not privileged): localhost NodePorts will not answer and conntrack timeouts stay the kernel's; mount the node's /proc/sys/net writable and pass --sysctl-dir, as deploy/ does",
					"path", path, "value", value)
			})
			return nil
		}
		return err
	}
}
