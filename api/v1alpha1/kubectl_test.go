package v1alpha1_test

import (
	"path/filepath"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyv1alpha1 "github.com/podsieve/podsieve/api/v1alpha1"
	"github.com/podsieve/podsieve/internal/testenv"
)

func kubectl(args ...string) string {
	out, err := testenv.Kubectl(env, args...)
	Expect(err).NotTo(HaveOccurred())
	return out
}

func columns(out string) [][]string { return testenv.Columns(out) }

// row returns the row whose cells include all of keys.
func row(rows [][]string, keys ...string) []string {
	r := testenv.Row(rows, keys...)
	if r == nil {
		Fail("no row with " + strings.Join(keys, ", "))
	}
	return r
}

var _ = Describe("Samples and kubectl output", Ordered, func() {
	BeforeAll(func() {
		for _, name := range []string{"staging", "prod"} {
			Expect(client.IgnoreAlreadyExists(k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}))).To(Succeed())
		}
	})

	It("applies config/samples cleanly with kubectl apply -k", func() {
		out := kubectl("apply", "-k", filepath.Join(testenv.RepoRoot(), "config", "samples"))
		Expect(out).To(ContainSubstring("securitypolicy.policy.podsieve.dev/pod-security-standards created"))
		Expect(out).To(ContainSubstring("securitypolicy.policy.podsieve.dev/restricted-workloads created"))
		Expect(out).To(ContainSubstring("policyexception.policy.podsieve.dev/mesh-init created"))
		Expect(out).To(ContainSubstring("policyexception.policy.podsieve.dev/node-debug-hostport created"))
	})

	It("renders the cert-manager overlay: no Secret of ours, the CA injected, rotation off", func() {
		out := kubectl("kustomize", filepath.Join(testenv.RepoRoot(), "config", "certmanager"))
		Expect(out).To(ContainSubstring("cert-manager.io/inject-ca-from: podsieve-system/podsieve-webhook-cert"))
		Expect(out).To(ContainSubstring("- --cert-rotation=false"))
		Expect(out).To(ContainSubstring("kind: Certificate"))
		Expect(out).NotTo(ContainSubstring("kind: Secret"))
	})

	It("renders config/default and the API server accepts every object", func() {
		// A server-side dry run validates every object without installing
		// the webhooks (which, with no manager behind them, would refuse the
		// other specs' writes). The namespace must exist for the dry run of
		// the objects in it.
		Expect(client.IgnoreAlreadyExists(k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "podsieve-system"}}))).To(Succeed())
		out := kubectl("apply", "--dry-run=server", "-k", filepath.Join(testenv.RepoRoot(), "config", "default"))
		for _, want := range []string{
			"namespace/podsieve-system",
			"customresourcedefinition.apiextensions.k8s.io/securitypolicies.policy.podsieve.dev",
			"customresourcedefinition.apiextensions.k8s.io/policyexceptions.policy.podsieve.dev",
			"clusterrole.rbac.authorization.k8s.io/podsieve-exception-editor",
			"clusterrole.rbac.authorization.k8s.io/podsieve-viewer",
			"clusterrole.rbac.authorization.k8s.io/podsieve-policy-admin",
			"clusterrole.rbac.authorization.k8s.io/podsieve-manager",
			"role.rbac.authorization.k8s.io/podsieve-manager",
			"clusterrolebinding.rbac.authorization.k8s.io/podsieve-manager",
			"rolebinding.rbac.authorization.k8s.io/podsieve-manager",
			"serviceaccount/podsieve-manager",
			"deployment.apps/podsieve-manager",
			"poddisruptionbudget.policy/podsieve-manager",
			"service/podsieve-webhook",
			"secret/podsieve-webhook-cert",
			"validatingwebhookconfiguration.admissionregistration.k8s.io/podsieve",
		} {
			Expect(out).To(ContainSubstring(want))
		}
	})

	It("shows the SecurityPolicy columns", func() {
		// No controller runs in this suite: status is set here as the
		// reconciler sets it, to test what kubectl prints from it. The columns
		// read status summaries because the API server's table printer shows
		// only the first element of a [*] JSONPath.
		var sp policyv1alpha1.SecurityPolicy
		Expect(k8s.Get(ctx, client.ObjectKey{Name: "pod-security-standards"}, &sp)).To(Succeed())
		sp.Status.ObservedGeneration = sp.Generation
		sp.Status.Rules = 1
		sp.Status.ActiveExceptions = 1
		sp.Status.Violations = ptr.To[int32](3)
		meta.SetStatusCondition(&sp.Status.Conditions, metav1.Condition{
			Type: policyv1alpha1.ConditionReady, Status: metav1.ConditionTrue, ObservedGeneration: sp.Generation,
			Reason: policyv1alpha1.ReasonCompiled, Message: "1 rule compiled",
		})
		Expect(k8s.Status().Update(ctx, &sp)).To(Succeed())

		rows := columns(kubectl("get", "securitypolicies"))
		Expect(rows[0]).To(Equal([]string{"NAME", "ACTION", "RULES", "READY", "EXCEPTIONS", "VIOLATIONS", "AGE"}))
		Expect(row(rows, "pod-security-standards")[:6]).To(Equal([]string{
			"pod-security-standards", "Enforce", "1", "True", "1", "3"}))

		wide := columns(kubectl("get", "secpol", "-o", "wide"))
		Expect(wide[0]).To(Equal([]string{"NAME", "ACTION", "RULES", "READY", "EXCEPTIONS", "VIOLATIONS", "REASON", "MESSAGE", "AGE"}))
		Expect(row(wide, "pod-security-standards")[6:8]).To(Equal([]string{"Compiled", "1 rule compiled"}))
	})

	It("shows the PolicyException columns across namespaces", func() {
		var pe policyv1alpha1.PolicyException
		Expect(k8s.Get(ctx, client.ObjectKey{Namespace: "staging", Name: "node-debug-hostport"}, &pe)).To(Succeed())
		pe.Status.ObservedGeneration = pe.Generation
		pe.Status.Policies = "pod-security-standards"
		pe.Status.Controls = "Host Ports"
		pe.Status.MatchedObjects = ptr.To[int32](0)
		pe.Status.LastAppliedTime = &metav1.Time{Time: time.Now().Add(-3 * time.Hour)}
		meta.SetStatusCondition(&pe.Status.Conditions, metav1.Condition{
			Type: policyv1alpha1.ConditionReady, Status: metav1.ConditionFalse, ObservedGeneration: pe.Generation,
			Reason: policyv1alpha1.ReasonExpired, Message: "expired at 2026-12-15T00:00:00Z",
		})
		Expect(k8s.Status().Update(ctx, &pe)).To(Succeed())

		var mesh policyv1alpha1.PolicyException
		Expect(k8s.Get(ctx, client.ObjectKey{Namespace: "staging", Name: "mesh-init"}, &mesh)).To(Succeed())
		mesh.Status.Policies = "restricted-workloads"
		mesh.Status.Controls = "Capabilities,Running as Non-root,Running as Non-root user"
		Expect(k8s.Status().Update(ctx, &mesh)).To(Succeed())

		rows := columns(kubectl("get", "polex", "-A"))
		Expect(rows[0]).To(Equal([]string{"NAMESPACE", "NAME", "POLICY", "CONTROLS", "READY", "EXPIRES", "AGE"}))
		Expect(row(rows, "mesh-init")[:6]).To(Equal([]string{"staging", "mesh-init", "restricted-workloads",
			"Capabilities,Running as Non-root,Running as Non-root user", "", "2027-03-01T00:00:00Z"}))
		Expect(row(rows, "node-debug-hostport")[:6]).To(Equal([]string{"staging", "node-debug-hostport",
			"pod-security-standards", "Host Ports", "False", "2026-12-15T00:00:00Z"}))

		wide := columns(kubectl("get", "polex", "-A", "-o", "wide"))
		Expect(wide[0]).To(Equal([]string{"NAMESPACE", "NAME", "POLICY", "CONTROLS", "READY", "EXPIRES", "MATCHED", "LAST-APPLIED", "REASON", "MESSAGE", "AGE"}))
		Expect(row(wide, "node-debug-hostport")[6:10]).To(Equal([]string{"0", "3h", "Expired", "expired at 2026-12-15T00:00:00Z"}))
		Expect(row(wide, "mesh-init")[6:8]).To(Equal([]string{"", ""}), "not scanned yet")
	})

	It("lists both kinds under the podsieve category", func() {
		out := kubectl("get", "podsieve", "-A")
		Expect(out).To(ContainSubstring("securitypolicy.policy.podsieve.dev/pod-security-standards"))
		Expect(out).To(ContainSubstring("policyexception.policy.podsieve.dev/mesh-init"))
	})
})
