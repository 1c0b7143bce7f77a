package config

import (
	"fmt"
	"os"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	kubeproxyconfig "k8s.io/kube-proxy/config/v1alpha1"
)

// Write writes cfg as a kubeproxy.config.k8s.io/v1alpha1 YAML document, like
// kube-proxy's --write-config-to; it is also the dry run that shows how svcproxy
// read its flags and file.
func Write(cfg *kubeproxyconfig.KubeProxyConfiguration, path string) error {
	cf := codecs(serializer.EnableStrict)
	info, ok := runtime.SerializerInfoForMediaType(cf.SupportedMediaTypes(), runtime.ContentTypeYAML)
	if !ok {
		return fmt.Errorf("no YAML serializer")
	}
	data, err := runtime.Encode(cf.EncoderForVersion(info.Serializer, kubeproxyconfig.SchemeGroupVersion), cfg)
	if err != nil {
		return fmt.Errorf("encode configuration: %w", err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		return fmt.Errorf("write configuration: %w", err)
	}
	return nil
}
