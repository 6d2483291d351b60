package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// PolicyExceptionSpec is the waiver a PolicyException requests.
type PolicyExceptionSpec struct {
	// exceptions name the policies and rules this exception waives violations of.
	// +required
	// +listType=atomic
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=8
	Exceptions []ExceptionTarget `json:"exceptions"`

	// match selects the objects, in this exception's namespace, that the
	// exception applies to. Unset matches every pod-bearing object in the
	// namespace.
	// +optional
	Match *ExceptionMatch `json:"match,omitempty"`

	// podSecurity lists the violations waived for matched objects. Unset
	// waives the named rules entirely for matched objects, which a policy
	// with allowedControls refuses. In all, the entries may hold at most 16
	// image globs, 32 container name globs and 64 values.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:XValidation:rule="size(self) > 0",message="podSecurity: an empty list is ambiguous; remove the field to waive the named rules entirely, or list the violations to waive"
	// +kubebuilder:validation:XValidation:rule="self.map(e, has(e.images) ? size(e.images) : 0).sum() <= 16",message="podSecurity: at most 16 image globs in all entries together; name fewer images or split the exception"
	// +kubebuilder:validation:XValidation:rule="self.map(e, has(e.containerNames) ? size(e.containerNames) : 0).sum() <= 32",message="podSecurity: at most 32 container name globs in all entries together"
	// +kubebuilder:validation:XValidation:rule="self.map(e, has(e.values) ? size(e.values) : 0).sum() <= 64",message="podSecurity: at most 64 values in all entries together; waive fewer values or split the exception"
	PodSecurity []PodSecurityExclusion `json:"podSecurity,omitempty"`

	// justification says why the exception is needed, for the people who
	// review it. Policies may require it.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Justification string `json:"justification,omitempty"`

	// expiresAt is the moment the exception stops applying. Policies may
	// require it and bound how far in the future it may be.
	// +optional
	ExpiresAt *metav1.Time `json:"expiresAt,omitempty"`

	// background applies the exception to background scans as well as to
	// admission.
	// +optional
	// +default=true
	Background *bool `json:"background,omitempty"`
}

// ExceptionTarget names rules of one SecurityPolicy.
type ExceptionTarget struct {
	// policyName is the name of the SecurityPolicy.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	PolicyName string `json:"policyName"`

	// ruleNames are globs on the names of the policy's rules.
	// +required
	// +listType=atomic
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=8
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=63
	// +kubebuilder:validation:items:Pattern=`^[^\x5b\x5d\x5c]*$`
	RuleNames []string `json:"ruleNames"`
}

// PodBearingKind is a kind of object that carries a pod spec.
// +kubebuilder:validation:Enum=Pod;Deployment;ReplicaSet;StatefulSet;DaemonSet;Job;CronJob;ReplicationController;PodTemplate
type PodBearingKind string

// The pod-bearing kinds, each in the group its API lives in (core, apps or
// batch). internal/engine's PodBearingKinds says where each keeps its pod
// template.
const (
	KindPod                   PodBearingKind = "Pod"
	KindPodTemplate           PodBearingKind = "PodTemplate"
	KindReplicationController PodBearingKind = "ReplicationController"
	KindReplicaSet            PodBearingKind = "ReplicaSet"
	KindDeployment            PodBearingKind = "Deployment"
	KindStatefulSet           PodBearingKind = "StatefulSet"
	KindDaemonSet             PodBearingKind = "DaemonSet"
	KindJob                   PodBearingKind = "Job"
	KindCronJob               PodBearingKind = "CronJob"
)

