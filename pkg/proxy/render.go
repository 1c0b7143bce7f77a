package proxy

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/svcproxy/svcproxy/pkg/endpoints"
	"github.com/svcproxy/svcproxy/pkg/nft"
)

// ServiceOwner is the ruleset fragment owner for a Service.
func ServiceOwner(k endpoints.ServiceKey) string { return "svc:" + k.String() }

var protoNumbers = map[string]uint8{"TCP": nft.ProtoTCP, "UDP": nft.ProtoUDP, "SCTP": nft.ProtoSCTP}

// RenderService returns one Service's part of the table: per port, the dispatch
// element that leads from ClusterIP . proto . port to where its endpoint is chosen,
// and the ClusterIP and hairpin elements. It is a pure function of its arguments;
// node is the proxy's node, for internalTrafficPolicy: Local.
//
// A port with n endpoints goes to the shared chain lb-n, whose one rule looks the
// endpoint up in the endpoints map under ClusterIP . proto . port . (random mod n).
// Replacing an endpoint then only swaps the map element of its slot (the sync loop
// keeps the other endpoints in theirs: keepSlots), and a change of n swaps one
// dispatch element: the kernel re-validates chains reachable from the dispatch map,
// a few per endpoint count, instead of a rule per endpoint of every Service.
// A ClientIP-affinity port goes to sticky-n-SS, which first looks the client up in
// the affinity map of the shard and otherwise picks as lb-n-SS does; its element in
// sticky-ports tells the filter chains after NAT how long to remember where the
// connection went (affinity-T-proto-SS). Sticky ports are element-only changes too.
func RenderService(ports []endpoints.ServicePort, eps endpoints.ByPort, node string) nft.Fragment {
	return RenderServiceWith(ports, eps, Options{NodeName: node})
}

// RenderServiceWith is RenderService with the options that shape external paths
// (see renderExternal): the node, and the cluster CIDR whose traffic an
// externalTrafficPolicy: Local port sends to cluster-wide endpoints.
func RenderServiceWith(ports []endpoints.ServicePort, eps endpoints.ByPort, o Options) nft.Fragment {
	var f nft.Fragment
	renderServiceInto(&f, ports, eps, o, lastRendering{})
	return f
}

// renderServiceInto is RenderServiceWith into f, which a sync reuses from one
// Service to the next (nft.Fragment.Reset). Endpoints keep the slots they had in
// last, the Service's last rendering (keepSlots); RenderServiceWith knows none.
func renderServiceInto(f *nft.Fragment, ports []endpoints.ServicePort, eps endpoints.ByPort, o Options, last lastRendering) {
	fam := fieldsOf(o.Family)
	for _, sp := range ports {
		proto, ok := protoNumbers[sp.Name.Protocol]
		if !ok || !fam.ofFamily(sp.ClusterIP) || sp.Port == 0 || endpoints.ReservedReason(sp.ClusterIP) != "" {
			// The tracker already reported it; never emit a rule the kernel may refuse,
			// nor capture an address of the node's own (127.0.0.1:80 would be every
			// local client's port 80).
			continue
		}
		usable, noLocal := targets(sp, eps.Endpoints(sp.Name), o.place())
		// An element per endpoint, a hairpin element per endpoint here, the dispatch,
		// the ClusterIP and a sticky port: reserved at once rather than grown
		// through copies (with a hairpin element for every endpoint, reserved for
		// the 1% of a 100-node cluster's that are here, this was a tenth of what a
		// cold sync allocated).
		hairpins := 0
		for _, e := range usable {
			if hairpinHere(e, o.place()) {
				hairpins++
			}
		}
		f.Elements = slices.Grow(f.Elements, len(usable)+hairpins+3)
		dispatch := nft.Element{Set: mapServiceIPs, Key: f.Datums(nft.IP(sp.ClusterIP), nft.Proto(proto), nft.Port(sp.Port)),
			Comment: sp.Name.String()}
		renderExternal(f, sp, proto, eps.Endpoints(sp.Name), o, last)
		switch {
		case noLocal:
			// kube-proxy drops rather than rejects here: the Service has endpoints,
			// just none on this node.
			dispatch.Verdict = &nft.Verdict{Kind: nft.Drop}
		case len(usable) == 0:
			dispatch.Verdict = noEndpointsVerdict(proto)
		default:
			lb := loadBalanceChain(len(usable), sp.ClusterIP)
			if sp.SessionAffinity {
				lb = stickyChain(len(usable), sp.ClusterIP)
				record := affinityChain(sp.AffinityTimeout, proto, sp.ClusterIP)
				f.Shared = append(f.Shared, record)
				f.Elements = append(f.Elements, nft.Element{Set: mapStickyPorts, Key: dispatch.Key,
					Verdict: &nft.Verdict{Kind: nft.Goto, Chain: record.Name}, Comment: dispatch.Comment})
			}
			f.Shared = append(f.Shared, lb)
			dispatch.Verdict = &nft.Verdict{Kind: nft.Goto, Chain: lb.Name}
			slotElements(f, endpointsMap(sp.ClusterIP), dispatch.Key, 0, usable, last)
		}
		f.Elements = append(f.Elements, dispatch, nft.Element{Set: setClusterIPs, Key: f.Datums(nft.IP(sp.ClusterIP))})
		for _, e := range usable {
			if hairpinHere(e, o.place()) {
				f.Elements = append(f.Elements, hairpinElement(f, e.Addr()))
			}
		}
	}
}

