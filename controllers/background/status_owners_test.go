package background

import (
	"fmt"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyv1alpha1 "github.com/podsieve/podsieve/api/v1alpha1"
	"github.com/podsieve/podsieve/internal/kube"
	"github.com/podsieve/podsieve/internal/testenv"
)

// Each writer of SecurityPolicy status writes its own part from a copy
// that is stale for every other part: the copy read before the round, as a
// writer working from its cache holds it. A writer that wrote more than its
// own part (a merge patch of the whole conditions list, say) would write
// another's older value back, and the round's check would find it.
var _ = Describe("The writers of SecurityPolicy status", func() {
	It("each write their own part, racing from stale copies, and none overwrites another's", func() {
		f := newFixture()
		sp := f.policy(uniqueName("owners"), "rules: [{name: r, podSecurity: {level: baseline}}]")
		condition := func(t string, round int) metav1.Condition {
			return metav1.Condition{Type: t, Status: metav1.ConditionTrue, Reason: "Round", Message: fmt.Sprintf("round %d", round),
				ObservedGeneration: sp.Generation}
		}
		writers := []func(stale *policyv1alpha1.SecurityPolicy, round int) error{
			func(stale *policyv1alpha1.SecurityPolicy, round int) error { // the SecurityPolicy controller
				// Locked: a conflict with another writer's part sends it to
				// read again, as the controller's requeue does.
				return retry.RetryOnConflict(retry.DefaultRetry, func() error {
					status := stale.Status.DeepCopy()
					status.ObservedGeneration, status.Rules, status.ActiveExceptions = sp.Generation, int32(round), int32(round+1)
					meta.SetStatusCondition(&status.Conditions, condition(policyv1alpha1.ConditionReady, round))
					_, err := kube.SecurityPolicyStatus.Apply(ctx, k8s, stale, status)
					if apierrors.IsConflict(err) {
						Expect(k8s.Get(ctx, client.ObjectKeyFromObject(stale), stale)).To(Succeed())
					}
					return err
				})
			},
			func(stale *policyv1alpha1.SecurityPolicy, round int) error { // the scan's health
				c := condition(policyv1alpha1.ConditionScanned, round)
				return kube.ApplyPolicyCondition(ctx, k8s, stale, kube.PolicyScanHealth, c.Type, &c, f.clk.Now())
			},
			func(stale *policyv1alpha1.SecurityPolicy, round int) error { // the scan's counters
				status := stale.Status.DeepCopy()
				status.Violations = ptr.To(int32(round + 2))
				_, err := kube.PolicyScanCounters.Apply(ctx, k8s, stale, status)
				return err
			},
			func(stale *policyv1alpha1.SecurityPolicy, round int) error { // the admission policies
				c := condition(policyv1alpha1.ConditionEnforcedByAPIServer, round)
				return kube.ApplyPolicyCondition(ctx, k8s, stale, kube.PolicyAdmissionPolicies, c.Type, &c, f.clk.Now())
			},
		}
		for round := 1; round <= 5; round++ {
			var stale policyv1alpha1.SecurityPolicy
			Expect(k8s.Get(ctx, client.ObjectKeyFromObject(sp), &stale)).To(Succeed())
			var wg sync.WaitGroup
			for _, write := range writers {
				wg.Go(func() {
					defer GinkgoRecover()
					Expect(write(stale.DeepCopy(), round)).To(Succeed())
				})
			}
			wg.Wait()

			var got policyv1alpha1.SecurityPolicy
			Expect(k8s.Get(ctx, client.ObjectKeyFromObject(sp), &got)).To(Succeed())
			Expect(got.Status.Rules).To(BeEquivalentTo(round), "rules, round %d", round)
			Expect(got.Status.ActiveExceptions).To(BeEquivalentTo(round+1), "activeExceptions, round %d", round)
			Expect(got.Status.Violations).To(HaveValue(BeEquivalentTo(round+2)), "violations, round %d", round)
			for _, t := range []string{policyv1alpha1.ConditionReady, policyv1alpha1.ConditionScanned, policyv1alpha1.ConditionEnforcedByAPIServer} {
				Expect(meta.FindStatusCondition(got.Status.Conditions, t)).To(HaveField("Message", fmt.Sprintf("round %d", round)),
					"condition %s, round %d", t, round)
			}
			expectOneOwnerEach(&got)
		}

		By("a writer that stops writing a part removes it, and only it")
		var stale policyv1alpha1.SecurityPolicy
		Expect(k8s.Get(ctx, client.ObjectKeyFromObject(sp), &stale)).To(Succeed())
		Expect(kube.ApplyPolicyCondition(ctx, k8s, stale.DeepCopy(), kube.PolicyScanHealth, policyv1alpha1.ConditionScanned, nil, f.clk.Now())).To(Succeed())
		status := stale.Status.DeepCopy()
		status.Violations = nil
		Expect(kube.PolicyScanCounters.Apply(ctx, k8s, stale.DeepCopy(), status)).To(BeTrue())
		var got policyv1alpha1.SecurityPolicy
		Expect(k8s.Get(ctx, client.ObjectKeyFromObject(sp), &got)).To(Succeed())
		Expect(got.Status.Violations).To(BeNil())
		Expect(got.Status.Conditions).To(ConsistOf(HaveField("Type", policyv1alpha1.ConditionReady),
			HaveField("Type", policyv1alpha1.ConditionEnforcedByAPIServer)))
		Expect(got.Status.Rules).To(BeEquivalentTo(5))
		expectOneOwnerEach(&got)
	})

	It("removes a part that a writer from before server-side apply left behind", func() {
		f := newFixture()
		sp := f.policy(uniqueName("legacy"), "rules: [{name: r, podSecurity: {level: baseline}}]")
		Expect(k8s.Get(ctx, client.ObjectKeyFromObject(sp), sp)).To(Succeed())
		// What podsieve wrote before: a merge patch of the whole status,
		// which the API server records as an Update by another manager.
		orig := sp.DeepCopy()
		sp.Status.Violations = ptr.To(int32(3))
		meta.SetStatusCondition(&sp.Status.Conditions, metav1.Condition{Type: policyv1alpha1.ConditionStalled, Status: metav1.ConditionTrue,
			Reason: policyv1alpha1.ReasonInvalidSpec, Message: "was invalid"})
		// A spec that waived a control; the admin has since removed its
		// exceptions block.
		sp.Status.LastValidSpec = &policyv1alpha1.LastValidSpec{Generation: 1, Spec: runtime.RawExtension{
			Raw: []byte(`{"action":"Enforce","exceptions":{"allowedControls":["Capabilities"]},"rules":[{"name":"r"}]}`)}}
		Expect(k8s.Status().Patch(ctx, sp, client.MergeFrom(orig), client.FieldOwner("podsieve"))).To(Succeed())

		status := sp.Status.DeepCopy()
		meta.RemoveStatusCondition(&status.Conditions, policyv1alpha1.ConditionStalled)
		meta.SetStatusCondition(&status.Conditions, metav1.Condition{Type: policyv1alpha1.ConditionReady, Status: metav1.ConditionTrue,
			Reason: policyv1alpha1.ReasonCompiled, Message: "compiled"})
		status.LastValidSpec = &policyv1alpha1.LastValidSpec{Generation: 2, Spec: runtime.RawExtension{
			Raw: []byte(`{"action":"Enforce","rules":[{"name":"r"}]}`)}}
		Expect(kube.SecurityPolicyStatus.Apply(ctx, k8s, sp.DeepCopy(), status)).To(BeTrue())
		status = sp.Status.DeepCopy()
		status.Violations = nil
		Expect(kube.PolicyScanCounters.Apply(ctx, k8s, sp.DeepCopy(), status)).To(BeTrue())

		var got policyv1alpha1.SecurityPolicy
		Expect(k8s.Get(ctx, client.ObjectKeyFromObject(sp), &got)).To(Succeed())
		Expect(got.Status.Conditions).To(ConsistOf(HaveField("Type", policyv1alpha1.ConditionReady)))
		Expect(got.Status.Violations).To(BeNil())
		// lastValidSpec.spec is atomic: the apply replaces it whole, so it
		// holds the spec applied and no key the old writer co-owned (which
		// a replica would enforce while the current spec does not compile).
		Expect(got.Status.LastValidSpec).NotTo(BeNil())
		Expect(got.Status.LastValidSpec.Generation).To(BeEquivalentTo(2))
		Expect(got.Status.LastValidSpec.Spec.Raw).To(MatchJSON(`{"action":"Enforce","rules":[{"name":"r"}]}`))
	})
})

