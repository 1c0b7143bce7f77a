//go:build e2e

package main

import (
	"context"
	"fmt"
	"log"
	"net/netip"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"

	"github.com/svcproxy/svcproxy/internal/netns"
)

type agent struct {
	client         kubernetes.Interface
	node           string
	nodeNetns      string
	nodeIPs        []string       // one per family, primary first
	podCIDRs       []netip.Prefix // one per family, primary first
	podNetnsPrefix string

	events chan event
	pods   map[types.UID]*pod // owned by the run loop
	used   [256]bool          // host indexes in podCIDR, owned by the run loop
	next   int                // where the next index search starts
}

type event struct {
	pod     *corev1.Pod
	deleted bool // the Pod object is gone
	expired bool // its grace period is over
}

func (a *agent) run(ctx context.Context) error {
	a.events = make(chan event, 1024)
	a.pods = map[types.UID]*pod{}
	lw := cache.NewListWatchFromClient(a.client.CoreV1().RESTClient(), "pods", metav1.NamespaceAll,
		fields.OneTermEqualSelector("spec.nodeName", a.node))
	inf := cache.NewSharedIndexInformer(lw, &corev1.Pod{}, 0, cache.Indexers{})
	send := func(e event) {
		select {
		case a.events <- e:
		case <-ctx.Done():
		}
	}
	_, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { send(event{pod: o.(*corev1.Pod)}) },
		UpdateFunc: func(_, o any) { send(event{pod: o.(*corev1.Pod)}) },
		DeleteFunc: func(o any) {
			if d, ok := o.(cache.DeletedFinalStateUnknown); ok {
				o = d.Obj
			}
			if p, ok := o.(*corev1.Pod); ok {
				send(event{pod: p, deleted: true})
			}
		},
	})
	if err != nil {
		return err
	}
	go inf.Run(ctx.Done())
	log.Printf("node agent for %s (netns %s, pods %v) started", a.node, a.nodeNetns, a.podCIDRs)
	for {
		select {
		case <-ctx.Done():
			for _, p := range a.pods {
				a.stop(p)
			}
			return nil
		case e := <-a.events:
			a.handle(ctx, e)
		}
	}
}

func (a *agent) handle(ctx context.Context, e event) {
	in := e.pod
	p := a.pods[in.UID]
	switch {
	case e.deleted:
		if p != nil {
			log.Printf("pod %s/%s deleted", in.Namespace, in.Name)
			a.stop(p)
		}
	case e.expired:
		if p != nil && !p.stopped {
			log.Printf("pod %s/%s: grace period over, stopping", in.Namespace, in.Name)
			a.stop(p)
			go a.remove(ctx, in)
		}
	case in.DeletionTimestamp != nil:
		if p == nil {
			go a.remove(ctx, in) // never started here: nothing to wait for
			return
		}
		if !p.terminating {
			p.terminating = true
			wait := time.Until(in.DeletionTimestamp.Time)
			log.Printf("pod %s/%s terminating, serving for %v more", in.Namespace, in.Name, wait.Round(time.Millisecond))
			time.AfterFunc(max(wait, 0), func() {
				select {
				case a.events <- event{pod: in, expired: true}:
				case <-ctx.Done():
				}
			})
		}
	case p == nil:
		if in.Status.Phase == corev1.PodSucceeded || in.Status.Phase == corev1.PodFailed {
			return
		}
		p, err := a.start(in)
		if err != nil {
			log.Printf("pod %s/%s: start: %v", in.Namespace, in.Name, err)
			return
		}
		a.pods[in.UID] = p
		go a.reportRunning(ctx, in, p)
	}
}

