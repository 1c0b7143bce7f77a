//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/svcproxy/svcproxy/internal/poll"
)

// TestExternalIPPolicy: deploy/policy/restrict-external-ips.yaml, the
// admission-control mitigation docs/security.md offers for CVE-2020-8554, does
// what it says on the real API server: as shipped, a Service with any externalIP
// is refused and one without is accepted; with allowedCIDRs set, an externalIP
// inside them is accepted and one outside refused.
func TestExternalIPPolicy(t *testing.T) {
	track(t)
	c := theCluster
	ctx := ctxFor(t, 3*time.Minute)
	root, err := repoRoot()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(root, "deploy", "policy", "restrict-external-ips.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	docs := bytes.Split(b, []byte("\n---\n"))
	if len(docs) != 2 {
		t.Fatalf("want a policy and its binding, have %d documents", len(docs))
	}
	var policy admissionv1.ValidatingAdmissionPolicy
	var binding admissionv1.ValidatingAdmissionPolicyBinding
	if err := yaml.UnmarshalStrict(docs[0], &policy); err != nil {
		t.Fatal(err)
	}
	if err := yaml.UnmarshalStrict(docs[1], &binding); err != nil {
		t.Fatal(err)
	}
	policies := c.client.AdmissionregistrationV1().ValidatingAdmissionPolicies()
	bindings := c.client.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings()
	if _, err := policies.Create(ctx, &policy, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := bindings.Create(ctx, &binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx := context.Background()
		_ = bindings.Delete(ctx, binding.Name, metav1.DeleteOptions{})
		_ = policies.Delete(ctx, policy.Name, metav1.DeleteOptions{})
		// The scenarios after this one create externalIPs: wait until the
		// API server has dropped the policy.
		poll.Eventually(t, time.Minute, "the policy gone", poll.NoError(func() error { return tryService(ctx, "192.0.2.99") }))
	})

	// The API server applies a new policy after a short while.
	poll.Eventually(t, time.Minute, "a Service with an externalIP refused", func() (bool, string) {
		err := tryService(ctx, "192.0.2.77")
		return isPolicyRefusal(err), errString(err)
	})
	if err := tryService(ctx, ""); err != nil {
		t.Errorf("a Service without externalIPs: %v", err)
	}

	got, err := policies.Get(ctx, policy.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got.Spec.Variables[0].Expression = `["192.0.2.0/24"]`
	if _, err := policies.Update(ctx, got, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	poll.Eventually(t, time.Minute, "an externalIP inside allowedCIDRs accepted", poll.NoError(func() error { return tryService(ctx, "192.0.2.77") }))
	if err := tryService(ctx, "198.51.100.7"); !isPolicyRefusal(err) {
		t.Errorf("a Service with an externalIP outside allowedCIDRs: %v, want the policy's refusal", err)
	}
}

// tryService creates (and deletes again) a ClusterIP Service in default with
// the given externalIP ("" for none).
func tryService(ctx context.Context, externalIP string) error {
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "policy-", Namespace: "default"},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80, Protocol: corev1.ProtocolTCP}}},
	}
	if externalIP != "" {
		svc.Spec.ExternalIPs = []string{externalIP}
	}
	created, err := theCluster.client.CoreV1().Services("default").Create(ctx, svc, metav1.CreateOptions{})
	if err != nil {
		return err
	}
	return theCluster.client.CoreV1().Services("default").Delete(ctx, created.Name, metav1.DeleteOptions{})
}

func isPolicyRefusal(err error) bool {
	return apierrors.IsForbidden(err) && strings.Contains(err.Error(), "svcproxy-restrict-external-ips")
}
