package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// PolicyAction is what podsieve does with a request that violates a rule.
// +kubebuilder:validation:Enum=Enforce;Audit;Warn
type PolicyAction string

const (
	// ActionEnforce refuses the request.
	ActionEnforce PolicyAction = "Enforce"
	// ActionAudit admits the request and records the violations in an audit annotation.
	ActionAudit PolicyAction = "Audit"
	// ActionWarn admits the request and returns one warning per violation.
	ActionWarn PolicyAction = "Warn"
)

// SecurityPolicySpec is the desired enforcement of a SecurityPolicy.
type SecurityPolicySpec struct {
	// action is what happens to a request with a violation that no exclusion
	// or PolicyException covers: Enforce refuses it, Audit and Warn admit it
	// and report the violations.
	// +optional
	// +default="Enforce"
	Action PolicyAction `json:"action,omitempty"`

	// background enables scanning of the objects that already exist.
	// +optional
	// +default=true
	Background *bool `json:"background,omitempty"`

	// rules are evaluated independently; an object must satisfy every rule that
	// matches it. Rule names are unique.
	// +required
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=64
	Rules []PolicyRule `json:"rules"`

	// exceptions opts the policy in to PolicyExceptions and sets the
	// guardrails on what developers may waive with them. Unset, the policy
	// honours no PolicyException: one that names it is NotPermitted.
	// +optional
	Exceptions *ExceptionGuardrails `json:"exceptions,omitempty"`
}

// PolicyRule enforces one Pod Security Standards profile on the objects it matches.
type PolicyRule struct {
	// name identifies the rule within the policy; PolicyExceptions refer to it.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Name string `json:"name"`

	// match selects the objects the rule applies to. Unset matches every
	// pod-bearing object in every namespace. It cannot name
	// runtimeClassNames or usernames, which exempt (in exclude).
	// +optional
	// +kubebuilder:validation:XValidation:rule="!has(self.runtimeClassNames) && !has(self.usernames)",message="runtimeClassNames and usernames exempt: write them in exclude, not match"
	Match *ResourceFilter `json:"match,omitempty"`

	// exclude removes objects from match.
	// +optional
	Exclude *ResourceFilter `json:"exclude,omitempty"`

	// podSecurity is the profile to enforce and the violations to tolerate.
	// +required
	PodSecurity PodSecurity `json:"podSecurity"`

	// severity is how serious the rule's violations are, as PolicyReport
	// results, the background scan's events and podsieve eval -o sarif
	// report them. Unset, a baseline rule's are high (known privilege
	// escalations) and the others' medium (missing hardening). It changes
	// what is reported, never what is admitted.
	// +optional
	Severity *Severity `json:"severity,omitempty"`

	// category is the PolicyReport category of the rule's results, which
	// Policy Reporter groups by, for example "Host Isolation". Unset, it
	// names the standard and level: "Pod Security Standards (Baseline)".
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9(]([-A-Za-z0-9 ._/()&:,+]*[A-Za-z0-9.)])?$`
	Category *string `json:"category,omitempty"`

	// controlSeverities set the severity, and optionally the category, of
	// the violations of single controls of this rule, over the rule's own:
	// for example Privileged Containers and Host Namespaces as critical. A
	// result that reports violations of several controls takes the highest
	// of their severities, and the category of the control that gave it
	// (docs/background.md).
	// +optional
	// +listType=map
	// +listMapKey=controlName
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:XValidation:rule="size(self) > 0",message="controlSeverities: an empty list sets nothing; remove the field, or list the controls whose severity to set"
	ControlSeverities []ControlSeverity `json:"controlSeverities,omitempty"`
}

// Severity is how serious a violation is, in the words of the PolicyReport
// API (wgpolicyk8s.io): critical, high, medium, low or info.
// +kubebuilder:validation:Enum=critical;high;medium;low;info
type Severity string

// The severities.
const (
	SeverityCritical Severity = "critical"
	SeverityHigh     Severity = "high"
	SeverityMedium   Severity = "medium"
	SeverityLow      Severity = "low"
	SeverityInfo     Severity = "info"
)

// Severities lists every severity, the most serious first.
var Severities = []Severity{SeverityCritical, SeverityHigh, SeverityMedium, SeverityLow, SeverityInfo}

// ControlSeverity sets how serious the violations of one control are.
type ControlSeverity struct {
	// controlName is the Pod Security Standards control, for example
	// "Privileged Containers".
	// +required
	ControlName ControlName `json:"controlName"`

	// severity is the severity of the control's violations under this rule.
	// +required
	Severity Severity `json:"severity"`

	// category is the category of the control's violations under this rule,
	// and so of a result whose severity this control gives. Unset, the
	// rule's category.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9(]([-A-Za-z0-9 ._/()&:,+]*[A-Za-z0-9.)])?$`
	Category *string `json:"category,omitempty"`
}

