package takeover

import (
	"context"
	"errors"
	"fmt"
	"net/netip"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
	"k8s.io/klog/v2"
)

// ipvsDeviceTypes are the link types of a kube-ipvs0 that kube-proxy made (a dummy);
// a kube-ipvs0 of another type is not kube-proxy's and stays, as kube-proxy's own
// cleanup leaves it. Tests add veth: this kernel has no dummy links.
var ipvsDeviceTypes = map[string]bool{"dummy": true}

// dialIPVSFunc opens IPVS; tests replace it with a fake.
var dialIPVSFunc = dialIPVS

// removeIPVS removes ipvs-mode kube-proxy's kube-ipvs0 device and the IPVS virtual
// services on its addresses (every Service address kube-proxy served is bound to it);
// other IPVS services stay. Services first: once the device is gone its addresses,
// which name kube-proxy's services, are gone too.
func removeIPVS(ctx context.Context, o Options, r *Report) error {
	h, err := linkHandle(o.NetNSFd)
	if err != nil {
		return err
	}
	defer h.Close()
	link, err := h.LinkByName(ipvsDevice)
	var notFound netlink.LinkNotFoundError
	if errors.As(err, &notFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("find %s: %w", ipvsDevice, err)
	}
	if !ipvsDeviceTypes[link.Type()] {
		klog.InfoS("Warning: leaving a device named like kube-proxy's that kube-proxy did not make", "device", ipvsDevice, "type", link.Type())
		return nil
	}
	addrs, err := h.AddrList(link, netlink.FAMILY_ALL)
	if err != nil {
		return fmt.Errorf("addresses of %s: %w", ipvsDevice, err)
	}
	onDevice := map[netip.Addr]bool{}
	for _, a := range addrs {
		if ip, ok := netip.AddrFromSlice(a.IP); ok {
			onDevice[ip.Unmap()] = true
		}
	}
	if err := removeIPVSServices(ctx, o.NetNSFd, onDevice, r); err != nil {
		return err // keep the device: its addresses name the services still to remove
	}
	if err := h.LinkDel(link); err != nil {
		return fmt.Errorf("delete %s: %w", ipvsDevice, err)
	}
	r.add(KindLink, 1)
	klog.InfoS("Removed kube-proxy's IPVS device", "device", ipvsDevice, "addresses", len(onDevice))
	return nil
}

func removeIPVSServices(ctx context.Context, nsFd int, onDevice map[netip.Addr]bool, r *Report) error {
	if len(onDevice) == 0 {
		return nil
	}
	c, err := dialIPVSFunc(nsFd)
	if errors.Is(err, errNoIPVS) {
		klog.V(2).InfoS("No IPVS in this kernel: no IPVS services to remove", "device", ipvsDevice)
		return nil
	}
	if err != nil {
		return err
	}
	defer c.Close()
	all, err := c.Services()
	if err != nil {
		return err
	}
	var errs []error
	removed := 0
	for _, s := range ipvsServicesOn(all, onDevice) {
		if err := ctx.Err(); err != nil {
			errs = append(errs, err)
			break
		}
		if err := c.DeleteService(s); err != nil && !errors.Is(err, unix.ESRCH) {
			errs = append(errs, err)
			continue
		}
		removed++
	}
	r.add(KindIPVSService, removed)
	if removed > 0 {
		klog.InfoS("Removed kube-proxy's IPVS virtual services", "services", removed, "kept", len(all)-removed-len(errs))
	}
	return errors.Join(errs...)
}

// ipvsServicesOn picks the virtual services whose address is one of addrs.
func ipvsServicesOn(all []ipvsService, addrs map[netip.Addr]bool) []ipvsService {
	var out []ipvsService
	for _, s := range all {
		if s.Addr.IsValid() && addrs[s.Addr.Unmap()] {
			out = append(out, s)
		}
	}
	return out
}

// linkHandle is a netlink handle in the namespace nsFd (0: the current one).
func linkHandle(nsFd int, families ...int) (*netlink.Handle, error) {
	var h *netlink.Handle
	var err error
	if nsFd != 0 {
		h, err = netlink.NewHandleAt(netns.NsHandle(nsFd), families...)
	} else {
		h, err = netlink.NewHandle(families...)
	}
	if err != nil {
		return nil, fmt.Errorf("netlink handle: %w", err)
	}
	return h, nil
}
