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
// the table once per address family and protocol in use and returns how many
// entries it deleted.
//
// Call it after the kernel accepted the rules that serving describes: an entry
// deleted before the new rules exist is recreated untranslated by the next packet.
func (c *Cleaner) Reconcile(serving Serving) (uint, error) {
	ix := newIndex(serving)
	var deleted uint
	var errs []error
	for _, d := range ix.dumps() {
		c.mu.Lock()
		n, err := c.reconcileDump(ix, d)
		c.mu.Unlock()
		deleted += n
		if err != nil {
			errs = append(errs, err)
		}
	}
	return deleted, errors.Join(errs...)
}

func (c *Cleaner) reconcileDump(ix index, d dump) (uint, error) {
	var stale []Entry
	if _, err := c.scan(d.family, d.proto, false, func(e Entry) {
		if ix.toDelete(e) {
			stale = append(stale, e)
		}
	}); err != nil {
		return 0, fmt.Errorf("reconcile conntrack (family %d, protocol %d): %w", d.family, d.proto, err)
	}
	n, err := c.delete(stale)
	if err != nil {
		return n, fmt.Errorf("reconcile conntrack (family %d, protocol %d): %w", d.family, d.proto, err)
	}
	return n, nil
}

// reconciled reports whether entries of proto are the reconciler's business: UDP
// and SCTP have no reset that would move a client to a new endpoint. TCP does.
func reconciled(proto uint8) bool {
	return proto == unix.IPPROTO_UDP || proto == unix.IPPROTO_SCTP
}

// dump is one read of the table: the entries of one address family and protocol.
type dump struct{ family, proto uint8 }

// dumps lists the (family, protocol) pairs of the reconciled Service keys, in a
// stable order, so that a node without IPv6 or SCTP Services never reads those
// entries (and nothing at all is read when no UDP or SCTP Service exists).
func (ix index) dumps() []dump {
	seen := map[dump]bool{}
	for svc := range ix {
		if !reconciled(svc.Proto) {
			continue
		}
		d := dump{family: unix.AF_INET, proto: svc.Proto}
		if svc.Addr.Is6() {
			d.family = unix.AF_INET6
		}
		seen[d] = true
	}
	var out []dump
	for _, fam := range []uint8{unix.AF_INET, unix.AF_INET6} {
		for _, proto := range []uint8{unix.IPPROTO_UDP, unix.IPPROTO_SCTP} {
			if seen[dump{fam, proto}] {
				out = append(out, dump{fam, proto})
			}
		}
	}
	return out
}

// toDelete reports whether e is a stale UDP or SCTP entry.
func (ix index) toDelete(e Entry) bool {
	return reconciled(e.Proto) && ix.stale(e)
}

// ReconcileUnanswered deletes the TCP entries of one address family that never saw
// a reply and go to a Service address without being translated to one of its
// endpoints: a SYN sent before the rules existed (untranslated), or translated to
// an endpoint that has gone since. Every retransmission of that SYN follows its
// entry, so the connect times out although the Service works; and since a client's
// ephemeral ports come round, a later connection can get the same source port and
// meet the same entry for as long as it lives (120 s, renewed by each SYN). Deleted,
// the next SYN is a new connection that the rules place. Entries that saw a reply
// are connections that happened, and are never touched.
//
// resolve returns the endpoints of the Service addresses asked about; an address it
// leaves out is not a Service's and its entries stay. It is asked only when some
// unanswered entry exists, for those entries' destinations alone, so that nothing
// the size of every TCP Service is built for a table that has no such entries.
func (c *Cleaner) ReconcileUnanswered(family uint8, resolve func([]Service) Serving) (uint, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var unanswered []Entry
	if _, err := c.scan(family, unix.IPPROTO_TCP, true, func(e Entry) {
		if e.Proto == unix.IPPROTO_TCP && e.Status&ipsSeenReply == 0 {
			unanswered = append(unanswered, e)
		}
	}); err != nil {
		return 0, fmt.Errorf("reconcile unanswered TCP entries (family %d): %w", family, err)
	}
	if len(unanswered) == 0 {
		return 0, nil
	}
	seen := map[Service]bool{}
	var keys []Service
	for _, e := range unanswered {
		k := Service{Proto: e.Proto, Addr: e.OrigDst.Addr().Unmap(), Port: e.OrigDst.Port()}
		if !seen[k] {
			seen[k] = true
			keys = append(keys, k)
		}
	}
	ix := newIndex(resolve(keys))
	stale := unanswered[:0]
	for _, e := range unanswered {
		if ix.stale(e) {
			stale = append(stale, e)
		}
	}
	n, err := c.delete(stale)
	if err != nil {
		return n, fmt.Errorf("reconcile unanswered TCP entries (family %d): %w", family, err)
	}
	return n, nil
}
