package webhooks_test

import (
	"fmt"
	"path/filepath"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	policyv1alpha1 "github.com/podsieve/podsieve/api/v1alpha1"
	"github.com/podsieve/podsieve/internal/engine"
	"github.com/podsieve/podsieve/internal/enginetest"
	"github.com/podsieve/podsieve/internal/testenv"
)

// The attacks of issue 13, each as the user who would try it: a namespace
// editor (the built-in edit role), a namespace admin, and a user who may
// only create pods. Each spec asserts the refusal and the message that user
// reads.
var _ = Describe("A hostile tenant", Ordered, func() {
	var (
		ns                   string
		editor, admin, pods  client.Client
		userWarnings         *warningRecorder
		editorName, podsName string
	)

	// scoped is a policy that applies in the attack namespace only.
	scoped := func(spec string) string {
		return createPolicy(strings.Replace(spec, "rules:\n- name: r\n", "rules:\n- name: r\n  match: {namespaces: ["+ns+"]}\n", 1))
	}
	// exceptionAs sends the exception as written, as kubectl apply does: a
	// typed object would drop an empty list before the API server saw it.
	exceptionAs := func(c client.Client, name, policy, podSecurity string) error {
		spec := map[string]any{}
		Expect(yaml.Unmarshal([]byte(fmt.Sprintf("exceptions: [{policyName: %s, ruleNames: [r]}]\njustification: attack\n%s", policy, podSecurity)), &spec)).To(Succeed())
		pe := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": policyv1alpha1.GroupVersion.String(), "kind": "PolicyException",
			"metadata": map[string]any{"namespace": ns, "name": name}, "spec": spec,
		}}
		err := c.Create(ctx, pe)
		if err == nil {
			DeferCleanup(func() { Expect(client.IgnoreNotFound(k8s.Delete(ctx, pe))).To(Succeed()) })
		}
		return err
	}

	BeforeAll(func() {
		_, err := testenv.Kubectl(env, "apply", "-f", filepath.Join(testenv.RepoRoot(), "config", "rbac", "user_roles.yaml"))
		Expect(err).NotTo(HaveOccurred())
		Expect(testenv.AggregateClusterRoles(ctx, k8s)).To(Succeed())
		ns = namespace("tenant", nil)
		editorName, podsName = "mallory-"+ns, "pete-"+ns
		Expect(testenv.BindUser(ctx, k8s, ns, editorName, "ClusterRole", "edit")).To(Succeed())
		Expect(testenv.BindUser(ctx, k8s, ns, "ada-"+ns, "ClusterRole", "admin")).To(Succeed())
		Expect(k8s.Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "pod-creator"},
			Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"create"}}}})).To(Succeed())
		Expect(testenv.BindUser(ctx, k8s, ns, podsName, "Role", "pod-creator")).To(Succeed())
		userCfg := *cfg
		userWarnings = &warningRecorder{}
		userCfg.WarningHandler = userWarnings
		for user, c := range map[string]*client.Client{editorName: &editor, "ada-" + ns: &admin, podsName: &pods} {
			*c, err = testenv.As(&userCfg, user)
			Expect(err).NotTo(HaveOccurred())
		}
	})

	It("cannot use an exception against a policy that did not opt in", func() {
		p := scoped(enginetest.BaselineRule)
		for _, c := range []client.Client{editor, admin} {
			msg := refusal(exceptionAs(c, "waive-all", p, ""))
			Expect(msg).To(ContainSubstring(fmt.Sprintf(`policy %q honours no PolicyExceptions: it has no spec.exceptions; a cluster admin opts it in by setting spec.exceptions`, p)))
		}
	})

	It("cannot waive a whole rule, or any control, where allowedControls is empty", func() {
		p := scoped("exceptions: {allowedControls: []}\n" + enginetest.BaselineRule)
		Expect(refusal(exceptionAs(editor, "whole", p, ""))).To(ContainSubstring("spec.podSecurity is empty, which waives every control"))
		Expect(refusal(exceptionAs(editor, "caps", p, "podSecurity: [{controlName: Capabilities}]"))).To(ContainSubstring(
			fmt.Sprintf(`policy %q allows exceptions for no control (spec.exceptions.allowedControls is empty)`, p)))
	})

	It("cannot make an empty list mean \"any\"", func() {
		p := scoped("exceptions: {}\n" + enginetest.BaselineRule)
		for field, list := range map[string]string{
			"images":         "podSecurity: [{controlName: Capabilities, images: []}]",
			"values":         `podSecurity: [{controlName: Capabilities, restrictedField: "spec.containers[*].securityContext.capabilities.add", values: []}]`,
			"containerNames": "podSecurity: [{controlName: Capabilities, containerNames: []}]",
			"names":          "match: {names: []}\npodSecurity: [{controlName: Capabilities}]",
			"kinds":          "match: {kinds: []}\npodSecurity: [{controlName: Capabilities}]",
		} {
			Expect(refusal(exceptionAs(editor, "empty", p, list))).To(ContainSubstring(field+": an empty list would match no"), field)
		}
	})

	It("cannot waive more of a control than the policy bounds", func() {
		p := scoped(`exceptions:
  allowedControls: [Capabilities]
  controls: [{controlName: Capabilities, allowedValues: [NET_ADMIN, NET_RAW], requireContainerNames: true, requirePinnedRegistry: true}]
` + enginetest.BaselineRule)
		field := `restrictedField: "spec.containers[*].securityContext.capabilities.add"`
		for what, c := range map[string]struct{ entry, message string }{
			"a value outside allowedValues": {`{controlName: Capabilities, containerNames: [app], images: ["docker.io/library/app"], ` + field + `, values: [SYS_ADMIN]}`,
				`spec.podSecurity[0].values[0]: "SYS_ADMIN" is not within the values policy`},
			"no values": {`{controlName: Capabilities, containerNames: [app], images: ["docker.io/library/app"]}`,
				`this entry has no values, so it would waive any value`},
			"every container": {`{controlName: Capabilities, images: ["docker.io/library/app"], ` + field + `, values: [NET_ADMIN]}`,
				`to name containers (spec.exceptions.controls): set spec.podSecurity[0].containerNames`},
			"a wildcard registry": {`{controlName: Capabilities, containerNames: [app], images: ["*/istio/proxyv2*"], ` + field + `, values: [NET_ADMIN]}`,
				`spec.podSecurity[0].images[0]: "*/istio/proxyv2*" does not pin its registry`},
		} {
			Expect(refusal(exceptionAs(editor, "broad", p, "podSecurity: ["+c.entry+"]"))).To(ContainSubstring(c.message), what)
		}
		userWarnings.take()
		Expect(exceptionAs(editor, "narrow", p, `podSecurity: [{controlName: Capabilities, containerNames: [app], images: ["docker.io/library/app"], `+field+`, values: [NET_ADMIN]}]`)).To(Succeed())
		Expect(userWarnings.take()).To(BeEmpty())
	})

	It("cannot make every review in its namespace match a huge label selector", func() {
		p := scoped("exceptions: {allowedControls: [Capabilities]}\n" + enginetest.BaselineRule)
		entry := `podSecurity: [{controlName: Capabilities, containerNames: [app], restrictedField: "spec.containers[*].securityContext.capabilities.add", values: [NET_ADMIN]}]`
		var labels, values []string
		for i := range engine.MaxSelectorRequirements + 1 {
			labels = append(labels, fmt.Sprintf("l%02d: v", i))
		}
		for i := range engine.MaxSelectorValues + 1 {
			values = append(values, fmt.Sprintf("v%02d", i))
		}
		Expect(refusal(exceptionAs(editor, "labels", p, "match: {selector: {matchLabels: {"+strings.Join(labels, ", ")+"}}}\n"+entry))).To(ContainSubstring(
			"spec.match.selector: Invalid value: 17 requirements (matchLabels and matchExpressions together); a PolicyException's selector may have at most 16: select by fewer labels"))
		Expect(refusal(exceptionAs(editor, "values", p, "match: {selector: {matchExpressions: [{key: app, operator: In, values: ["+strings.Join(values, ", ")+"]}]}}\n"+entry))).To(ContainSubstring(
			"spec.match.selector.matchExpressions[0].values: Invalid value: 65 values; at most 64"))
		Expect(exceptionAs(editor, "labelled", p, "match: {selector: {matchLabels: {"+strings.Join(labels[:engine.MaxSelectorRequirements], ", ")+"}}}\n"+entry)).To(Succeed())
	})

	It("is warned when an entry is easy to spoof", func() {
		p := scoped("exceptions: {}\n" + enginetest.BaselineRule)
		userWarnings.take()
		Expect(exceptionAs(editor, "spoofable", p, `podSecurity:
- {controlName: Capabilities, images: ["*/istio/proxyv2*"]}
- {controlName: Capabilities, containerNames: [istio-init]}
- {controlName: Host Probes / Lifecycle Hooks, restrictedField: "spec.containers[*].livenessProbe.httpGet.host", values: ["10.0.0.*"]}`)).To(Succeed())
		Expect(userWarnings.take()).To(ConsistOf(
			ContainSubstring(`spec.podSecurity[0].images[0] "*/istio/proxyv2*" matches its path on any registry`),
			ContainSubstring(`spec.podSecurity[1] selects containers by name only`),
			ContainSubstring(`spec.podSecurity[2].values[0] "10.0.0.*" is a glob on spec.containers[*].livenessProbe.httpGet.host`),
		))
	})

	It("cannot reach a hostPath volume through Volume Types", func() {
		p := scoped("exceptions: {allowedControls: [Volume Types]}\nrules:\n- name: r\n  podSecurity: {level: restricted}")
		Expect(exceptionAs(editor, "volumes", p, "podSecurity: [{controlName: Volume Types}]")).To(Succeed())
		Eventually(func() bool { return ix.Snapshot().Exception(ns, "volumes") != nil }).Should(BeTrue())
		root := restrictedPod(ns, "root")
		root.Spec.Volumes = []corev1.Volume{{Name: "root", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/"}}}}
		msg := refusal(pods.Create(ctx, root))
		Expect(msg).To(ContainSubstring("Volume Types: pod sets spec.volumes[*].hostPath to /"))
		Expect(msg).To(ContainSubstring(fmt.Sprintf(`Policy %q does not allow PolicyExceptions for "HostPath Volumes"`, p)))
	})

	It("tells a user who may only create pods which exception would waive the violation but misses the pod, and nothing of its match", func() {
		p := scoped("exceptions: {allowedControls: [Host Namespaces]}\nrules:\n- name: r\n  podSecurity: {level: restricted}")
		Expect(exceptionAs(editor, "old-release", p, "match: {selector: {matchLabels: {app: old-release}}}\n"+
			`podSecurity: [{controlName: Host Namespaces, restrictedField: spec.hostNetwork, values: ["true"]}]`)).To(Succeed())
		Eventually(func() bool { return ix.Snapshot().Exception(ns, "old-release") != nil }).Should(BeTrue())
		web := restrictedPod(ns, "web")
		web.Labels = map[string]string{"app": "new-release"}
		web.Spec.HostNetwork = true
		msg := refusal(pods.Create(ctx, web))
		Expect(msg).To(ContainSubstring("Host Namespaces: pod sets spec.hostNetwork to true"))
		Expect(msg).To(ContainSubstring(fmt.Sprintf("exception/%s/old-release would waive a violation here but does not reach this object: its match.selector does not select it", ns)))
		Expect(msg).NotTo(ContainSubstring("old-release}"))
		Expect(msg).NotTo(ContainSubstring("app=old-release"))
		Expect(msg).NotTo(ContainSubstring("new-release"))
	})

	It("cannot pass the mesh exclusion with the mesh image from another registry, or as a native sidecar", func() {
		scoped(`rules:
- name: r
  podSecurity:
    level: baseline
    exclude:
    - controlName: Capabilities
      images: ["docker.io/istio/proxyv2"]
      containerNames: ["istio-init"]
      restrictedField: spec.initContainers[*].securityContext.capabilities.add
      values: ["NET_ADMIN", "NET_RAW"]`)
		Expect(pods.Create(ctx, pod(ns, "mesh", []corev1.Container{container("istio-init", "docker.io/istio/proxyv2:1.24.0", "NET_ADMIN", "NET_RAW")},
			container("app", "nginx:1.25")))).To(Succeed())
		spoofed := pod(ns, "spoofed", []corev1.Container{container("istio-init", "registry.attacker.example/istio/proxyv2:1.24.0", "NET_ADMIN", "NET_RAW")}, container("app", "nginx:1.25"))
		Expect(refusal(pods.Create(ctx, spoofed))).To(ContainSubstring(`Capabilities: init container "istio-init" (image registry.attacker.example/istio/proxyv2:1.24.0)`))
		sidecar := container("istio-proxy", "docker.io/istio/proxyv2:1.24.0", "NET_ADMIN")
		sidecar.RestartPolicy = ptr.To(corev1.ContainerRestartPolicyAlways)
		Expect(refusal(pods.Create(ctx, pod(ns, "sidecar", []corev1.Container{sidecar}, container("app", "nginx:1.25"))))).To(
			ContainSubstring(`Capabilities: sidecar container "istio-proxy" (image docker.io/istio/proxyv2:1.24.0)`))
		// Named as the init container and of its image, a sidecar is still
		// no init container: an entry kept to containerKinds [Init] does not
		// cover it.
		scoped(`rules:
- name: r
  podSecurity:
    level: baseline
    exclude:
    - controlName: Capabilities
      images: ["docker.io/istio/proxyv2"]
      containerKinds: [Init]
      restrictedField: spec.initContainers[*].securityContext.capabilities.add
      values: ["NET_ADMIN", "NET_RAW"]`)
		renamed := container("istio-init", "docker.io/istio/proxyv2:1.24.0", "NET_ADMIN")
		renamed.RestartPolicy = ptr.To(corev1.ContainerRestartPolicyAlways)
		Expect(refusal(pods.Create(ctx, pod(ns, "renamed", []corev1.Container{renamed}, container("app", "nginx:1.25"))))).To(
			ContainSubstring(`Capabilities: sidecar container "istio-init" (image docker.io/istio/proxyv2:1.24.0)`))
	})

	It("cannot opt a pod out with podsieve.dev/ignore, or opt the namespace in", func() {
		scoped(enginetest.BaselineRule)
		p := pod(ns, "ignored", nil, container("app", "nginx:1.25", "SYS_ADMIN"))
		p.Labels = map[string]string{"podsieve.dev/ignore": "true"}
		Expect(refusal(pods.Create(ctx, p))).To(ContainSubstring("SYS_ADMIN"))
		var n corev1.Namespace
		Expect(k8s.Get(ctx, client.ObjectKey{Name: ns}, &n)).To(Succeed())
		n.Labels["podsieve.dev/allow-ignore"] = "true"
		Expect(apierrors.IsForbidden(editor.Update(ctx, &n))).To(BeTrue(), "a namespace editor relabelled its namespace")
	})

	It("cannot forge a policy's status or write a policy", func() {
		p := scoped(enginetest.BaselineRule)
		var sp policyv1alpha1.SecurityPolicy
		Expect(k8s.Get(ctx, client.ObjectKey{Name: p}, &sp)).To(Succeed())
		for _, c := range []client.Client{editor, admin} {
			Expect(apierrors.IsForbidden(c.Status().Update(ctx, sp.DeepCopy()))).To(BeTrue())
			Expect(apierrors.IsForbidden(c.Update(ctx, sp.DeepCopy()))).To(BeTrue())
		}
	})

	It("cannot reach other namespaces from its own", func() {
		p := scoped("exceptions: {}\n" + enginetest.BaselineRule)
		Expect(refusal(exceptionAs(editor, "cross", p, "match: {namespaces: [\"*\"]}\npodSecurity: [{controlName: Capabilities}]"))).To(
			ContainSubstring("namespaces and namespaceSelector are honoured only for exceptions in the cluster exceptions namespace"))
		Expect(apierrors.IsForbidden(exceptionAsIn(editor, exceptionsNamespace, p))).To(BeTrue())
	})

	It("gets an answer, not a timeout, for a pod with an image longer than any reference", func() {
		p := scoped("exceptions: {}\n" + enginetest.BaselineRule)
		long := "docker.io/istio/" + strings.Repeat("a", 10_000) + ":1"
		Expect(exceptionAs(editor, "long", p, `podSecurity: [{controlName: Capabilities, images: ["docker.io/istio/a*a*a*a*a*a*a*a*"]}]`)).To(Succeed())
		Eventually(func() bool { return ix.Snapshot().Exception(ns, "long") != nil }).Should(BeTrue())
		msg := refusal(pods.Create(ctx, pod(ns, "long", nil, container("app", long, "SYS_ADMIN"))))
		// podsieve's own refusal: it answered within the API server's
		// timeout, and the entry, whose glob would match, does not cover an
		// image no registry can serve.
		Expect(msg).To(ContainSubstring(`is refused by SecurityPolicy`))
		Expect(msg).To(ContainSubstring("SYS_ADMIN"))
	})

	It("is refused at once, not after seconds of work, for pods whose lists are as long as a request holds", func() {
		p := scoped(`exceptions: {}
rules:
- name: r
  podSecurity: {level: restricted}`)
		// The API server checks neither capability names nor how many
		// there are: 120,000 made-up ones (about 800 KB) cost seconds of
		// attribution when de-duplication was quadratic.
		caps := make([]corev1.Capability, 120_000)
		for i := range caps {
			caps[i] = corev1.Capability(fmt.Sprintf("c%x", i))
		}
		long := restrictedPod(ns, "caps")
		long.Spec.Containers[0].SecurityContext.Capabilities.Add = caps
		// And 20,000 containers, each a finding of several checks.
		many := restrictedPod(ns, "containers")
		for i := range 20_000 {
			many.Spec.Containers = append(many.Spec.Containers, corev1.Container{Name: fmt.Sprintf("c%x", i), Image: "i"})
		}
		// And a megabyte SELinux type, which upstream quotes into its
		// message and attribution copies into its finding.
		selinux := restrictedPod(ns, "selinux")
		selinux.Spec.Containers[0].SecurityContext.SELinuxOptions = &corev1.SELinuxOptions{Type: strings.Repeat("t", 1<<20)}
		for _, o := range []*corev1.Pod{long, many, selinux} {
			msg := refusal(pods.Create(ctx, o))
			// The budget stopped it before the work: the engine's message,
			// not the deadline's, which would mean the work ran until then.
			Expect(msg).To(ContainSubstring(fmt.Sprintf(`podsieve stopped evaluating SecurityPolicy %q rule "r": the review exceeded its work budget`, p)), o.Name)
			Expect(msg).NotTo(ContainSubstring("could not finish deciding"), o.Name)
		}
		// A megabyte image costs the checks little (no image that long is
		// parsed) and is decided, but the refusal names it clipped, once
		// per finding, and stays small.
		image := restrictedPod(ns, "image")
		image.Spec.Containers[0].Image = strings.Repeat("i", 1<<20)
		image.Spec.Containers[0].SecurityContext.Capabilities.Add = []corev1.Capability{"SYS_ADMIN"}
		msg := refusal(pods.Create(ctx, image))
		Expect(msg).To(ContainSubstring(fmt.Sprintf("…(%d bytes)", 1<<20)))
		Expect(len(msg)).To(BeNumerically("<", 16<<10))
	})
})

// exceptionAsIn tries to create a whole-rule exception in another namespace.
func exceptionAsIn(c client.Client, namespace, policy string) error {
	return c.Create(ctx, &policyv1alpha1.PolicyException{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "elsewhere"},
		Spec: policyv1alpha1.PolicyExceptionSpec{Exceptions: []policyv1alpha1.ExceptionTarget{{PolicyName: policy, RuleNames: []string{"*"}}}}})
}

// restrictedPod is a pod that passes restricted but for what a test adds.
func restrictedPod(ns, name string) *corev1.Pod {
	p := pod(ns, name, nil, corev1.Container{Name: "app", Image: "nginx:1.25", SecurityContext: &corev1.SecurityContext{
		AllowPrivilegeEscalation: ptr.To(false),
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
	}})
	p.Spec.SecurityContext = &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true), SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}}
	return p
}
