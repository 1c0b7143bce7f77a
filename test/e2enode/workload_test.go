//go:build e2enode

package e2enode

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/yaml"
)

// The seed tutorial's workload: Deployment my-nginx (run=my-nginx), and the
// Service of deploy/examples/my-nginx.yaml (its ClusterIP 10.96.0.10, port
// 80). The suite's echo server plays nginx.
const (
	nginxSelector = "run=my-nginx"
	nginxVIP      = "10.96.0.10:80"
)

// seedService is the Service document of deploy/examples/my-nginx.yaml (the
// file's EndpointSlice is what the endpointslice controller writes here).
func (c *cluster) seedService() (*corev1.Service, error) {
	b, err := os.ReadFile(filepath.Join(c.cfg.repo, "deploy", "examples", "my-nginx.yaml"))
	if err != nil {
		return nil, err
	}
	for _, doc := range bytes.Split(b, []byte("\n---\n")) {
		var meta metav1.TypeMeta
		if err := yaml.Unmarshal(doc, &meta); err != nil {
			return nil, err
		}
		if meta.Kind == "Service" {
			svc := &corev1.Service{}
			if err := yaml.UnmarshalStrict(doc, svc); err != nil {
				return nil, fmt.Errorf("my-nginx.yaml: %w", err)
			}
			return svc, nil
		}
	}
	return nil, fmt.Errorf("no Service in deploy/examples/my-nginx.yaml")
}

// ensureSeed creates Deployment and Service my-nginx unless they exist, and
// scales the Deployment to replicas.
func (c *cluster) ensureSeed(ctx context.Context, replicas int32) error {
	svc, err := c.seedService()
	if err != nil {
		return err
	}
	if _, err := c.client.CoreV1().Services("default").Get(ctx, svc.Name, metav1.GetOptions{}); apierrors.IsNotFound(err) {
		if _, err := c.client.CoreV1().Services("default").Create(ctx, svc, metav1.CreateOptions{}); err != nil {
			return err
		}
	} else if err != nil {
		return err
	}
	labels := map[string]string{"run": "my-nginx"}
	ctr := echoContainer("my-nginx")
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "my-nginx", Namespace: "default"},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					Containers:                    []corev1.Container{ctr},
					TerminationGracePeriodSeconds: ptr[int64](2),
				},
			},
		},
	}
	_, err = c.client.AppsV1().Deployments("default").Create(ctx, dep, metav1.CreateOptions{})
	if !apierrors.IsAlreadyExists(err) {
		return err
	}
	// An earlier scenario may have scaled it.
	return c.scaleNginx(ctx, replicas)
}

// scaleNginx sets my-nginx's replicas. The scale carries the Deployment's
// resource version, which the Deployment controller's status updates move on:
// on a conflict it is read again.
func (c *cluster) scaleNginx(ctx context.Context, replicas int32) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		scale, err := c.client.AppsV1().Deployments("default").GetScale(ctx, "my-nginx", metav1.GetOptions{})
		if err != nil || scale.Spec.Replicas == replicas {
			return err
		}
		scale.Spec.Replicas = replicas
		_, err = c.client.AppsV1().Deployments("default").UpdateScale(ctx, "my-nginx", scale, metav1.UpdateOptions{})
		return err
	})
}

// nginxPods waits until my-nginx has n Ready pods and returns their names.
func (c *cluster) nginxPods(ctx context.Context, n int) ([]string, error) {
	pods, err := c.waitPodsReady(ctx, "default", nginxSelector, n, 2*time.Minute)
	if err != nil {
		return nil, fmt.Errorf("my-nginx pods: %w", err)
	}
	var names []string
	for _, p := range pods {
		names = append(names, p.Name)
	}
	sort.Strings(names)
	return names, nil
}

// answers makes n requests from client to addr and returns the distinct
// answers (sorted) and the number of failures.
func answers(client, addr string, n int) ([]string, int) {
	seen := map[string]bool{}
	failed := 0
	for i := 0; i < n; i++ {
		got, err := getFrom(client, addr, 2*time.Second)
		if err != nil {
			failed++
			continue
		}
		seen[got] = true
	}
	var out []string
	for s := range seen {
		out = append(out, s)
	}
	sort.Strings(out)
	return out, failed
}

func sameSet(a, b []string) bool { return strings.Join(a, ",") == strings.Join(b, ",") }