// hairpinHere reports whether e may be a pod of this node. Only such a pod can send
// a packet that this node's rules translate back to its sender: a pod elsewhere is
// translated by its own node's proxy, and external paths to it masquerade anyway
// (renderExternal adds local endpoints alone, as here). So the hairpin set holds
// this node's share of the endpoints, not every endpoint of the cluster (300k
// elements at 30k Services x 10, most of the table). An endpoint without a node, or
// a proxy not told its node, may be here.
func hairpinHere(e endpoints.Endpoint, here endpoints.Place) bool {
	node := e.NodeName()
	return node == "" || here.Node == "" || node == here.Node
}

// loadBalanceChain is the chain shared by every port with n endpoints whose
// ClusterIP falls in the same shard of the endpoints map: lb-N-SS. Each call builds a
// new value; callers that keep many Services deduplicate them (sharedChains).
func loadBalanceChain(n int, clusterIP netip.Addr) *nft.Chain {
	x := fieldsFor(clusterIP)
	return &nft.Chain{Name: fmt.Sprintf("lb-%d-%02d", n, shardOf(clusterIP)), Rules: []nft.Rule{{Stmts: []nft.Stmt{x.dnatMap(
		[]nft.Operand{nft.F(x.daddr), nft.F(nft.FieldL4Proto), nft.F(nft.FieldThDport), nft.Random(uint32(n))},
		endpointsMap(clusterIP),
	)}}}}
}

// targets picks the endpoints new connections may go to: those hints allow at here
// (clusterEndpoints); with internalTrafficPolicy Local only those on this node (ready
// ones, else serving terminating ones, among them, hints ignored), and noLocal
// reports that the Service has usable endpoints but none here.
func targets(sp endpoints.ServicePort, eps []endpoints.Endpoint, here endpoints.Place) (usable []endpoints.Endpoint, noLocal bool) {
	eps = programmable(eps, sp.ClusterIP)
	if !sp.InternalLocal {
		return clusterEndpoints(sp, eps, here), false
	}
	var local []endpoints.Endpoint
	for _, e := range eps {
		if e.NodeName() == here.Node {
			local = append(local, e)
		}
	}
	usable = endpoints.UsableEndpoints(local)
	return usable, len(usable) == 0 && len(endpoints.UsableEndpoints(eps)) > 0
}

