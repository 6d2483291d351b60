package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// PodSecurityParams holds the PolicyExceptions in force in its namespace,
// compiled for the ValidatingAdmissionPolicies podsieve compiles from
// SecurityPolicies: their bindings read the object named "podsieve" in the
// namespace of each object they admit. Only podsieve writes them (the
// manager's leader, or `podsieve compile`); no aggregated role grants them
// to namespace users, whose waivers go through PolicyExceptions and the
// policies' guardrails. Every exception here was judged Ready against those
// guardrails before it was written.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Namespaced,categories=podsieve
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type PodSecurityParams struct {
	metav1.TypeMeta `json:",inline"`
	// metadata is the object's metadata; its name is "podsieve".
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`
	// spec holds the compiled exceptions.
	// +optional
	Spec *PodSecurityParamsSpec `json:"spec,omitempty"`
}

// PodSecurityParamsSpec is what the ValidatingAdmissionPolicies read.
type PodSecurityParamsSpec struct {
	// exceptions are the PolicyExceptions that reach the namespace (its own,
	// and those of the cluster exceptions namespace that select it): those
	// in force, and those that name a rule but do not apply to it, with
	// the reason (targets[].refusal).
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=100000
	Exceptions []CompiledException `json:"exceptions,omitempty"`
}

// CompiledException is one PolicyException in force, compiled: the rules it
// waives by name (its ruleNames globs resolved against the policies), its
// match, and its entries, with each glob as the CEL tests it.
type CompiledException struct {
	// source is exception/<namespace>/<name>, as podsieve reports it.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	Source string `json:"source"`
	// targets are the rules the exception waives.
	// +required
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=1024
	Targets []CompiledTarget `json:"targets"`
	// names match the object's name (spec.match.names); absent matches any.
	// +optional
	Names *GlobSet `json:"names,omitempty"`
	// kinds are the object kinds it matches (spec.match.kinds); absent
	// matches any.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=9
	Kinds []PodBearingKind `json:"kinds,omitempty"`
	// selector matches the pod template's labels (spec.match.selector).
	// +optional
	Selector *metav1.LabelSelector `json:"selector,omitempty"`
	// wholeRule is true when the exception waives the named rules entirely
	// (its spec.podSecurity is absent).
	// +optional
	WholeRule *bool `json:"wholeRule,omitempty"`
	// entries are its spec.podSecurity entries.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16
	Entries []CompiledEntry `json:"entries,omitempty"`
}

// CompiledTarget is one rule an exception names.
type CompiledTarget struct {
	// policy is the SecurityPolicy's name.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Policy string `json:"policy"`
	// rule is the rule's name.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Rule string `json:"rule"`
	// refusal is, when set, why the exception does not apply to the rule
	// (it expired, or the policy's guardrails refuse it): it waives nothing
	// there, and a refusal by the rule quotes it, as the webhook's does.
	// +optional
	// +kubebuilder:validation:MaxLength=4096
	Refusal *string `json:"refusal,omitempty"`
}

// CompiledEntry is one podSecurity entry of an exception, compiled.
type CompiledEntry struct {
	// control is the entry's controlName.
	// +required
	Control ControlName `json:"control"`
	// field is the entry's restrictedField; absent matches any field.
	// +optional
	// +kubebuilder:validation:MaxLength=256
	Field *string `json:"field,omitempty"`
	// kinds are the entry's containerKinds; absent matches any kind.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=4
	Kinds []ContainerKind `json:"kinds,omitempty"`
	// names are the entry's containerNames; absent matches any container.
	// +optional
	Names *GlobSet `json:"names,omitempty"`
	// images are the entry's images; absent matches any image.
	// +optional
	Images *GlobSet `json:"images,omitempty"`
	// values are the entry's values; absent matches any value, and a
	// missing setting, which has none.
	// +optional
	Values *GlobSet `json:"values,omitempty"`
}

// GlobSet is a list of globs as the CEL tests them: the literal ones as
// strings, the others as anchored regular expressions (RE2), and any when one
// glob is "*".
type GlobSet struct {
	// any is true when one glob is "*": every string matches.
	// +optional
	Any *bool `json:"any,omitempty"`
	// exact are the globs without wildcards.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=256
	// +kubebuilder:validation:items:MaxLength=1024
	Exact []string `json:"exact,omitempty"`
	// patterns are the other globs as regular expressions.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=256
	// +kubebuilder:validation:items:MaxLength=8192
	Patterns []string `json:"patterns,omitempty"`
}

// PodSecurityParamsList is a list of PodSecurityParams.
//
// +kubebuilder:object:root=true
type PodSecurityParamsList struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []PodSecurityParams `json:"items"`
}
