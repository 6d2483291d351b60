package webhooks_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"path/filepath"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	policyv1alpha1 "github.com/podsieve/podsieve/api/v1alpha1"
	"github.com/podsieve/podsieve/internal/enginetest"
	"github.com/podsieve/podsieve/internal/testenv"
)

func container(name, image string, caps ...corev1.Capability) corev1.Container {
	c := corev1.Container{Name: name, Image: image}
	if len(caps) > 0 {
		c.SecurityContext = &corev1.SecurityContext{Capabilities: &corev1.Capabilities{Add: caps}}
	}
	return c
}

func pod(ns, name string, init []corev1.Container, containers ...corev1.Container) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: corev1.PodSpec{InitContainers: init, Containers: containers}}
}

func istioInit(image string) corev1.Container {
	c := container("istio-init", image, "NET_ADMIN", "NET_RAW")
	c.SecurityContext.RunAsUser = ptr.To[int64](0)
	c.SecurityContext.RunAsNonRoot = ptr.To(false)
	return c
}

func namespace(prefix string, labels map[string]string) string {
	name := fmt.Sprintf("%s-%d", prefix, rand.IntN(1_000_000))
	Expect(k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}})).To(Succeed())
	return name
}

func createPolicy(spec string) string {
	sp := &policyv1alpha1.SecurityPolicy{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("p-%d", rand.IntN(1_000_000))}}
	Expect(yaml.UnmarshalStrict([]byte(spec), &sp.Spec)).To(Succeed())
	Expect(k8s.Create(ctx, sp)).To(Succeed())
	DeferCleanup(func() { Expect(client.IgnoreNotFound(k8s.Delete(ctx, sp))).To(Succeed()) })
	Eventually(func() bool { return ix.Snapshot().Policy(sp.Name) != nil }).Should(BeTrue())
	return sp.Name
}

// invalidCauses are the field paths of a 422 Invalid answer's causes, in
// order; it fails unless err is one.
func invalidCauses(err error) []string {
	Expect(apierrors.IsInvalid(err)).To(BeTrue(), "want a 422 Invalid, got %v", err)
	var status apierrors.APIStatus
	Expect(errors.As(err, &status)).To(BeTrue())
	Expect(status.Status().Code).To(BeEquivalentTo(http.StatusUnprocessableEntity))
	Expect(status.Status().Details).NotTo(BeNil(), "%v", err)
	var paths []string
	for _, c := range status.Status().Details.Causes {
		Expect(c.Type).To(Equal(metav1.CauseTypeFieldValueInvalid))
		paths = append(paths, c.Field)
	}
	return paths
}

// refusal is the whole message the API server returns for a refused write.
func refusal(err error) string {
	Expect(err).To(HaveOccurred())
	return err.Error()
}

