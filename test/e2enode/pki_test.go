//go:build e2enode

package e2enode

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// pki is the harness's throw-away certificate authority (the same as
// test/e2e's: a test-only file cannot be imported from there).
type pki struct {
	dir    string
	caCert *x509.Certificate
	caKey  *ecdsa.PrivateKey
	caPEM  []byte
}

func newPKI(dir string) (*pki, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "svcproxy-e2enode-ca"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	p := &pki{dir: dir, caCert: cert, caKey: key, caPEM: pemBlock("CERTIFICATE", der)}
	if err := os.WriteFile(p.path("ca.crt"), p.caPEM, 0o600); err != nil {
		return nil, err
	}
	if err := p.writeKey("sa.key", nil); err != nil {
		return nil, err
	}
	return p, nil
}

func (p *pki) path(name string) string { return filepath.Join(p.dir, name) }

func pemBlock(typ string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
}

func (p *pki) writeKey(name string, key *ecdsa.PrivateKey) error {
	if key == nil {
		var err error
		if key, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader); err != nil {
			return err
		}
	}
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return err
	}
	return os.WriteFile(p.path(name), pemBlock("EC PRIVATE KEY", der), 0o600)
}

var serial int64 = 1

// issue writes NAME.crt and NAME.key signed by the CA. A certificate with
// SANs is a serving certificate, one without is a client certificate.
func (p *pki) issue(name, cn string, orgs []string, ips []string, dns []string) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	serial++
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial),
		Subject:      pkix.Name{CommonName: cn, Organization: orgs},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		DNSNames:     dns,
	}
	for _, ip := range ips {
		tmpl.IPAddresses = append(tmpl.IPAddresses, net.ParseIP(ip))
	}
	if len(ips)+len(dns) > 0 {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.caCert, &key.PublicKey, p.caKey)
	if err != nil {
		return err
	}
	if err := os.WriteFile(p.path(name+".crt"), pemBlock("CERTIFICATE", der), 0o600); err != nil {
		return err
	}
	return p.writeKey(name+".key", key)
}

// kubeconfig issues a client certificate and writes NAME.kubeconfig for it.
func (p *pki) kubeconfig(name, server, cn string, orgs ...string) (string, error) {
	if err := p.issue(name, cn, orgs, nil, nil); err != nil {
		return "", err
	}
	crt, err := os.ReadFile(p.path(name + ".crt"))
	if err != nil {
		return "", err
	}
	key, err := os.ReadFile(p.path(name + ".key"))
	if err != nil {
		return "", err
	}
	b64 := base64.StdEncoding.EncodeToString
	cfg := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: e2e
  cluster:
    server: %s
    certificate-authority-data: %s
users:
- name: %s
  user:
    client-certificate-data: %s
    client-key-data: %s
contexts:
- name: e2e
  context:
    cluster: e2e
    user: %s
current-context: e2e
`, server, b64(p.caPEM), name, b64(crt), b64(key), name)
	path := p.path(name + ".kubeconfig")
	return path, os.WriteFile(path, []byte(cfg), 0o600)
}
