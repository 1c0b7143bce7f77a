package readback

import (
	"regexp"
	"strings"
)

// volatile is what changes in a listing without any rule or element being
// touched: counters and the timeouts of dynamic set entries.
var volatile = regexp.MustCompile(`counter packets \d+ bytes \d+| expires [0-9dhms]+`)

// RulesetLines splits an `nft -a list` listing into one normalised line per
// rule, chain, set and element line, volatile parts masked.
func RulesetLines(listing string) []string {
	var lines []string
	for _, l := range strings.Split(listing, "\n") {
		l = strings.TrimSpace(volatile.ReplaceAllString(l, ""))
		if l != "" && l != "}" {
			lines = append(lines, l)
		}
	}
	return lines
}

// Removed returns the lines of before that after lacks.
func Removed(before, after []string) []string {
	have := map[string]int{}
	for _, l := range after {
		have[l]++
	}
	var out []string
	for _, l := range before {
		if have[l] > 0 {
			have[l]--
			continue
		}
		out = append(out, l)
	}
	return out
}

// NamesAddr reports whether one of a listing's lines names addr as a whole
// address: 10.244.1.2 is not named by 10.244.1.23 nor by 110.244.1.2.
func NamesAddr(lines []string, addr string) bool {
	whole := regexp.MustCompile(`(^|[^0-9a-f.:])` + regexp.QuoteMeta(addr) + `($|[^0-9a-f])`)
	for _, l := range lines {
		if whole.MatchString(l) {
			return true
		}
	}
	return false
}
