package main

import (
	"fmt"

	"k8s.io/apimachinery/pkg/util/validation/field"
	logsapi "k8s.io/component-base/logs/api/v1"
	_ "k8s.io/component-base/logs/json/register" // --logging-format=json, as kube-proxy offers
	"k8s.io/component-base/version"
	"k8s.io/klog/v2"
)

// startLogging applies the logging configuration (format, verbosity, vmodule,
// flush frequency) with component-base, as kube-proxy does, then logs what
// parsing found worth a warning, so that the warnings too are in that format.
func startLogging(o *options) error {
	// In-process tests run several commands; an unchanged configuration may be
	// applied again.
	logsapi.ReapplyHandling = logsapi.ReapplyHandlingIgnoreUnchanged
	if err := logsapi.ValidateAndApplyAsField(&o.Config.Logging, o.gates, field.NewPath("logging")); err != nil {
		return fmt.Errorf("initialize logging: %w", err)
	}
	klog.InfoS("Version info", "version", version.Get().GitVersion, "gitCommit", version.Get().GitCommit)
	for _, w := range o.warnings {
		klog.InfoS(w.Msg, w.KV...)
	}
	return nil
}
