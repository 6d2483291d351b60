package background

import (
	"context"
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlconfig "sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	reportv1alpha2 "github.com/podsieve/podsieve/api/wgpolicyk8s/v1alpha2"
	"github.com/podsieve/podsieve/internal/index"
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

var _ = Describe("A scanned kind the manager cannot watch", func() {
	It("leaves the scan off and the manager, and so admission, running", func() {
		// The controller's own wait for its informers gives up after
		// cacheSyncTimeout, and an error from a runnable stops the manager.
		defer func(d time.Duration) { cacheSyncTimeout = d }(cacheSyncTimeout)
		cacheSyncTimeout = 100 * time.Millisecond

		// A user who may read every scanned kind but ReplicationControllers:
		// that informer never syncs.
		user := uniqueName("no-rc")
		role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: user}, Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"pods", "namespaces", "events"}, Verbs: []string{"*"}},
			{APIGroups: []string{"apps"}, Resources: []string{"deployments", "replicasets", "statefulsets", "daemonsets"}, Verbs: []string{"*"}},
			{APIGroups: []string{"batch"}, Resources: []string{"jobs", "cronjobs"}, Verbs: []string{"*"}},
			{APIGroups: []string{"wgpolicyk8s.io", "policy.podsieve.dev"}, Resources: []string{"*"}, Verbs: []string{"*"}},
		}}
		Expect(k8s.Create(ctx, role)).To(Succeed())
		Expect(k8s.Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: user},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: user},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}}})).To(Succeed())
		restricted := rest.CopyConfig(cfg)
		restricted.Impersonate = rest.ImpersonationConfig{UserName: user}

		mgr, err := ctrl.NewManager(restricted, ctrl.Options{
			Scheme:                 testenv.Scheme(),
			Metrics:                metricsserver.Options{BindAddress: "0"},
			HealthProbeBindAddress: "0",
			Controller:             ctrlconfig.Controller{SkipNameValidation: ptr.To(true)},
		})
		Expect(err).NotTo(HaveOccurred())
		ix := index.New(exceptionsNamespace)
		ix.MarkReady()
		Expect(Setup(mgr, ix, Options{ExceptionsNamespace: exceptionsNamespace})).To(Succeed())
		mctx, stop := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- mgr.Start(mctx) }()

		// Well past cacheSyncTimeout, the manager still runs.
		Consistently(done, time.Second, 50*time.Millisecond).ShouldNot(Receive())
		stop()
		Eventually(done).Should(Receive(BeNil()), "the manager stopped with an error")
	})
})