// ResourceFilter selects objects by namespace and labels. Every field that is
// set must match; an empty filter matches everything.
type ResourceFilter struct {
	// namespaces are globs on the object's namespace name.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:XValidation:rule="size(self) > 0",message="namespaces: an empty list would match no namespace; remove the field to mean any namespace"
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=253
	// +kubebuilder:validation:items:Pattern=`^[^\x5b\x5d\x5c]*$`
	Namespaces []string `json:"namespaces,omitempty"`

	// namespaceSelector matches the labels of the object's Namespace.
	// +optional
	NamespaceSelector *metav1.LabelSelector `json:"namespaceSelector,omitempty"`

	// selector matches the object's labels (for a pod controller, the labels
	// of its pod template).
	// +optional
	Selector *metav1.LabelSelector `json:"selector,omitempty"`

	// runtimeClassNames exempt, in a rule's exclude only, pods (and pod
	// templates) whose spec.runtimeClassName is one of these names, as Pod
	// Security Admission's runtimeClasses exemption does: for sandboxed
	// runtimes such as gVisor or Kata. With usernames, either one exempts;
	// with the other fields of exclude, they must match as well.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:XValidation:rule="size(self) > 0",message="runtimeClassNames: an empty list would exempt nothing; remove the field"
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=253
	RuntimeClassNames []string `json:"runtimeClassNames,omitempty"`

	// usernames exempt, in a rule's exclude only, requests by these
	// authenticated users (exact names, such as
	// system:serviceaccount:ci:image-builder), as Pod Security Admission's
	// usernames exemption does. Never a controller's or a node's user: that
	// would exempt every pod it creates for anyone. Admission only: the
	// background scan and podsieve eval have no requester, so they judge the
	// objects these users created.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:XValidation:rule="size(self) > 0",message="usernames: an empty list would exempt nobody; remove the field"
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=256
	Usernames []string `json:"usernames,omitempty"`
}

