//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// What kubelet and the container runtime make of a pod spec, for the pod
// contract scenario: the command line, the environment, the user and the
// capabilities a container really gets. Only what svcproxy's DaemonSet uses is
// supported; anything else fails loudly rather than being ignored.

// podContainer is a container as it would run on node.
type podContainer struct {
	argv []string // absolute binary path (in the image) and arguments
	env  []string // KEY=VALUE, in kubelet's order
	uid  int64
	gid  int64
	caps []string // capability names without CAP_, lower case, for setpriv
	nnp  bool     // no_new_privs (allowPrivilegeEscalation: false)
	// mounts are the container's hostPath volume mounts, in the spec's order.
	mounts []hostMount
}

// hostMount is a hostPath volume mounted into the container.
type hostMount struct {
	hostPath, mountPath string
	readOnly            bool
}

// imageDefaults is what the image's config contributes.
type imageDefaults struct {
	entrypoint, cmd, env []string
	user                 string
}

// runtimeDefaultCaps is containerd's (and Docker's) default capability set,
// which a container gets unless it drops ALL.
var runtimeDefaultCaps = []string{
	"CHOWN", "DAC_OVERRIDE", "FSETID", "FOWNER", "MKNOD", "NET_RAW", "SETGID", "SETUID",
	"SETFCAP", "SETPCAP", "NET_BIND_SERVICE", "SYS_CHROOT", "KILL", "AUDIT_WRITE",
}

// resolveContainer does kubelet's work for the container of pod running on
// nodeName: service links, env sources (ConfigMaps read from the API server, as
// kubelet reads them), $(VAR) expansion, command/args over the image's
// entrypoint/cmd, and the security context.
func resolveContainer(ctx context.Context, client kubernetes.Interface, pod *corev1.PodTemplateSpec, namespace, nodeName string, img imageDefaults) (*podContainer, error) {
	if len(pod.Spec.Containers) != 1 {
		return nil, fmt.Errorf("want one container, have %d", len(pod.Spec.Containers))
	}
	ctr := pod.Spec.Containers[0]
	env := newEnvList()
	for _, kv := range img.env {
		k, v, _ := strings.Cut(kv, "=")
		env.set(k, v)
	}
	// The runtime sets HOSTNAME; a host-network pod has the node's.
	if pod.Spec.HostNetwork {
		env.set("HOSTNAME", nodeName)
	}
	if pod.Spec.EnableServiceLinks == nil || *pod.Spec.EnableServiceLinks {
		if err := serviceEnv(ctx, client, namespace, env); err != nil {
			return nil, err
		}
	}
	for _, e := range ctr.Env {
		v, err := envValue(ctx, client, e, namespace, nodeName, env)
		if err != nil {
			return nil, fmt.Errorf("env %s: %w", e.Name, err)
		}
		env.set(e.Name, v)
	}
	if len(ctr.EnvFrom) > 0 {
		return nil, fmt.Errorf("envFrom is not supported by the pod contract test")
	}

	// Kubernetes: command replaces the entrypoint (and drops the image's cmd);
	// args replace cmd.
	argv := img.entrypoint
	args := img.cmd
	if len(ctr.Command) > 0 {
		argv, args = ctr.Command, nil
	}
	if ctr.Args != nil {
		args = ctr.Args
	}
	argv = append(slices.Clone(argv), args...)
	for i := range argv {
		argv[i] = expand(argv[i], env)
	}
	if len(argv) == 0 || !strings.HasPrefix(argv[0], "/") {
		return nil, fmt.Errorf("command %q: want an absolute path in the image", argv)
	}

	out := &podContainer{argv: argv, env: env.list()}
	for _, m := range ctr.VolumeMounts {
		i := slices.IndexFunc(pod.Spec.Volumes, func(v corev1.Volume) bool { return v.Name == m.Name })
		if i < 0 {
			return nil, fmt.Errorf("volume mount %s: no such volume", m.Name)
		}
		hp := pod.Spec.Volumes[i].HostPath
		if hp == nil || m.SubPath != "" || m.SubPathExpr != "" || !strings.HasPrefix(m.MountPath, "/") {
			return nil, fmt.Errorf("volume mount %s: only hostPath volumes at an absolute path are supported by the pod contract test", m.Name)
		}
		out.mounts = append(out.mounts, hostMount{hostPath: hp.Path, mountPath: m.MountPath, readOnly: m.ReadOnly})
	}
	if err := securityContext(out, pod.Spec.SecurityContext, ctr.SecurityContext, img.user); err != nil {
		return nil, err
	}
	return out, nil
}

func securityContext(out *podContainer, psc *corev1.PodSecurityContext, sc *corev1.SecurityContext, imageUser string) error {
	uid, gid := int64(0), int64(0)
	if imageUser != "" {
		u, g, hasGroup := strings.Cut(imageUser, ":")
		var err error
		if uid, err = strconv.ParseInt(u, 10, 64); err != nil {
			return fmt.Errorf("image user %q: only numeric users are supported", imageUser)
		}
		if hasGroup {
			if gid, err = strconv.ParseInt(g, 10, 64); err != nil {
				return fmt.Errorf("image user %q: only numeric groups are supported", imageUser)
			}
		}
	}
	if psc != nil {
		if psc.RunAsUser != nil {
			uid = *psc.RunAsUser
		}
		if psc.RunAsGroup != nil {
			gid = *psc.RunAsGroup
		}
	}
	caps := map[string]bool{}
	for _, c := range runtimeDefaultCaps {
		caps[c] = true
	}
	if sc != nil {
		if sc.Privileged != nil && *sc.Privileged {
			return fmt.Errorf("privileged containers are not what svcproxy's DaemonSet should need")
		}
		if sc.RunAsUser != nil {
			uid = *sc.RunAsUser
		}
		if sc.RunAsGroup != nil {
			gid = *sc.RunAsGroup
		}
		if sc.Capabilities != nil {
			for _, c := range sc.Capabilities.Drop {
				if c == "ALL" {
					clear(caps)
				}
				delete(caps, strings.TrimPrefix(string(c), "CAP_"))
			}
			for _, c := range sc.Capabilities.Add {
				caps[strings.TrimPrefix(string(c), "CAP_")] = true
			}
		}
		// Kubernetes' default is to allow escalation.
		out.nnp = sc.AllowPrivilegeEscalation != nil && !*sc.AllowPrivilegeEscalation
	}
	out.uid, out.gid = uid, gid
	for c := range caps {
		out.caps = append(out.caps, strings.ToLower(c))
	}
	sort.Strings(out.caps)
	return nil
}