var _ = Describe("A locked status writer", func() {
	It("the SecurityPolicy controller's: a stale copy gets a conflict instead of moving observedGeneration and lastValidSpec back", func() {
		f := newFixture()
		sp := f.policy(uniqueName("stale"), "rules: [{name: r, podSecurity: {level: baseline}}]")
		Expect(k8s.Get(ctx, client.ObjectKeyFromObject(sp), sp)).To(Succeed())
		stale := sp.DeepCopy() // generation 1: a lagging cache's copy

		sp.Spec.Rules[0].Name = "r2"
		Expect(k8s.Update(ctx, sp)).To(Succeed())
		Expect(sp.Generation).To(BeEquivalentTo(2))
		status := sp.Status.DeepCopy()
		status.ObservedGeneration = 2
		status.LastValidSpec = &policyv1alpha1.LastValidSpec{Generation: 2, Spec: runtime.RawExtension{Raw: []byte(`{"rules":[{"name":"r2"}]}`)}}
		Expect(kube.SecurityPolicyStatus.Apply(ctx, k8s, sp, status)).To(BeTrue())

		status = stale.Status.DeepCopy()
		status.ObservedGeneration = 1
		status.LastValidSpec = &policyv1alpha1.LastValidSpec{Generation: 1, Spec: runtime.RawExtension{Raw: []byte(`{"rules":[{"name":"r"}]}`)}}
		_, err := kube.SecurityPolicyStatus.Apply(ctx, k8s, stale, status)
		Expect(apierrors.IsConflict(err)).To(BeTrue(), "a stale copy's apply: %v", err)

		var got policyv1alpha1.SecurityPolicy
		Expect(k8s.Get(ctx, client.ObjectKeyFromObject(sp), &got)).To(Succeed())
		Expect(got.Status.ObservedGeneration).To(BeEquivalentTo(2))
		Expect(got.Status.LastValidSpec).To(HaveField("Generation", BeEquivalentTo(2)))
	})

	It("the PolicyException controller's: a stale copy gets a conflict instead of moving observedGeneration back", func() {
		f := newFixture()
		ns := f.namespace("stale")
		policy := uniqueName("stale")
		f.policy(policy, "rules: [{name: r, podSecurity: {level: baseline}}]")
		pe := f.exception(ns, "mesh", fmt.Sprintf(`exceptions: [{policyName: %s, ruleNames: ["*"]}]
podSecurity: [{controlName: Capabilities, restrictedField: "spec.containers[*].securityContext.capabilities.add", values: [NET_ADMIN]}]`, policy))
		Expect(k8s.Get(ctx, client.ObjectKeyFromObject(pe), pe)).To(Succeed())
		stale := pe.DeepCopy() // generation 1

		pe.Spec.Justification = "the mesh sidecar needs it"
		Expect(k8s.Update(ctx, pe)).To(Succeed())
		Expect(pe.Generation).To(BeEquivalentTo(2))
		status := pe.Status.DeepCopy()
		status.ObservedGeneration = 2
		Expect(kube.PolicyExceptionStatus.Apply(ctx, k8s, pe, status)).To(BeTrue())

		status = stale.Status.DeepCopy()
		status.ObservedGeneration = 1
		_, err := kube.PolicyExceptionStatus.Apply(ctx, k8s, stale, status)
		Expect(apierrors.IsConflict(err)).To(BeTrue(), "a stale copy's apply: %v", err)

		var got policyv1alpha1.PolicyException
		Expect(k8s.Get(ctx, client.ObjectKeyFromObject(pe), &got)).To(Succeed())
		Expect(got.Status.ObservedGeneration).To(BeEquivalentTo(2))
	})

	It("the exception usage flusher's: a stale copy gets a conflict instead of moving lastAppliedTime back", func() {
		f := newFixture()
		ns := f.namespace("locked")
		policy := uniqueName("locked")
		f.policy(policy, "rules: [{name: r, podSecurity: {level: baseline}}]")
		pe := f.exception(ns, "mesh", fmt.Sprintf(`exceptions: [{policyName: %s, ruleNames: ["*"]}]
podSecurity: [{controlName: Capabilities, restrictedField: "spec.containers[*].securityContext.capabilities.add", values: [NET_ADMIN]}]`, policy))
		Expect(k8s.Get(ctx, client.ObjectKeyFromObject(pe), pe)).To(Succeed())
		stale := pe.DeepCopy()
		later := metav1.NewTime(f.clk.Now().Add(time.Hour).Truncate(time.Second))

		status := pe.Status.DeepCopy()
		status.LastAppliedTime = &later
		Expect(kube.ExceptionUsage.Apply(ctx, k8s, pe, status)).To(BeTrue())

		status = stale.Status.DeepCopy()
		earlier := metav1.NewTime(f.clk.Now().Truncate(time.Second))
		status.LastAppliedTime = &earlier
		_, err := kube.ExceptionUsage.Apply(ctx, k8s, stale, status)
		Expect(apierrors.IsConflict(err)).To(BeTrue(), "a stale copy's apply: %v", err)
		var got policyv1alpha1.PolicyException
		Expect(k8s.Get(ctx, client.ObjectKeyFromObject(pe), &got)).To(Succeed())
		Expect(got.Status.LastAppliedTime.Time).To(BeTemporally("==", later.Time))
	})
})

// expectOneOwnerEach checks the API server's record of who wrote what: each
// writer's field manager owns its own parts of the status and nothing of
// another's.
func expectOneOwnerEach(sp *policyv1alpha1.SecurityPolicy) {
	GinkgoHelper()
	owned, err := testenv.StatusFieldsByManager(sp)
	Expect(err).NotTo(HaveOccurred())
	for _, o := range kube.SecurityPolicyStatusOwners() {
		for _, part := range owned[o.Manager] {
			Expect(o.Owns(part)).To(BeTrue(), "%s owns status part %s, which is another writer's", o.Manager, part)
		}
	}
	for manager := range owned {
		Expect(manager).To(BeElementOf(managers(kube.SecurityPolicyStatusOwners())), "a status writer that is none of the declared ones")
	}
}

func managers(owners []kube.StatusOwner) []string {
	out := make([]string, len(owners))
	for i, o := range owners {
		out[i] = o.Manager
	}
	return out
}
