//go:build e2e

package e2e

import "github.com/svcproxy/svcproxy/internal/kubepki"

// pki is the harness's throw-away certificate authority, internal/kubepki
// (shared with test/e2enode) under the names this suite calls.
type pki struct {
	*kubepki.PKI
	caPEM []byte
}

func newPKI(dir string) (*pki, error) {
	p, err := kubepki.New(dir, "svcproxy-e2e-ca")
	if err != nil {
		return nil, err
	}
	return &pki{PKI: p, caPEM: p.CAPEM}, nil
}

func (p *pki) path(name string) string { return p.Path(name) }

// issue writes NAME.crt and NAME.key signed by the CA. A certificate with
// SANs is a serving certificate, one without is a client certificate.
func (p *pki) issue(name, cn string, orgs []string, ips []string, dns []string) error {
	return p.Issue(name, cn, orgs, ips, dns)
}

// kubeconfig issues a client certificate and writes NAME.kubeconfig for it.
func (p *pki) kubeconfig(name, server, cn string, orgs ...string) (string, error) {
	return p.Kubeconfig(name, server, cn, orgs...)
}
