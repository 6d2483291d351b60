package v1alpha1_test

import (
	"fmt"
	"strings"
	"sync/atomic"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	policyv1alpha1 "github.com/podsieve/podsieve/api/v1alpha1"
)

var seq atomic.Int64

// create sends one object, written as YAML with only its spec, to the API
// server with strict field validation, as `kubectl apply` does.
func create(kind, namespace, spec string) (*unstructured.Unstructured, error) {
	name := fmt.Sprintf("case-%d", seq.Add(1))
	body := map[string]any{}
	Expect(yaml.Unmarshal([]byte(spec), &body)).To(Succeed(), "test case YAML must parse")
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": policyv1alpha1.GroupVersion.String(),
		"kind":       kind,
		"metadata":   map[string]any{"name": name},
		"spec":       body,
	}}
	if namespace != "" {
		u.SetNamespace(namespace)
	}
	return u, k8s.Create(ctx, u, client.FieldValidation("Strict"))
}

// expectation is what the API server should answer.
type expectation struct {
	accepted bool
	messages []string // each must appear in the error
}

func accepted() expectation { return expectation{accepted: true} }
func rejectedWith(msgs ...string) expectation {
	return expectation{messages: msgs}
}

func check(err error, want expectation) {
	if want.accepted {
		Expect(err).NotTo(HaveOccurred())
		return
	}
	Expect(err).To(HaveOccurred(), "the API server accepted an object it must refuse")
	for _, m := range want.messages {
		Expect(err.Error()).To(ContainSubstring(m))
	}
}

// rule wraps one podSecurity block into a minimal valid SecurityPolicy spec.
func rule(podSecurity string) string {
	return "rules:\n- name: r\n  podSecurity:\n" + indent(podSecurity, "    ")
}

func indent(s, prefix string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	for i, l := range lines {
		lines[i] = prefix + l
	}
	return strings.Join(lines, "\n") + "\n"
}

