package main

import (
	"strconv"

	"github.com/spf13/pflag"
)

// Taking over from kube-proxy. kube-proxy's leftovers (its iptables-nft chains, its
// nftables tables, kube-ipvs0 and its IPVS services and ipsets) are removed on every
// start, in cluster and --manifests mode alike (both program the node's kernel, which
// kube-proxy's rules would otherwise share), once our first sync has programmed every
// Service; and by --cleanup. Ordering: while both exist, new connections already
// follow our rules, not kube-proxy's: NAT chains of one priority (both are dstnat,
// -100) run in reverse order of registration, and the first to translate a connection
// decides it, so our chains, registered after kube-proxy's, win; kube-proxy's rules
// are removed only after our first sync, in one transaction per family, so a new
// connection always finds one of the two. --takeover=false leaves kube-proxy's rules
// alone (to run svcproxy next to a kube-proxy on purpose, e.g. to compare them).

// addTakeoverFlag registers --takeover on fs, stored inverted in o.NoTakeover so that
// the zero options take over, like kube-proxy, which always cleans up after the other
// modes.
func addTakeoverFlag(fs *pflag.FlagSet, o *options) {
	fs.Var((*invertedBool)(&o.NoTakeover), "takeover",
		"After the first sync, remove what kube-proxy left in the kernel (iptables-nft chains, nftables tables, kube-ipvs0, IPVS services, ipsets); false to run next to a kube-proxy.")
	fs.Lookup("takeover").NoOptDefVal = "true"
}

// invertedBool is a bool flag that stores the negation of its value.
type invertedBool bool

func (b *invertedBool) String() string { return strconv.FormatBool(!bool(*b)) }
func (b *invertedBool) Type() string   { return "bool" }
func (b *invertedBool) Set(s string) error {
	v, err := strconv.ParseBool(s)
	if err != nil {
		return err
	}
	*b = invertedBool(!v)
	return nil
}
