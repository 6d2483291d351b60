package controllers_test

import (
	"fmt"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyv1alpha1 "github.com/podsieve/podsieve/api/v1alpha1"
	reportv1alpha2 "github.com/podsieve/podsieve/api/wgpolicyk8s/v1alpha2"
	"github.com/podsieve/podsieve/internal/report"
)

// The scan's own specs, which call it directly with a fake clock, are in
// package background. This one checks that Setup wires it: to the index the
// controllers keep, to the API server, and to the usage record whose flusher
// writes lastAppliedTime.

// createPod creates a pod directly (this suite runs no webhook, as if the
// pod had been admitted before the policy existed or while it audited).
func createPod(ns, name string, caps ...corev1.Capability) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"app": name}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.example/" + name + ":1"}}}}
	if len(caps) > 0 {
		pod.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{Capabilities: &corev1.Capabilities{Add: caps}}
	}
	Expect(k8s.Create(ctx, pod)).To(Succeed())
}

// outcomes reads the namespace's reports of a policy as the API server has
// them: resource name → result.
func outcomes(ns, policy string) func() map[string]string {
	return func() map[string]string {
		var list reportv1alpha2.PolicyReportList
		Expect(k8s.List(ctx, &list, client.InNamespace(ns))).To(Succeed())
		out := map[string]string{}
		for _, r := range list.Items {
			if r.Annotations[report.AnnotationPolicy] != policy {
				continue
			}
			for _, res := range r.Results {
				out[res.Resources[0].Kind+"/"+res.Resources[0].Name] = string(res.Result)
			}
		}
		return out
	}
}

func violations(name string) func() *int32 {
	return func() *int32 {
		var sp policyv1alpha1.SecurityPolicy
		Expect(k8s.Get(ctx, client.ObjectKey{Name: name}, &sp)).To(Succeed())
		return sp.Status.Violations
	}
}

const netAdminException = `
exceptions: [{policyName: %s, ruleNames: ["*"]}]
podSecurity:
- controlName: Capabilities
  restrictedField: spec.containers[*].securityContext.capabilities.add
  values: ["NET_ADMIN"]
match:
  names: ["mesh"]
`

var _ = Describe("Background scan, as Setup wires it", func() {
	It("follows the index the controllers keep, writes the counters and lastAppliedTime, and removes a deleted policy's reports", func() {
		ns := newNamespace("bg")
		policy := uniqueName("bg")
		createPod(ns, "mesh", "NET_ADMIN")
		createPod(ns, "plain")
		sp := createPolicy(policy, fmt.Sprintf("exceptions: {}\nrules: [{name: r, match: {namespaces: [%q]}, podSecurity: {level: baseline}}]", ns))
		Eventually(outcomes(ns, policy)).Should(Equal(map[string]string{"Pod/mesh": "fail", "Pod/plain": "pass"}))
		Eventually(violations(policy)).Should(HaveValue(Equal(int32(1))))

		pe := createException(ns, "mesh-net-admin", fmt.Sprintf(netAdminException, policy))
		Eventually(outcomes(ns, policy)).Should(Equal(map[string]string{"Pod/mesh": "skip", "Pod/plain": "pass"}))
		Eventually(violations(policy)).Should(HaveValue(Equal(int32(0))))
		Eventually(func() *policyv1alpha1.PolicyExceptionStatus {
			Expect(k8s.Get(ctx, client.ObjectKeyFromObject(pe), pe)).To(Succeed())
			return &pe.Status
		}).Should(And(HaveField("MatchedObjects", HaveValue(Equal(int32(1)))), HaveField("LastAppliedTime", Not(BeNil()))))

		Expect(k8s.Delete(ctx, sp)).To(Succeed())
		Eventually(func() bool {
			err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: report.Name(policy, 0)}, &reportv1alpha2.PolicyReport{})
			return apierrors.IsNotFound(err)
		}).Should(BeTrue())
	})
})
