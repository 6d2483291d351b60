package webhooks

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/podsieve/podsieve/internal/engine"
	"github.com/podsieve/podsieve/internal/enginetest"
	"github.com/podsieve/podsieve/internal/index"
	"github.com/podsieve/podsieve/internal/testenv"
)

// restrictedPod passes restricted but for what a test adds; its volumes are
// raw JSON, so that a test can send a source this build does not know.
func restrictedPod(volumes string) []byte {
	return []byte(`{"apiVersion":"v1","kind":"Pod","metadata":{"namespace":"staging","name":"web"},"spec":{` +
		`"securityContext":{"runAsNonRoot":true,"seccompProfile":{"type":"RuntimeDefault"}},` +
		`"containers":[{"name":"app","image":"nginx:1.25","securityContext":{"allowPrivilegeEscalation":false,"capabilities":{"drop":["ALL"]}}}],` +
		`"volumes":` + volumes + `}}`)
}

func restrictedIndex(t *testing.T) *index.Index {
	ix := index.New("podsieve-system")
	ix.Load([]*engine.Policy{enginetest.MustPolicy(t, "restricted", "rules:\n- name: restricted\n  podSecurity: {level: restricted, version: latest}")}, nil, nil, nil)
	ix.MarkReady()
	return ix
}

func rawPodRequest(body []byte) admission.Request {
	return admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
		UID: "1", Kind: metav1.GroupVersionKind{Version: "v1", Kind: "Pod"}, Operation: admissionv1.Create,
		Namespace: "staging", Name: "web", Object: runtime.RawExtension{Raw: body},
	}}
}

// TestUnknownVolumeSourceRefused: the API server has defaulted every volume
// by the time podsieve sees it, so a volume without a source has one this
// build does not know; restricted refuses it (upstream's type "unknown")
// instead of judging it an emptyDir.
func TestUnknownVolumeSourceRefused(t *testing.T) {
	h := &PodAdmission{Index: restrictedIndex(t), Clock: clocktesting.NewFakePassiveClock(now)}
	tests := []struct {
		name        string
		volumes     string
		wantAllowed bool
		wantMessage []string
	}{
		{name: "an emptyDir is admitted", volumes: `[{"name":"v","emptyDir":{}}]`, wantAllowed: true},
		{name: "a source this build does not know is refused", volumes: `[{"name":"ok","emptyDir":{}},{"name":"v","futureDisk":{"id":"x"}}]`,
			wantMessage: []string{"Volume Types: pod sets spec.volumes[*] to v\n", "does not know spec.volumes[1].futureDisk"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := h.Handle(context.Background(), rawPodRequest(restrictedPod(tt.volumes)))
			if resp.Allowed != tt.wantAllowed {
				t.Fatalf("allowed = %v, want %v: %+v", resp.Allowed, tt.wantAllowed, resp.Result)
			}
			if tt.wantAllowed {
				return
			}
			if resp.Result.Code != http.StatusForbidden {
				t.Errorf("code = %d, want 403", resp.Result.Code)
			}
			for _, want := range tt.wantMessage {
				if !strings.Contains(resp.Result.Message, want) {
					t.Errorf("message does not name %q:\n%s", want, resp.Result.Message)
				}
			}
			if strings.Contains(resp.Result.Message, "to ok") {
				t.Errorf("message names the emptyDir volume:\n%s", resp.Result.Message)
			}
		})
	}
}

// TestUnknownFieldsCounted: fields this build does not know are counted by
// kind and path, list indices folded, and series are capped.
func TestUnknownFieldsCounted(t *testing.T) {
	h := &PodAdmission{Index: restrictedIndex(t), Clock: clocktesting.NewFakePassiveClock(now)}
	saved := unknownFields
	t.Cleanup(func() { unknownFields = saved })
	unknownFields = &unknownFieldCounter{vec: saved.vec.MustCurryWith(nil), max: 2, seen: map[[2]string]bool{}}
	unknownFields.vec.Reset()

	body := restrictedPod(`[{"name":"a","emptyDir":{},"futureFlag":true},{"name":"b","emptyDir":{},"futureFlag":false}]`)
	body = []byte(strings.Replace(string(body), `"spec":{`, `"spec":{"futurePodField":1,`, 1))
	if resp := h.Handle(context.Background(), rawPodRequest(body)); !resp.Allowed {
		t.Fatalf("refused: %+v", resp.Result)
	}
	if got := testenv.CounterValue(t, unknownFields.vec.WithLabelValues("Pod", "spec.volumes[*].futureFlag")); got != 2 {
		t.Errorf("spec.volumes[*].futureFlag counted %v times, want 2 (one per volume)", got)
	}
	if got := testenv.CounterValue(t, unknownFields.vec.WithLabelValues("Pod", "spec.futurePodField")); got != 1 {
		t.Errorf("spec.futurePodField counted %v times, want 1", got)
	}
	// The cap (2 here) is reached: a third path is counted as (other).
	body = []byte(strings.Replace(string(body), `"futurePodField"`, `"anotherField"`, 1))
	h.Handle(context.Background(), rawPodRequest(body))
	if got := testenv.CounterValue(t, unknownFields.vec.WithLabelValues("Pod", unknownFieldOther)); got != 1 {
		t.Errorf("field=%q counted %v times, want 1", unknownFieldOther, got)
	}
	if n := seriesCount(unknownFields.vec); n != 3 {
		t.Errorf("%d series, want 3 (two paths and %q)", n, unknownFieldOther)
	}
}

func seriesCount(c prometheus.Collector) int {
	ch := make(chan prometheus.Metric, 1000)
	c.Collect(ch)
	close(ch)
	return len(ch)
}
