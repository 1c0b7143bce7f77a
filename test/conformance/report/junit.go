package main

import (
	"encoding/xml"
	"fmt"
	"os"
	"strings"
)

// run is one proxy's results: spec name -> result.
type run struct {
	proxy   string
	results map[string]result
	missing string // why there are no results, if there are none
}

type result struct {
	state   string // PASS, FAIL or SKIP
	seconds float64
	message string // why it was skipped, or the first line of its failure
}

// The part of ginkgo's JUnit report (e2e.test --report-dir) the table needs.
type junitSuites struct {
	Suites []struct {
		Cases []struct {
			Name    string  `xml:"name,attr"`
			Status  string  `xml:"status,attr"`
			Time    float64 `xml:"time,attr"`
			Skipped *struct {
				Message string `xml:"message,attr"`
			} `xml:"skipped"`
			Failure *struct {
				Message string `xml:"message,attr"`
				Text    string `xml:",chardata"`
			} `xml:"failure"`
			Error *struct {
				Message string `xml:"message,attr"`
			} `xml:"error"`
		} `xml:"testcase"`
	} `xml:"testsuite"`
}

// read adds the spec results of one JUnit file. Specs ginkgo filtered out
// (not focused, or skipped by pattern) are left out: the table lists the
// selection, and the reason of a pattern skip comes from test/conformance/specs.
func (r *run) read(path string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var doc junitSuites
	if err := xml.Unmarshal(b, &doc); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	for _, s := range doc.Suites {
		for _, c := range s.Cases {
			// "[It] " and the full text: e2e.test omits the labels.
			name := strings.TrimPrefix(strings.TrimSpace(c.Name), "[It] ")
			if !strings.HasPrefix(name, "[sig-network]") {
				continue // suite setup and teardown nodes
			}
			res := result{seconds: c.Time}
			switch {
			case c.Failure != nil || c.Error != nil || c.Status == "failed" || c.Status == "panicked" || c.Status == "timedout":
				res.state = "FAIL"
				if c.Failure != nil {
					res.message = firstLine(c.Failure.Message + "\n" + c.Failure.Text)
				}
			case c.Skipped != nil || c.Status == "skipped" || c.Status == "pending":
				if c.Skipped != nil && c.Skipped.Message == "skipped" {
					continue // filtered out: never ran ("skipped - REASON" is a Skip call)
				}
				res.state = "SKIP"
				if c.Skipped != nil {
					res.message = firstLine(strings.TrimPrefix(c.Skipped.Message, "skipped - "))
				}
			default:
				res.state = "PASS"
			}
			r.results[name] = res
		}
	}
	return nil
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	if len(s) > 160 {
		s = s[:160] + "..."
	}
	return s
}
