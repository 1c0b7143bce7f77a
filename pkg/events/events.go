// Package events is what svcproxy tells users through the apiserver: Warning
// Events on the Services it cannot serve as asked (address and port conflicts,
// rules the kernel refuses, health check ports it cannot open), with their
// reasons, and kube-proxy's start-up Event on the Node. Every Warning is logged
// too, so that --manifests, without an apiserver, loses nothing.
package events

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	typedeventsv1 "k8s.io/client-go/kubernetes/typed/events/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"

	"github.com/svcproxy/svcproxy/pkg/endpoints"
)

// ReasonClusterIPConflict is the Event reason on a Service left unproxied because an
// older Service has the same ClusterIP.
const ReasonClusterIPConflict = "ClusterIPConflict"

// ReasonNodePortConflict is the Event reason on a Service served without one of its
// node ports (a nodePort, or its healthCheckNodePort) because an older Service uses
// that port.
const ReasonNodePortConflict = "NodePortConflict"

// ReasonExternalIPConflict is the Event reason on a Service served without one of
// its externalIPs or load balancer IPs on one port because the address is another
// Service's ClusterIP, or an older Service's external address on that port.
const ReasonExternalIPConflict = "ExternalIPConflict"

// ReasonKernelRefused is the Event reason on a Service whose rules the kernel refuses.
const ReasonKernelRefused = "KernelRefused"

// ReasonFailedHealthCheck is kube-proxy's Event reason on a Service whose health
// check node port cannot be opened.
const ReasonFailedHealthCheck = "FailedToStartServiceHealthcheck"

// kube-proxy's start-up Event on its Node (cmd/kube-proxy/app/server.go, birthCry):
// type Normal, reason "Starting", action "StartKubeProxy", no note. svcproxy sends
// the same, so that whatever watches for kube-proxy's starts sees svcproxy's, with
// reportingController "svcproxy" saying which proxy it is.
const (
	ReasonStarting       = "Starting"
	actionStartKubeProxy = "StartKubeProxy"
)

// Recorder records Warning Events about Services. Every Warn is logged; once connected
// to a cluster it is also sent to the apiserver as a core/v1 Event (source component
// "svcproxy", host the node). With --manifests there is no apiserver: log only.
type Recorder struct {
	broadcaster record.EventBroadcaster
	recorder    record.EventRecorder
	uid         func(namespace, name string) types.UID
	// nodeEvents sends the start-up Event through events.k8s.io/v1, as
	// kube-proxy does (see startup.go).
	nodeEvents typedeventsv1.EventsGetter
	node       string
}

// Connect sends later Warns to the apiserver too, as core/v1 Events, and the
// start-up Event as an events.k8s.io/v1 one; uid supplies the Service's UID for
// the Event's involvedObject (empty if unknown). Call it before anything may Warn.
func (e *Recorder) Connect(core typedcorev1.EventsGetter, nodeEvents typedeventsv1.EventsGetter, node string, uid func(namespace, name string) types.UID) {
	e.broadcaster = record.NewBroadcaster()
	e.broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: core.Events("")})
	e.recorder = e.broadcaster.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "svcproxy", Host: node})
	e.uid = uid
	e.nodeEvents = nodeEvents
	e.node = node
}

// Started records kube-proxy's start-up Event on this node's Node object, in the
// background, until ctx ends.
func (e *Recorder) Started(ctx context.Context) {
	if e == nil || e.nodeEvents == nil {
		return
	}
	go sendStartupEvent(ctx, e.nodeEvents, e.node, startupRetry)
}

// Warn records a Warning Event with reason and message on the Service namespace/name.
// It never blocks: the broadcaster queues, aggregates repeats and retries.
func (e *Recorder) Warn(namespace, name, reason, message string) {
	klog.InfoS("Warning", "service", namespace+"/"+name, "reason", reason, "message", message)
	if e == nil || e.recorder == nil {
		return
	}
	ref := &corev1.ObjectReference{Kind: "Service", APIVersion: "v1", Namespace: namespace, Name: name}
	if e.uid != nil {
		ref.UID = e.uid(namespace, name)
	}
	e.recorder.Event(ref, corev1.EventTypeWarning, reason, message)
}

// Shutdown stops sending Events.
func (e *Recorder) Shutdown() {
	if e != nil && e.broadcaster != nil {
		e.broadcaster.Shutdown()
	}
}

// ConflictReporter turns the tracker's conflict changes into the conflicting-Services
// (which counts Services served without an external address too) and
// conflicting-node-ports gauges, a log line, and for each new conflict one Warning
// Event on the Service that is not proxied (or not on that node port or external
// address), naming the one that keeps the address or port.
func ConflictReporter(events *Recorder, active, activeNodePorts interface{ Set(float64) }) func(endpoints.ConflictChange) {
	return func(c endpoints.ConflictChange) {
		active.Set(float64(c.Active))
		activeNodePorts.Set(float64(c.ActiveNodePorts))
		if c.NodePort != (endpoints.NodePortUse{}) {
			reportNodePortConflict(events, c)
			return
		}
		if c.External != (endpoints.AddrUse{}) {
			reportExternalIPConflict(events, c)
			return
		}
		if c.Resolved {
			klog.InfoS("ClusterIP conflict over", "service", c.Service.Key.String(), "clusterIP", c.Addr)
			return
		}
		events.Warn(c.Service.Key.Namespace, c.Service.Key.Name, ReasonClusterIPConflict,
			fmt.Sprintf("ClusterIP %s is also used by the older Service %s, which keeps it: svcproxy does not proxy this Service until that one is deleted or one of them changes its ClusterIP",
				c.Addr, c.Winner))
	}
}

func reportNodePortConflict(events *Recorder, c endpoints.ConflictChange) {
	if c.Resolved {
		klog.InfoS("Node port conflict over", "service", c.Service.Key.String(), "nodePort", c.NodePort.String())
		return
	}
	without := "svcproxy does not serve this Service on that nodePort"
	if c.NodePort.HealthCheck {
		without = "svcproxy serves no health check for this Service (its load balancer's probes would reach the other Service)"
	}
	events.Warn(c.Service.Key.Namespace, c.Service.Key.Name, ReasonNodePortConflict,
		fmt.Sprintf("%s is also %s of the older Service %s, which keeps it: %s until one of them is deleted or changes that port",
			c.NodePort, c.WinnerUse, c.Winner, without))
}

func reportExternalIPConflict(events *Recorder, c endpoints.ConflictChange) {
	if c.Resolved {
		klog.InfoS("External address conflict over", "service", c.Service.Key.String(), "address", c.External.String())
		return
	}
	msg := fmt.Sprintf("%s is also %s of the older Service %s, which keeps it: svcproxy does not serve this Service on that address and port until one of them is deleted or changes it",
		c.External, c.WinnerExternal, c.Winner)
	if c.WinnerExternal == (endpoints.AddrUse{}) {
		msg = fmt.Sprintf("%s is the ClusterIP of Service %s, which always keeps it: svcproxy does not serve this Service on that address until that Service is deleted or changes its ClusterIP",
			c.External, c.Winner)
	}
	events.Warn(c.Service.Key.Namespace, c.Service.Key.Name, ReasonExternalIPConflict, msg)
}
