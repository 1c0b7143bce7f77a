//go:build e2enode

package e2enode

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/svcproxy/svcproxy/internal/netns"
	"github.com/svcproxy/svcproxy/internal/poll"
)

// The echo server image (hack/echoserver, at /echoserver) answers HTTP on
// port 80 with the name it was given; the suite gives it the pod's name, so
// that the process of pod P is the one whose command line is
// "/echoserver serve P". Requests "from a pod" are made by the test process
// from a socket opened in that process's network namespace.
const echoImage = "docker.io/svcproxy-e2enode/echoserver:1"

// echoContainer is a container answering with its pod's name.
func echoContainer(name string) corev1.Container {
	return corev1.Container{
		Name:            name,
		Image:           echoImage,
		ImagePullPolicy: corev1.PullNever,
		Args:            []string{"serve", "$(POD_NAME)"},
		Env: []corev1.EnvVar{{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{
			FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"},
		}}},
		Ports: []corev1.ContainerPort{{ContainerPort: 80}},
		ReadinessProbe: &corev1.Probe{
			ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/", Port: intstr.FromInt32(80)}},
			PeriodSeconds: 1,
		},
	}
}

// findProcess returns the pid of the process whose argv is exactly argv.
func findProcess(argv ...string) (int, error) {
	want := []byte(strings.Join(argv, "\x00") + "\x00")
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return 0, err
	}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && bytes.Equal(b, want) {
			return pid, nil
		}
	}
	return 0, fmt.Errorf("no process %q", strings.Join(argv, " "))
}

// podNetns is the network namespace of pod name's echo server.
func podNetns(pod string) (string, error) {
	pid, err := findProcess("/echoserver", "serve", pod)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("/proc/%d/ns/net", pid), nil
}

// dialFrom opens a TCP connection from inside the network namespace at path.
func dialFrom(path, addr string, timeout time.Duration) (net.Conn, error) {
	return dialFromPort(path, addr, timeout, 0)
}

// dialFromPort is dialFrom from local port port (0: an ephemeral one).
func dialFromPort(path, addr string, timeout time.Duration, port int) (net.Conn, error) {
	d := net.Dialer{Timeout: timeout}
	if port != 0 {
		d.LocalAddr = &net.TCPAddr{Port: port}
	}
	var c net.Conn
	var derr error
	if err := netns.Do(path, func() error {
		c, derr = d.Dial("tcp", addr)
		return nil
	}); err != nil {
		return nil, err
	}
	return c, derr
}

// getFrom makes one HTTP request (addr: host:port, optionally with a path) on a
// new connection from pod's namespace and returns the answer (the answering
// pod's name).
func getFrom(pod, addr string, timeout time.Duration) (string, error) {
	return getFromPort(pod, addr, timeout, 0)
}

// unservedPorts hands out the local ports of connections to an address no
// proxy serves yet. Such a connection's SYN meets no rule and leaves an
// untranslated conntrack entry in the client's node (SYN_SENT, 120 s), which
// every later SYN of the same 4-tuple follows untranslated into nothing. The
// kernel moves its ephemeral port base every 10 s, so a later connection of
// the same client can land on such a port: from an ephemeral port, the
// "nothing answers yet" probes of TestDaemonSetApply black-holed a connection
// of the swap scenario a minute later (its 10 s of SYNs made no conntrack
// event in the node; the node held 9 untranslated entries of client-w1's).
// These ports lie below the ephemeral range (32768-60999), so no later
// connection meets their entries, and are not reused within 120 s even at a
// connection every 10 ms.
var unservedPorts = &portRange{first: 20000, n: 12000}

// portRange hands out the local ports first .. first+n-1 in turn, then
// again from first.
type portRange struct {
	mu       sync.Mutex
	first, n int
	next     int
}

func (r *portRange) take() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	p := r.first + r.next%r.n
	r.next++
	return p
}

// getFromUnserved is getFrom for an address no proxy may serve yet (see
// unservedPorts).
func getFromUnserved(pod, addr string, timeout time.Duration) (string, error) {
	return getFromPort(pod, addr, timeout, unservedPorts.take())
}

// getFromPort is getFrom from local port port (0: an ephemeral one).
func getFromPort(pod, addr string, timeout time.Duration, port int) (string, error) {
	path, err := podNetns(pod)
	if err != nil {
		return "", err
	}
	client := &http.Client{Timeout: timeout, Transport: &http.Transport{
		DisableKeepAlives: true,
		DialContext: func(ctx context.Context, network, a string) (net.Conn, error) {
			return dialFromPort(path, a, timeout, port)
		},
	}}
	if !strings.Contains(addr, "/") {
		addr += "/"
	}
	resp, err := client.Get("http://" + addr)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return strings.TrimSpace(string(b)), err
}

// clientPod is an echo server pod pinned to node n: the suite's client there.
func (c *cluster) createClientPod(ctx context.Context, n *node) (string, error) {
	name := "client-" + n.short
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Labels: map[string]string{"app": "e2enode-client"}},
		Spec: corev1.PodSpec{
			NodeName:                      n.name,
			Containers:                    []corev1.Container{echoContainer("client")},
			TerminationGracePeriodSeconds: ptr[int64](1),
		},
	}
	_, err := c.client.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{})
	return name, err
}

// waitPodsReady waits until the pods matching selector are n, all Ready.
func (c *cluster) waitPodsReady(ctx context.Context, ns, selector string, n int, timeout time.Duration) ([]corev1.Pod, error) {
	var ready []corev1.Pod
	err := poll.Until(ctx, timeout, 250*time.Millisecond, func() (bool, string) {
		list, err := c.client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: selector})
		if err != nil {
			return false, err.Error()
		}
		ready = ready[:0]
		var states []string
		for _, p := range list.Items {
			if p.DeletionTimestamp != nil {
				continue
			}
			if podReady(&p) {
				ready = append(ready, p)
			}
			states = append(states, fmt.Sprintf("%s@%s:%s", p.Name, p.Spec.NodeName, podState(&p)))
		}
		return len(ready) == n && len(states) == n, strings.Join(states, " ")
	})
	return ready, err
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// podState is a short description for poll messages.
func podState(p *corev1.Pod) string {
	for _, cs := range p.Status.ContainerStatuses {
		if w := cs.State.Waiting; w != nil {
			return w.Reason + " " + w.Message
		}
	}
	if podReady(p) {
		return "Ready"
	}
	return string(p.Status.Phase)
}

func ptr[T any](v T) *T { return &v }
