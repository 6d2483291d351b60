package webhooks_test

import (
	"fmt"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	policyv1alpha1 "github.com/podsieve/podsieve/api/v1alpha1"
	"github.com/podsieve/podsieve/internal/enginetest"
)

var _ = Describe("The limit on PolicyExceptions per namespace", func() {
	It("refuses the creation beyond the limit, naming the namespace, the limit and what to do", func() {
		policy := createPolicy("exceptions: {allowedControls: [Capabilities]}\n" + enginetest.BaselineRule)
		ns := namespace("crowded", nil)
		mk := func(i int) *policyv1alpha1.PolicyException {
			pe := &policyv1alpha1.PolicyException{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("e-%d", i)}}
			Expect(yaml.UnmarshalStrict([]byte(fmt.Sprintf(
				"exceptions: [{policyName: %s, ruleNames: [r]}]\nmatch: {names: [app-%d]}\npodSecurity: [{controlName: Capabilities, containerNames: [app]}]", policy, i)), &pe.Spec)).To(Succeed())
			return pe
		}
		for i := range exceptionsLimit {
			Expect(k8s.Create(ctx, mk(i))).To(Succeed())
		}
		// The webhook counts what the index holds.
		Eventually(func() int { return ix.Snapshot().ExceptionsIn(ns) }).Should(Equal(exceptionsLimit))

		Expect(refusal(k8s.Create(ctx, mk(exceptionsLimit)))).To(ContainSubstring(fmt.Sprintf(
			`PolicyException %s/e-%d: namespace %q already holds %d PolicyExceptions, the limit (podsieve manager --max-exceptions-per-namespace=%d); `+
				`delete the ones no longer used (kubectl get podex -n %s -o wide shows MATCHED 0 for those that waive nothing now)`,
			ns, exceptionsLimit, ns, exceptionsLimit, exceptionsLimit, ns)))

		// An update is not a creation; a deletion makes room.
		pe := mk(0)
		Expect(k8s.Get(ctx, client.ObjectKeyFromObject(pe), pe)).To(Succeed())
		pe.Spec.Justification = "still needed"
		Expect(k8s.Update(ctx, pe)).To(Succeed())
		Expect(k8s.Delete(ctx, pe)).To(Succeed())
		Eventually(func() int { return ix.Snapshot().ExceptionsIn(ns) }).Should(Equal(exceptionsLimit - 1))
		Expect(k8s.Create(ctx, mk(exceptionsLimit))).To(Succeed())
	})
})
