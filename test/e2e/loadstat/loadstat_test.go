package loadstat

import (
	"errors"
	"testing"
	"time"
)

var t0 = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

// at is t0 plus ms milliseconds.
func at(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }

// ok is a request that started at start ms and took took ms.
func ok(start, took int) Outcome { return Outcome{Start: at(start), End: at(start + took)} }

func failed(start, took int) Outcome {
	return Outcome{Start: at(start), End: at(start + took), Err: errors.New("refused")}
}

func TestSummarize(t *testing.T) {
	tests := []struct {
		name     string
		out      []Outcome
		from, to int
		want     Summary
	}{
		{
			name: "steady answers: the gap is the interval",
			out:  []Outcome{ok(0, 5), ok(50, 5), ok(100, 5), ok(150, 5)},
			from: 0, to: 200,
			want: Summary{Total: 4, LongestGap: 50 * time.Millisecond, GapStart: at(5), Slowest: 5 * time.Millisecond},
		},
		{
			name: "failures count and widen the gap",
			out:  []Outcome{ok(0, 5), failed(50, 1), failed(100, 1), ok(150, 5)},
			from: 0, to: 200,
			want: Summary{Total: 4, Failed: 2, FirstFailure: failed(50, 1), LongestGap: 150 * time.Millisecond, GapStart: at(5), Slowest: 5 * time.Millisecond},
		},
		{
			name: "a slow success (SYN retransmitted) is a gap without a failure",
			out:  []Outcome{ok(0, 5), ok(50, 1010), ok(100, 5), ok(1100, 5)},
			from: 0, to: 1200,
			want: Summary{Total: 4, LongestGap: 955 * time.Millisecond, GapStart: at(105), Slowest: 1010 * time.Millisecond},
		},
		{
			name: "outcomes outside the window are ignored; answers after its end clamp",
			out:  []Outcome{ok(-100, 5), failed(-50, 1), ok(10, 5), ok(190, 50), failed(200, 1)},
			from: 0, to: 200,
			want: Summary{Total: 2, LongestGap: 185 * time.Millisecond, GapStart: at(15), Slowest: 50 * time.Millisecond},
		},
		{
			name: "nothing answered: the whole window is the gap",
			out:  []Outcome{failed(10, 1)},
			from: 0, to: 300,
			want: Summary{Total: 1, Failed: 1, FirstFailure: failed(10, 1), LongestGap: 300 * time.Millisecond, GapStart: at(0)},
		},
		{
			name: "the earliest failure is first even out of order",
			out:  []Outcome{failed(80, 1), ok(0, 5), failed(40, 1)},
			from: 0, to: 100,
			want: Summary{Total: 3, Failed: 2, FirstFailure: failed(40, 1), LongestGap: 95 * time.Millisecond, GapStart: at(5), Slowest: 5 * time.Millisecond},
		},
	}
	for _, tc := range tests {
		got := Summarize(tc.out, at(tc.from), at(tc.to))
		if got.Total != tc.want.Total || got.Failed != tc.want.Failed || got.LongestGap != tc.want.LongestGap ||
			!got.GapStart.Equal(tc.want.GapStart) || got.Slowest != tc.want.Slowest ||
			!got.FirstFailure.Start.Equal(tc.want.FirstFailure.Start) || (got.FirstFailure.Err == nil) != (tc.want.FirstFailure.Err == nil) {
			t.Errorf("%s:\n got %+v\nwant %+v", tc.name, got, tc.want)
		}
	}
}

func TestFailedOutside(t *testing.T) {
	windows := []Window{{at(100), at(200)}, {at(500), at(600)}}
	out := []Outcome{ok(0, 5), failed(50, 1), failed(100, 1), failed(150, 1), failed(200, 1), failed(300, 1), ok(550, 1), failed(599, 1), failed(601, 1)}
	got := FailedOutside(out, windows)
	var starts []time.Time
	for _, o := range got {
		starts = append(starts, o.Start)
	}
	want := []time.Time{at(50), at(300), at(601)}
	if len(starts) != len(want) {
		t.Fatalf("got %v, want %v", starts, want)
	}
	for i := range want {
		if !starts[i].Equal(want[i]) {
			t.Errorf("failure %d: got %v, want %v", i, starts[i], want[i])
		}
	}
}
