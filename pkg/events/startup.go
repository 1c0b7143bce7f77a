package events

import (
	"context"
	"errors"
	"os"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	typedeventsv1 "k8s.io/client-go/kubernetes/typed/events/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/record/util"
	"k8s.io/klog/v2"
)

// startupRetry is how client-go's tools/events retries an Event it could not
// write: up to 12 tries, about 10 s apart.
var startupRetry = retryPolicy{tries: 12, sleep: 10 * time.Second}

type retryPolicy struct {
	tries int
	sleep time.Duration
}

// startupEvent is the events.k8s.io/v1 Event that kube-proxy's birth cry
// (tools/events' recorder, reporting controller "svcproxy" here) writes on
// this node's Node: type Normal, reason Starting, action StartKubeProxy, no
// note. svcproxy writes it itself because tools/events imports client-go's
// whole Clientset.
func startupEvent(node string, now time.Time) *eventsv1.Event {
	hostname, _ := os.Hostname()
	return &eventsv1.Event{
		ObjectMeta: metav1.ObjectMeta{
			Name:      util.GenerateEventName(node, now.UnixNano()),
			Namespace: metav1.NamespaceDefault, // a Node has none; the recorder uses default
		},
		EventTime:           metav1.MicroTime{Time: now},
		ReportingController: "svcproxy",
		ReportingInstance:   "svcproxy-" + hostname,
		Action:              actionStartKubeProxy,
		Reason:              ReasonStarting,
		Regarding:           corev1.ObjectReference{APIVersion: "v1", Kind: "Node", Name: node},
		Type:                corev1.EventTypeNormal,
	}
}

// sendStartupEvent creates the start-up Event, retrying as tools/events does:
// transport errors are retried, an answer of the API server is final.
func sendStartupEvent(ctx context.Context, client typedeventsv1.EventsGetter, node string, p retryPolicy) {
	ev := startupEvent(node, time.Now())
	for try := 1; ; try++ {
		_, err := client.Events(ev.Namespace).Create(ctx, ev, metav1.CreateOptions{})
		if err == nil {
			return
		}
		var status *apierrors.StatusError
		var construct *rest.RequestConstructionError
		if apierrors.IsAlreadyExists(err) {
			klog.V(5).InfoS("Server rejected the start-up Event (will not retry)", "node", node, "err", err)
			return
		}
		if errors.As(err, &status) || errors.As(err, &construct) {
			klog.ErrorS(err, "Server rejected the start-up Event (will not retry)", "node", node)
			return
		}
		if try >= p.tries {
			klog.ErrorS(err, "Cannot send the start-up Event (retry limit exceeded)", "node", node)
			return
		}
		klog.ErrorS(err, "Cannot send the start-up Event (may retry after sleeping)", "node", node)
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait.Jitter(p.sleep, 0.25)):
		}
	}
}
