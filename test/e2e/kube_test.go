//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/util/retry"

	"github.com/svcproxy/svcproxy/internal/poll"
)

const ns = "default"

func ctxFor(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func container(ports ...corev1.ContainerPort) corev1.Container {
	return corev1.Container{Name: "app", Image: "registry.k8s.io/e2e-test-images/agnhost:2.53", Ports: ports}
}

func tcpPort(p int32) corev1.ContainerPort {
	return corev1.ContainerPort{ContainerPort: p, Protocol: corev1.ProtocolTCP}
}

func udpPort(p int32) corev1.ContainerPort {
	return corev1.ContainerPort{ContainerPort: p, Protocol: corev1.ProtocolUDP}
}

// deployment creates a Deployment whose pods carry lbls and are deleted with
// the test.
func deployment(t *testing.T, name string, replicas int32, lbls map[string]string, grace int64, ports ...corev1.ContainerPort) *appsv1.Deployment {
	t.Helper()
	c := theCluster
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: lbls},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: lbls},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: lbls},
				Spec: corev1.PodSpec{
					Containers:                    []corev1.Container{container(ports...)},
					TerminationGracePeriodSeconds: &grace,
				},
			},
		},
	}
	out, err := c.client.AppsV1().Deployments(ns).Create(ctxFor(t, 30*time.Second), d, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create deployment %s: %v", name, err)
	}
	t.Cleanup(func() {
		bg := metav1.DeletePropagationBackground
		err := c.client.AppsV1().Deployments(ns).Delete(context.Background(), name, metav1.DeleteOptions{PropagationPolicy: &bg})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Logf("delete deployment %s: %v", name, err)
		}
	})
	return out
}

func scale(t *testing.T, name string, replicas int32) {
	t.Helper()
	ctx := ctxFor(t, 30*time.Second)
	// The deployment controller writes the Deployment too: retry on conflict.
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		s, err := theCluster.client.AppsV1().Deployments(ns).GetScale(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		s.Spec.Replicas = replicas
		_, err = theCluster.client.AppsV1().Deployments(ns).UpdateScale(ctx, name, s, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatalf("scale %s to %d: %v", name, replicas, err)
	}
}

// service creates a Service that is deleted with the test.
func service(t *testing.T, svc *corev1.Service) *corev1.Service {
	t.Helper()
	c := theCluster
	out, err := c.client.CoreV1().Services(ns).Create(ctxFor(t, 30*time.Second), svc, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create service %s: %v", svc.Name, err)
	}
	t.Cleanup(func() {
		err := c.client.CoreV1().Services(ns).Delete(context.Background(), svc.Name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Logf("delete service %s: %v", svc.Name, err)
		}
	})
	return out
}

// simpleService is a ClusterIP Service with one port and no targetPort.
func simpleService(name string, port int32, proto corev1.Protocol, selector map[string]string) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.ServiceSpec{
			Selector: selector,
			Ports:    []corev1.ServicePort{{Port: port, Protocol: proto}},
		},
	}
}

func servicePort(name string, port, target int32) corev1.ServicePort {
	return corev1.ServicePort{Name: name, Port: port, TargetPort: intstr.FromInt32(target), Protocol: corev1.ProtocolTCP}
}

// pod creates a bare Pod bound to node (no scheduler), deleted with the test.
func pod(t *testing.T, name, node string, lbls map[string]string, ports ...corev1.ContainerPort) {
	t.Helper()
	c := theCluster
	grace := int64(1)
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: lbls},
		Spec: corev1.PodSpec{
			NodeName:                      node,
			Containers:                    []corev1.Container{container(ports...)},
			TerminationGracePeriodSeconds: &grace,
		},
	}
	if _, err := c.client.CoreV1().Pods(ns).Create(ctxFor(t, 30*time.Second), p, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create pod %s: %v", name, err)
	}
	t.Cleanup(func() {
		err := c.client.CoreV1().Pods(ns).Delete(context.Background(), name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Logf("delete pod %s: %v", name, err)
		}
	})
}

// podNetns is the network namespace the node agent runs pod in.
func podNetns(p *corev1.Pod) string {
	for _, s := range p.Status.ContainerStatuses {
		if n, ok := strings.CutPrefix(s.ContainerID, "netns://"); ok {
			return n
		}
	}
	return ""
}

func isReady(p *corev1.Pod) bool {
	if p.DeletionTimestamp != nil || p.Status.PodIP == "" || podNetns(p) == "" {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// pods lists the Pods matching selector, sorted by name.
func pods(ctx context.Context, selector map[string]string) ([]corev1.Pod, error) {
	l, err := theCluster.client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{
		LabelSelector: labels.SelectorFromSet(selector).String(),
	})
	if err != nil {
		return nil, err
	}
	sort.Slice(l.Items, func(i, j int) bool { return l.Items[i].Name < l.Items[j].Name })
	return l.Items, nil
}

// waitPods waits until exactly n Pods match selector and all of them are
// ready and not terminating.
func waitPods(t *testing.T, selector map[string]string, n int) []corev1.Pod {
	t.Helper()
	ctx := ctxFor(t, 90*time.Second)
	var got []corev1.Pod
	err := poll.Until(ctx, 60*time.Second, 100*time.Millisecond, func() (bool, string) {
		all, err := pods(ctx, selector)
		if err != nil {
			return false, err.Error()
		}
		got = got[:0]
		var states []string
		for i := range all {
			if isReady(&all[i]) {
				got = append(got, all[i])
			}
			states = append(states, fmt.Sprintf("%s(ready=%v,del=%v)", all[i].Name, isReady(&all[i]), all[i].DeletionTimestamp != nil))
		}
		return len(got) == n && len(all) == n, strings.Join(states, " ")
	})
	if err != nil {
		t.Fatalf("waiting for %d ready pods %v: %v", n, selector, err)
	}
	return got
}

func names(ps []corev1.Pod) []string {
	var out []string
	for _, p := range ps {
		out = append(out, p.Name)
	}
	return out
}
