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

// reporting is a minimal valid SecurityPolicy spec whose one rule also
// has fields (YAML, indented by two spaces after the first line).
func reporting(fields string) string {
	return "rules:\n- name: r\n  podSecurity: {level: baseline}\n  " + fields + "\n"
}

// globs is a YAML flow list of n distinct globs, each made from format with
// its index.
func globs(format string, n int) string {
	items := make([]string, n)
	for i := range items {
		items[i] = fmt.Sprintf("%q", fmt.Sprintf(format, i))
	}
	return "[" + strings.Join(items, ", ") + "]"
}

// long is an image glob or value of exactly n characters.
func long(n int) string { return "registry.example/" + strings.Repeat("a", n-len("registry.example/")) }

// capabilities is one Capabilities exclusion entry, with field: value lines
// (already indented by two spaces) appended.
func capabilities(fields ...string) string {
	return "- controlName: Capabilities\n  restrictedField: spec.containers[*].securityContext.capabilities.add\n" + strings.Join(fields, "")
}

// guardrails wraps spec.exceptions around a minimal valid SecurityPolicy spec.
func guardrails(exceptions string) string {
	return "exceptions:\n" + indent(exceptions, "  ") + rule("level: baseline")
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
			rejectedWith(`control "Host Namespaces" has only pod-level fields; remove them from this entry`)),
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

		// Explicitly empty lists are refused: each would match nothing,
		// which is never what an admin who wrote the field meant.
		Entry("empty images in an exclusion", rule("level: baseline\nexclude:\n"+capabilities("  images: []\n")),
			rejectedWith(`spec.rules[0].podSecurity.exclude[0].images`, "images: an empty list would match no image; remove the field to mean any image")),
		Entry("empty containerNames in an exclusion", rule("level: baseline\nexclude:\n"+capabilities("  containerNames: []\n")),
			rejectedWith(`spec.rules[0].podSecurity.exclude[0].containerNames`, "containerNames: an empty list would match no container; remove the field to mean any container")),
		Entry("empty containerKinds in an exclusion", rule("level: baseline\nexclude:\n"+capabilities("  containerKinds: []\n")),
			rejectedWith(`spec.rules[0].podSecurity.exclude[0].containerKinds`, "containerKinds: an empty list would match no container; remove the field to mean every kind")),
		Entry("containerKinds", rule("level: baseline\nexclude:\n"+capabilities("  containerKinds: [Init, Sidecar]\n")), accepted()),
		Entry("an unknown containerKind", rule("level: baseline\nexclude:\n"+capabilities("  containerKinds: [Job]\n")),
			rejectedWith(`spec.rules[0].podSecurity.exclude[0].containerKinds[0]`, `Unsupported value: "Job"`)),
		Entry("a containerKind twice", rule("level: baseline\nexclude:\n"+capabilities("  containerKinds: [Init, Init]\n")),
			rejectedWith(`spec.rules[0].podSecurity.exclude[0].containerKinds[1]`, "Duplicate value")),
		Entry("containerKinds on a pod-level control", rule("level: baseline\nexclude:\n- controlName: Host Namespaces\n  containerKinds: [App]\n"),
			rejectedWith(`images, containerNames and containerKinds select containers, but control "Host Namespaces" has only pod-level fields`)),
		Entry("empty values in an exclusion", rule("level: baseline\nexclude:\n"+capabilities("  values: []\n")),
			rejectedWith(`spec.rules[0].podSecurity.exclude[0].values`, "values: an empty list would match no value; remove the field to mean any value")),
		Entry("exemptions in exclude", "rules:\n- name: r\n  exclude: {runtimeClassNames: [gvisor], usernames: [\"system:serviceaccount:ci:builder\"]}\n  podSecurity: {level: baseline}\n",
			accepted()),
		Entry("runtimeClassNames in match", "rules:\n- name: r\n  match: {runtimeClassNames: [gvisor]}\n  podSecurity: {level: baseline}\n",
			rejectedWith(`spec.rules[0].match`, "runtimeClassNames and usernames exempt: write them in exclude, not match")),
		Entry("empty exclude.usernames", "rules:\n- name: r\n  exclude: {usernames: []}\n  podSecurity: {level: baseline}\n",
			rejectedWith(`spec.rules[0].exclude.usernames`, "usernames: an empty list would exempt nobody; remove the field")),
		Entry("empty exclude.runtimeClassNames", "rules:\n- name: r\n  exclude: {runtimeClassNames: []}\n  podSecurity: {level: baseline}\n",
			rejectedWith(`spec.rules[0].exclude.runtimeClassNames`, "runtimeClassNames: an empty list would exempt nothing; remove the field")),
		Entry("empty rule match.namespaces", "rules:\n- name: r\n  match: {namespaces: []}\n  podSecurity: {level: baseline}\n",
			rejectedWith(`spec.rules[0].match.namespaces`, "namespaces: an empty list would match no namespace; remove the field to mean any namespace")),
		Entry("empty rule exclude.namespaces", "rules:\n- name: r\n  exclude: {namespaces: []}\n  podSecurity: {level: baseline}\n",
			rejectedWith(`spec.rules[0].exclude.namespaces`, "namespaces: an empty list would match no namespace; remove the field to mean any namespace")),

		// Severity and category (reported, never admitted).
		Entry("severity, category and controlSeverities", reporting("severity: high\n  category: Host Isolation (CIS 5.2)\n  controlSeverities:\n  - {controlName: Privileged Containers, severity: critical, category: Privilege}\n  - {controlName: Host Namespaces, severity: critical}\n  - {controlName: Seccomp, severity: info}"),
			accepted()),
		Entry("every severity", reporting("controlSeverities: [{controlName: HostProcess, severity: critical}, {controlName: Capabilities, severity: high}, {controlName: Seccomp, severity: medium}, {controlName: Sysctls, severity: low}, {controlName: AppArmor, severity: info}]"),
			accepted()),
		Entry("a severity that is not one", reporting("severity: urgent"),
			rejectedWith(`spec.rules[0].severity`, `Unsupported value: "urgent"`)),
		Entry("a severity in capitals", reporting("severity: Critical"),
			rejectedWith(`spec.rules[0].severity`, `Unsupported value: "Critical"`)),
		Entry("an empty category", reporting(`category: ""`),
			rejectedWith(`spec.rules[0].category`, "at least 1 chars long")),
		Entry("a 65-character category", reporting("category: "+strings.Repeat("c", 65)),
			rejectedWith(`spec.rules[0].category`, "Too long", "64")),
		Entry("a 64-character category", reporting("category: "+strings.Repeat("c", 64)), accepted()),
		Entry("a category with a newline", reporting(`category: "Host\nIsolation"`),
			rejectedWith(`spec.rules[0].category`, "should match")),
		Entry("a category ending in a space", reporting(`category: "Host "`),
			rejectedWith(`spec.rules[0].category`, "should match")),
		Entry("empty controlSeverities", reporting("controlSeverities: []"),
			rejectedWith(`spec.rules[0].controlSeverities`, "controlSeverities: an empty list sets nothing; remove the field, or list the controls whose severity to set")),
		Entry("a control that is not one", reporting("controlSeverities: [{controlName: Privileged, severity: critical}]"),
			rejectedWith(`spec.rules[0].controlSeverities[0].controlName`, `Unsupported value: "Privileged"`)),
		Entry("a control twice", reporting("controlSeverities: [{controlName: Seccomp, severity: low}, {controlName: Seccomp, severity: high}]"),
			rejectedWith(`spec.rules[0].controlSeverities[1]`, "Duplicate value")),
		Entry("a control without a severity", reporting("controlSeverities: [{controlName: Seccomp}]"),
			rejectedWith(`spec.rules[0].controlSeverities[0].severity`, "Required value")),
		Entry("a control's severity that is not one", reporting("controlSeverities: [{controlName: Seccomp, severity: none}]"),
			rejectedWith(`spec.rules[0].controlSeverities[0].severity`, `Unsupported value: "none"`)),
		Entry("a control's category that is not one", reporting(`controlSeverities: [{controlName: Seccomp, severity: low, category: "-x"}]`),
			rejectedWith(`spec.rules[0].controlSeverities[0].category`, "should match")),

		// Per-entry limits.
		Entry("9 images in an exclusion", rule("level: baseline\nexclude:\n"+capabilities("  images: "+globs("registry.example/app-%d:*", 9)+"\n")),
			rejectedWith(`spec.rules[0].podSecurity.exclude[0].images`, "must have at most 8 items")),
		Entry("8 images in an exclusion", rule("level: baseline\nexclude:\n"+capabilities("  images: "+globs("registry.example/app-%d:*", 8)+"\n")), accepted()),
		Entry("257-character image glob", rule("level: baseline\nexclude:\n"+capabilities("  images: [\""+long(257)+"\"]\n")),
			rejectedWith(`spec.rules[0].podSecurity.exclude[0].images[0]`, "Too long", "256")),
		Entry("256-character image glob", rule("level: baseline\nexclude:\n"+capabilities("  images: [\""+long(256)+"\"]\n")), accepted()),
		Entry("9 containerNames in an exclusion", rule("level: baseline\nexclude:\n"+capabilities("  containerNames: "+globs("init-%d", 9)+"\n")),
			rejectedWith(`spec.rules[0].podSecurity.exclude[0].containerNames`, "must have at most 8 items")),
		Entry("64-character containerName", rule("level: baseline\nexclude:\n"+capabilities("  containerNames: [\""+strings.Repeat("c", 64)+"\"]\n")),
			rejectedWith(`spec.rules[0].podSecurity.exclude[0].containerNames[0]`, "Too long", "63")),
		Entry("63-character containerName", rule("level: baseline\nexclude:\n"+capabilities("  containerNames: [\""+strings.Repeat("c", 63)+"\"]\n")), accepted()),
		Entry("17 values in an exclusion", rule("level: baseline\nexclude:\n"+capabilities("  values: "+globs("CAP_%d", 17)+"\n")),
			rejectedWith(`spec.rules[0].podSecurity.exclude[0].values`, "must have at most 16 items")),
		Entry("257-character value", rule("level: baseline\nexclude:\n"+capabilities("  values: [\""+long(257)+"\"]\n")),
			rejectedWith(`spec.rules[0].podSecurity.exclude[0].values[0]`, "Too long", "256")),

		// Opting in to exceptions, and the per-control guardrails.
		Entry("exceptions: {} opts in for every control", "exceptions: {}\n"+rule("level: baseline"), accepted()),
		Entry("allowedControls: [] allows no control", guardrails("allowedControls: []"), accepted()),
		Entry("per-control guardrails", guardrails(`allowedControls: ["Capabilities", "Host Ports", "HostPath Volumes"]
controls:
- controlName: Capabilities
  allowedValues: ["NET_ADMIN", "NET_RAW"]
  requireImages: true
  requireContainerNames: true
  requirePinnedRegistry: true
- controlName: HostPath Volumes
  allowedValues: ["/var/log/**"]`), accepted()),
		Entry("controls without allowedControls", guardrails("controls: [{controlName: Host Ports, allowedValues: [\"9100\"]}]"), accepted()),
		Entry("empty controls", guardrails("controls: []"),
			rejectedWith(`spec.exceptions.controls`, "controls: an empty list bounds nothing; remove the field, or list the controls to bound")),
		Entry("controls[].controlName not in allowedControls", guardrails("allowedControls: [Capabilities]\ncontrols: [{controlName: Host Ports, allowedValues: [\"9100\"]}]"),
			rejectedWith(`spec.exceptions`, "controls: every controlName must also be listed in allowedControls, which no exception may go beyond")),
		Entry("controls[].controlName with allowedControls: []", guardrails("allowedControls: []\ncontrols: [{controlName: Capabilities, requireImages: true}]"),
			rejectedWith(`spec.exceptions`, "controls: every controlName must also be listed in allowedControls")),
		Entry("controls repeated", guardrails("controls: [{controlName: Capabilities, requireImages: true}, {controlName: Capabilities, requireContainerNames: true}]"),
			rejectedWith(`spec.exceptions.controls[1]`, "Duplicate value")),
		Entry("controls[].controlName unknown", guardrails("controls: [{controlName: Everything, requireImages: true}]"),
			rejectedWith(`spec.exceptions.controls[0].controlName`, `Unsupported value: "Everything"`)),
		Entry("controls[].controlName missing", guardrails("controls: [{requireImages: true}]"),
			rejectedWith(`spec.exceptions.controls[0].controlName`, "Required value")),
		Entry("empty allowedValues", guardrails("controls: [{controlName: Capabilities, allowedValues: []}]"),
			rejectedWith(`spec.exceptions.controls[0].allowedValues`, "allowedValues: an empty list would allow no value; remove the control from allowedControls to allow none, or remove the field to allow any")),
		Entry("allowedValues on Volume Types", guardrails("controls: [{controlName: Volume Types, allowedValues: [data]}]"),
			rejectedWith(`spec.exceptions.controls[0]`, "allowedValues: the values of Volume Types are volume names, which the workload chooses, so they bound nothing")),
		Entry("allowedFields on Volume Types", guardrails("controls: [{controlName: Volume Types, allowedFields: [\"spec.volumes[*].nfs\"]}]"), accepted()),
		Entry("empty allowedFields", guardrails("controls: [{controlName: Host Namespaces, allowedFields: []}]"),
			rejectedWith(`spec.exceptions.controls[0].allowedFields`, "allowedFields: an empty list would allow no field")),
		Entry("33 allowedValues", guardrails("controls: [{controlName: Capabilities, allowedValues: "+globs("CAP_%d", 33)+"}]"),
			rejectedWith(`spec.exceptions.controls[0].allowedValues`, "must have at most 32 items")),
		Entry("257-character allowedValue", guardrails("controls: [{controlName: HostPath Volumes, allowedValues: [\"/"+strings.Repeat("v", 256)+"\"]}]"),
			rejectedWith(`spec.exceptions.controls[0].allowedValues[0]`, "Too long", "256")),
		Entry("character class in allowedValues", guardrails("controls: [{controlName: Host Ports, allowedValues: [\"91[0-9]0\"]}]"),
			rejectedWith(`spec.exceptions.controls[0].allowedValues[0]`, "should match")),

		// allowedRegistries and allowedContainerKinds.
		Entry("allowedRegistries and allowedContainerKinds", guardrails(`controls:
- controlName: Capabilities
  allowedValues: ["NET_ADMIN", "NET_RAW"]
  allowedRegistries: ["docker.io", "gcr.io/istio-release", "registry.local:5000/mesh", "localhost", "registry:5000", "index.docker.io/kumahq", "docker.io/library", "quay.io/a__b/c--d.e"]
  allowedContainerKinds: [Init]`), accepted()),
		Entry("empty allowedRegistries", guardrails("controls: [{controlName: Capabilities, allowedRegistries: []}]"),
			rejectedWith(`spec.exceptions.controls[0].allowedRegistries`, "allowedRegistries: an empty list would allow no image; remove the control from allowedControls to allow none, or remove the field to allow any registry")),
		Entry("a wildcard in allowedRegistries", guardrails(`controls: [{controlName: Capabilities, allowedRegistries: ["docker.io", "*.gcr.io"]}]`),
			rejectedWith(`spec.exceptions.controls[0].allowedRegistries`, `allowedRegistries: each is a lowercase registry host (with a "." or a port, or localhost), optionally followed by a path prefix`)),
		Entry("a wildcard in an allowedRegistries path", guardrails(`controls: [{controlName: Capabilities, allowedRegistries: ["gcr.io/istio-*"]}]`),
			rejectedWith(`spec.exceptions.controls[0].allowedRegistries`, "allowedRegistries: each is a lowercase registry host")),
		Entry("an allowedRegistries entry without a host", guardrails(`controls: [{controlName: Capabilities, allowedRegistries: ["istio"]}]`),
			rejectedWith(`spec.exceptions.controls[0].allowedRegistries`, "allowedRegistries: each is a lowercase registry host")),
		Entry("an allowedRegistries entry with a trailing slash", guardrails(`controls: [{controlName: Capabilities, allowedRegistries: ["gcr.io/istio-release/"]}]`),
			rejectedWith(`spec.exceptions.controls[0].allowedRegistries`, "allowedRegistries: each is a lowercase registry host")),
		Entry("an allowedRegistries entry with a scheme", guardrails(`controls: [{controlName: Capabilities, allowedRegistries: ["https://gcr.io"]}]`),
			rejectedWith(`spec.exceptions.controls[0].allowedRegistries`, "allowedRegistries: each is a lowercase registry host")),
		Entry("an uppercase allowedRegistries entry", guardrails(`controls: [{controlName: Capabilities, allowedRegistries: ["GCR.io"]}]`),
			rejectedWith(`spec.exceptions.controls[0].allowedRegistries`, "allowedRegistries: each is a lowercase registry host")),
		Entry("an allowedRegistries entry with a tag", guardrails(`controls: [{controlName: Capabilities, allowedRegistries: ["gcr.io/istio-release/proxyv2:1.24"]}]`),
			rejectedWith(`spec.exceptions.controls[0].allowedRegistries`, "allowedRegistries: each is a lowercase registry host")),
		Entry("an allowedRegistries entry twice", guardrails(`controls: [{controlName: Capabilities, allowedRegistries: ["docker.io", "docker.io"]}]`),
			rejectedWith(`spec.exceptions.controls[0].allowedRegistries[1]`, "Duplicate value")),
		Entry("17 allowedRegistries", guardrails("controls: [{controlName: Capabilities, allowedRegistries: "+globs("registry-%d.example", 17)+"}]"),
			rejectedWith(`spec.exceptions.controls[0].allowedRegistries`, "must have at most 16 items")),
		Entry("256-character allowedRegistries entry", guardrails("controls: [{controlName: Capabilities, allowedRegistries: [\""+long(256)+"\"]}]"),
			rejectedWith(`spec.exceptions.controls[0].allowedRegistries[0]`, "Too long", "255")),
		Entry("allowedRegistries on a pod-level control", guardrails("controls: [{controlName: HostPath Volumes, allowedRegistries: [docker.io]}]"),
			rejectedWith(`spec.exceptions.controls[0]`, `allowedRegistries and allowedContainerKinds bound the images and containers of entries, but control "HostPath Volumes" has only pod-level fields`)),
		Entry("empty allowedContainerKinds", guardrails("controls: [{controlName: Capabilities, allowedContainerKinds: []}]"),
			rejectedWith(`spec.exceptions.controls[0].allowedContainerKinds`, "allowedContainerKinds: an empty list would allow no container; remove the control from allowedControls to allow none, or remove the field to allow every kind")),
		Entry("an unknown allowedContainerKind", guardrails("controls: [{controlName: Capabilities, allowedContainerKinds: [Job]}]"),
			rejectedWith(`spec.exceptions.controls[0].allowedContainerKinds[0]`, `Unsupported value: "Job"`)),
		Entry("an allowedContainerKind twice", guardrails("controls: [{controlName: Capabilities, allowedContainerKinds: [Init, Init]}]"),
			rejectedWith(`spec.exceptions.controls[0].allowedContainerKinds[1]`, "Duplicate value")),
		Entry("allowedContainerKinds on a pod-level control", guardrails("controls: [{controlName: Sysctls, allowedContainerKinds: [Init]}]"),
			rejectedWith(`spec.exceptions.controls[0]`, `control "Sysctls" has only pod-level fields`)),
	)

	// omitzero on allowedControls: an empty list is sent, stored and read
	// back as [] (no control may be waived), and an unset one stays unset
	// (any control), through the typed client as through raw YAML.
	It("keeps allowedControls: [] apart from unset", func() {
		u, err := create("SecurityPolicy", "", guardrails("allowedControls: []"))
		Expect(err).NotTo(HaveOccurred())
		var raw unstructured.Unstructured
		raw.SetGroupVersionKind(u.GroupVersionKind())
		Expect(k8s.Get(ctx, client.ObjectKeyFromObject(u), &raw)).To(Succeed())
		allowed, found, err := unstructured.NestedSlice(raw.Object, "spec", "exceptions", "allowedControls")
		Expect(err).NotTo(HaveOccurred())
		Expect(found).To(BeTrue(), "the API server dropped allowedControls: []")
		Expect(allowed).To(BeEmpty())
		var sp policyv1alpha1.SecurityPolicy
		Expect(k8s.Get(ctx, client.ObjectKeyFromObject(u), &sp)).To(Succeed())
		Expect(sp.Spec.Exceptions).NotTo(BeNil())
		Expect(sp.Spec.Exceptions.AllowedControls).NotTo(BeNil(), "allowedControls: [] read back as unset")
		Expect(sp.Spec.Exceptions.AllowedControls).To(BeEmpty())

		typed := &policyv1alpha1.SecurityPolicy{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("case-%d", seq.Add(1))},
			Spec: policyv1alpha1.SecurityPolicySpec{
				Rules:      []policyv1alpha1.PolicyRule{{Name: "r", PodSecurity: policyv1alpha1.PodSecurity{Level: policyv1alpha1.LevelBaseline}}},
				Exceptions: &policyv1alpha1.ExceptionGuardrails{AllowedControls: []policyv1alpha1.ControlName{}},
			},
		}
		Expect(k8s.Create(ctx, typed)).To(Succeed())
		var back policyv1alpha1.SecurityPolicy
		Expect(k8s.Get(ctx, client.ObjectKeyFromObject(typed), &back)).To(Succeed())
		Expect(back.Spec.Exceptions.AllowedControls).NotTo(BeNil(), "an empty allowedControls written by a Go client read back as unset")
		Expect(back.Spec.Exceptions.AllowedControls).To(BeEmpty())

		u, err = create("SecurityPolicy", "", "exceptions: {}\n"+rule("level: baseline"))
		Expect(err).NotTo(HaveOccurred())
		var unset policyv1alpha1.SecurityPolicy
		Expect(k8s.Get(ctx, client.ObjectKeyFromObject(u), &unset)).To(Succeed())
		Expect(unset.Spec.Exceptions).NotTo(BeNil(), "exceptions: {} read back as unset: the policy would no longer opt in")
		Expect(unset.Spec.Exceptions.AllowedControls).To(BeNil())
	})

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
		n := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "podex-"}}
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
		Entry("9 targets", "exceptions:\n"+strings.Repeat("- policyName: p\n  ruleNames: [r]\n", 9),
			rejectedWith(`spec.exceptions`, "must have at most 8 items")),
		Entry("8 targets", "exceptions:\n"+strings.Repeat("- policyName: p\n  ruleNames: [r]\n", 8), accepted()),
		Entry("9 ruleNames", "exceptions:\n- policyName: p\n  ruleNames: "+globs("r%d", 9),
			rejectedWith(`spec.exceptions[0].ruleNames`, "must have at most 8 items")),
		Entry("8 ruleNames", "exceptions:\n- policyName: p\n  ruleNames: "+globs("r%d", 8), accepted()),

		// Explicitly empty lists are refused.
		Entry("empty podSecurity", target+"podSecurity: []",
			rejectedWith(`spec.podSecurity`, "podSecurity: an empty list is ambiguous; remove the field to waive the named rules entirely, or list the violations to waive")),
		Entry("empty match.names", target+"match: {names: []}",
			rejectedWith(`spec.match.names`, "names: an empty list would match no object; remove the field to mean any name")),
		Entry("empty match.kinds", target+"match: {kinds: []}",
			rejectedWith(`spec.match.kinds`, "kinds: an empty list would match no object; remove the field to mean any kind")),
		Entry("empty match.namespaces", target+"match: {namespaces: []}",
			rejectedWith(`spec.match.namespaces`, "namespaces: an empty list would match no namespace; remove the field to mean any namespace")),
		Entry("empty images in an entry", target+"podSecurity:\n"+capabilities("  images: []\n"),
			rejectedWith(`spec.podSecurity[0].images`, "images: an empty list would match no image")),
		Entry("empty containerNames in an entry", target+"podSecurity:\n"+capabilities("  containerNames: []\n"),
			rejectedWith(`spec.podSecurity[0].containerNames`, "containerNames: an empty list would match no container")),
		Entry("empty values in an entry", target+"podSecurity:\n"+capabilities("  values: []\n"),
			rejectedWith(`spec.podSecurity[0].values`, "values: an empty list would match no value")),

		// Limits per list and per item.
		Entry("17 podSecurity entries", target+"podSecurity:\n"+strings.Repeat(capabilities(), 17),
			rejectedWith(`spec.podSecurity`, "must have at most 16 items")),
		Entry("16 podSecurity entries", target+"podSecurity:\n"+strings.Repeat(capabilities(), 16), accepted()),
		Entry("17 match.names", target+"match: {names: "+globs("web-%d", 17)+"}",
			rejectedWith(`spec.match.names`, "must have at most 16 items")),
		Entry("17 match.namespaces", target+"match: {namespaces: "+globs("team-%d", 17)+"}",
			rejectedWith(`spec.match.namespaces`, "must have at most 16 items")),
		Entry("16 match.names and namespaces", target+"match: {names: "+globs("web-%d", 16)+", namespaces: "+globs("team-%d", 16)+"}", accepted()),
		Entry("9 images in an entry", target+"podSecurity:\n"+capabilities("  images: "+globs("registry.example/app-%d:*", 9)+"\n"),
			rejectedWith(`spec.podSecurity[0].images`, "must have at most 8 items")),
		Entry("257-character image glob in an entry", target+"podSecurity:\n"+capabilities("  images: [\""+long(257)+"\"]\n"),
			rejectedWith(`spec.podSecurity[0].images[0]`, "Too long", "256")),
		Entry("64-character containerName in an entry", target+"podSecurity:\n"+capabilities("  containerNames: [\""+strings.Repeat("c", 64)+"\"]\n"),
			rejectedWith(`spec.podSecurity[0].containerNames[0]`, "Too long", "63")),
		Entry("257-character value in an entry", target+"podSecurity:\n"+capabilities("  values: [\""+long(257)+"\"]\n"),
			rejectedWith(`spec.podSecurity[0].values[0]`, "Too long", "256")),

		// Totals over all entries (CEL on spec.podSecurity): 8 per entry
		// would otherwise allow 128 image globs in 16 entries.
		Entry("17 image globs across entries", target+"podSecurity:\n"+strings.Repeat(capabilities("  images: "+globs("registry.example/app-%d:*", 8)+"\n"), 2)+
			capabilities("  images: [\"registry.example/one-more:*\"]\n"),
			rejectedWith(`spec.podSecurity`, "podSecurity: at most 16 image globs in all entries together; name fewer images or split the exception")),
		Entry("16 image globs across entries", target+"podSecurity:\n"+strings.Repeat(capabilities("  images: "+globs("registry.example/app-%d:*", 8)+"\n"), 2), accepted()),
		Entry("33 containerNames across entries", target+"podSecurity:\n"+strings.Repeat(capabilities("  containerNames: "+globs("init-%d", 8)+"\n"), 4)+
			capabilities("  containerNames: [one-more]\n"),
			rejectedWith(`spec.podSecurity`, "podSecurity: at most 32 container name globs in all entries together")),
		Entry("32 containerNames across entries", target+"podSecurity:\n"+strings.Repeat(capabilities("  containerNames: "+globs("init-%d", 8)+"\n"), 4), accepted()),
		Entry("65 values across entries", target+"podSecurity:\n"+strings.Repeat(capabilities("  values: "+globs("CAP_%d", 16)+"\n"), 4)+
			capabilities("  values: [ONE_MORE]\n"),
			rejectedWith(`spec.podSecurity`, "podSecurity: at most 64 values in all entries together; waive fewer values or split the exception")),
		Entry("64 values across entries", target+"podSecurity:\n"+strings.Repeat(capabilities("  values: "+globs("CAP_%d", 16)+"\n"), 4), accepted()),
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
