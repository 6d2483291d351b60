package v1alpha1_test

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
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
		// staging comes from config/samples itself (kubectl apply -k works
		// on a fresh cluster).
		for _, name := range []string{"prod"} {
			Expect(client.IgnoreAlreadyExists(k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}))).To(Succeed())
		}
	})

	It("applies config/samples cleanly with kubectl apply -k", func() {
		out := kubectl("apply", "-k", filepath.Join(testenv.RepoRoot(), "config", "samples"))
		Expect(out).To(ContainSubstring("namespace/staging created"))
		Expect(out).To(ContainSubstring("securitypolicy.policy.podsieve.dev/pod-security-standards created"))
		Expect(out).To(ContainSubstring("securitypolicy.policy.podsieve.dev/restricted-workloads created"))
		Expect(out).To(ContainSubstring("policyexception.policy.podsieve.dev/mesh-init created"))
		Expect(out).NotTo(ContainSubstring("node-debug-hostport"), "the time-boxed sample needs a date, and is not in the kustomization")
		// Applied as its comment says, with a date.
		sample, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "config", "samples", "policy_v1alpha1_policyexception_expiring.yaml"))
		Expect(err).NotTo(HaveOccurred())
		dated := filepath.Join(GinkgoT().TempDir(), "expiring.yaml")
		Expect(os.WriteFile(dated, append(sample, "  expiresAt: \"2026-12-15T00:00:00Z\"\n"...), 0o600)).To(Succeed())
		Expect(kubectl("apply", "-f", dated)).To(ContainSubstring("policyexception.policy.podsieve.dev/node-debug-hostport created"))
	})

	It("accepts every mesh sample of config/samples/meshes (server-side dry run)", func() {
		// The schema and its CEL rules check what the samples write; the
		// decisions they give on each mesh's output are cmd/podsieve's
		// TestMeshSamples.
		Expect(client.IgnoreAlreadyExists(k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "podsieve-system"}}))).To(Succeed())
		out := kubectl("apply", "--dry-run=server", "-f", filepath.Join(testenv.RepoRoot(), "config", "samples", "meshes"))
		for _, want := range []string{
			"securitypolicy.policy.podsieve.dev/istio-sidecar-baseline created (server dry run)",
			"securitypolicy.policy.podsieve.dev/istio-sidecar-restricted created (server dry run)",
			"securitypolicy.policy.podsieve.dev/istio-cni-baseline created (server dry run)",
			"securitypolicy.policy.podsieve.dev/istio-cni-restricted created (server dry run)",
			"securitypolicy.policy.podsieve.dev/istio-system created (server dry run)",
			"policyexception.policy.podsieve.dev/istio-cni-node created (server dry run)",
			"policyexception.policy.podsieve.dev/istio-cni-node-pods created (server dry run)",
			"securitypolicy.policy.podsieve.dev/linkerd-baseline created (server dry run)",
			"securitypolicy.policy.podsieve.dev/linkerd-restricted created (server dry run)",
			"securitypolicy.policy.podsieve.dev/linkerd-cni-baseline created (server dry run)",
			"securitypolicy.policy.podsieve.dev/linkerd-cni-restricted created (server dry run)",
			"securitypolicy.policy.podsieve.dev/linkerd-cni-system created (server dry run)",
			"policyexception.policy.podsieve.dev/linkerd-cni created (server dry run)",
			"policyexception.policy.podsieve.dev/linkerd-cni-pods created (server dry run)",
			"securitypolicy.policy.podsieve.dev/kuma-baseline created (server dry run)",
			"securitypolicy.policy.podsieve.dev/kuma-restricted created (server dry run)",
		} {
			Expect(out).To(ContainSubstring(want))
		}
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
			"clusterrole.rbac.authorization.k8s.io/podsieve-report-viewer",
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
		Expect(wide[0]).To(Equal([]string{"NAME", "ACTION", "RULES", "READY", "EXCEPTIONS", "VIOLATIONS", "REASON", "MESSAGE", "API-SERVER", "AGE"}))
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

		rows := columns(kubectl("get", "podex", "-A"))
		Expect(rows[0]).To(Equal([]string{"NAMESPACE", "NAME", "POLICY", "CONTROLS", "READY", "EXPIRES", "AGE"}))
		Expect(row(rows, "mesh-init")[:6]).To(Equal([]string{"staging", "mesh-init", "restricted-workloads",
			"Capabilities,Running as Non-root,Running as Non-root user", "", ""}))
		Expect(row(rows, "node-debug-hostport")[:6]).To(Equal([]string{"staging", "node-debug-hostport",
			"pod-security-standards", "Host Ports", "False", "2026-12-15T00:00:00Z"}))

		wide := columns(kubectl("get", "podex", "-A", "-o", "wide"))
		Expect(wide[0]).To(Equal([]string{"NAMESPACE", "NAME", "POLICY", "CONTROLS", "READY", "EXPIRES", "MATCHED", "LAST-APPLIED", "REASON", "MESSAGE", "AGE"}))
		Expect(row(wide, "node-debug-hostport")[6:10]).To(Equal([]string{"0", "3h", "Expired", "expired at 2026-12-15T00:00:00Z"}))
		Expect(row(wide, "mesh-init")[6:8]).To(Equal([]string{"", ""}), "not scanned yet")
	})

	It("shows no drift when config/samples is applied again after its status was written", func() {
		// The specs above wrote status (as the controllers do) and set the
		// date the time-boxed sample needs (as its comment says); neither
		// is in the manifests. Client-side or server-side, applying again
		// changes nothing and a diff finds nothing (docs/gitops.md).
		samples := filepath.Join(testenv.RepoRoot(), "config", "samples")
		for _, line := range strings.Split(strings.TrimSpace(kubectl("apply", "-k", samples)), "\n") {
			Expect(line).To(HaveSuffix(" unchanged"))
		}
		out, err := testenv.Kubectl(env, "diff", "-k", samples)
		Expect(err).NotTo(HaveOccurred())
		Expect(out).To(BeEmpty())
		// Server-side: the applier takes the fields over (a GitOps tool
		// moving to server-side apply), then finds no drift either.
		kubectl("apply", "--server-side", "-k", samples)
		out, err = testenv.Kubectl(env, "diff", "--server-side", "-k", samples)
		Expect(err).NotTo(HaveOccurred())
		Expect(out).To(BeEmpty())
	})

	It("lists both kinds under the podsieve category", func() {
		out := kubectl("get", "podsieve", "-A")
		Expect(out).To(ContainSubstring("securitypolicy.policy.podsieve.dev/pod-security-standards"))
		Expect(out).To(ContainSubstring("policyexception.policy.podsieve.dev/mesh-init"))
	})

	It("has short names that no peer uses", func() {
		// Kyverno's PolicyException has the short name this kind had before:
		// a cluster migrating from Kyverno runs both, and kubectl would pick
		// one of the two for it (docs/migration.md).
		rows := columns(kubectl("api-resources", "--api-group=policy.podsieve.dev", "-o", "wide"))
		Expect(row(rows, "policyexceptions")).To(ContainElements("podex", "podsieve"))
		Expect(row(rows, "securitypolicies")).To(ContainElements("secpol", "podsieve"))
		Expect(kubectl("get", "podex", "-n", "staging", "-o", "name")).To(ContainSubstring("policyexception.policy.podsieve.dev/mesh-init"))
	})
})

