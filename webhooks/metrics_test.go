package webhooks

import (
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
)

// TestMetricLabelsAreBounded: the kind and operation of a review come from
// its caller; anything the webhook configuration does not send is "other".
func TestMetricLabelsAreBounded(t *testing.T) {
	for kind, want := range map[string]string{"Pod": "Pod", "CronJob": "CronJob", "Pod-4242": "other", "": "other"} {
		if got := metricKind(kind); got != want {
			t.Errorf("metricKind(%q) = %q, want %q", kind, got, want)
		}
	}
	for op, want := range map[admissionv1.Operation]string{admissionv1.Create: "CREATE", "PATCH-4242": "other"} {
		if got := metricOperation(op); got != want {
			t.Errorf("metricOperation(%q) = %q, want %q", op, got, want)
		}
	}
}
