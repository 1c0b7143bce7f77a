//go:build e2e

package e2e

import (
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/svcproxy/svcproxy/internal/netns"
	"github.com/svcproxy/svcproxy/test/e2e/readback"
)

// scrape reads the proxy's Prometheus metrics on node n (series -> value).
func (c *cluster) scrape(n *node) (map[string]float64, error) {
	hc := &http.Client{
		Transport: &http.Transport{DialContext: netns.DialFunc(n.netns, 2*time.Second), DisableKeepAlives: true},
		Timeout:   10 * time.Second,
	}
	resp, err := hc.Get(fmt.Sprintf("http://127.0.0.1:%d/metrics", metricsPort))
	if err != nil {
		return nil, fmt.Errorf("metrics on %s: %w", n.name, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("metrics on %s: %w", n.name, err)
	}
	return readback.ParseMetrics(string(b)), nil
}
