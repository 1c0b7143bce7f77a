// Package endpoints turns Kubernetes Services and EndpointSlices into the
// plain values a proxy renders: which service ports exist, at which cluster
// IP, and which backends each may use.
//
// It deliberately knows nothing about nftables (or any dataplane) so that the
// Kubernetes semantics — defaulting, skipping, merging and deduplicating
// slices, endpoint conditions — can be tested in isolation and reused by any
// renderer.
package endpoints
