package upgrade_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlconfig "sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	policyv1alpha1 "github.com/podsieve/podsieve/api/v1alpha1"
	"github.com/podsieve/podsieve/controllers"
	"github.com/podsieve/podsieve/controllers/background"
	"github.com/podsieve/podsieve/internal/engine"
	"github.com/podsieve/podsieve/internal/index"
	"github.com/podsieve/podsieve/internal/testenv"
	"github.com/podsieve/podsieve/webhooks"
)

// readObjects reads a multi-document YAML file of objects, as kubectl
// apply would send them: unstructured, so that empty lists are sent as
// written (a typed object's omitempty would drop them).
func readObjects(path string) []*unstructured.Unstructured {
	f, err := os.Open(path)
	Expect(err).NotTo(HaveOccurred())
	defer f.Close()
	var out []*unstructured.Unstructured
	dec := utilyaml.NewYAMLOrJSONDecoder(f, 4096)
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); errors.Is(err, io.EOF) {
			return out
		} else if err != nil {
			Expect(err).NotTo(HaveOccurred())
		}
		if len(u.Object) > 0 {
			out = append(out, u)
		}
	}
}

// startManager starts this version's manager, as after `helm upgrade`, and
// returns its index once it is ready. It stops at the end of the spec.
func startManager() *index.Index {
	mctx, stop := context.WithCancel(ctx)
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 testenv.Scheme(),
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Cache:                  controllers.CacheOptions(),
		Controller:             ctrlconfig.Controller{SkipNameValidation: ptr.To(true)},
	})
	Expect(err).NotTo(HaveOccurred())
	ix, err := controllers.Setup(mctx, mgr, controllers.Options{
		ExceptionsNamespace: "podsieve-system",
		Background:          background.Options{Disabled: true},
	})
	Expect(err).NotTo(HaveOccurred())
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
	Eventually(ix.Ready, time.Minute).Should(BeTrue(), "the index never became ready")
	return ix
}

// readyCondition reads a SecurityPolicy's Ready condition.
func readyCondition(name string) func() *metav1.Condition {
	return func() *metav1.Condition {
		var sp policyv1alpha1.SecurityPolicy
		Expect(k8s.Get(ctx, client.ObjectKey{Name: name}, &sp)).To(Succeed())
		return meta.FindStatusCondition(sp.Status.Conditions, policyv1alpha1.ConditionReady)
	}
}

// policyState is the value of podsieve_securitypolicy_state for a policy
// and state, as the manager's metrics endpoint would serve it; -1 when the
// series does not exist.
func policyState(name, state string) func() float64 {
	return func() float64 {
		families, err := metrics.Registry.Gather()
		Expect(err).NotTo(HaveOccurred())
		for _, f := range families {
			if f.GetName() != "podsieve_securitypolicy_state" {
				continue
			}
			for _, m := range f.GetMetric() {
				labels := map[string]string{}
				for _, l := range m.GetLabel() {
					labels[l.GetName()] = l.GetValue()
				}
				if labels["name"] == name && labels["state"] == state {
					return m.GetGauge().GetValue()
				}
			}
		}
		return -1
	}
}

// hostPod is the pod admitted after the upgrade when the stored policies
// stopped being enforced: privileged, hostPID and hostNetwork.
func hostPod(ns string) *engine.Object {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "node-agent"}, Spec: corev1.PodSpec{
		HostPID: true, HostNetwork: true,
		Containers: []corev1.Container{{Name: "agent", Image: "registry.example/agent:1",
			SecurityContext: &corev1.SecurityContext{Privileged: ptr.To(true)}}},
	}}
	o, err := engine.NewAdmissionObject(pod)
	Expect(err).NotTo(HaveOccurred())
	return o
}

// refusedBy lists the policies whose rules fail the object in a decision.
func refusedBy(d engine.Decision) []string {
	var out []string
	for _, r := range d.Results {
		if r.Outcome == engine.Fail {
			out = append(out, r.Rule.Policy.Name)
		}
	}
	return out
}

