// Command kubeadmgen prints the kube-proxy ConfigMap and DaemonSet that kubeadm
// v1.37.2 generates, from kubeadm's own code. It is not built with svcproxy (testdata
// is ignored by the go tool); to regenerate ../kubeadm-kube-proxy.yaml, copy this file
// into an empty directory with test/e2e/k8sbins' go.mod and go.sum (module line
// renamed), then `GOFLAGS=-mod=mod go run .` and keep the output from `kind: ConfigMap` on.
package main

import (
	"fmt"
	"os"

	kubeadmapiv1 "k8s.io/kubernetes/cmd/kubeadm/app/apis/kubeadm/v1beta4"
	"k8s.io/kubernetes/cmd/kubeadm/app/constants"
	"k8s.io/kubernetes/cmd/kubeadm/app/phases/addons/proxy"
	configutil "k8s.io/kubernetes/cmd/kubeadm/app/util/config"
)

func main() {
	initCfg := &kubeadmapiv1.InitConfiguration{
		LocalAPIEndpoint: kubeadmapiv1.APIEndpoint{AdvertiseAddress: "172.18.0.2", BindPort: 6443},
		NodeRegistration: kubeadmapiv1.NodeRegistrationOptions{CRISocket: constants.DefaultCRISocket, Name: "svcproxy-control-plane"},
	}
	clusterCfg := &kubeadmapiv1.ClusterConfiguration{
		KubernetesVersion:    "v1.37.2",
		ControlPlaneEndpoint: "svcproxy-control-plane:6443",
		Networking:           kubeadmapiv1.Networking{PodSubnet: "10.244.0.0/16"},
	}
	cfg, err := configutil.DefaultedInitConfiguration(initCfg, clusterCfg, configutil.LoadOrDefaultConfigurationOptions{SkipCRIDetect: true})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if err := proxy.EnsureProxyAddon(&cfg.ClusterConfiguration, &cfg.LocalAPIEndpoint, nil, "", os.Stdout, true); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
