package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
	// +kubebuilder:default=Enforce
	Action PolicyAction `json:"action,omitempty"`

	// background enables scanning of the objects that already exist.
	// +optional
	// +kubebuilder:default=true
	Background *bool `json:"background,omitempty"`

	// rules are evaluated independently; an object must satisfy every rule that
	// matches it. Rule names are unique.
	// +required
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=64
	Rules []PolicyRule `json:"rules"`

	// exceptions are the guardrails on the PolicyExceptions that developers may
	// write against this policy. Unset allows exceptions without further limits.
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
	// pod-bearing object in every namespace.
	// +optional
	Match *ResourceFilter `json:"match,omitempty"`

	// exclude removes objects from match.
	// +optional
	Exclude *ResourceFilter `json:"exclude,omitempty"`

	// podSecurity is the profile to enforce and the violations to tolerate.
	// +required
	PodSecurity PodSecurity `json:"podSecurity"`
}

// ResourceFilter selects objects by namespace and labels. Every field that is
// set must match; an empty filter matches everything.
type ResourceFilter struct {
	// namespaces are globs on the object's namespace name.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=64
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
}

// ExceptionGuardrails limit what PolicyExceptions may waive in a policy.
type ExceptionGuardrails struct {
	// allow is false to honour no PolicyException for this policy.
	// +optional
	// +kubebuilder:default=true
	Allow *bool `json:"allow,omitempty"`

	// allowedControls, when set, are the only controls an exception may name.
	// An exception with an empty podSecurity waives every control and is then
	// refused.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=16
	AllowedControls []ControlName `json:"allowedControls,omitempty"`

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
}

// SecurityPolicyStatus is the observed state of a SecurityPolicy.
type SecurityPolicyStatus struct {
	// observedGeneration is the metadata.generation this status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// conditions describe the policy; Ready says whether it is enforced.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=8
	Conditions []metav1.Condition `json:"conditions,omitempty"`

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
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type SecurityPolicy struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the desired enforcement.
	// +required
	Spec SecurityPolicySpec `json:"spec"`

	// status is the observed state, written by podsieve.
	// +optional
	Status SecurityPolicyStatus `json:"status,omitempty"`
}

// SecurityPolicyList is a list of SecurityPolicies.
// +kubebuilder:object:root=true
type SecurityPolicyList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []SecurityPolicy `json:"items"`
}
