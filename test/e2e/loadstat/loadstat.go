// Package loadstat summarises a steady load of requests: how many failed and
// the longest time without a successful answer. Pure, so that the swap
// scenarios' figures are tested without a cluster.
package loadstat

import (
	"slices"
	"time"
)

// Outcome is one request: when it started, when it ended and how.
type Outcome struct {
	Start, End time.Time
	Err        error
}

// Summary of the outcomes that started in a window.
type Summary struct {
	Total, Failed int
	// FirstFailure is the earliest failed outcome (zero if none failed).
	FirstFailure Outcome
	// LongestGap is the longest stretch of the window without a successful
	// answer: between the window's start, the end of each successful request
	// and the window's end. Under a steady load it is about the request
	// interval; a dropped SYN, retransmitted after TCP's 1 s initial RTO,
	// shows as a gap of a second or more even when the request succeeds.
	LongestGap time.Duration
	// GapStart is where LongestGap begins.
	GapStart time.Time
	// Slowest is the longest successful request.
	Slowest time.Duration
}

// Summarize looks at the outcomes that started in [from, to).
func Summarize(out []Outcome, from, to time.Time) Summary {
	var s Summary
	answers := []time.Time{from}
	for _, o := range out {
		if o.Start.Before(from) || !o.Start.Before(to) {
			continue
		}
		s.Total++
		if o.Err != nil {
			s.Failed++
			if s.FirstFailure.Err == nil || o.Start.Before(s.FirstFailure.Start) {
				s.FirstFailure = o
			}
			continue
		}
		s.Slowest = max(s.Slowest, o.End.Sub(o.Start))
		answers = append(answers, minTime(o.End, to))
	}
	answers = append(answers, to)
	slices.SortFunc(answers, func(a, b time.Time) int { return a.Compare(b) })
	for i := 1; i < len(answers); i++ {
		if gap := answers[i].Sub(answers[i-1]); gap > s.LongestGap {
			s.LongestGap, s.GapStart = gap, answers[i-1]
		}
	}
	return s
}

// Window is a stretch of time [From, To].
type Window struct{ From, To time.Time }

// FailedOutside returns the failed outcomes that did not start inside any of
// the windows: failures a scenario cannot blame on a known outage.
func FailedOutside(out []Outcome, windows []Window) []Outcome {
	var bad []Outcome
	for _, o := range out {
		if o.Err == nil {
			continue
		}
		inside := false
		for _, w := range windows {
			if !o.Start.Before(w.From) && !o.Start.After(w.To) {
				inside = true
				break
			}
		}
		if !inside {
			bad = append(bad, o)
		}
	}
	return bad
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}
