package takeover

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
	"k8s.io/klog/v2"
)

// ipsetBusyWait bounds the wait for an ipset still referenced: the kernel may release
// the references of deleted iptables-nft rules only after their transaction returned
// (not seen on kernel 6.18, where the first destroy succeeds; kept as a bound).
var ipsetBusyWait = 2 * time.Second

// removeIPSets destroys ipvs-mode kube-proxy's ipsets (by their exact names), after
// removeNFTables removed the chains whose rules match them.
func removeIPSets(ctx context.Context, o Options, r *Report) (err error) {
	h, err := linkHandle(o.NetNSFd, unix.NETLINK_NETFILTER)
	if err != nil {
		return err
	}
	defer h.Close()
	defer func() {
		if p := recover(); p != nil { // the listing is parsed by vishvananda/netlink
			err = fmt.Errorf("list ipsets: decoder panic: %v", p)
		}
	}()
	sets, err := h.IpsetListAll()
	if err != nil {
		// EPROTONOSUPPORT and the like: no ipset in this kernel, so none to remove.
		klog.V(2).InfoS("No ipsets to remove", "reason", err.Error())
		return nil
	}
	var errs []error
	removed := 0
	for _, s := range sets {
		if !isKubeProxyIPSet(s.SetName) {
			continue
		}
		if err := destroyIPSet(ctx, h, s.SetName); err != nil {
			errs = append(errs, err)
			continue
		}
		removed++
	}
	r.add(KindIPSet, removed)
	if removed > 0 {
		klog.InfoS("Removed kube-proxy's ipsets", "ipsets", removed)
	}
	return errors.Join(errs...)
}

func destroyIPSet(ctx context.Context, h *netlink.Handle, name string) error {
	deadline := time.Now().Add(ipsetBusyWait)
	for {
		err := h.IpsetDestroy(name)
		if err == nil || errors.Is(err, unix.ENOENT) {
			return nil
		}
		if !errors.Is(err, unix.EBUSY) && !isIPSetReferenced(err) || time.Now().After(deadline) {
			return fmt.Errorf("destroy ipset %s: %w", name, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// isIPSetReferenced recognises IPSET_ERR_REFERENCED (4105), ipset's own errno for a
// set that a rule still uses.
func isIPSetReferenced(err error) bool {
	var errno unix.Errno
	return errors.As(err, &errno) && errno == 4105
}
