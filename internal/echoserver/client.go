package echoserver

import (
	"io"
	"net/http"
	"strings"
	"time"
)

// Get fetches http://target (host:port, optionally with a path) on a new connection
// and returns the trimmed body.
func Get(target string, timeout time.Duration) (string, error) {
	if !strings.Contains(target, "/") {
		target += "/"
	}
	c := &http.Client{Timeout: timeout, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := c.Get("http://" + target)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return strings.TrimSpace(string(b)), err
}
