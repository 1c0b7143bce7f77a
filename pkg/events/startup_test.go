package events

import (
	"errors"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// TestSendStartupEventRetries: like tools/events, a transport error is
// retried (up to the limit) and an answer of the API server is final.
func TestSendStartupEventRetries(t *testing.T) {
	refused := errors.New("connect: connection refused")
	forbidden := apierrors.NewForbidden(schema.GroupResource{Group: "events.k8s.io", Resource: "events"}, "x", errors.New("no"))
	for _, tc := range []struct {
		name        string
		errs        []error
		wantCreates int
		wantEvent   bool
	}{
		{"at once", nil, 1, true},
		{"after two refused connections", []error{refused, refused}, 3, true},
		{"forbidden: no retry", []error{forbidden}, 1, false},
		{"retry limit", []error{refused, refused, refused, refused}, 3, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			client := fake.NewClientset()
			creates := 0
			client.PrependReactor("create", "events", func(k8stesting.Action) (bool, runtime.Object, error) {
				creates++
				if creates <= len(tc.errs) {
					return true, nil, tc.errs[creates-1]
				}
				return false, nil, nil
			})
			sendStartupEvent(t.Context(), client.EventsV1(), "node-a", retryPolicy{tries: 3})
			list, err := client.EventsV1().Events("default").List(t.Context(), metav1.ListOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if creates != tc.wantCreates || (len(list.Items) == 1) != tc.wantEvent {
				t.Errorf("%d creates, %d Events; want %d, event %v", creates, len(list.Items), tc.wantCreates, tc.wantEvent)
			}
		})
	}
}
