// Package kubepki is the end-to-end suites' throw-away certificate authority:
// a CA, the service-account signing key, serving and client certificates
// signed by it, and kubeconfigs that carry them. test/e2e and test/e2enode
// build their clusters' PKI with it. It is not part of the svcproxy binary.
package kubepki

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
	"sync"
	"time"
)

// PKI writes its files into Dir: ca.crt, sa.key, NAME.crt, NAME.key and
// NAME.kubeconfig.
type PKI struct {
	Dir    string
	CACert *x509.Certificate
	CAPEM  []byte
	caKey  *ecdsa.PrivateKey

	mu     sync.Mutex
	serial int64
}

// New makes a CA named cn, valid for a day, and the service-account key.
func New(dir, cn string) (*PKI, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: cn},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("CA certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	p := &PKI{Dir: dir, CACert: cert, caKey: key, CAPEM: pemBlock("CERTIFICATE", der), serial: 1}
	if err := os.WriteFile(p.Path("ca.crt"), p.CAPEM, 0o600); err != nil {
		return nil, err
	}
	if err := p.writeKey("sa.key", nil); err != nil {
		return nil, err
	}
	return p, nil
}

// Path is the file name in the PKI's directory.
func (p *PKI) Path(name string) string { return filepath.Join(p.Dir, name) }

func pemBlock(typ string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
}

func (p *PKI) writeKey(name string, key *ecdsa.PrivateKey) error {
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
	return os.WriteFile(p.Path(name), pemBlock("EC PRIVATE KEY", der), 0o600)
}

func (p *PKI) nextSerial() *big.Int {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.serial++
	return big.NewInt(p.serial)
}

// Issue writes NAME.crt and NAME.key signed by the CA, subject cn and
// organisations orgs (Kubernetes' user and groups). A certificate with IP or
// DNS SANs is a serving certificate, one without is a client certificate.
func (p *PKI) Issue(name, cn string, orgs []string, ips []string, dns []string) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	tmpl := &x509.Certificate{
		SerialNumber: p.nextSerial(),
		Subject:      pkix.Name{CommonName: cn, Organization: orgs},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		DNSNames:     dns,
	}
	for _, ip := range ips {
		parsed := net.ParseIP(ip)
		if parsed == nil {
			return fmt.Errorf("certificate %s: bad IP %q", name, ip)
		}
		tmpl.IPAddresses = append(tmpl.IPAddresses, parsed)
	}
	if len(ips)+len(dns) > 0 {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.CACert, &key.PublicKey, p.caKey)
	if err != nil {
		return fmt.Errorf("certificate %s: %w", name, err)
	}
	if err := os.WriteFile(p.Path(name+".crt"), pemBlock("CERTIFICATE", der), 0o600); err != nil {
		return err
	}
	return p.writeKey(name+".key", key)
}

// Kubeconfig issues a client certificate (cn, orgs) and writes
// NAME.kubeconfig for it against server; it returns the file's path.
func (p *PKI) Kubeconfig(name, server, cn string, orgs ...string) (string, error) {
	if err := p.Issue(name, cn, orgs, nil, nil); err != nil {
		return "", err
	}
	crt, err := os.ReadFile(p.Path(name + ".crt"))
	if err != nil {
		return "", err
	}
	key, err := os.ReadFile(p.Path(name + ".key"))
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
`, server, b64(p.CAPEM), name, b64(crt), b64(key), name)
	path := p.Path(name + ".kubeconfig")
	return path, os.WriteFile(path, []byte(cfg), 0o600)
}
