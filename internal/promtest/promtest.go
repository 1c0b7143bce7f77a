// Package promtest talks to a real Prometheus from tests: the scrape configuration
// they start it with, and instant queries through its HTTP API.
package promtest

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Sample is one element of an instant query's vector result.
type Sample struct {
	Labels map[string]string
	Value  float64
}

// Config is a prometheus.yml that scrapes targets (host:port) every second as job.
// One second is what lets a test see a change within a few seconds.
func Config(job string, targets []string) string {
	quoted := make([]string, len(targets))
	for i, t := range targets {
		quoted[i] = strconv.Quote(t)
	}
	return "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n  evaluation_interval: 1s\n" +
		"scrape_configs:\n- job_name: " + job + "\n  static_configs:\n  - targets: [" + strings.Join(quoted, ", ") + "]\n"
}

// QueryVia returns Query for the Prometheus at addr (host:port), reached through
// dial: the tests' Prometheus listens inside a network namespace.
func QueryVia(dial func(ctx context.Context, network, addr string) (net.Conn, error), addr string) func(q string) ([]Sample, error) {
	hc := &http.Client{
		Transport: &http.Transport{DialContext: dial, DisableKeepAlives: true},
		Timeout:   10 * time.Second,
	}
	return func(q string) ([]Sample, error) { return Query(hc, addr, q) }
}

// Query runs the instant query q against the Prometheus at addr (host:port) and
// returns its vector result. Any other result type is an error: the tests ask for
// vectors only, and a scalar or matrix means the query is not what they think.
func Query(hc *http.Client, addr, q string) ([]Sample, error) {
	resp, err := hc.Get("http://" + addr + "/api/v1/query?query=" + url.QueryEscape(q))
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	return decode(q, body)
}

func decode(q string, body []byte) ([]Sample, error) {
	var r struct {
		Status string `json:"status"`
		Data   struct {
			ResultType string `json:"resultType"`
			Result     []struct {
				Metric map[string]string `json:"metric"`
				Value  [2]any            `json:"value"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &r); err != nil {
		return nil, fmt.Errorf("%s: %s: %w", q, body, err)
	}
	if r.Status != "success" || r.Data.ResultType != "vector" {
		return nil, fmt.Errorf("%s: %s", q, body)
	}
	out := make([]Sample, 0, len(r.Data.Result))
	for _, s := range r.Data.Result {
		str, ok := s.Value[1].(string)
		if !ok {
			return nil, fmt.Errorf("%s: value %v is not a string", q, s.Value)
		}
		v, err := strconv.ParseFloat(str, 64)
		if err != nil {
			return nil, fmt.Errorf("%s: value %v: %w", q, s.Value, err)
		}
		out = append(out, Sample{Labels: s.Metric, Value: v})
	}
	return out, nil
}
