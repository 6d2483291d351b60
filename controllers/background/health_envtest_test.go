package background

import (
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyv1alpha1 "github.com/podsieve/podsieve/api/v1alpha1"
	"github.com/podsieve/podsieve/internal/kube"
)

var _ = Describe("Scan health", func() {
	It("sets Scanned on the policies it reports on, says when the scan stalls, and leaves the policy controller's conditions alone", func() {
		f := newFixture()
		f.s.opts.ResyncPeriod = time.Hour
		ns := f.namespace("health")
		policy, off := uniqueName("health"), uniqueName("health-off")
		sp := f.policy(policy, fmt.Sprintf("rules: [{name: r, match: {namespaces: [%q]}, podSecurity: {level: baseline}}]", ns))
		f.policy(off, fmt.Sprintf("background: false\nrules: [{name: r, match: {namespaces: [%q]}, podSecurity: {level: baseline}}]", ns))
		// The policy controller's condition, which the scan must not touch.
		Expect(k8s.Get(ctx, client.ObjectKeyFromObject(sp), sp)).To(Succeed())
		Expect(kubePatchReady(sp)).To(Succeed())
		conditions := func(name string) []metav1.Condition {
			GinkgoHelper()
			var got policyv1alpha1.SecurityPolicy
			Expect(k8s.Get(ctx, client.ObjectKey{Name: name}, &got)).To(Succeed())
			return got.Status.Conditions
		}
		f.s.activeSince = f.clk.Now()

		By("the first full scan under way: nothing to say yet")
		Expect(f.s.writeHealth(ctx)).To(Succeed())
		Expect(conditions(policy)).To(ConsistOf(HaveField("Type", policyv1alpha1.ConditionReady)))

		By("no full scan for two resync periods and ten minutes: stalled")
		f.clk.Step(2*time.Hour + 11*time.Minute)
		Expect(f.s.writeHealth(ctx)).To(Succeed())
		Expect(conditions(policy)).To(ContainElements(HaveField("Type", policyv1alpha1.ConditionReady),
			And(HaveField("Type", policyv1alpha1.ConditionScanned), HaveField("Status", metav1.ConditionFalse),
				HaveField("Reason", policyv1alpha1.ReasonScanStalled), HaveField("Message", ContainSubstring("has not completed a full scan")))))

		// What the policy controller holds now: Ready, and the Scanned the
		// scan is about to replace.
		Expect(k8s.Get(ctx, client.ObjectKeyFromObject(sp), sp)).To(Succeed())
		stale := sp.DeepCopy()

		By("a full scan completes: True, with when it started")
		f.s.mu.Lock()
		f.s.startRound([]string{ns})
		f.s.mu.Unlock()
		f.scan(ns)
		Expect(f.s.writeHealth(ctx)).To(Succeed())
		Expect(meta.FindStatusCondition(conditions(policy), policyv1alpha1.ConditionScanned)).To(And(
			HaveField("Status", metav1.ConditionTrue), HaveField("Reason", policyv1alpha1.ReasonScanComplete),
			HaveField("Message", ContainSubstring(f.clk.Now().UTC().Format(time.RFC3339))), HaveField("ObservedGeneration", sp.Generation)))
		Expect(meta.FindStatusCondition(conditions(policy), policyv1alpha1.ConditionReady)).NotTo(BeNil())
		Expect(meta.FindStatusCondition(conditions(off), policyv1alpha1.ConditionScanned)).To(BeNil(), "background: false, so the scan says nothing")
		Expect(kubectlRow("secpol", "", policy)).NotTo(BeEmpty())

		By("the policy controller, holding the copy from before, writes its own part and not the stalled Scanned back")
		status := stale.Status.DeepCopy()
		status.Rules = 7
		// Locked: the copy from before gets a conflict, and the controller
		// reads again (a requeue) before it writes its part.
		_, err := kube.SecurityPolicyStatus.Apply(ctx, k8s, stale.DeepCopy(), status)
		Expect(apierrors.IsConflict(err)).To(BeTrue(), "an apply from the copy from before: %v", err)
		Expect(k8s.Get(ctx, client.ObjectKeyFromObject(sp), stale)).To(Succeed())
		status = stale.Status.DeepCopy()
		status.Rules = 7
		Expect(kube.SecurityPolicyStatus.Apply(ctx, k8s, stale, status)).To(BeTrue())
		Expect(meta.FindStatusCondition(conditions(policy), policyv1alpha1.ConditionScanned)).To(HaveField("Reason", policyv1alpha1.ReasonScanComplete))

		By("nothing new: no write")
		Expect(k8s.Get(ctx, client.ObjectKeyFromObject(sp), sp)).To(Succeed())
		Expect(f.s.writeHealth(ctx)).To(Succeed())
		var again policyv1alpha1.SecurityPolicy
		Expect(k8s.Get(ctx, client.ObjectKeyFromObject(sp), &again)).To(Succeed())
		Expect(again.ResourceVersion).To(Equal(sp.ResourceVersion))

		By("the scan turned off: the condition goes")
		Expect(f.s.clear(ctx, false)).To(Succeed())
		Expect(conditions(policy)).To(ConsistOf(HaveField("Type", policyv1alpha1.ConditionReady)))
	})
})

// kubePatchReady sets a Ready condition as the policy controller does.
func kubePatchReady(sp *policyv1alpha1.SecurityPolicy) error {
	status := sp.Status.DeepCopy()
	meta.SetStatusCondition(&status.Conditions, metav1.Condition{Type: policyv1alpha1.ConditionReady, Status: metav1.ConditionTrue,
		Reason: policyv1alpha1.ReasonCompiled, Message: "compiled", ObservedGeneration: sp.Generation})
	_, err := kube.SecurityPolicyStatus.Apply(ctx, k8s, sp, status)
	return err
}