func envValue(ctx context.Context, client kubernetes.Interface, e corev1.EnvVar, namespace, nodeName string, env *envList) (string, error) {
	switch {
	case e.ValueFrom == nil:
		return expand(e.Value, env), nil
	case e.ValueFrom.FieldRef != nil:
		switch p := e.ValueFrom.FieldRef.FieldPath; p {
		case "spec.nodeName":
			return nodeName, nil
		case "metadata.namespace":
			return namespace, nil
		default:
			return "", fmt.Errorf("fieldRef %q is not supported by the pod contract test", p)
		}
	case e.ValueFrom.ConfigMapKeyRef != nil:
		ref := e.ValueFrom.ConfigMapKeyRef
		cm, err := client.CoreV1().ConfigMaps(namespace).Get(ctx, ref.Name, metav1.GetOptions{})
		if err != nil {
			return "", fmt.Errorf("configMapKeyRef: %w", err)
		}
		v, ok := cm.Data[ref.Key]
		if !ok {
			return "", fmt.Errorf("ConfigMap %s has no key %q", ref.Name, ref.Key)
		}
		return v, nil
	default:
		return "", fmt.Errorf("env source %+v is not supported by the pod contract test", e.ValueFrom)
	}
}

// serviceEnv adds the variables kubelet derives from Services: those of the
// pod's namespace and the master Service `kubernetes` (default namespace).
func serviceEnv(ctx context.Context, client kubernetes.Interface, namespace string, env *envList) error {
	l, err := client.CoreV1().Services(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("service links: %w", err)
	}
	svcs := l.Items
	if namespace != metav1.NamespaceDefault {
		k, err := client.CoreV1().Services(metav1.NamespaceDefault).Get(ctx, "kubernetes", metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("service links: %w", err)
		}
		svcs = append(svcs, *k)
	}
	for _, s := range svcs {
		ip := s.Spec.ClusterIP
		if ip == "" || ip == corev1.ClusterIPNone || len(s.Spec.Ports) == 0 {
			continue
		}
		name := strings.ToUpper(strings.ReplaceAll(s.Name, "-", "_"))
		p0 := s.Spec.Ports[0]
		env.set(name+"_SERVICE_HOST", ip)
		env.set(name+"_SERVICE_PORT", fmt.Sprint(p0.Port))
		env.set(name+"_PORT", fmt.Sprintf("%s://%s:%d", strings.ToLower(string(p0.Protocol)), ip, p0.Port))
		for _, p := range s.Spec.Ports {
			if p.Name != "" {
				env.set(name+"_SERVICE_PORT_"+strings.ToUpper(strings.ReplaceAll(p.Name, "-", "_")), fmt.Sprint(p.Port))
			}
			pre := fmt.Sprintf("%s_PORT_%d_%s", name, p.Port, p.Protocol)
			env.set(pre, fmt.Sprintf("%s://%s:%d", strings.ToLower(string(p.Protocol)), ip, p.Port))
			env.set(pre+"_PROTO", strings.ToLower(string(p.Protocol)))
			env.set(pre+"_PORT", fmt.Sprint(p.Port))
			env.set(pre+"_ADDR", ip)
		}
	}
	return nil
}

// expand does kubelet's $(VAR) expansion: defined variables are replaced,
// $$ is a literal $, anything else is left as written.
func expand(s string, env *envList) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '$' || i+1 >= len(s) {
			b.WriteByte(s[i])
			continue
		}
		switch s[i+1] {
		case '$':
			b.WriteByte('$')
			i++
		case '(':
			end := strings.IndexByte(s[i+2:], ')')
			if end < 0 {
				b.WriteString(s[i:])
				return b.String()
			}
			name := s[i+2 : i+2+end]
			if v, ok := env.get(name); ok {
				b.WriteString(v)
			} else {
				b.WriteString(s[i : i+3+end])
			}
			i += 2 + end
		default:
			b.WriteByte('$')
		}
	}
	return b.String()
}

// envList keeps the first-set order of names and the last value, as kubelet's
// environment does.
type envList struct {
	order []string
	vals  map[string]string
}

func newEnvList() *envList { return &envList{vals: map[string]string{}} }

func (e *envList) set(k, v string) {
	if _, ok := e.vals[k]; !ok {
		e.order = append(e.order, k)
	}
	e.vals[k] = v
}

func (e *envList) get(k string) (string, bool) {
	v, ok := e.vals[k]
	return v, ok
}

func (e *envList) list() []string {
	out := make([]string, 0, len(e.order))
	for _, k := range e.order {
		out = append(out, k+"="+e.vals[k])
	}
	return out
}