// ExceptionMatch selects the objects a PolicyException applies to. Every
// field that is set must match.
type ExceptionMatch struct {
	// names are globs on the object's name (for an object named by the API
	// server, its generateName prefix).
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:XValidation:rule="size(self) > 0",message="names: an empty list would match no object; remove the field to mean any name"
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=253
	// +kubebuilder:validation:items:Pattern=`^[^\x5b\x5d\x5c]*$`
	Names []string `json:"names,omitempty"`

	// selector matches the object's labels (for a pod controller, the labels
	// of its pod template).
	// +optional
	Selector *metav1.LabelSelector `json:"selector,omitempty"`

	// kinds limits the exception to these kinds of object.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=9
	// +kubebuilder:validation:XValidation:rule="size(self) > 0",message="kinds: an empty list would match no object; remove the field to mean any kind"
	Kinds []PodBearingKind `json:"kinds,omitempty"`

	// namespaces are globs on the object's namespace. Honoured only for
	// exceptions in the cluster exceptions namespace; elsewhere an exception
	// applies to its own namespace only.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:XValidation:rule="size(self) > 0",message="namespaces: an empty list would match no namespace; remove the field to mean any namespace"
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=253
	// +kubebuilder:validation:items:Pattern=`^[^\x5b\x5d\x5c]*$`
	Namespaces []string `json:"namespaces,omitempty"`

	// namespaceSelector matches the labels of the object's Namespace. Honoured
	// only for exceptions in the cluster exceptions namespace.
	// +optional
	NamespaceSelector *metav1.LabelSelector `json:"namespaceSelector,omitempty"`
}

// PolicyExceptionStatus is the observed state of a PolicyException.
type PolicyExceptionStatus struct {
	// conditions describe the exception; Ready is True when it is in force.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=8
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// observedGeneration is the metadata.generation this status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// policies lists the names of the policies the exception targets, comma
	// separated, for kubectl (which shows only the first element of a list column).
	// +optional
	// +kubebuilder:validation:MaxLength=4096
	Policies string `json:"policies,omitempty"`

	// controls lists the controls the exception waives, comma separated, or
	// "*" when an empty podSecurity waives whole rules.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Controls string `json:"controls,omitempty"`
	// matchedObjects is how many existing objects the exception currently
	// waives at least one violation for, as the last background scan found.
	// An exception that stays at 0 is a candidate for removal.
	// +optional
	// +kubebuilder:validation:Minimum=0
	MatchedObjects *int32 `json:"matchedObjects,omitempty"`
	// lastAppliedTime is the last time the exception waived a violation, at
	// admission or in a background scan. It is written in batches and is
	// accurate to about a minute.
	// +optional
	LastAppliedTime *metav1.Time `json:"lastAppliedTime,omitempty"`
}

// PolicyException waives named controls of SecurityPolicy rules for matched
// objects in its own namespace, as narrowly as its entries say, optionally
// until an expiry date.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=podex,categories=podsieve
// +kubebuilder:printcolumn:name="Policy",type=string,JSONPath=`.status.policies`
// +kubebuilder:printcolumn:name="Controls",type=string,JSONPath=`.status.controls`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Expires",type=string,JSONPath=`.spec.expiresAt`
// +kubebuilder:printcolumn:name="Matched",type=integer,JSONPath=`.status.matchedObjects`,priority=1
// +kubebuilder:printcolumn:name="Last-Applied",type=date,JSONPath=`.status.lastAppliedTime`,priority=1
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`,priority=1
// +kubebuilder:printcolumn:name="Message",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].message`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type PolicyException struct {
	metav1.TypeMeta `json:",inline"`

	// metadata is the standard object metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the requested waiver.
	// +required
	Spec PolicyExceptionSpec `json:"spec"`

	// status is the observed state, written by podsieve. A new object
	// reads observedGeneration 0 until podsieve has judged it, so that
	// kstatus (Flux, and Argo CD with the check in docs/gitops.md)
	// sees it in progress.
	// +optional
	// +default={"observedGeneration": 0}
	Status PolicyExceptionStatus `json:"status,omitempty,omitzero"`
}

// PolicyExceptionList is a list of PolicyExceptions.
// +kubebuilder:object:root=true
type PolicyExceptionList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []PolicyException `json:"items"`
}