var _ = Describe("Upgrading from a289960", func() {
	It("keeps enforcing the policies it stored, at their strictest, Degraded and alerting", func() {
		// Before: the old CRDs (BeforeSuite), a tenant namespace, and the
		// old objects stored through the API server.
		Expect(k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team", Labels: map[string]string{"tenant": "true"}}})).To(Succeed())
		Expect(k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "podsieve-system"}})).To(Succeed())
		for _, u := range readObjects(filepath.Join("testdata", "stored-a289960.yaml")) {
			Expect(k8s.Create(ctx, u)).To(Succeed(), "the old CRD refuses %s", u.GetName())
		}
		stored := &unstructured.Unstructured{}
		stored.SetGroupVersionKind(policyv1alpha1.GroupVersion.WithKind("SecurityPolicy"))
		Expect(k8s.Get(ctx, client.ObjectKey{Name: "pod-security-standards"}, stored)).To(Succeed())
		names, found, err := unstructured.NestedFieldNoCopy(stored.Object, "spec", "rules")
		Expect(err).NotTo(HaveOccurred())
		Expect(found).To(BeTrue())
		Expect(names).To(HaveLen(1))
		entry := names.([]any)[0].(map[string]any)["podSecurity"].(map[string]any)["exclude"].([]any)[0].(map[string]any)
		Expect(entry).To(HaveKeyWithValue("containerNames", BeEmpty()), "the old API server did not store the empty list")

		// The upgrade: this version's CRDs over the old ones, served once
		// the API server refuses a new empty list.
		Expect(envtest.CreateCRDs(cfg, mustCRDs())).To(Succeed())
		Eventually(func() error {
			fresh := readObjects(filepath.Join("testdata", "stored-a289960.yaml"))[1]
			fresh.SetName("written-after-the-upgrade")
			err := k8s.Create(ctx, fresh)
			if err == nil {
				Expect(k8s.Delete(ctx, fresh)).To(Succeed())
			}
			return err
		}).Should(MatchError(ContainSubstring("an empty list would match no namespace")), "the new CRD never refused a new empty list")

		// What the webhook says of a new write of the stored spec: still refused.
		var typed policyv1alpha1.SecurityPolicy
		Expect(k8s.Get(ctx, client.ObjectKey{Name: "pod-security-standards"}, &typed)).To(Succeed())
		_, err = webhooks.SecurityPolicyValidator{}.ValidateUpdate(ctx, typed.DeepCopy(), &typed)
		// 422 Invalid, every field error a cause (internal/engine ValidatePolicy).
		Expect(err).To(MatchError(ContainSubstring("spec.rules[0].podSecurity.exclude[0].containerNames: Invalid value: an empty list would match no container")))
		Expect(err).To(MatchError(ContainSubstring("spec.rules[0].podSecurity.exclude[1].values: Invalid value: an empty list would match no value")))

		ix := startManager()

		// Both policies are in force and refuse the pod.
		for _, name := range []string{"pod-security-standards", "restricted-tenants"} {
			Eventually(func() *engine.Policy { return ix.Snapshot().Policy(name) }).ShouldNot(BeNil(), "%s is not enforced after the upgrade", name)
		}
		d := ix.Snapshot().Decide(hostPod("team"), time.Now(), engine.Admission)
		Expect(d.Allowed).To(BeFalse(), "the privileged, hostPID, hostNetwork pod is admitted after the upgrade")
		Expect(refusedBy(d)).To(ConsistOf("pod-security-standards", "restricted-tenants"))

		// Degraded, with the field and what to write instead.
		Eventually(readyCondition("pod-security-standards")).Should(And(
			HaveField("Status", metav1.ConditionFalse),
			HaveField("Reason", policyv1alpha1.ReasonDegraded),
			HaveField("Message", ContainSubstring("enforced at its strictest")),
			HaveField("Message", ContainSubstring("spec.rules[0].podSecurity.exclude[0].containerNames: an empty list would match no container; remove the field to mean any container (until then the entry waives nothing)")),
			HaveField("Message", ContainSubstring("spec.rules[0].podSecurity.exclude[1].values: an empty list would match no value; remove the field to mean any value (until then the entry waives nothing)"))))
		Eventually(readyCondition("restricted-tenants")).Should(And(
			HaveField("Reason", policyv1alpha1.ReasonDegraded),
			HaveField("Message", ContainSubstring("spec.rules[0].match.namespaces: an empty list would match no namespace; remove the field to mean any namespace (until then the rule's match ignores its namespaces)")),
			HaveField("Message", ContainSubstring("spec.rules[0].podSecurity.exclude[0].images: an empty list would match no image"))))

		// What the alerts read.
		Expect(policyState("pod-security-standards", policyv1alpha1.ReasonDegraded)()).To(Equal(1.0))
		Expect(policyState("restricted-tenants", policyv1alpha1.ReasonDegraded)()).To(Equal(1.0))
		Expect(policyState("pod-security-standards", policyv1alpha1.ReasonInvalidSpec)()).To(Equal(-1.0))

		// The admin writes what the message says: Compiled, enforced as
		// written, and the Degraded series is gone.
		patch := []byte(`{"spec":{"rules":[{"name":"restricted","match":{"namespaceSelector":{"matchLabels":{"tenant":"true"}}},` +
			`"podSecurity":{"level":"restricted","exclude":[{"controlName":"Seccomp"}]}}]}}`)
		Expect(k8s.Patch(ctx, &policyv1alpha1.SecurityPolicy{ObjectMeta: metav1.ObjectMeta{Name: "restricted-tenants"}},
			client.RawPatch(types.MergePatchType, patch))).To(Succeed())
		Eventually(readyCondition("restricted-tenants")).Should(HaveField("Reason", policyv1alpha1.ReasonCompiled))
		Eventually(policyState("restricted-tenants", policyv1alpha1.ReasonDegraded)).Should(Equal(-1.0))
		Expect(policyState("restricted-tenants", policyv1alpha1.ReasonCompiled)()).To(Equal(1.0))
		Expect(refusedBy(ix.Snapshot().Decide(hostPod("team"), time.Now(), engine.Admission))).To(ContainElement("restricted-tenants"))
	})
})

// mustCRDs reads this version's CRDs, config/crd/bases.
func mustCRDs() []*apiextensionsv1.CustomResourceDefinition {
	dir := filepath.Join(testenv.RepoRoot(), "config", "crd", "bases")
	entries, err := os.ReadDir(dir)
	Expect(err).NotTo(HaveOccurred())
	var out []*apiextensionsv1.CustomResourceDefinition
	for _, e := range entries {
		raw, err := os.ReadFile(filepath.Join(dir, e.Name()))
		Expect(err).NotTo(HaveOccurred())
		crd := &apiextensionsv1.CustomResourceDefinition{}
		Expect(utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(raw), 4096).Decode(crd)).To(Succeed())
		out = append(out, crd)
	}
	return out
}
