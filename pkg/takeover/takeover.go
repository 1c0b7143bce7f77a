// Package takeover removes what a kube-proxy that ran on this node left in the kernel,
// so that svcproxy's table is the only proxy that places Service traffic:
//
//   - iptables-mode and ipvs-mode chains in iptables-nft's tables (`ip`/`ip6` `nat`,
//     `filter`, `mangle`) and the rules of the base chains (PREROUTING, OUTPUT,
//     POSTROUTING, INPUT, FORWARD) that jump to them;
//   - nftables-mode's tables `ip kube-proxy` and `ip6 kube-proxy`;
//   - ipvs-mode's `kube-ipvs0` device, the IPVS virtual services on its addresses and
//     its `KUBE-*` ipsets;
//   - iptables-legacy (x_tables), which netlink cannot edit, is only detected: Run says
//     in the log exactly what to run.
//
// Everything goes through netlink; nothing is shelled out. What kubelet owns
// (KUBE-IPTABLES-HINT, KUBE-KUBELET-CANARY, KUBE-FIREWALL and its jumps, KUBE-MARK-DROP)
// and every other program's rules are never touched: chains are removed by kube-proxy's
// exact names and prefixes (owned.go), never by the bare `KUBE-` prefix, which other
// programs (kube-router's network policies, for one) use too.
package takeover

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
)

// Kind names a family of removed objects: the label of
// svcproxy_takeover_removed_objects_total and the keys of Report.Removed.
type Kind string

// The kinds of objects Run removes.
const (
	KindJumpRule    Kind = "iptables-jump-rule" // a base chain's rule (PREROUTING, ...) jumping into a removed chain
	KindChain       Kind = "iptables-chain"     // a kube-proxy chain in iptables-nft's tables
	KindTable       Kind = "nftables-table"     // table ip/ip6 kube-proxy
	KindIPVSService Kind = "ipvs-service"       // an IPVS virtual service on kube-ipvs0's addresses
	KindLink        Kind = "link"               // the kube-ipvs0 device
	KindIPSet       Kind = "ipset"              // an ipset of ipvs-mode kube-proxy
)

// Kinds lists every Kind, in the order Run removes them.
var Kinds = []Kind{KindJumpRule, KindChain, KindTable, KindIPVSService, KindLink, KindIPSet}

// Options say where to take over.
type Options struct {
	// NetNSFd, when non-zero, is the network namespace to clean instead of the
	// current one (tests).
	NetNSFd int
	// NetNSPath is the same namespace as a path (e.g. /run/netns/NAME), needed to
	// read iptables-legacy's state, which is only visible from inside the namespace.
	// Empty with NetNSFd set: the legacy check is skipped.
	NetNSPath string
}

// Report says what Run found and removed.
type Report struct {
	// Removed counts the removed objects by kind (kinds with nothing removed are absent).
	Removed map[Kind]int
	// Kept lists kube-proxy objects left in place on purpose, each with the reason
	// (e.g. a chain another program's rule still jumps to).
	Kept []string
	// Legacy lists kube-proxy chains found in iptables-legacy (x_tables), as
	// "family table chain"; netlink cannot remove them.
	Legacy []string
	// LegacyHint is what to run to remove them; empty when Legacy is.
	LegacyHint string
}

// Total is the number of objects removed.
func (r Report) Total() int {
	n := 0
	for _, c := range r.Removed {
		n += c
	}
	return n
}

// String summarises the report in one line.
func (r Report) String() string {
	var parts []string
	for _, k := range Kinds {
		if n := r.Removed[k]; n > 0 {
			parts = append(parts, fmt.Sprintf("%s=%d", k, n))
		}
	}
	if len(parts) == 0 {
		parts = append(parts, "nothing removed")
	}
	if len(r.Kept) > 0 {
		parts = append(parts, fmt.Sprintf("kept=%d", len(r.Kept)))
	}
	if len(r.Legacy) > 0 {
		parts = append(parts, fmt.Sprintf("iptables-legacy=%d", len(r.Legacy)))
	}
	return strings.Join(parts, " ")
}

func (r *Report) add(k Kind, n int) {
	if n == 0 {
		return
	}
	if r.Removed == nil {
		r.Removed = map[Kind]int{}
	}
	r.Removed[k] += n
}

// Run removes kube-proxy's leftovers (see the package comment) and reports what it
// removed. Each part is tried even when another fails: the error joins the failures,
// and the report counts what was removed anyway. Run is idempotent: on a node
// without leftovers it reads and removes nothing.
//
// Call it only once svcproxy's own table is programmed: until then kube-proxy's
// rules are what serves the node's Services.
func Run(ctx context.Context, o Options) (Report, error) {
	var r Report
	var errs []error
	// nf_tables first: the chains hold references to the ipsets, and their rules
	// match kube-ipvs0's addresses.
	if err := removeNFTables(ctx, o, &r); err != nil {
		errs = append(errs, err)
	}
	if err := removeIPVS(ctx, o, &r); err != nil {
		errs = append(errs, err)
	}
	if err := removeIPSets(ctx, o, &r); err != nil {
		errs = append(errs, err)
	}
	if err := checkLegacy(o, &r); err != nil {
		errs = append(errs, err)
	}
	sort.Strings(r.Kept)
	return r, errors.Join(errs...)
}
