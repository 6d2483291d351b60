package controllers_test

import (
	"fmt"
	"slices"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyv1alpha1 "github.com/podsieve/podsieve/api/v1alpha1"
	reportv1alpha2 "github.com/podsieve/podsieve/api/wgpolicyk8s/v1alpha2"
	"github.com/podsieve/podsieve/controllers/background"
	"github.com/podsieve/podsieve/internal/kube"
	"github.com/podsieve/podsieve/internal/report"
	"github.com/podsieve/podsieve/internal/testenv"
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
			for _, res := range r.Results {
				if res.Policy == policy {
					out[res.Resources[0].Kind+"/"+res.Resources[0].Name] = string(res.Result)
				}
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

		By("each part of each status is its one writer's, as the API server records who wrote it")
		Expect(k8s.Get(ctx, client.ObjectKeyFromObject(sp), sp)).To(Succeed())
		Expect(statusParts(sp, kube.SecurityPolicyStatusOwners())).To(And(
			HaveKeyWithValue(policyv1alpha1.FieldManagerSecurityPolicy, ContainElements("conditions[Ready]", "observedGeneration", "rules")),
			HaveKeyWithValue(policyv1alpha1.FieldManagerBackgroundCounters, ConsistOf("violations"))))
		Expect(statusParts(pe, kube.PolicyExceptionStatusOwners())).To(And(
			HaveKeyWithValue(policyv1alpha1.FieldManagerPolicyException, ContainElements("conditions[Ready]", "observedGeneration", "policies")),
			HaveKeyWithValue(policyv1alpha1.FieldManagerBackgroundCounters, ConsistOf("matchedObjects")),
			HaveKeyWithValue(policyv1alpha1.FieldManagerExceptionUsage, ConsistOf("lastAppliedTime"))))

		// The violation shows where developers look, on the pod itself, in
		// the refusal's words; once, and never on a pod a controller owns.
		createPod(ns, "root", "SYS_ADMIN")
		owned := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web-1",
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web", UID: "0d1b5e5e-0000-4000-8000-000000000001", Controller: ptr.To(true)}}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.example/web:1",
				SecurityContext: &corev1.SecurityContext{Capabilities: &corev1.Capabilities{Add: []corev1.Capability{"SYS_ADMIN"}}}}}}}
		Expect(k8s.Create(ctx, owned)).To(Succeed())
		notes := func(name string) func() []string {
			return func() []string {
				var list eventsv1.EventList
				Expect(k8s.List(ctx, &list, client.InNamespace(ns))).To(Succeed())
				var out []string
				for _, e := range list.Items {
					if e.Regarding.Kind == "Pod" && e.Regarding.Name == name && e.Reason == background.EventReason {
						Expect(e.Type).To(Equal(corev1.EventTypeWarning))
						out = append(out, e.Note)
					}
				}
				return out
			}
		}
		Eventually(notes("root")).Should(ConsistOf(And(
			HavePrefix(fmt.Sprintf("Pod %s/root violates SecurityPolicy %q rule \"r\" (baseline:latest):", ns, policy)),
			ContainSubstring("Capabilities: container \"app\""), ContainSubstring("SYS_ADMIN"))))
		Eventually(outcomes(ns, policy)).Should(HaveKeyWithValue("Pod/web-1", "fail"))
		Consistently(notes("web-1"), "2s").Should(BeEmpty())
		Expect(notes("mesh")()).To(HaveLen(1), "mesh's event from before the exception, not repeated since")

		Expect(k8s.Delete(ctx, sp)).To(Succeed())
		Eventually(func() []reportv1alpha2.PolicyReport {
			var list reportv1alpha2.PolicyReportList
			Expect(k8s.List(ctx, &list, client.InNamespace(ns), client.MatchingLabels{report.LabelManagedBy: report.ManagedBy})).To(Succeed())
			return list.Items
		}).Should(BeEmpty(), "the reports left without results are deleted")
	})
})

// statusParts reads who owns which part of obj's status from its
// managedFields, and fails when a field manager is none of owners or owns
// a part that is another writer's.
func statusParts(obj client.Object, owners []kube.StatusOwner) map[string][]string {
	GinkgoHelper()
	parts, err := testenv.StatusFieldsByManager(obj)
	Expect(err).NotTo(HaveOccurred())
	for manager, owned := range parts {
		i := slices.IndexFunc(owners, func(o kube.StatusOwner) bool { return o.Manager == manager })
		Expect(i).NotTo(BeNumerically("<", 0), "%s writes the status of %s, and is none of its writers", manager, obj.GetName())
		for _, part := range owned {
			Expect(owners[i].Owns(part)).To(BeTrue(), "%s owns %s, another writer's part", manager, part)
		}
	}
	return parts
}