var _ = Describe("SecurityPolicy schema", func() {
	DescribeTable("validation",
		func(spec string, want expectation) {
			_, err := create("SecurityPolicy", "", spec)
			check(err, want)
		},
		Entry("minimal baseline rule", rule("level: baseline"), accepted()),
		Entry("service-mesh exclusion with images and values", rule(`
level: baseline
exclude:
- controlName: Capabilities
  images: ["*/istio/proxyv2*"]
  restrictedField: spec.initContainers[*].securityContext.capabilities.add
  values: ["NET_ADMIN", "NET_RAW"]`), accepted()),
		Entry("version v1.30", rule("level: restricted\nversion: v1.30"), accepted()),
		Entry("version v1.0", rule("level: restricted\nversion: v1.0"), accepted()),
		Entry("version v2.0", rule("level: baseline\nversion: v2.0"),
			rejectedWith(`spec.rules[0].podSecurity.version`, `version must be "latest" or "v1.N", for example "v1.30"`)),
		Entry("version without v: 1.25", rule("level: baseline\nversion: \"1.25\""),
			rejectedWith(`version must be "latest" or "v1.N"`)),
		Entry("version with a leading zero: v1.05", rule("level: baseline\nversion: v1.05"),
			rejectedWith(`version must be "latest" or "v1.N"`)),
		Entry("unknown level", rule("level: strict"),
			rejectedWith(`spec.rules[0].podSecurity.level`, `Unsupported value: "strict"`, `"baseline"`)),
		Entry("unknown action", "action: Deny\n"+rule("level: baseline"),
			rejectedWith(`spec.action`, `Unsupported value: "Deny"`, `"Enforce"`, `"Audit"`, `"Warn"`)),
		Entry("values without restrictedField", rule(`
level: baseline
exclude:
- controlName: Capabilities
  values: ["NET_ADMIN"]`),
			rejectedWith(`spec.rules[0].podSecurity.exclude[0]`, "values requires restrictedField")),
		Entry("images on Host Namespaces", rule(`
level: baseline
exclude:
- controlName: Host Namespaces
  images: ["nginx*"]`),
			rejectedWith(`control "Host Namespaces" has only pod-level fields; remove images and containerNames`)),
		Entry("containerNames on Sysctls", rule(`
level: baseline
exclude:
- controlName: Sysctls
  containerNames: ["app"]`),
			rejectedWith(`control "Sysctls" has only pod-level fields`)),
		Entry("images on HostPath Volumes", rule(`
level: baseline
exclude:
- controlName: HostPath Volumes
  images: ["*"]`),
			rejectedWith(`control "HostPath Volumes" has only pod-level fields`)),
		Entry("containerNames on Volume Types", rule(`
level: restricted
exclude:
- controlName: Volume Types
  containerNames: ["*"]`),
			rejectedWith(`control "Volume Types" has only pod-level fields`)),
		Entry("unknown controlName", rule(`
level: baseline
exclude:
- controlName: Privileged`),
			rejectedWith(`spec.rules[0].podSecurity.exclude[0].controlName`, `Unsupported value: "Privileged"`, `"Privileged Containers"`)),
		Entry("restrictedField outside the pod", rule(`
level: baseline
exclude:
- controlName: Capabilities
  restrictedField: containers[*].securityContext.capabilities.add`),
			rejectedWith("restrictedField is a pod field path starting with spec. or metadata.")),
		Entry("character class in an image glob", rule(`
level: baseline
exclude:
- controlName: Capabilities
  images: ["nginx[0-9]"]`),
			rejectedWith(`spec.rules[0].podSecurity.exclude[0].images[0]`, `Invalid value: "nginx[0-9]"`, "should match")),
		Entry("escape in a values glob", rule(`
level: baseline
exclude:
- controlName: Capabilities
  restrictedField: spec.containers[*].securityContext.capabilities.add
  values: ["NET\\_ADMIN"]`),
			rejectedWith(`spec.rules[0].podSecurity.exclude[0].values[0]`, "should match")),
		Entry("empty image glob", rule(`
level: baseline
exclude:
- controlName: Capabilities
  images: [""]`),
			rejectedWith(`spec.rules[0].podSecurity.exclude[0].images[0]`, "at least 1 chars long")),
		Entry("duplicate rule names", `
rules:
- name: same
  podSecurity: {level: baseline}
- name: same
  podSecurity: {level: restricted}`,
			rejectedWith(`spec.rules[1]`, "Duplicate value")),
		Entry("no rules", "rules: []", rejectedWith(`spec.rules`, "should have at least 1 items")),
		Entry("rule name with capitals", `
rules:
- name: Baseline
  podSecurity: {level: baseline}`,
			rejectedWith(`spec.rules[0].name`, "should match")),
		Entry("65 rules", manyRules(65), rejectedWith(`spec.rules`, "must have at most 64 items")),
		Entry("64 rules", manyRules(64), accepted()),
		Entry("unknown field", rule("level: baseline\nlevle: restricted"),
			rejectedWith(`unknown field "spec.rules[0].podSecurity.levle"`)),
		Entry("guardrails", `
exceptions:
  allow: true
  allowedControls: ["Capabilities", "Host Ports"]
  maxDuration: 2160h
  requireJustification: true
`+rule("level: baseline"), accepted()),
		Entry("maxDuration in days", "exceptions:\n  maxDuration: 90d\n"+rule("level: baseline"),
			rejectedWith(`spec.exceptions.maxDuration`, "should match")),
		Entry("maxDuration zero", "exceptions:\n  maxDuration: 0s\n"+rule("level: baseline"),
			rejectedWith(`maxDuration must be a positive duration such as "720h"`)),
		Entry("allowedControls repeated", "exceptions:\n  allowedControls: [Capabilities, Capabilities]\n"+rule("level: baseline"),
			rejectedWith(`spec.exceptions.allowedControls[1]`, "Duplicate value")),
		Entry("allowedControls unknown", "exceptions:\n  allowedControls: [Everything]\n"+rule("level: baseline"),
			rejectedWith(`spec.exceptions.allowedControls[0]`, `Unsupported value: "Everything"`)),
	)

	It("defaults action, background and version", func() {
		u, err := create("SecurityPolicy", "", rule("level: baseline"))
		Expect(err).NotTo(HaveOccurred())
		var sp policyv1alpha1.SecurityPolicy
		Expect(k8s.Get(ctx, client.ObjectKeyFromObject(u), &sp)).To(Succeed())
		Expect(sp.Spec.Action).To(Equal(policyv1alpha1.ActionEnforce))
		Expect(sp.Spec.Background).To(HaveValue(BeTrue()))
		Expect(sp.Spec.Rules[0].PodSecurity.Version).To(Equal(policyv1alpha1.VersionLatest))
	})

	It("is cluster-scoped", func() {
		sp := &policyv1alpha1.SecurityPolicy{
			ObjectMeta: metav1.ObjectMeta{Name: "scoped"},
			Spec: policyv1alpha1.SecurityPolicySpec{Rules: []policyv1alpha1.PolicyRule{{
				Name: "r", PodSecurity: policyv1alpha1.PodSecurity{Level: policyv1alpha1.LevelBaseline},
			}}},
		}
		Expect(k8s.Create(ctx, sp)).To(Succeed())
		Expect(sp.Namespace).To(BeEmpty())
	})
})