// start creates the pod's namespace, wires it to the node and starts its servers.
func (a *agent) start(in *corev1.Pod) (*pod, error) {
	// Round robin, so that a replacement pod does not get the address its
	// predecessor just gave up (that would hide stale conntrack entries).
	idx := 0
	for k := range 253 {
		i := 2 + (a.next+k)%253
		if !a.used[i] {
			idx = i
			a.next = i - 1
			break
		}
	}
	if idx == 0 {
		return nil, fmt.Errorf("pod CIDRs %v exhausted", a.podCIDRs)
	}
	p := &pod{
		name:  in.Name,
		netns: fmt.Sprintf("%s%d", a.podNetnsPrefix, idx),
		ips:   podIPs(a.podCIDRs, idx),
		idx:   idx,
	}
	if err := a.wire(p); err != nil {
		_ = netns.Delete(p.netns)
		return nil, err
	}
	if err := p.serve(in); err != nil {
		_ = netns.Delete(p.netns)
		return nil, err
	}
	a.used[idx] = true
	log.Printf("pod %s/%s running as %v in %s", in.Namespace, in.Name, p.ips, p.netns)
	return p, nil
}

func (a *agent) wire(p *pod) error {
	for _, s := range wireSteps(a.nodeNetns, p) {
		if err := netns.IP(s...); err != nil {
			return err
		}
	}
	return nil
}

// stop closes the pod's servers and removes its namespace (and so its veth).
func (a *agent) stop(p *pod) {
	if p.stopped {
		return
	}
	p.stopped = true
	p.close()
	if err := netns.Delete(p.netns); err != nil {
		log.Printf("pod %s: delete netns: %v", p.name, err)
	}
	a.used[p.idx] = false
}

// remove deletes the Pod object for good, as kubelet does once its
// containers have stopped.
func (a *agent) remove(ctx context.Context, in *corev1.Pod) {
	zero := int64(0)
	err := a.client.CoreV1().Pods(in.Namespace).Delete(ctx, in.Name, metav1.DeleteOptions{
		GracePeriodSeconds: &zero,
		Preconditions:      &metav1.Preconditions{UID: &in.UID},
	})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		log.Printf("pod %s/%s: final delete: %v", in.Namespace, in.Name, err)
	}
}

// reportRunning writes the running, ready status of a started pod.
func (a *agent) reportRunning(ctx context.Context, in *corev1.Pod, p *pod) {
	now := metav1.Now()
	err := retry.OnError(retry.DefaultBackoff, func(error) bool { return ctx.Err() == nil }, func() error {
		cur, err := a.client.CoreV1().Pods(in.Namespace).Get(ctx, in.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if cur.UID != in.UID {
			return nil
		}
		st := &cur.Status
		st.Phase = corev1.PodRunning
		st.HostIP = a.nodeIPs[0]
		st.HostIPs = nil
		for _, ip := range a.nodeIPs {
			st.HostIPs = append(st.HostIPs, corev1.HostIP{IP: ip})
		}
		st.PodIP = p.ips[0].String()
		st.PodIPs = nil
		for _, ip := range p.ips {
			st.PodIPs = append(st.PodIPs, corev1.PodIP{IP: ip.String()})
		}
		st.StartTime = &now
		st.Conditions = nil
		for _, c := range []corev1.PodConditionType{corev1.PodScheduled, corev1.PodInitialized, corev1.ContainersReady, corev1.PodReady} {
			st.Conditions = append(st.Conditions, corev1.PodCondition{
				Type: c, Status: corev1.ConditionTrue, LastTransitionTime: now,
			})
		}
		st.ContainerStatuses = nil
		for _, c := range cur.Spec.Containers {
			started := true
			st.ContainerStatuses = append(st.ContainerStatuses, corev1.ContainerStatus{
				Name:        c.Name,
				Image:       c.Image,
				ImageID:     "e2e://" + c.Image,
				ContainerID: "netns://" + p.netns,
				Ready:       true,
				Started:     &started,
				State:       corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}},
			})
		}
		_, err = a.client.CoreV1().Pods(in.Namespace).UpdateStatus(ctx, cur, metav1.UpdateOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return err
	})
	if err != nil {
		log.Printf("pod %s/%s: report status: %v", in.Namespace, in.Name, err)
	}
}