// renderInto renders one of the repository's kustomizations into namespace
// ns, as a user's overlay does: `namespace:` and the base, nothing else.
// kustomize loads a base only by a relative path.
func renderInto(base, ns string) (string, []*unstructured.Unstructured) {
	GinkgoHelper()
	dir := GinkgoT().TempDir()
	rel, err := filepath.Rel(dir, filepath.Join(testenv.RepoRoot(), "config", base))
	Expect(err).NotTo(HaveOccurred())
	overlay := "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nnamespace: " + ns + "\nresources:\n- " + rel + "\n"
	Expect(os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(overlay), 0o600)).To(Succeed())
	out := kubectl("kustomize", dir)
	var objs []*unstructured.Unstructured
	dec := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(out), 4096)
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); errors.Is(err, io.EOF) {
			break
		} else {
			Expect(err).NotTo(HaveOccurred())
		}
		if len(u.Object) > 0 {
			objs = append(objs, u)
		}
	}
	return out, objs
}

// object returns the one rendered object of a kind and name.
func object(objs []*unstructured.Unstructured, kind, name string) *unstructured.Unstructured {
	GinkgoHelper()
	var found []*unstructured.Unstructured
	for _, u := range objs {
		if u.GetKind() == kind && u.GetName() == name {
			found = append(found, u)
		}
	}
	Expect(found).To(HaveLen(1), "%s %s", kind, name)
	return found[0]
}

func field[T any](u *unstructured.Unstructured, path ...string) T {
	GinkgoHelper()
	v, ok, err := unstructured.NestedFieldNoCopy(u.Object, path...)
	Expect(err).NotTo(HaveOccurred())
	Expect(ok).To(BeTrue(), "%s %s has no %s", u.GetKind(), u.GetName(), strings.Join(path, "."))
	t, ok := v.(T)
	Expect(ok).To(BeTrue(), "%s %s: %s is a %T", u.GetKind(), u.GetName(), strings.Join(path, "."), v)
	return t
}

