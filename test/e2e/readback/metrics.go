package readback

import (
	"sort"
	"strconv"
	"strings"
)

// ParseMetrics reads Prometheus' text exposition: series (name and labels as
// written) -> value.
func ParseMetrics(text string) map[string]float64 {
	out := map[string]float64{}
	for _, l := range strings.Split(text, "\n") {
		if l == "" || l[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(l, ' ')
		if i < 0 {
			continue
		}
		if v, err := strconv.ParseFloat(l[i+1:], 64); err == nil {
			out[l[:i]] = v
		}
	}
	return out
}

// HistogramQuantile estimates quantile q of the observations a histogram
// gained between two scrapes, interpolating inside the bucket as
// Prometheus' histogram_quantile does, with buckets of every label set summed
// by le. It returns the count too.
func HistogramQuantile(before, after map[string]float64, name string, q float64) (float64, float64) {
	type bucket struct{ le, n float64 }
	byLe := map[float64]float64{}
	prefix := name + `_bucket{`
	for k, v := range after {
		labels, ok := strings.CutPrefix(k, prefix)
		if !ok {
			continue
		}
		_, le, ok := strings.Cut(labels, `le="`)
		if !ok {
			continue
		}
		le, _, _ = strings.Cut(le, `"`)
		bound, err := strconv.ParseFloat(le, 64)
		if le == "+Inf" {
			bound, err = inf, nil
		}
		if err == nil {
			byLe[bound] += v - before[k]
		}
	}
	var bs []bucket
	for le, n := range byLe {
		bs = append(bs, bucket{le, n})
	}
	sort.Slice(bs, func(i, j int) bool { return bs[i].le < bs[j].le })
	if len(bs) == 0 || bs[len(bs)-1].n == 0 {
		return 0, 0
	}
	total := bs[len(bs)-1].n
	rank := q * total
	lo, prev := 0.0, 0.0
	for _, b := range bs {
		if b.n >= rank {
			if b.le == inf {
				return lo, total
			}
			return lo + (b.le-lo)*(rank-prev)/max(b.n-prev, 1e-9), total
		}
		lo, prev = b.le, b.n
	}
	return lo, total
}

var inf = 1e308
