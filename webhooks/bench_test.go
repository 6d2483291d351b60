package webhooks

import (
	"context"
	"testing"

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
//	go test ./webhooks -run '^$' -bench BenchmarkPodAdmission -benchmem -count 4
func BenchmarkPodAdmission(b *testing.B) {
	cluster := synthetic.New(1000, 100_000, 10_000)
	ix, err := cluster.Index()
	if err != nil {
		b.Fatal(err)
	}
	h := &PodAdmission{Index: ix, Clock: clock.RealClock{}}
	reviews := cluster.Reviews(100_000)
	reqs := make([]admission.Request, len(reviews))
	for i, r := range reviews {
		req, err := r.Request(i)
		if err != nil {
			b.Fatal(err)
		}
		reqs[i] = admission.Request{AdmissionRequest: *req}
	}
	ctx := context.Background()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		r := i % len(reqs)
		if resp := h.Handle(ctx, reqs[r]); resp.Allowed != reviews[r].Allowed {
			b.Fatalf("review %d: allowed=%v: %v", r, resp.Allowed, resp.Result)
		}
		i++
	}
}
