//go:build e2e

package e2e

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/svcproxy/svcproxy/internal/netns"

	"github.com/svcproxy/svcproxy/internal/poll"
)

// podClient makes requests from inside a pod's network namespace.
type podClient struct {
	name  string
	node  string
	netns string
	ip    string

	once sync.Once
	http *http.Client
}

// clients holds one client pod per worker, keyed by node name.
var clients = map[string]*podClient{}

func (c *cluster) createClients(ctx context.Context) error {
	for _, n := range c.workers() {
		name := "client-" + n.short
		grace := int64(1)
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": "e2e-client"}},
			Spec: corev1.PodSpec{
				NodeName:                      n.name,
				Containers:                    []corev1.Container{container()},
				TerminationGracePeriodSeconds: &grace,
			},
		}
		if _, err := c.client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			return err
		}
	}
	for _, n := range c.workers() {
		name := "client-" + n.short
		var got *corev1.Pod
		err := poll.Until(ctx, 60*time.Second, 100*time.Millisecond, func() (bool, string) {
			p, err := c.client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			got = p
			return isReady(p), fmt.Sprintf("phase=%s ip=%s", p.Status.Phase, p.Status.PodIP)
		})
		if err != nil {
			return fmt.Errorf("client pod %s: %w", name, err)
		}
		clients[n.name] = &podClient{name: name, node: n.name, netns: podNetns(got), ip: got.Status.PodIP}
	}
	return nil
}

// clientOn returns the client pod on the named node.
func clientOn(node string) *podClient { return clients[node] }

// clientNotOn returns a client pod on a worker other than node.
func clientNotOn(node string) *podClient {
	for _, n := range theCluster.workers() {
		if n.name != node {
			return clients[n.name]
		}
	}
	return nil
}

func (p *podClient) client() *http.Client {
	p.once.Do(func() {
		p.http = &http.Client{
			Transport: &http.Transport{
				DialContext:       netns.DialFunc(p.netns, 2*time.Second),
				DisableKeepAlives: true,
				TLSClientConfig:   &tls.Config{RootCAs: caPool(), ServerName: "kubernetes.default.svc"},
			},
			Timeout: 2 * time.Second,
		}
	})
	return p.http
}

func caPool() *x509.CertPool {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(theCluster.pki.caPEM)
	return pool
}

// get makes one HTTP request on a new connection and returns the trimmed body.
func (p *podClient) get(url string) (string, error) {
	resp, err := p.client().Get(url)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("%s: %s", resp.Status, body)
	}
	return strings.TrimSpace(string(body)), nil
}

// hit asks who answers at ip:port over HTTP.
func (p *podClient) hit(ip string, port int32) (string, error) {
	return p.get(fmt.Sprintf("http://%s/", net.JoinHostPort(ip, fmt.Sprint(port))))
}

// hitWithin is hit with its own timeout, for addresses expected to lead
// nowhere.
func (p *podClient) hitWithin(ip string, port int32, timeout time.Duration) (string, error) {
	hc := &http.Client{
		Transport: &http.Transport{DialContext: netns.DialFunc(p.netns, timeout), DisableKeepAlives: true},
		Timeout:   timeout,
	}
	resp, err := hc.Get(fmt.Sprintf("http://%s/", net.JoinHostPort(ip, fmt.Sprint(port))))
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return strings.TrimSpace(string(body)), err
}

// dialTCP opens (and closes) one TCP connection, for refusal checks.
func (p *podClient) dialTCP(addr string, timeout time.Duration) error {
	c, err := netns.DialFunc(p.netns, timeout)(context.Background(), "tcp", addr)
	if err == nil {
		c.Close()
	}
	return err
}

// udpConn opens a connected UDP socket in the pod.
func (p *podClient) udpConn(addr string) (net.Conn, error) {
	return netns.DialFunc(p.netns, 2*time.Second)(context.Background(), "udp", addr)
}

// udpAsk sends one datagram on c and waits up to timeout for the name of the
// pod that answered (pods echo "NAME MESSAGE").
func udpAsk(c net.Conn, timeout time.Duration) (string, error) {
	if _, err := c.Write([]byte("who\n")); err != nil {
		return "", err
	}
	_ = c.SetReadDeadline(time.Now().Add(timeout))
	buf := make([]byte, 512)
	n, err := c.Read(buf)
	if err != nil {
		return "", err
	}
	name, _, _ := strings.Cut(strings.TrimSpace(string(buf[:n])), " ")
	return name, nil
}
