package controllers_test

import (
	"fmt"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	policyv1alpha1 "github.com/podsieve/podsieve/api/v1alpha1"
	reportv1alpha2 "github.com/podsieve/podsieve/api/wgpolicyk8s/v1alpha2"
	"github.com/podsieve/podsieve/internal/report"
	"github.com/podsieve/podsieve/internal/testenv"
)

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
// them: resource name → result, and the summaries' total of each outcome.
func outcomes(ns, policy string) func() map[string]string {
	return func() map[string]string {
		var list reportv1alpha2.PolicyReportList
		Expect(k8s.List(ctx, &list, client.InNamespace(ns))).To(Succeed())
		out := map[string]string{}
		for _, r := range list.Items {
			if r.Annotations[report.AnnotationPolicy] != policy {
				continue
			}
			Expect(r.Summary).To(Equal(report.Summarize(r.Results)), "report %s: summary disagrees with results", r.Name)
			for _, res := range r.Results {
				Expect(res.Source).To(Equal("podsieve"))
				Expect(res.Policy).To(Equal(policy))
				out[res.Resources[0].Kind+"/"+res.Resources[0].Name] = string(res.Result)
			}
		}
		return out
	}
}

// result returns one resource's result in the policy's report.
func result(ns, policy, kindName string) func() *reportv1alpha2.PolicyReportResult {
	return func() *reportv1alpha2.PolicyReportResult {
		var r reportv1alpha2.PolicyReport
		if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: report.Name(policy, 0)}, &r); err != nil {
			return nil
		}
		for i := range r.Results {
			if res := &r.Results[i]; res.Resources[0].Kind+"/"+res.Resources[0].Name == kindName {
				return res
			}
		}
		return nil
	}
}

func violations(name string) func() *int32 {
	return func() *int32 {
		var sp policyv1alpha1.SecurityPolicy
		Expect(k8s.Get(ctx, client.ObjectKey{Name: name}, &sp)).To(Succeed())
		return sp.Status.Violations
	}
}

func matchedObjects(ns, name string) func() *int32 {
	return func() *int32 {
		var pe policyv1alpha1.PolicyException
		Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &pe)).To(Succeed())
		return pe.Status.MatchedObjects
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

