//go:build e2enode

package e2enode

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// kubeProxyManifest is kube-proxy as kubeadm installs it, in mode (iptables
// or nftables):
// its ServiceAccount bound to system:node-proxier, a ConfigMap holding
// config.conf and a kubeconfig.conf that reads the pod's ServiceAccount
// token, and a privileged host-network DaemonSet running
// `kube-proxy --config=/var/lib/kube-proxy/config.conf
// --hostname-override=$(NODE_NAME)` with xtables.lock and /lib/modules
// mounted. The image is the cached kube-proxy binary with this machine's
// iptables and nft (hack/e2e-node.sh). Its conntrack settings are kind's:
// maxPerCore 0 leaves the machine-wide nf_conntrack_max alone; the TCP
// timeouts keep kube-proxy's defaults (24h established, 1h CLOSE_WAIT), which
// it writes into the node's own network namespace, as upstream's KubeProxy
// spec expects.
func (c *cluster) kubeProxyManifest(mode string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: ServiceAccount
metadata:
  name: kube-proxy
  namespace: kube-system
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: kubeadm:node-proxier
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: system:node-proxier
subjects:
- kind: ServiceAccount
  name: kube-proxy
  namespace: kube-system
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: kube-proxy
  namespace: kube-system
  labels:
    app: kube-proxy
data:
  config.conf: |-
    apiVersion: kubeproxy.config.k8s.io/v1alpha1
    kind: KubeProxyConfiguration
    bindAddress: 0.0.0.0
    clientConnection:
      kubeconfig: /var/lib/kube-proxy/kubeconfig.conf
    clusterCIDR: %[1]s
    mode: %[5]s
    conntrack:
      maxPerCore: 0
    healthzBindAddress: 0.0.0.0:10256
    metricsBindAddress: 127.0.0.1:10249
  kubeconfig.conf: |-
    apiVersion: v1
    kind: Config
    clusters:
    - cluster:
        certificate-authority: /var/run/secrets/kubernetes.io/serviceaccount/ca.crt
        server: https://%[2]s:%[3]d
      name: default
    contexts:
    - context:
        cluster: default
        namespace: default
        user: default
      name: default
    current-context: default
    users:
    - name: default
      user:
        tokenFile: /var/run/secrets/kubernetes.io/serviceaccount/token
---
apiVersion: apps/v1
kind: DaemonSet
metadata:
  name: kube-proxy
  namespace: kube-system
  labels:
    k8s-app: kube-proxy
spec:
  selector:
    matchLabels:
      k8s-app: kube-proxy
  updateStrategy:
    type: RollingUpdate
  template:
    metadata:
      labels:
        k8s-app: kube-proxy
    spec:
      containers:
      - name: kube-proxy
        image: registry.k8s.io/kube-proxy:%[4]s
        imagePullPolicy: IfNotPresent
        command:
        - /usr/local/bin/kube-proxy
        - --config=/var/lib/kube-proxy/config.conf
        - --hostname-override=$(NODE_NAME)
        env:
        - name: NODE_NAME
          valueFrom:
            fieldRef:
              fieldPath: spec.nodeName
        securityContext:
          privileged: true
        volumeMounts:
        - mountPath: /var/lib/kube-proxy
          name: kube-proxy
        - mountPath: /run/xtables.lock
          name: xtables-lock
        - mountPath: /lib/modules
          name: lib-modules
          readOnly: true
      hostNetwork: true
      nodeSelector:
        kubernetes.io/os: linux
      priorityClassName: system-node-critical
      serviceAccountName: kube-proxy
      tolerations:
      - operator: Exists
      volumes:
      - name: kube-proxy
        configMap:
          name: kube-proxy
      - name: xtables-lock
        hostPath:
          path: /run/xtables.lock
          type: FileOrCreate
      - name: lib-modules
        hostPath:
          path: /lib/modules
`, c.clusterCIDRs(), c.cp().ip, apiPort, k8sVersion, mode)
}

func (c *cluster) applyKubeProxy(ctx context.Context, mode string) error {
	path := filepath.Join(c.dir, "kube-proxy-"+mode+".yaml")
	if err := os.WriteFile(path, []byte(c.kubeProxyManifest(mode)), 0o644); err != nil {
		return err
	}
	out, err := c.kubectl(ctx, "apply", "-f", path)
	c.logf("kubectl apply -f %s:\n%s", filepath.Base(path), strings.TrimSpace(out))
	return err
}