var _ = Describe("Pod-bearing admission", Ordered, func() {
	var staging, prod string
	BeforeAll(func() {
		staging, prod = "staging", "prod"
		for _, ns := range []string{staging, prod} {
			Expect(client.IgnoreAlreadyExists(k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))).To(Succeed())
		}
		out, err := testenv.Kubectl(env, "apply", "-k", filepath.Join(testenv.RepoRoot(), "config", "samples"))
		Expect(err).NotTo(HaveOccurred(), out)
		Eventually(func() bool { return ix.Snapshot().Policy("pod-security-standards") != nil }).Should(BeTrue())
	})
	BeforeEach(func() { warnings.take() })

	It("admits Istio's init container thanks to the policy's exclusion", func() {
		Expect(k8s.Create(ctx, pod(staging, "istio", []corev1.Container{istioInit("docker.io/istio/proxyv2:1.24.0")}, container("app", "nginx:1.25")))).To(Succeed())
	})

	It("admits Linkerd's init container thanks to the policy's exclusion", func() {
		Expect(k8s.Create(ctx, pod(staging, "linkerd", []corev1.Container{container("linkerd-init", "cr.l5d.io/linkerd/proxy-init:v2.4.1", "NET_ADMIN", "NET_RAW")}, container("app", "nginx:1.25")))).To(Succeed())
	})

	It("refuses the same capability on the app container, saying what to change", func() {
		err := k8s.Create(ctx, pod(staging, "app-caps", nil, container("app", "nginx:1.25", "NET_ADMIN")))
		Expect(refusal(err)).To(Equal(`admission webhook "pods.podsieve.dev" denied the request: ` +
			`Pod staging/app-caps is refused by SecurityPolicy "pod-security-standards" rule "baseline-service-mesh" (baseline:latest):` + "\n" +
			`- Capabilities: container "app" (image nginx:1.25) sets spec.containers[*].securityContext.capabilities.add to NET_ADMIN` + "\n" +
			// The sample's guardrails allow capabilities only for init
			// containers of the meshes' registries: no exception helps,
			// and the hint says what they do allow.
			`Policy "pod-security-standards" allows PolicyExceptions for "Capabilities" only for containers of kind Init: change the workload.`))
	})

	It("refuses the same capabilities on an init container running another image", func() {
		err := k8s.Create(ctx, pod(staging, "evil-init", []corev1.Container{istioInit("registry.example/evil/proxyv2:1")}, container("app", "nginx:1.25")))
		Expect(refusal(err)).To(ContainSubstring(`- Capabilities: init container "istio-init" (image registry.example/evil/proxyv2:1) sets spec.initContainers[*].securityContext.capabilities.add to NET_ADMIN, NET_RAW`))
	})

	It("refuses a Deployment whose template would be refused, with the template's path", func() {
		d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: staging, Name: "web"}, Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
				Spec: corev1.PodSpec{HostNetwork: true, Containers: []corev1.Container{container("app", "nginx:1.25")}}},
		}}
		err := k8s.Create(ctx, d)
		Expect(refusal(err)).To(Equal(`admission webhook "pods.podsieve.dev" denied the request: ` +
			`Deployment staging/web is refused by SecurityPolicy "pod-security-standards" rule "baseline-service-mesh" (baseline:latest):` + "\n" +
			`- Host Namespaces: pod sets spec.template.spec.hostNetwork to true` + "\n" +
			`Policy "pod-security-standards" does not allow PolicyExceptions for "Host Namespaces": change the workload.`))
	})

	It("refuses a privileged ephemeral container added the way kubectl debug does", func() {
		p := pod(staging, "debug-me", nil, container("app", "nginx:1.25"))
		Expect(k8s.Create(ctx, p)).To(Succeed())
		p.Spec.EphemeralContainers = []corev1.EphemeralContainer{{EphemeralContainerCommon: corev1.EphemeralContainerCommon{
			Name: "debugger", Image: "busybox:1.36", SecurityContext: &corev1.SecurityContext{Privileged: ptr.To(true)},
		}}}
		err := k8s.SubResource("ephemeralcontainers").Update(ctx, p)
		Expect(refusal(err)).To(ContainSubstring(`- Privileged Containers: ephemeral container "debugger" (image busybox:1.36) sets spec.ephemeralContainers[*].securityContext.privileged to true`))
	})

	It("lets a pod's labels change without re-evaluating it, as Pod Security Admission does", func() {
		p := pod(staging, "relabel", nil, container("app", "nginx:1.25"))
		Expect(k8s.Create(ctx, p)).To(Succeed())
		tighten := createPolicy("rules:\n- name: all\n  match: {namespaces: [staging]}\n  podSecurity: {level: restricted}")
		_ = tighten
		p.Labels = map[string]string{"touched": "yes"}
		Expect(k8s.Update(ctx, p)).To(Succeed(), "a label change is not a reason to refuse a running pod")
		p.Spec.Containers[0].Image = "nginx:1.26"
		Expect(refusal(k8s.Update(ctx, p))).To(ContainSubstring(`rule "all" (restricted:latest)`))
	})

	It("waives a violation with a PolicyException in its own namespace only, and tells the developer", func() {
		expires := time.Now().Add(24 * time.Hour).UTC().Format(time.RFC3339)
		pe := &policyv1alpha1.PolicyException{ObjectMeta: metav1.ObjectMeta{Namespace: staging, Name: "exporter-port"}}
		Expect(yaml.UnmarshalStrict([]byte(fmt.Sprintf(`
exceptions: [{policyName: pod-security-standards, ruleNames: ["*"]}]
match: {names: ["exporter*"]}
podSecurity:
- controlName: Host Ports
  containerNames: [exporter]
  containerKinds: [App]
  images: ["quay.io/prometheus/node-exporter"]
  restrictedField: spec.containers[*].ports[*].hostPort
  values: ["9100"]
justification: node exporter, ticket OPS-1
expiresAt: %q`, expires)), &pe.Spec)).To(Succeed())
		Expect(k8s.Create(ctx, pe)).To(Succeed())
		Eventually(func() bool { return ix.Snapshot().Exception(staging, "exporter-port") != nil }).Should(BeTrue())

		exporter := func(ns string) *corev1.Pod {
			c := container("exporter", "quay.io/prometheus/node-exporter:v1.8.0")
			c.Ports = []corev1.ContainerPort{{ContainerPort: 9100, HostPort: 9100}}
			return pod(ns, "exporter", nil, c)
		}
		warnings.take()
		Expect(k8s.Create(ctx, exporter(staging))).To(Succeed())
		Expect(warnings.take()).To(ContainElement("Pod staging/exporter is admitted under PolicyException staging/exporter-port"))
		Expect(refusal(k8s.Create(ctx, exporter(prod)))).To(ContainSubstring(
			`- Host Ports: container "exporter" (image quay.io/prometheus/node-exporter:v1.8.0) sets spec.containers[*].ports[*].hostPort to 9100`))
	})

	It("warns, and does not refuse, under a Warn policy", func() {
		ns := namespace("warned", map[string]string{"tier": "warned"})
		name := createPolicy("action: Warn\nrules:\n- name: restricted\n  match: {namespaceSelector: {matchLabels: {tier: warned}}}\n  podSecurity: {level: restricted, version: v1.30}")
		Eventually(func() map[string]string { return ix.Snapshot().NamespaceLabels(ns) }).Should(HaveKey("tier"))
		Expect(k8s.Create(ctx, pod(ns, "plain", nil, container("app", "nginx:1.25")))).To(Succeed())
		Expect(warnings.take()).To(ContainElement(fmt.Sprintf(
			`SecurityPolicy %q rule "restricted" (restricted:v1.30): Seccomp: container "app" (image nginx:1.25) must set spec.containers[*].securityContext.seccompProfile.type`, name)))
	})

	It("leaves kube-system alone, whatever the policies say", func() {
		createPolicy("rules:\n- name: everywhere\n  podSecurity: {level: baseline}")
		Expect(refusal(k8s.Create(ctx, pod(prod, "caps", nil, container("app", "nginx:1.25", "SYS_ADMIN"))))).To(ContainSubstring(`rule "everywhere"`))
		Expect(k8s.Create(ctx, pod("kube-system", "caps", nil, container("app", "nginx:1.25", "SYS_ADMIN")))).To(Succeed())
	})

	It("honours the podsieve.dev/ignore label only in namespaces an admin allowed it in", func() {
		allowed := namespace("allowed", map[string]string{"podsieve.dev/allow-ignore": "true"})
		plain := namespace("plain", nil)
		for _, ns := range []string{allowed, plain} {
			p := pod(ns, "ignored", nil, container("app", "nginx:1.25", "SYS_ADMIN"))
			p.Labels = map[string]string{"podsieve.dev/ignore": "true"}
			err := k8s.Create(ctx, p)
			if ns == allowed {
				Expect(err).NotTo(HaveOccurred())
			} else {
				Expect(refusal(err)).To(ContainSubstring(`- Capabilities: container "app"`))
			}
		}
		// Without the label, the allowed namespace is judged like any other.
		Expect(refusal(k8s.Create(ctx, pod(allowed, "labelless", nil, container("app", "nginx:1.25", "SYS_ADMIN"))))).To(ContainSubstring("SYS_ADMIN"))
	})

	It("counts the opt-out labels only with the value \"true\"", func() {
		allowed := namespace("allowed-true", map[string]string{"podsieve.dev/allow-ignore": "true"})
		notAllowed := namespace("allowed-false", map[string]string{"podsieve.dev/allow-ignore": "false"})
		for _, c := range []struct{ ns, value string }{{allowed, "false"}, {allowed, "yes"}, {notAllowed, "true"}} {
			p := pod(c.ns, "ignored", nil, container("app", "nginx:1.25", "SYS_ADMIN"))
			p.Labels = map[string]string{"podsieve.dev/ignore": c.value}
			Expect(refusal(k8s.Create(ctx, p))).To(ContainSubstring(`- Capabilities: container "app"`), "namespace %s, podsieve.dev/ignore=%s", c.ns, c.value)
		}
	})

	It("fails closed when the webhook cannot be reached, and kube-system still works", func() {
		ns := namespace("down", map[string]string{"podsieve-test": "down"})
		unreachable := &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "podsieve-unreachable"},
			Webhooks: []admissionregistrationv1.ValidatingWebhook{{
				Name:                    "unreachable.podsieve.dev",
				AdmissionReviewVersions: []string{"v1"},
				ClientConfig:            admissionregistrationv1.WebhookClientConfig{URL: ptr.To("https://127.0.0.1:1/validate-pods"), CABundle: env.WebhookInstallOptions.LocalServingCAData},
				FailurePolicy:           ptr.To(admissionregistrationv1.Fail),
				SideEffects:             ptr.To(admissionregistrationv1.SideEffectClassNone),
				TimeoutSeconds:          ptr.To[int32](2),
				NamespaceSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{"podsieve-test": "down"}},
				Rules: []admissionregistrationv1.RuleWithOperations{{Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
					Rule: admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"}}}},
			}},
		}
		Expect(k8s.Create(ctx, unreachable)).To(Succeed())
		DeferCleanup(func() { Expect(k8s.Delete(ctx, unreachable)).To(Succeed()) })
		Eventually(func() string {
			return refusal(k8s.Create(ctx, pod(ns, fmt.Sprintf("clean-%d", rand.IntN(1000)), nil, container("app", "nginx:1.25"))))
		}).Should(ContainSubstring(`failed calling webhook "unreachable.podsieve.dev"`))
		Expect(k8s.Create(ctx, pod("kube-system", "still-works", nil, container("app", "nginx:1.25")))).To(Succeed())
	})
})

