package controllers_test

import (
	"context"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlconfig "sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	policyv1alpha1 "github.com/podsieve/podsieve/api/v1alpha1"
	"github.com/podsieve/podsieve/controllers"
	"github.com/podsieve/podsieve/controllers/background"
	"github.com/podsieve/podsieve/internal/engine"
	"github.com/podsieve/podsieve/internal/index"
)

// startReplica starts another manager against the suite's API server, as a
// replica that starts (or restarts) while the suite's keeps running, and
// returns its index once ready. It stops at the end of the spec.
func startReplica() *index.Index {
	rctx, stop := context.WithCancel(ctx)
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 k8s.Scheme(),
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Cache:                  controllers.CacheOptions(),
		Controller:             ctrlconfig.Controller{SkipNameValidation: ptr.To(true)},
	})
	Expect(err).NotTo(HaveOccurred())
	rix, err := controllers.Setup(rctx, mgr, controllers.Options{
		ExceptionsNamespace: exceptionsNamespace,
		Background:          background.Options{Disabled: true},
	})
	Expect(err).NotTo(HaveOccurred())
	done := make(chan struct{})
	go func() {
		defer GinkgoRecover()
		defer close(done)
		Expect(mgr.Start(rctx)).To(Succeed())
	}()
	DeferCleanup(func() {
		stop()
		<-done
	})
	Eventually(rix.Ready, time.Minute).Should(BeTrue(), "the replica's index never became ready")
	return rix
}

var _ = Describe("SecurityPolicy across restarts", func() {
	It("keeps the last spec that compiled in force on a replica that starts after the spec broke", func() {
		name := uniqueName("restarted")
		sp := createPolicy(name, "rules:\n- name: a\n  podSecurity: {level: baseline}")
		DeferCleanup(func() { Expect(client.IgnoreNotFound(k8s.Delete(ctx, sp))).To(Succeed()) })
		Eventually(ready(sp)).Should(haveReason(policyv1alpha1.ReasonCompiled))
		Eventually(func() *policyv1alpha1.LastValidSpec {
			Expect(k8s.Get(ctx, client.ObjectKeyFromObject(sp), sp)).To(Succeed())
			return sp.Status.LastValidSpec
		}).Should(And(Not(BeNil()), HaveField("Generation", int64(1))))

		// The suite has no webhook: nothing refuses an edit that does not
		// compile, as when podsieve's webhook is down.
		edit(sp, func() {
			sp.Spec.Rules[0].PodSecurity.Exclude = []policyv1alpha1.PodSecurityExclusion{{ControlName: policyv1alpha1.ControlCapabilities, RestrictedField: "spec.hostPID"}}
		})
		Eventually(ready(sp)).Should(haveReason(policyv1alpha1.ReasonDegraded))
		Expect(sp.Status.LastValidSpec.Generation).To(Equal(int64(1)), "a spec that does not compile replaced the last valid one")

		// A replica that starts now never compiled generation 1 itself.
		rix := startReplica()
		p := rix.Snapshot().Policy(name)
		Expect(p).NotTo(BeNil(), "the restarted replica does not enforce the policy")
		Expect(p.Generation).To(Equal(int64(1)))
		d := rix.Snapshot().Decide(hostPortPod("default"), time.Now(), engine.Admission)
		Expect(d.Results).To(ContainElement(And(HaveField("Rule.Policy.Name", name), HaveField("Outcome", engine.Fail))),
			"the restarted replica admits what generation 1 refuses")
		// Both managers write status: neither says InvalidSpec.
		Consistently(ready(sp), 2*time.Second, 200*time.Millisecond).Should(And(haveReason(policyv1alpha1.ReasonDegraded),
			HaveField("Message", ContainSubstring("generation 2 does not compile")), HaveField("Message", ContainSubstring("generation 1 (1 rule) stays in force"))))

		// Fixed: the new spec is in force on the replica too.
		edit(sp, func() { sp.Spec.Rules[0].PodSecurity.Exclude = nil })
		Eventually(func() int64 { return rix.Snapshot().Policy(name).Generation }).Should(Equal(int64(3)))
		Eventually(ready(sp)).Should(haveReason(policyv1alpha1.ReasonCompiled))
		Eventually(func() int64 {
			Expect(k8s.Get(ctx, client.ObjectKeyFromObject(sp), sp)).To(Succeed())
			return sp.Status.LastValidSpec.Generation
		}).Should(Equal(int64(3)))
	})
})
