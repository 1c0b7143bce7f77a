package main

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"time"

	"golang.org/x/sys/unix"

	"github.com/svcproxy/svcproxy/internal/benchworld"
)

type dataplaneResult struct {
	Rounds         int     `json:"dataplane_rounds"`
	PerRound       int     `json:"dataplane_connections_per_round"`
	ClusterIPP10   float64 `json:"connect_clusterip_p10_s"`
	ClusterIPP25   float64 `json:"connect_clusterip_p25_s"`
	ClusterIPP50   float64 `json:"connect_clusterip_p50_s"`
	ClusterIPP99   float64 `json:"connect_clusterip_p99_s"`
	DirectP10      float64 `json:"connect_direct_p10_s"`
	DirectP25      float64 `json:"connect_direct_p25_s"`
	DirectP50      float64 `json:"connect_direct_p50_s"`
	DirectP99      float64 `json:"connect_direct_p99_s"`
	RatioP50       float64 `json:"connect_ratio_p50"`
	RatioP99       float64 `json:"connect_ratio_p99"`
	DataplaneFails int     `json:"dataplane_failures"`
}

// perRound is how many new connections each kind makes in a round.
const perRound = 200

// dataplane times new connections (the TCP handshake, from the client namespace
// through the node) to a ClusterIP and straight to one of that Service's pods,
// alternating, rounds x perRound of each, so that the machine's load falls on
// both alike. Eight Services
// spread over the table are used.
func (b *bench) dataplane(rounds int) (*dataplaneResult, error) {
	pr := b.world.NewProber(time.Second)
	defer pr.Close()
	svcs := spreadServices(b.n)
	var viaService, direct []time.Duration
	fails := 0
	probe := func(kind string, c int, out *[]time.Duration) error {
		i := svcs[c%len(svcs)]
		ip, port := netip.MustParseAddr(addr(96, i)), 80
		if kind == "direct" {
			// Not endpoint 0, which the one-endpoint changes moved in some Services.
			j := 0
			if size := b.o.size(i); size > 1 {
				j = 1 + c%(size-1)
			}
			ip, port = netip.MustParseAddr(b.o.endpointAddr(i, j)), benchworld.Port
		}
		_, d, err := pr.Probe(ip, port)
		for errors.Is(err, unix.EINTR) {
			_, d, err = pr.Probe(ip, port)
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "bench: data plane: %s: %v\n", kind, err)
			fails++
			if fails > perRound/10 {
				return fmt.Errorf("%s: %w", kind, err)
			}
			return nil
		}
		*out = append(*out, d)
		return nil
	}
	// Connection by connection, the two kinds alternate (and which goes first
	// alternates too): a burst of the machine's other load falls on both, where
	// blocks of 200 of one kind let it fall on one (p99 x0.9-x1.2 between runs).
	for c := range rounds * perRound {
		kinds := [2]string{"service", "direct"}
		if c%2 == 1 {
			kinds[0], kinds[1] = kinds[1], kinds[0]
		}
		for _, kind := range kinds {
			out := &direct
			if kind == "service" {
				out = &viaService
			}
			if err := probe(kind, c, out); err != nil {
				return nil, err
			}
		}
	}
	res := &dataplaneResult{Rounds: rounds, PerRound: perRound, DataplaneFails: fails,
		ClusterIPP50: quantile(viaService, 0.5), ClusterIPP99: quantile(viaService, 0.99),
		DirectP50: quantile(direct, 0.5), DirectP99: quantile(direct, 0.99),
		// The low quantiles are what a loaded machine disturbs least.
		ClusterIPP10: quantile(viaService, 0.1), ClusterIPP25: quantile(viaService, 0.25),
		DirectP10: quantile(direct, 0.1), DirectP25: quantile(direct, 0.25)}
	res.RatioP50, res.RatioP99 = res.ClusterIPP50/res.DirectP50, res.ClusterIPP99/res.DirectP99
	return res, nil
}
