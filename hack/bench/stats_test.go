package main

import (
	"testing"
	"time"
)

func TestQuantile(t *testing.T) {
	ms := func(v ...int) []time.Duration {
		var out []time.Duration
		for _, x := range v {
			out = append(out, time.Duration(x)*time.Millisecond)
		}
		return out
	}
	hundred := make([]int, 100)
	for i := range hundred {
		hundred[i] = 100 - i // unsorted on purpose
	}
	for _, tc := range []struct {
		name string
		in   []time.Duration
		q    float64
		want float64
	}{
		{"empty", nil, 0.5, 0},
		{"one", ms(7), 0.99, 0.007},
		{"median of odd", ms(3, 1, 2), 0.5, 0.002},
		{"p99 of 100 is the 99th", ms(hundred...), 0.99, 0.099},
		{"p50 of 100", ms(hundred...), 0.5, 0.051},
		{"max", ms(5, 9, 1), 1, 0.009},
	} {
		if got := quantile(tc.in, tc.q); got != tc.want {
			t.Errorf("%s: quantile(%v) = %v, want %v", tc.name, tc.q, got, tc.want)
		}
	}
}