// expectPortable checks what must follow the namespace in every install:
// nothing names podsieve-system, the webhooks call the Service where it is
// and never see its namespace, and the manager's ServiceAccount is bound
// there. It returns the webhook Service.
func expectPortable(out string, objs []*unstructured.Unstructured, ns string) *unstructured.Unstructured {
	GinkgoHelper()
	Expect(out).NotTo(ContainSubstring("podsieve-system"))
	Expect(out).NotTo(ContainSubstring("$("), "a kustomize var left unresolved")
	object(objs, "Namespace", ns)
	svc := object(objs, "Service", "podsieve-webhook")
	Expect(svc.GetNamespace()).To(Equal(ns))
	for _, u := range objs {
		if u.GetNamespace() != "" {
			Expect(u.GetNamespace()).To(Equal(ns), "%s %s", u.GetKind(), u.GetName())
		}
	}

	vwc := object(objs, "ValidatingWebhookConfiguration", "podsieve")
	excluded := 0
	for _, w := range field[[]any](vwc, "webhooks") {
		wh := &unstructured.Unstructured{Object: w.(map[string]any)}
		name := field[string](wh, "name")
		Expect(field[string](wh, "clientConfig", "service", "name")).To(Equal(svc.GetName()), name)
		Expect(field[string](wh, "clientConfig", "service", "namespace")).To(Equal(ns), name)
		exprs, _, _ := unstructured.NestedSlice(wh.Object, "namespaceSelector", "matchExpressions")
		for _, e := range exprs {
			if e.(map[string]any)["key"] == "kubernetes.io/metadata.name" {
				Expect(e).To(HaveKeyWithValue("operator", "NotIn"), name)
				Expect(e).To(HaveKeyWithValue("values", ConsistOf("kube-system", ns)), name)
				excluded++
			}
		}
	}
	Expect(excluded).To(Equal(2), "both pod webhooks exclude kube-system and podsieve's namespace")

	for _, kind := range []string{"RoleBinding", "ClusterRoleBinding"} {
		b := object(objs, kind, "podsieve-manager")
		Expect(field[[]any](b, "subjects")).To(ConsistOf(And(
			HaveKeyWithValue("name", "podsieve-manager"), HaveKeyWithValue("namespace", ns))), kind)
	}
	return svc
}

// mountedSecret is the Secret the manager serves its certificate from.
func mountedSecret(objs []*unstructured.Unstructured) string {
	GinkgoHelper()
	deploy := object(objs, "Deployment", "podsieve-manager")
	for _, v := range field[[]any](deploy, "spec", "template", "spec", "volumes") {
		if v.(map[string]any)["name"] == "cert" {
			return field[string](&unstructured.Unstructured{Object: v.(map[string]any)}, "secret", "secretName")
		}
	}
	Fail("the Deployment mounts no volume cert")
	return ""
}

var _ = Describe("Installing into another namespace with a namespace overlay", func() {
	const ns = "security-tools"

	It("renders config/default there: the Secret, the webhooks and their exclusions follow", func() {
		out, objs := renderInto("default", ns)
		expectPortable(out, objs, ns)
		secret := object(objs, "Secret", mountedSecret(objs))
		Expect(secret.GetNamespace()).To(Equal(ns))
		// The manager's certificate rotation finds the Service and the
		// Secret in its own namespace (POD_NAMESPACE) under these names,
		// its flags' defaults.
		Expect(secret.GetName()).To(Equal("podsieve-webhook-cert"))
		Expect(out).To(ContainSubstring("fieldPath: metadata.namespace"))

		// A drain evicts one replica at a time at any replica count
		// (minAvailable: 2 would block every drain at two).
		pdb := object(objs, "PodDisruptionBudget", "podsieve-manager")
		Expect(field[any](pdb, "spec", "maxUnavailable")).To(BeNumerically("==", 1))
		Expect(field[map[string]any](pdb, "spec")).NotTo(HaveKey("minAvailable"))
	})

	It("renders config/default there and the API server accepts every object", func() {
		Expect(client.IgnoreAlreadyExists(k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))).To(Succeed())
		dir := GinkgoT().TempDir()
		rel, err := filepath.Rel(dir, filepath.Join(testenv.RepoRoot(), "config", "default"))
		Expect(err).NotTo(HaveOccurred())
		Expect(os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte("namespace: "+ns+"\nresources:\n- "+rel+"\n"), 0o600)).To(Succeed())
		out := kubectl("apply", "--dry-run=server", "-k", dir)
		Expect(out).To(ContainSubstring("namespace/" + ns))
		Expect(out).To(ContainSubstring("validatingwebhookconfiguration.admissionregistration.k8s.io/podsieve"))
	})

	It("renders config/certmanager there: the certificate names the Service, the CA comes from it", func() {
		out, objs := renderInto("certmanager", ns)
		svc := expectPortable(out, objs, ns)
		cert := object(objs, "Certificate", "podsieve-webhook-cert")
		Expect(cert.GetNamespace()).To(Equal(ns))
		Expect(field[[]any](cert, "spec", "dnsNames")).To(ConsistOf(
			svc.GetName()+"."+ns+".svc", svc.GetName()+"."+ns+".svc.cluster.local"))
		Expect(field[string](cert, "spec", "secretName")).To(Equal(mountedSecret(objs)))
		Expect(object(objs, "Issuer", field[string](cert, "spec", "issuerRef", "name")).GetNamespace()).To(Equal(ns))
		vwc := object(objs, "ValidatingWebhookConfiguration", "podsieve")
		Expect(vwc.GetAnnotations()).To(HaveKeyWithValue("cert-manager.io/inject-ca-from", ns+"/"+cert.GetName()))
		for _, u := range objs {
			Expect(u.GetKind()).NotTo(Equal("Secret"), "cert-manager writes the Secret")
		}
	})
})
