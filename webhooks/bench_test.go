package webhooks

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/podsieve/podsieve/internal/synthetic"
)

// BenchmarkPodAdmission is the pod handler alone, without the server, TLS
// or client of hack/loadtest: the same synthetic cluster (1,000 policies,
// 100,000 exceptions, 10,000 namespaces) and the same rotation of clean,
// refused and exempted pods, so that a change to the handler's own cost
// (decode, decision, answer) shows without the load test's noise.
//
//	go test ./webhooks -run '^$' -bench BenchmarkPodAdmission -benchmem -count 6
func BenchmarkPodAdmission(b *testing.B) {
	cluster := synthetic.New(1000, 100_000, 10_000)
	ix, err := cluster.Index()
	if err != nil {
		b.Fatal(err)
	}
	h := &PodAdmission{Index: ix, Clock: clock.RealClock{}}
	var reqs []admission.Request
	var want []bool
	for i := range 300 {
		k := (i * 7919) % 100_000
		for _, kind := range []string{synthetic.Clean, synthetic.Refused, synthetic.Exempted} {
			pod := cluster.Pod(kind, k)
			raw, err := json.Marshal(pod)
			if err != nil {
				b.Fatal(err)
			}
			reqs = append(reqs, admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
				UID:       types.UID(fmt.Sprintf("%s-%d", kind, k)),
				Kind:      metav1.GroupVersionKind{Version: "v1", Kind: "Pod"},
				Resource:  metav1.GroupVersionResource{Version: "v1", Resource: "pods"},
				Namespace: pod.Namespace, Name: pod.Name,
				Operation: admissionv1.Create,
				Object:    runtime.RawExtension{Raw: raw},
			}})
			want = append(want, kind != synthetic.Refused)
		}
	}
	ctx := context.Background()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		r := i % len(reqs)
		if resp := h.Handle(ctx, reqs[r]); resp.Allowed != want[r] {
			b.Fatalf("review %d: allowed=%v: %v", r, resp.Allowed, resp.Result)
		}
		i++
	}
}