// programmable drops endpoints the kernel could not be given or that no connection
// may be sent to (the tracker reports them); what is left has the family of the
// Service's address (its table's) and a port. When that is all of them (the
// common case) it is eps itself, for reading only.
func programmable(eps []endpoints.Endpoint, clusterIP netip.Addr) []endpoints.Endpoint {
	fam := fieldsFor(clusterIP)
	ok := func(e endpoints.Endpoint) bool {
		a := e.Addr()
		return fam.ofFamily(a) && e.Port != 0 && endpoints.ReservedReason(a) == ""
	}
	first := slices.IndexFunc(eps, func(e endpoints.Endpoint) bool { return !ok(e) })
	if first < 0 {
		return eps
	}
	out := slices.Clone(eps[:first])
	for _, e := range eps[first+1:] {
		if ok(e) {
			out = append(out, e)
		}
	}
	return out
}

// stickyChain is lb-N-SS for ClientIP-affinity ports: a client the affinity map
// knows for this ClusterIP . proto . port goes back to its endpoint, others are
// spread as lb-N-SS spreads them. It holds no constant of any Service, so every
// sticky port with n endpoints in the shard shares it.
//
// An entry whose endpoint is no longer a usable endpoint of the port would send the
// client to a removed pod: the affinity sweeper deletes such entries after the
// commit that removed the endpoint (see affinity.go).
func stickyChain(n int, clusterIP netip.Addr) *nft.Chain {
	lb := loadBalanceChain(n, clusterIP)
	return &nft.Chain{Name: fmt.Sprintf("sticky-%d-%02d", n, shardOf(clusterIP)), Rules: []nft.Rule{
		{Stmts: []nft.Stmt{fieldsFor(clusterIP).dnatMap(fieldsFor(clusterIP).affinityKey(), affinityMap(clusterIP))}},
		lb.Rules[0],
	}}
}

// affinityKey is the client . ClusterIP . proto . port of a packet before NAT.
func (x ipFields) affinityKey() []nft.Operand {
	return []nft.Operand{nft.F(x.saddr), nft.F(x.daddr), nft.F(nft.FieldL4Proto), nft.F(nft.FieldThDport)}
}

// dnatMap is "dnat ip to KEY map @m", or "dnat ip6 to" in the ip6 table.
func (x ipFields) dnatMap(key []nft.Operand, m string) nft.DNATMap {
	d := nft.DNATMap{Key: key, Map: m}
	if x.table == nft.FamilyIPv6 {
		d.Family = nft.FamilyIPv6
	}
	return d
}

// affinityChain records, after NAT, where a new connection to a sticky port went:
// the key from the connection's original tuple, the endpoint from the packet and
// the reply tuple. Every new connection refreshes the entry's timeout, as
// kube-proxy's "update @affinity-X { ip saddr }" does. One chain per timeout,
// protocol and shard of the affinity map, shared: nft types "ct original proto-dst"
// only after "ct protocol".
func affinityChain(timeout time.Duration, proto uint8, clusterIP netip.Addr) *nft.Chain {
	if timeout <= 0 {
		timeout = DefaultAffinityTimeout // a zero dynset timeout would mean "never expire"
	}
	protoName := strings.ToLower(nft.Proto(proto).String())
	return fieldsFor(clusterIP).recordChain(fmt.Sprintf("affinity-%d-%s-%02d", int64(timeout/time.Second), protoName, shardOf(clusterIP)), affinityMap(clusterIP), timeout, proto)
}

// recordChain writes a new connection's client . original address . proto .
// original port : endpoint . endpoint port into the affinity map amap, with timeout.
func (x ipFields) recordChain(name, amap string, timeout time.Duration, proto uint8) *nft.Chain {
	return &nft.Chain{Name: name, Rules: []nft.Rule{{Stmts: []nft.Stmt{
		nft.Match{Field: nft.FieldCtProtocol, Value: nft.Proto(proto)},
		nft.Update{Set: amap, Timeout: timeout,
			Key:  []nft.Operand{nft.F(x.saddr), nft.F(x.ctOrigDaddr), nft.F(nft.FieldL4Proto), nft.F(nft.FieldCtOrigProtoDst)},
			Data: []nft.Operand{nft.F(x.daddr), nft.F(nft.FieldCtReplyProtoSrc)}},
	}}}}
}
