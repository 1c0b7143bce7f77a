package main

import (
	"slices"
	"time"
)

// quantile is the q-quantile (nearest rank) of ds, in seconds.
func quantile(ds []time.Duration, q float64) float64 {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(q*float64(len(s)-1) + 0.5)
	return s[i].Seconds()
}
