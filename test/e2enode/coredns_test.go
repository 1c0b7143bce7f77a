//go:build e2enode

package e2enode

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// coreDNSManifest is kubeadm's CoreDNS (ServiceAccount, RBAC, Corefile,
// Deployment, Service kube-dns at E2ENODE_CLUSTER_DNS, the kubelets' clusterDNS),
// with the image built here (hack/conformance.sh) and no forward plugin:
// nothing outside the cluster is reachable.
const coreDNSManifest = `apiVersion: v1
kind: ServiceAccount
metadata:
  name: coredns
  namespace: kube-system
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: system:coredns
rules:
- apiGroups: [""]
  resources: [endpoints, services, pods, namespaces]
  verbs: [list, watch]
- apiGroups: [discovery.k8s.io]
  resources: [endpointslices]
  verbs: [list, watch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: system:coredns
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: system:coredns
subjects:
- kind: ServiceAccount
  name: coredns
  namespace: kube-system
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: coredns
  namespace: kube-system
data:
  Corefile: |
    .:53 {
        errors
        health {
           lameduck 5s
        }
        ready
        kubernetes cluster.local in-addr.arpa ip6.arpa {
           pods insecure
           fallthrough in-addr.arpa ip6.arpa
           ttl 30
        }
        cache 30
        loop
    }
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: coredns
  namespace: kube-system
  labels:
    k8s-app: kube-dns
spec:
  replicas: 1
  selector:
    matchLabels:
      k8s-app: kube-dns
  template:
    metadata:
      labels:
        k8s-app: kube-dns
    spec:
      serviceAccountName: coredns
      priorityClassName: system-cluster-critical
      tolerations:
      - key: node-role.kubernetes.io/control-plane
        effect: NoSchedule
      dnsPolicy: Default
      containers:
      - name: coredns
        image: svcproxy-e2enode/coredns:1
        imagePullPolicy: Never
        args: ["-conf", "/etc/coredns/Corefile"]
        volumeMounts:
        - name: config-volume
          mountPath: /etc/coredns
          readOnly: true
        ports:
        - {containerPort: 53, name: dns, protocol: UDP}
        - {containerPort: 53, name: dns-tcp, protocol: TCP}
        livenessProbe:
          httpGet: {path: /health, port: 8080}
          initialDelaySeconds: 60
        readinessProbe:
          httpGet: {path: /ready, port: 8181}
          periodSeconds: 2
      volumes:
      - name: config-volume
        configMap:
          name: coredns
---
apiVersion: v1
kind: Service
metadata:
  name: kube-dns
  namespace: kube-system
  labels:
    k8s-app: kube-dns
spec:
  clusterIP: %s
  selector:
    k8s-app: kube-dns
  ports:
  - {name: dns, port: 53, protocol: UDP}
  - {name: dns-tcp, port: 53, protocol: TCP}
`

func (c *cluster) applyCoreDNS(ctx context.Context) error {
	path := filepath.Join(c.dir, "coredns.yaml")
	if c.cfg.clusterDNS == "" {
		return fmt.Errorf("CoreDNS needs E2ENODE_CLUSTER_DNS, the kubelets' clusterDNS, for its Service's address")
	}
	if err := os.WriteFile(path, []byte(fmt.Sprintf(coreDNSManifest, c.cfg.clusterDNS)), 0o644); err != nil {
		return err
	}
	out, err := c.kubectl(ctx, "apply", "-f", path)
	c.logf("kubectl apply -f %s:\n%s", path, strings.TrimSpace(out))
	return err
}
