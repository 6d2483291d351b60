package background

import (
	"context"
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlconfig "sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	reportv1alpha2 "github.com/podsieve/podsieve/api/wgpolicyk8s/v1alpha2"
	"github.com/podsieve/podsieve/internal/report"
	"github.com/podsieve/podsieve/internal/testenv"
)

var _ = Describe("The scan's controller", func() {
	It("resyncs at start, writes the counters, and scans a namespace again when one of its objects or the index changes", func() {
		f := newFixture()
		ns := f.namespace("ctrl")
		policy := uniqueName("ctrl")
		createPod(ns, "before", "NET_ADMIN")
		f.policy(policy, fmt.Sprintf("rules: [{name: r, match: {namespaces: [%q]}, podSecurity: {level: baseline}}]", ns))

		mgr, err := ctrl.NewManager(cfg, ctrl.Options{
			Scheme:                 testenv.Scheme(),
			Metrics:                metricsserver.Options{BindAddress: "0"},
			HealthProbeBindAddress: "0",
			Controller:             ctrlconfig.Controller{SkipNameValidation: ptr.To(true)},
		})
		Expect(err).NotTo(HaveOccurred())
		// Quick enough to watch: the defaults batch for a second and write
		// counters every ten.
		Expect(Setup(mgr, f.ix, Options{ExceptionsNamespace: exceptionsNamespace, Batch: 10 * time.Millisecond, StatusInterval: 100 * time.Millisecond})).To(Succeed())
		mctx, stop := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() {
			defer GinkgoRecover()
			defer close(done)
			Expect(mgr.Start(mctx)).To(Succeed())
		}()
		DeferCleanup(func() {
			stop()
			<-done
		})

		// The resync at start lists every namespace; once each is scanned
		// the counters are written.
		Eventually(func() *int32 { return violations(policy) }).Should(HaveValue(Equal(int32(1))))
		Expect(outcomes(ns, policy)).To(Equal(map[string]string{"Pod/before": "fail"}))

		// The informers: a pod created queues its namespace.
		createPod(ns, "after")
		Eventually(func() map[string]string { return outcomes(ns, policy) }).Should(Equal(map[string]string{"Pod/before": "fail", "Pod/after": "pass"}))

		// The index: a policy out of force queues the namespaces it may have
		// matched, whose reports of it go.
		f.ix.DeletePolicy(policy)
		Eventually(func() []string { return reportsOf(ns) }).Should(BeEmpty())
	})
})

// reportsOf names podsieve's reports in a namespace.
func reportsOf(ns string) []string {
	GinkgoHelper()
	var list reportv1alpha2.PolicyReportList
	Expect(k8s.List(ctx, &list, client.InNamespace(ns), client.MatchingLabels{report.LabelManagedBy: report.ManagedBy})).To(Succeed())
	var names []string
	for _, r := range list.Items {
		names = append(names, r.Name)
	}
	return names
}
