package netnstest

import (
	"context"
	"net"
	"net/http"
	"time"
)

// HTTPClient returns an HTTP client whose connections are opened from inside the
// namespace (see Dial), one per request: keep-alives are off so that nothing
// outlives the request.
func (ns *NS) HTTPClient(timeout time.Duration) *http.Client {
	return &http.Client{
		Timeout: timeout,
		Transport: &http.Transport{
			Proxy:             nil,
			DisableKeepAlives: true,
			DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
				d := timeout
				if dl, ok := ctx.Deadline(); ok {
					d = time.Until(dl)
				}
				return ns.Dial(network, addr, d)
			},
		},
	}
}