var _ = Describe("Validation of podsieve's own objects", func() {
	It("refuses a SecurityPolicy that does not compile, naming the field", func() {
		sp := &policyv1alpha1.SecurityPolicy{ObjectMeta: metav1.ObjectMeta{Name: "bad-field"}}
		Expect(yaml.UnmarshalStrict([]byte("rules:\n- name: r\n  podSecurity:\n    level: baseline\n    exclude: [{controlName: Host Ports, restrictedField: spec.hostPID}]"), &sp.Spec)).To(Succeed())
		err := k8s.Create(ctx, sp)
		Expect(apierrors.IsInvalid(err)).To(BeTrue(), "%v", err)
		Expect(refusal(err)).To(ContainSubstring(
			`SecurityPolicy.policy.podsieve.dev "bad-field" is invalid: spec.rules[0].podSecurity.exclude[0].restrictedField: Invalid value: "spec.hostPID" is not a field of control "Host Ports"; use one of spec.containers[*].ports[*].hostPort, spec.ephemeralContainers[*].ports[*].hostPort, spec.initContainers[*].ports[*].hostPort`))
	})

	// One 422 with every cause, as the API server answers its own
	// validation: the writer fixes all three in one round.
	It("refuses a SecurityPolicy with three errors in one 422 listing all three", func() {
		sp := &policyv1alpha1.SecurityPolicy{ObjectMeta: metav1.ObjectMeta{Name: "three-errors"}}
		Expect(yaml.UnmarshalStrict([]byte("rules:\n"+
			"- name: r\n  podSecurity:\n    level: baseline\n    exclude:\n"+
			"    - {controlName: Host Ports, restrictedField: spec.hostPID}\n"+
			"    - {controlName: Host Ports, restrictedField: 'spec.containers[*].ports[*].hostPort', values: [metrics]}\n"+
			"- name: s\n  podSecurity: {level: baseline}\n  match: {selector: {matchExpressions: [{key: app, operator: In}]}}"), &sp.Spec)).To(Succeed())
		Expect(invalidCauses(k8s.Create(ctx, sp))).To(Equal([]string{
			"spec.rules[0].podSecurity.exclude[0].restrictedField",
			"spec.rules[0].podSecurity.exclude[1].values[0]",
			"spec.rules[1].match.selector",
		}))
	})

	It("refuses a PolicyException with three errors in one 422 listing all three", func() {
		ns := namespace("team", nil)
		pe := &policyv1alpha1.PolicyException{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "three-errors"}}
		Expect(yaml.UnmarshalStrict([]byte("exceptions: [{policyName: p, ruleNames: [r]}]\n"+
			"match: {namespaces: [other], selector: {matchExpressions: [{key: app, operator: In}]}}\n"+
			"podSecurity: [{controlName: Host Ports, restrictedField: spec.hostPID}]"), &pe.Spec)).To(Succeed())
		Expect(invalidCauses(k8s.Create(ctx, pe))).To(Equal([]string{
			"spec.match",
			"spec.match.selector",
			"spec.podSecurity[0].restrictedField",
		}))
	})

	It("refuses values that can never match their field", func() {
		sp := &policyv1alpha1.SecurityPolicy{ObjectMeta: metav1.ObjectMeta{Name: "bad-values"}}
		Expect(yaml.UnmarshalStrict([]byte("rules:\n- name: r\n  podSecurity:\n    level: baseline\n    exclude: [{controlName: Host Ports, restrictedField: 'spec.containers[*].ports[*].hostPort', values: [metrics]}]"), &sp.Spec)).To(Succeed())
		Expect(refusal(k8s.Create(ctx, sp))).To(ContainSubstring(`values[0]: Invalid value: "metrics" can never match field spec.containers[*].ports[*].hostPort, whose values are numbers`))
	})

	It("refuses an exception the policy's guardrails refuse, 403 with the NotPermitted message", func() {
		guarded := createPolicy("exceptions: {allowedControls: [Capabilities]}\n" + enginetest.BaselineRule)
		ns := namespace("team", nil)
		pe := &policyv1alpha1.PolicyException{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "host-pid"}}
		Expect(yaml.UnmarshalStrict([]byte(fmt.Sprintf("exceptions: [{policyName: %s, ruleNames: [r]}]\npodSecurity: [{controlName: Host Namespaces}]", guarded)), &pe.Spec)).To(Succeed())
		err := k8s.Create(ctx, pe)
		Expect(apierrors.IsForbidden(err)).To(BeTrue(), "%v", err)
		Expect(refusal(err)).To(ContainSubstring(fmt.Sprintf(
			`PolicyException %s/host-pid: policy %q allows exceptions only for controls "Capabilities"; remove control "Host Namespaces" from spec.podSecurity`, ns, guarded)))
	})

	It("admits an exception for a policy that does not exist yet, with a warning", func() {
		ns := namespace("team", nil)
		pe := &policyv1alpha1.PolicyException{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "early"}}
		Expect(yaml.UnmarshalStrict([]byte("exceptions: [{policyName: coming-soon, ruleNames: [r]}]"), &pe.Spec)).To(Succeed())
		warnings.take()
		Expect(k8s.Create(ctx, pe)).To(Succeed())
		Expect(strings.Join(warnings.take(), "\n")).To(ContainSubstring(fmt.Sprintf(`PolicyException %s/early will not apply: spec.exceptions[0].policyName: SecurityPolicy "coming-soon" does not exist`, ns)))
	})

	It("refuses match.namespaces outside the cluster exceptions namespace", func() {
		ns := namespace("team", nil)
		pe := &policyv1alpha1.PolicyException{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "reach"}}
		Expect(yaml.UnmarshalStrict([]byte("exceptions: [{policyName: p, ruleNames: [r]}]\nmatch: {namespaces: [other]}"), &pe.Spec)).To(Succeed())
		Expect(refusal(k8s.Create(ctx, pe))).To(ContainSubstring(`spec.match: Invalid value: namespaces and namespaceSelector are honoured only for exceptions in the cluster exceptions namespace "podsieve-system"`))
	})
})