// ExceptionGuardrails limit what PolicyExceptions may waive in a policy.
// +kubebuilder:validation:XValidation:rule="!has(self.controls) || !has(self.allowedControls) || self.controls.all(c, c.controlName in self.allowedControls)",message="controls: every controlName must also be listed in allowedControls, which no exception may go beyond"
type ExceptionGuardrails struct {
	// allow is false to honour no PolicyException for this policy.
	// +optional
	// +default=true
	Allow *bool `json:"allow,omitempty"`

	// allowedControls, when set, are the only controls an exception may name;
	// an empty list allows none. Unset allows every control. An exception
	// with an empty podSecurity waives every control and is refused when
	// allowedControls is set.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=16
	AllowedControls []ControlName `json:"allowedControls,omitzero"`

	// controls bound how much an exception may waive of each control: which
	// values, and whether each entry must name images (with a pinned
	// registry) and containers. A control without an entry here is bounded
	// only by allowedControls.
	// +optional
	// +listType=map
	// +listMapKey=controlName
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:XValidation:rule="size(self) > 0",message="controls: an empty list bounds nothing; remove the field, or list the controls to bound"
	Controls []ControlGuardrail `json:"controls,omitempty"`

	// maxDuration, when set, requires exceptions to set expiresAt no later
	// than this duration after their creation, for example "2160h" (90 days).
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$`
	// +kubebuilder:validation:XValidation:rule="duration(self) > duration('0s')",message="maxDuration must be a positive duration such as \"720h\""
	MaxDuration *metav1.Duration `json:"maxDuration,omitempty"`

	// requireJustification refuses exceptions without a justification.
	// +optional
	RequireJustification *bool `json:"requireJustification,omitempty"`

	// clusterExceptionsOnly honours, when true, only PolicyExceptions in the
	// cluster exceptions namespace (the manager's --exceptions-namespace,
	// its own namespace by default), which cluster admins write and which reach other namespaces with
	// match.namespaces: an exception in any other namespace is NotPermitted,
	// whatever it waives. For a policy whose guardrails must permit what no
	// namespace editor should get, such as the host access of a CNI plugin's
	// DaemonSet.
	// +optional
	ClusterExceptionsOnly *bool `json:"clusterExceptionsOnly,omitempty"`
}

// ControlGuardrail bounds the PolicyException entries of one control. Every
// entry of an exception that names the control must satisfy every field set
// here; otherwise the exception is NotPermitted.
// +kubebuilder:validation:XValidation:rule="!(self.controlName == 'Volume Types' && has(self.allowedValues))",message="allowedValues: the values of Volume Types are volume names, which the workload chooses, so they bound nothing; bound the volume types with allowedFields, for example spec.volumes[*].nfs"
// +kubebuilder:validation:XValidation:rule="!(self.controlName in ['Host Namespaces', 'HostPath Volumes', 'Sysctls', 'Volume Types']) || (!has(self.allowedRegistries) && !has(self.allowedContainerKinds))",messageExpression="'allowedRegistries and allowedContainerKinds bound the images and containers of entries, but control \"' + self.controlName + '\" has only pod-level fields, whose entries name neither; remove them'"
type ControlGuardrail struct {
	// controlName is the control these limits apply to.
	// +required
	ControlName ControlName `json:"controlName"`

	// allowedValues are globs that every value an entry waives must fall
	// within: a literal value matched by one of them, or a glob identical to
	// one of them. When set, every entry of the control must list values
	// (an entry without values would waive any value), so a missing required
	// setting, which has no value, cannot be waived. For example
	// Capabilities: ["NET_ADMIN", "NET_RAW"]; Host Ports: ["9100"];
	// HostPath Volumes: ["/var/log/**"].
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:XValidation:rule="size(self) > 0",message="allowedValues: an empty list would allow no value; remove the control from allowedControls to allow none, or remove the field to allow any"
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=256
	// +kubebuilder:validation:items:Pattern=`^[^\x5b\x5d\x5c]*$`
	AllowedValues []string `json:"allowedValues,omitempty"`

	// allowedFields are the only fields of the control an entry may waive:
	// every entry of the control must set restrictedField to one of them.
	// For example Host Namespaces: [spec.hostNetwork] (not hostPID or
	// hostIPC, whose values are also "true"); Volume Types:
	// [spec.volumes[*].nfs].
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:XValidation:rule="size(self) > 0",message="allowedFields: an empty list would allow no field; remove the control from allowedControls to allow none, or remove the field to allow any"
	// +kubebuilder:validation:items:MaxLength=256
	AllowedFields []string `json:"allowedFields,omitempty"`

	// requireImages, when true, requires every entry of the control to name
	// images, each with a literal part: a registry host or a whole
	// repository path segment written without a wildcard
	// (docker.io/**, **/proxyv2:*), so not a glob that matches every image
	// ("**", "**:*", "*/**", "*/*:*", "**@*").
	// +optional
	RequireImages *bool `json:"requireImages,omitempty"`

	// requireContainerNames, when true, requires every entry of the control
	// to name containers, each with a literal part (not "*").
	// +optional
	RequireContainerNames *bool `json:"requireContainerNames,omitempty"`

	// requirePinnedRegistry, when true, requires every image glob of the
	// control's entries to start with a literal registry host
	// (docker.io/istio/proxyv2:*, not */istio/proxyv2*): no wildcard before
	// the first "/", and a host (with a "." or ":", or localhost) there.
	// Any host: the one the exception's author writes, which may be a
	// registry they push to. To name the registries exceptions may use, set
	// allowedRegistries. Implies requireImages.
	// +optional
	RequirePinnedRegistry *bool `json:"requirePinnedRegistry,omitempty"`

	// allowedRegistries are, when set, the only registries the image globs
	// of the control's entries may reach: every entry must name images, and
	// every image glob must match only images of one of these registries,
	// or of a repository path under one. Each is a registry host, with an
	// optional path prefix: docker.io, gcr.io/istio-release,
	// registry.example:5000/mesh. Globs and these are read as the container
	// runtime reads an image: istio/proxyv2 is docker.io/istio/proxyv2,
	// nginx is docker.io/library/nginx, index.docker.io is docker.io. A path
	// prefix ends at a "/": gcr.io/istio-release admits
	// gcr.io/istio-release/proxyv2:*, not gcr.io/istio-release-evil/proxyv2
	// or gcr.io/istio-releasex. A glob with a wildcard in its registry host,
	// or within the path prefix, is refused. Implies requireImages.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:XValidation:rule="size(self) > 0",message="allowedRegistries: an empty list would allow no image; remove the control from allowedControls to allow none, or remove the field to allow any registry"
	// +kubebuilder:validation:XValidation:rule="self.all(r, r.matches('^(localhost(:[0-9]+)?|[a-z0-9]([a-z0-9-]*[a-z0-9])?([.][a-z0-9]([a-z0-9-]*[a-z0-9])?)+(:[0-9]+)?|[a-z0-9]([a-z0-9-]*[a-z0-9])?:[0-9]+)(/[a-z0-9]+(([._]|__|-+)[a-z0-9]+)*)*$'))",message="allowedRegistries: each is a lowercase registry host (with a \".\" or a port, or localhost), optionally followed by a path prefix, with no scheme, wildcard, tag or trailing \"/\": for example docker.io or gcr.io/istio-release"
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=255
	AllowedRegistries []string `json:"allowedRegistries,omitempty"`

	// allowedContainerKinds are, when set, the only kinds of container the
	// control's entries may reach: every entry must set containerKinds, to
	// kinds among these (Init, Sidecar, App, Ephemeral). Capabilities: [Init] keeps a waiver written for a mesh's
	// init container (istio-init, linkerd-init, kuma-init) off a native
	// sidecar (an init container with restartPolicy: Always, which runs for
	// the pod's life) and off app containers, whatever their names. Only for
	// controls with container fields.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=4
	// +kubebuilder:validation:XValidation:rule="size(self) > 0",message="allowedContainerKinds: an empty list would allow no container; remove the control from allowedControls to allow none, or remove the field to allow every kind"
	AllowedContainerKinds []ContainerKind `json:"allowedContainerKinds,omitempty"`
}

// SecurityPolicyStatus is the observed state of a SecurityPolicy.
type SecurityPolicyStatus struct {
	// conditions describe the policy; Ready says whether it is enforced.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=8
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// observedGeneration is the metadata.generation this status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// rules is the number of rules in force: those of the current spec, or of
	// the last spec that compiled when the policy is Degraded. It is a field
	// of its own because kubectl shows only the first element of a list column.
	// +optional
	Rules int32 `json:"rules,omitempty"`

	// activeExceptions counts the Ready PolicyExceptions bound to this policy.
	// +optional
	ActiveExceptions int32 `json:"activeExceptions,omitempty"`

	// violations counts the uncovered violations that the background scan
	// found in the objects that exist now. Unset when the policy is not
	// scanned (background: false, or the scan is off).
	// +optional
	// +kubebuilder:validation:Minimum=0
	Violations *int32 `json:"violations,omitempty"`

	// lastValidSpec is the last spec of this policy that compiled, written by
	// podsieve's leader whenever the current generation compiles. When the
	// current spec does not compile (Degraded), every replica keeps this one
	// in force, including a replica that restarts and never compiled it
	// itself; without it a restart would leave the policy unenforced. Only
	// podsieve and cluster admins may write the status subresource
	// (securitypolicies/status): a status written by anyone else can put an
	// arbitrary spec in force while the current one does not compile.
	// +optional
	LastValidSpec *LastValidSpec `json:"lastValidSpec,omitempty"`
}

// LastValidSpec is a copy of a SecurityPolicy spec that compiled.
type LastValidSpec struct {
	// generation is the metadata.generation of the spec.
	// +required
	// +kubebuilder:validation:Minimum=1
	Generation int64 `json:"generation"`

	// spec is the spec as it was, kept as raw JSON and not validated again: a
	// typed copy would be held to the current schema, so a spec written
	// under an older podsieve (or before a validation rule tightened) would
	// make every status write fail. podsieve compiles it again when it needs
	// it and ignores it when that fails. Atomic for server-side apply: a
	// write replaces it whole, so it never keeps a key of an earlier spec
	// that another field manager still owns.
	// +required
	// +kubebuilder:pruning:PreserveUnknownFields
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:validation:Type=object
	// +mapType=atomic
	Spec runtime.RawExtension `json:"spec"`
}

// SecurityPolicy enforces Pod Security Standards profiles on matched
// namespaces and objects, with fine-grained exclusions and guardrails on the
// PolicyExceptions developers may write.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=secpol,categories=podsieve
// +kubebuilder:printcolumn:name="Action",type=string,JSONPath=`.spec.action`
// +kubebuilder:printcolumn:name="Rules",type=integer,JSONPath=`.status.rules`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Exceptions",type=integer,JSONPath=`.status.activeExceptions`
// +kubebuilder:printcolumn:name="Violations",type=integer,JSONPath=`.status.violations`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`,priority=1
// +kubebuilder:printcolumn:name="Message",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].message`,priority=1
// +kubebuilder:printcolumn:name="API-Server",type=string,JSONPath=`.status.conditions[?(@.type=="EnforcedByAPIServer")].status`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type SecurityPolicy struct {
	metav1.TypeMeta `json:",inline"`

	// metadata is the standard object metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the desired enforcement.
	// +required
	Spec SecurityPolicySpec `json:"spec"`

	// status is the observed state, written by podsieve. A new object
	// reads observedGeneration 0 until podsieve has judged it, so that
	// kstatus (Flux, and Argo CD with the check in docs/gitops.md)
	// sees it in progress.
	// +optional
	// +default={"observedGeneration": 0}
	Status SecurityPolicyStatus `json:"status,omitempty,omitzero"`
}

// SecurityPolicyList is a list of SecurityPolicies.
// +kubebuilder:object:root=true
type SecurityPolicyList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []SecurityPolicy `json:"items"`
}
