package kubepki

import (
	"crypto/x509"
	"encoding/pem"
	"os"
	"slices"
	"testing"

	"k8s.io/client-go/tools/clientcmd"
)

func readCert(t *testing.T, path string) *x509.Certificate {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(b)
	if block == nil {
		t.Fatalf("%s: no PEM block", path)
	}
	c, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestIssue(t *testing.T) {
	p, err := New(t.TempDir(), "test-ca")
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(p.CACert)
	tests := []struct {
		name, cn string
		orgs     []string
		ips, dns []string
		usage    x509.ExtKeyUsage
		verifyAs string // a SAN the serving certificate must be valid for
	}{
		{name: "client", cn: "system:node:n1", orgs: []string{"system:nodes"}, usage: x509.ExtKeyUsageClientAuth},
		{name: "server", cn: "kube-apiserver", ips: []string{"172.18.0.2"}, dns: []string{"kubernetes"}, usage: x509.ExtKeyUsageServerAuth, verifyAs: "172.18.0.2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := p.Issue(tt.name, tt.cn, tt.orgs, tt.ips, tt.dns); err != nil {
				t.Fatal(err)
			}
			c := readCert(t, p.Path(tt.name+".crt"))
			if c.Subject.CommonName != tt.cn || !slices.Equal(c.Subject.Organization, tt.orgs) {
				t.Errorf("subject %v, want CN %s O %v", c.Subject, tt.cn, tt.orgs)
			}
			if _, err := c.Verify(x509.VerifyOptions{Roots: pool, DNSName: tt.verifyAs, KeyUsages: []x509.ExtKeyUsage{tt.usage}}); err != nil {
				t.Errorf("verify: %v", err)
			}
		})
	}
	if err := p.Issue("bad", "x", nil, []string{"not-an-ip"}, nil); err == nil {
		t.Error("a bad IP SAN was accepted")
	}
	a, b := readCert(t, p.Path("client.crt")), readCert(t, p.Path("server.crt"))
	if a.SerialNumber.Cmp(b.SerialNumber) == 0 {
		t.Errorf("two certificates share serial %v", a.SerialNumber)
	}
}

func TestKubeconfig(t *testing.T) {
	p, err := New(t.TempDir(), "test-ca")
	if err != nil {
		t.Fatal(err)
	}
	path, err := p.Kubeconfig("admin", "https://127.0.0.1:6443", "admin", "system:masters")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Host != "https://127.0.0.1:6443" || len(cfg.CertData) == 0 || len(cfg.KeyData) == 0 || string(cfg.CAData) != string(p.CAPEM) {
		t.Errorf("kubeconfig: host %s, cert %d bytes, key %d bytes, CA matches %v", cfg.Host, len(cfg.CertData), len(cfg.KeyData), string(cfg.CAData) == string(p.CAPEM))
	}
}
