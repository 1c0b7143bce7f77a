package agent

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/pprof"
	"sort"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"k8s.io/component-base/configz"
	"k8s.io/component-base/metrics/legacyregistry"
	_ "k8s.io/component-base/metrics/prometheus/restclient" // client-go's rest_client_* metrics, as kube-proxy has them
	_ "k8s.io/component-base/metrics/prometheus/version"    // kubernetes_build_info
	kubeproxyconfig "k8s.io/kube-proxy/config/v1alpha1"

	"github.com/svcproxy/svcproxy/pkg/config"
)

// addKubeProxyEndpoints serves on the metrics mux what kube-proxy serves there
// besides /metrics and /healthz: /proxyMode, /configz and, with enableProfiling,
// /debug/pprof.
func addKubeProxyEndpoints(mux *http.ServeMux, cfg *kubeproxyconfig.KubeProxyConfiguration) error {
	mux.HandleFunc("/proxyMode", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		fmt.Fprint(w, config.ModeNFTables) // what svcproxy programs, whatever the configured mode
	})
	// configz keeps one global registry per process; an in-process restart replaces
	// the entry.
	configz.Delete(kubeproxyconfig.GroupName)
	cz, err := configz.New(kubeproxyconfig.GroupName)
	if err != nil {
		return fmt.Errorf("configz: %w", err)
	}
	if err := cz.Set(cfg); err != nil {
		return fmt.Errorf("configz: %w", err)
	}
	configz.InstallHandler(mux)
	if cfg.EnableProfiling {
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	return nil
}

// withComponentBaseMetrics adds to own what component-base registers in its global
// (legacy) registry, kubernetes_build_info and client-go's rest_client_* among them.
// Families own already has are taken from own: both registries carry the Go and
// process collectors.
func withComponentBaseMetrics(own prometheus.Gatherer) prometheus.Gatherer {
	return prometheus.GathererFunc(func() ([]*dto.MetricFamily, error) {
		mine, errMine := own.Gather()
		theirs, errTheirs := legacyregistry.DefaultGatherer.Gather()
		have := make(map[string]bool, len(mine))
		for _, mf := range mine {
			have[mf.GetName()] = true
		}
		for _, mf := range theirs {
			if !have[mf.GetName()] {
				mine = append(mine, mf)
			}
		}
		sort.Slice(mine, func(i, j int) bool { return mine[i].GetName() < mine[j].GetName() })
		return mine, errors.Join(errMine, errTheirs)
	})
}
