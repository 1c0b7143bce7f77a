package conntrack

import (
	"errors"
	"fmt"

	"golang.org/x/sys/unix"
)

// Reconcile makes the conntrack table agree with serving, as upstream kube-proxy's
// conntrack reconciler does: it deletes every UDP and SCTP entry whose original
// destination (protocol, address, port) is a key of serving and whose reply source
// is not among that key's endpoints — flows translated to an endpoint that is gone
// (also while svcproxy was down) and flows that were never translated (sent before
// the rules existed). Entries towards other addresses are never touched. It reads
// the table once per address family in use and returns how many entries it deleted.
//
// Call it after the kernel accepted the rules that serving describes: an entry
// deleted before the new rules exist is recreated untranslated by the next packet.
func (c *Cleaner) Reconcile(serving Serving) (uint, error) {
	ix := newIndex(serving)
	var deleted uint
	var errs []error
	for _, family := range ix.families() {
		c.mu.Lock()
		n, err := c.reconcileFamily(ix, family)
		c.mu.Unlock()
		deleted += n
		if err != nil {
			errs = append(errs, err)
		}
	}
	return deleted, errors.Join(errs...)
}

func (c *Cleaner) reconcileFamily(ix index, family uint8) (uint, error) {
	entries, _, err := c.list(family)
	if err != nil {
		return 0, err
	}
	n, err := c.delete(ix.toDelete(entries))
	if err != nil {
		return n, fmt.Errorf("reconcile conntrack (family %d): %w", family, err)
	}
	return n, nil
}

// reconciled reports whether entries of proto are the reconciler's business: UDP
// and SCTP have no reset that would move a client to a new endpoint. TCP does.
func reconciled(proto uint8) bool {
	return proto == unix.IPPROTO_UDP || proto == unix.IPPROTO_SCTP
}

// families lists the address families of the reconciled Service keys, so that a
// node without IPv6 Services never dumps the IPv6 table (and none at all when no
// UDP or SCTP Service exists).
func (ix index) families() []uint8 {
	var v4, v6 bool
	for svc := range ix {
		if !reconciled(svc.Proto) {
			continue
		}
		if svc.Addr.Is4() {
			v4 = true
		} else {
			v6 = true
		}
	}
	var out []uint8
	if v4 {
		out = append(out, unix.AF_INET)
	}
	if v6 {
		out = append(out, unix.AF_INET6)
	}
	return out
}

// toDelete picks the stale UDP and SCTP entries.
func (ix index) toDelete(entries []Entry) []Entry {
	var out []Entry
	for _, e := range entries {
		if reconciled(e.Proto) && ix.stale(e) {
			out = append(out, e)
		}
	}
	return out
}