func manyRules(n int) string {
	var b strings.Builder
	b.WriteString("rules:\n")
	for i := range n {
		fmt.Fprintf(&b, "- name: r%d\n  podSecurity: {level: baseline}\n", i)
	}
	return b.String()
}

var _ = Describe("PolicyException schema", func() {
	var ns string
	BeforeEach(func() {
		n := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "polex-"}}
		Expect(k8s.Create(ctx, n)).To(Succeed())
		ns = n.Name
	})

	const target = "exceptions:\n- policyName: pod-security-standards\n  ruleNames: [\"*\"]\n"

	DescribeTable("validation",
		func(spec string, want expectation) {
			_, err := create("PolicyException", ns, spec)
			check(err, want)
		},
		Entry("whole-rule waiver", target, accepted()),
		Entry("istio-init exception", target+`
match:
  names: ["web-*"]
  selector: {matchLabels: {app: web}}
  kinds: ["Pod", "Deployment"]
podSecurity:
- controlName: Capabilities
  images: ["*/istio/proxyv2*"]
  containerNames: ["istio-init"]
  restrictedField: spec.initContainers[*].securityContext.capabilities.add
  values: ["NET_ADMIN", "NET_RAW"]
justification: "Istio sidecar injection, ticket SEC-123"
expiresAt: "2027-03-01T00:00:00Z"
background: true`, accepted()),
		Entry("no exceptions", "exceptions: []", rejectedWith(`spec.exceptions`, "should have at least 1 items")),
		Entry("no policyName", "exceptions:\n- ruleNames: [r]", rejectedWith(`spec.exceptions[0].policyName`, "Required value")),
		Entry("no ruleNames", "exceptions:\n- policyName: p", rejectedWith(`spec.exceptions[0].ruleNames`, "Required value")),
		Entry("empty ruleNames", "exceptions:\n- policyName: p\n  ruleNames: []",
			rejectedWith(`spec.exceptions[0].ruleNames`, "should have at least 1 items")),
		Entry("17 targets", "exceptions:\n"+strings.Repeat("- policyName: p\n  ruleNames: [r]\n", 17),
			rejectedWith(`spec.exceptions`, "must have at most 16 items")),
		Entry("unknown kind", target+"match:\n  kinds: [Service]",
			rejectedWith(`spec.match.kinds[0]`, `Unsupported value: "Service"`, `"Deployment"`)),
		Entry("values without restrictedField", target+`
podSecurity:
- controlName: Capabilities
  values: ["NET_ADMIN"]`, rejectedWith(`spec.podSecurity[0]`, "values requires restrictedField")),
		Entry("images on Host Namespaces", target+`
podSecurity:
- controlName: Host Namespaces
  images: ["*"]`, rejectedWith(`control "Host Namespaces" has only pod-level fields`)),
		Entry("unknown controlName", target+"podSecurity:\n- controlName: NET_ADMIN",
			rejectedWith(`spec.podSecurity[0].controlName`, `Unsupported value: "NET_ADMIN"`)),
		Entry("expiresAt not a timestamp", target+"expiresAt: next-friday",
			rejectedWith(`spec.expiresAt`)),
		Entry("justification over 1024 characters", target+"justification: "+strings.Repeat("x", 1025),
			rejectedWith(`spec.justification`, "Too long")),
		Entry("glob with a character class in names", target+"match:\n  names: [\"web-[ab]\"]",
			rejectedWith(`spec.match.names[0]`, "should match")),
		Entry("unknown field", target+"podSecurityy: []", rejectedWith(`unknown field "spec.podSecurityy"`)),
	)

	It("defaults background to true", func() {
		u, err := create("PolicyException", ns, target)
		Expect(err).NotTo(HaveOccurred())
		var pe policyv1alpha1.PolicyException
		Expect(k8s.Get(ctx, client.ObjectKeyFromObject(u), &pe)).To(Succeed())
		Expect(pe.Spec.Background).To(HaveValue(BeTrue()))
	})
})
