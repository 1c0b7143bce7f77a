package main

import (
	"errors"
	"sync"
	"syscall"

	"k8s.io/klog/v2"
)

// tolerateReadOnlyProcSys wraps the sysctl writer the proxy uses for
// route_localnet (localhost NodePorts). In a pod that is not privileged,
// such as svcproxy's own DaemonSet (CAP_NET_ADMIN only), the runtime mounts
// /proc/sys read-only: the write fails with EROFS on every sync, and
// returning that error would fail every sync, so that no Service at all is
// served. A read-only /proc/sys is warned about once and the sync goes on:
// only localhost NodePorts (127.0.0.1:<nodePort>) do not answer, as in
// kube-proxy's nftables mode, which has none. Any other error still fails
// the sync.
func tolerateReadOnlyProcSys(write func(path, value string) error) func(path, value string) error {
	var once sync.Once
	return func(path, value string) error {
		err := write(path, value)
		if errors.Is(err, syscall.EROFS) {
			once.Do(func() {
				klog.InfoS("Warning: cannot set a sysctl, /proc/sys is read-only (a pod that is not privileged); localhost NodePorts will not answer (--iptables-localhost-nodeports=false silences this)",
					"path", path, "value", value)
			})
			return nil
		}
		return err
	}
}