var _ = Describe("Background scan", func() {
	var ns, policy string
	BeforeEach(func() {
		ns = newNamespace("bg")
		policy = uniqueName("bg")
	})

	It("reports pods admitted under Audit as fail after Enforce, skip under an exception, and fail again when it expires", func() {
		createPod(ns, "mesh", "NET_ADMIN")
		createPod(ns, "plain")
		sp := createPolicy(policy, fmt.Sprintf(`
action: Audit
exceptions: {}
rules:
- name: baseline
  match: {namespaces: [%q]}
  podSecurity: {level: baseline}
`, ns))
		Eventually(outcomes(ns, policy)).Should(Equal(map[string]string{"Pod/mesh": "fail", "Pod/plain": "pass"}))
		edit(sp, func() { sp.Spec.Action = policyv1alpha1.ActionEnforce })
		Eventually(func() string {
			r := result(ns, policy, "Pod/mesh")()
			if r == nil {
				return ""
			}
			return string(r.Result) + " " + r.Properties[report.PropertyAction]
		}).Should(Equal("fail Enforce"))
		Eventually(violations(policy)).Should(HaveValue(Equal(int32(1))))
		Expect(kubectlRow("secpol", "", policy)).To(ContainElements("Enforce", "1"))

		expiry := time.Now().Add(12 * time.Second).Truncate(time.Second)
		pe := createException(ns, "mesh-net-admin", fmt.Sprintf(netAdminException, policy)+fmt.Sprintf("expiresAt: %q\n", expiry.UTC().Format(time.RFC3339)))
		Eventually(outcomes(ns, policy)).Should(Equal(map[string]string{"Pod/mesh": "skip", "Pod/plain": "pass"}))
		Expect(result(ns, policy, "Pod/mesh")().Properties).To(HaveKeyWithValue(report.PropertyExceptions, ns+"/mesh-net-admin"))
		Eventually(violations(policy)).Should(HaveValue(Equal(int32(0))))
		Eventually(matchedObjects(ns, "mesh-net-admin")).Should(HaveValue(Equal(int32(1))))
		Eventually(func() *metav1.Time {
			Expect(k8s.Get(ctx, client.ObjectKeyFromObject(pe), pe)).To(Succeed())
			return pe.Status.LastAppliedTime
		}).ShouldNot(BeNil())
		row := kubectlRow("polex", ns, "mesh-net-admin")
		Expect(row).To(ContainElement("1"), "the Matched column")

		Eventually(outcomes(ns, policy), 30*time.Second).Should(Equal(map[string]string{"Pod/mesh": "fail", "Pod/plain": "pass"}))
		Expect(result(ns, policy, "Pod/mesh")().Message).To(ContainSubstring("exception/" + ns + "/mesh-net-admin does not apply: expired at"))
		Eventually(violations(policy)).Should(HaveValue(Equal(int32(1))))
		Eventually(matchedObjects(ns, "mesh-net-admin")).Should(HaveValue(Equal(int32(0))))
	})

	It("never turns a result into skip with an exception from another namespace", func() {
		other := newNamespace("bg-other")
		createPod(ns, "mesh", "NET_ADMIN")
		createPolicy(policy, fmt.Sprintf(`
exceptions: {}
rules:
- name: baseline
  match: {namespaces: [%q, %q]}
  podSecurity: {level: baseline}
`, ns, other))
		Eventually(outcomes(ns, policy)).Should(Equal(map[string]string{"Pod/mesh": "fail"}))
		pe := createException(other, "mesh-net-admin", fmt.Sprintf(netAdminException, policy))
		Eventually(ready(pe)).Should(haveReason(policyv1alpha1.ReasonActive))
		Consistently(outcomes(ns, policy), 4*time.Second).Should(Equal(map[string]string{"Pod/mesh": "fail"}))
		Eventually(matchedObjects(other, "mesh-net-admin")).Should(HaveValue(Equal(int32(0))))
	})

	It("reports top-level workloads, not the ReplicaSets they own, and leaves out policies with background: false", func() {
		off := uniqueName("bg-off")
		createPolicy(policy, fmt.Sprintf("rules: [{name: r, match: {namespaces: [%q]}, podSecurity: {level: baseline}}]", ns))
		createPolicy(off, fmt.Sprintf("background: false\nrules: [{name: r, match: {namespaces: [%q]}, podSecurity: {level: baseline}}]", ns))
		labels := map[string]string{"app": "web"}
		Expect(k8s.Create(ctx, &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"},
			Spec: appsv1.DeploymentSpec{
				Selector: &metav1.LabelSelector{MatchLabels: labels},
				Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
					Spec: corev1.PodSpec{HostPID: true, Containers: []corev1.Container{{Name: "web", Image: "nginx"}}}},
			},
		})).To(Succeed())
		// A ReplicaSet the Deployment controls (no controller-manager runs
		// here to create it) repeats its template and is not reported.
		var dep appsv1.Deployment
		Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "web"}, &dep)).To(Succeed())
		Expect(k8s.Create(ctx, &appsv1.ReplicaSet{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web-1", Labels: labels,
				OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(&dep, appsv1.SchemeGroupVersion.WithKind("Deployment"))}},
			Spec: appsv1.ReplicaSetSpec{Selector: &metav1.LabelSelector{MatchLabels: labels}, Template: dep.Spec.Template},
		})).To(Succeed())
		Eventually(outcomes(ns, policy)).Should(Equal(map[string]string{"Deployment/web": "fail"}))
		Expect(result(ns, policy, "Deployment/web")().Properties).To(HaveKeyWithValue(report.PropertyFields, "spec.template.spec.hostPID"))
		Consistently(outcomes(ns, off), 2*time.Second).Should(BeEmpty())
		Eventually(violations(off)).Should(BeNil())
	})

	It("empties a namespace's results when its pods are deleted, and removes a policy's results with the policy", func() {
		other := newNamespace("bg-other")
		createPod(ns, "mesh", "NET_ADMIN")
		createPod(other, "mesh", "NET_ADMIN")
		sp := createPolicy(policy, fmt.Sprintf("rules: [{name: r, match: {namespaces: [%q, %q]}, podSecurity: {level: baseline}}]", ns, other))
		Eventually(outcomes(ns, policy)).Should(Equal(map[string]string{"Pod/mesh": "fail"}))
		Eventually(outcomes(other, policy)).Should(Equal(map[string]string{"Pod/mesh": "fail"}))
		Eventually(violations(policy)).Should(HaveValue(Equal(int32(2))))

		var r reportv1alpha2.PolicyReport
		Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: report.Name(policy, 0)}, &r)).To(Succeed())
		Expect(r.OwnerReferences).To(ConsistOf(HaveField("UID", sp.UID)), "garbage collection removes the reports with their policy")

		Expect(k8s.DeleteAllOf(ctx, &corev1.Pod{}, client.InNamespace(ns), client.GracePeriodSeconds(0))).To(Succeed())
		Eventually(outcomes(ns, policy)).Should(BeEmpty())
		Eventually(violations(policy)).Should(HaveValue(Equal(int32(1))))

		Expect(k8s.Delete(ctx, sp)).To(Succeed())
		Eventually(func() bool {
			err := k8s.Get(ctx, client.ObjectKey{Namespace: other, Name: report.Name(policy, 0)}, &r)
			return apierrors.IsNotFound(err)
		}).Should(BeTrue())
	})

	It("shows the reports with kubectl get polr", func() {
		createPod(ns, "mesh", "NET_ADMIN")
		createPod(ns, "plain")
		createPolicy(policy, fmt.Sprintf("rules: [{name: r, match: {namespaces: [%q]}, podSecurity: {level: baseline}}]", ns))
		Eventually(outcomes(ns, policy)).Should(HaveLen(2))
		out, err := testenv.Kubectl(env, "get", "polr", "-A")
		Expect(err).NotTo(HaveOccurred())
		Expect(strings.Fields(strings.Split(out, "\n")[0])).To(Equal([]string{"NAMESPACE", "NAME", "PASS", "FAIL", "WARN", "ERROR", "SKIP", "AGE"}))
		Expect(testenv.Row(testenv.Columns(out), ns, report.Name(policy, 0))).To(HaveExactElements(ns, report.Name(policy, 0), "1", "1", "0", "0", "0", Not(BeEmpty())))
	})

	It("does not rewrite a report when a scan finds what it already says", func() {
		createPod(ns, "mesh", "NET_ADMIN")
		createPolicy(policy, fmt.Sprintf("rules: [{name: r, match: {namespaces: [%q]}, podSecurity: {level: baseline}}]", ns))
		Eventually(outcomes(ns, policy)).Should(HaveLen(1))
		var before reportv1alpha2.PolicyReport
		Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: report.Name(policy, 0)}, &before)).To(Succeed())
		scanned, writes := metricValue("podsieve_background_objects_scanned_total"), metricValue("podsieve_background_report_writes_total")

		// A label change re-scans the namespace: same results, no write.
		// Timestamps count seconds: let one pass, so that a scan that
		// rewrote them would show.
		time.Sleep(1100 * time.Millisecond)
		var n corev1.Namespace
		Expect(k8s.Get(ctx, client.ObjectKey{Name: ns}, &n)).To(Succeed())
		edit(&n, func() { n.Labels["touched"] = "yes" })
		Eventually(func() float64 { return metricValue("podsieve_background_objects_scanned_total") }).Should(BeNumerically(">", scanned))
		Consistently(func() string {
			var r reportv1alpha2.PolicyReport
			Expect(k8s.Get(ctx, client.ObjectKeyFromObject(&before), &r)).To(Succeed())
			return r.ResourceVersion
		}, 2*time.Second).Should(Equal(before.ResourceVersion))
		Expect(metricValue("podsieve_background_report_writes_total")).To(Equal(writes))
	})
})

// metricValue sums a metric's samples in controller-runtime's registry.
func metricValue(name string) float64 {
	families, err := metrics.Registry.Gather()
	Expect(err).NotTo(HaveOccurred())
	total := 0.0
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			total += m.GetCounter().GetValue()
		}
	}
	return total
}
