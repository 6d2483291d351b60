package v1alpha2

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// PolicyResult is the outcome of one policy rule on the resources of a result.
// +kubebuilder:validation:Enum=pass;fail;warn;error;skip
type PolicyResult string

const (
	// ResultPass means the resources satisfy the rule.
	ResultPass PolicyResult = "pass"
	// ResultFail means the resources violate the rule.
	ResultFail PolicyResult = "fail"
	// ResultWarn means the resources violate a rule that only warns.
	ResultWarn PolicyResult = "warn"
	// ResultError means the rule could not be evaluated.
	ResultError PolicyResult = "error"
	// ResultSkip means the rule was not applied, or its violations were waived.
	ResultSkip PolicyResult = "skip"
)

// PolicySeverity is how serious a failure of the rule is.
// +kubebuilder:validation:Enum=critical;high;low;medium;info
type PolicySeverity string

// The severities of a rule, from the most serious to the least.
const (
	SeverityCritical PolicySeverity = "critical"
	SeverityHigh     PolicySeverity = "high"
	SeverityMedium   PolicySeverity = "medium"
	SeverityLow      PolicySeverity = "low"
	SeverityInfo     PolicySeverity = "info"
)

// PolicyReportSummary counts the results of a report by outcome.
type PolicyReportSummary struct {
	// pass is the number of results that passed.
	// +optional
	Pass int `json:"pass"`
	// fail is the number of results that failed.
	// +optional
	Fail int `json:"fail"`
	// warn is the number of results that warned.
	// +optional
	Warn int `json:"warn"`
	// error is the number of results that could not be evaluated.
	// +optional
	Error int `json:"error"`
	// skip is the number of results that were skipped or waived.
	// +optional
	Skip int `json:"skip"`
}

// PolicyReportResult is the outcome of one rule of one policy on the
// resources it lists.
type PolicyReportResult struct {
	// source is the tool that produced the result: podsieve.
	// +optional
	Source string `json:"source,omitempty"`
	// policy is the name of the policy.
	// +required
	Policy string `json:"policy"`
	// rule is the name of the rule within the policy.
	// +optional
	Rule string `json:"rule,omitempty"`
	// category groups policies, for example by standard.
	// +optional
	Category string `json:"category,omitempty"`
	// severity says how serious a failure is.
	// +optional
	Severity PolicySeverity `json:"severity,omitempty"`
	// timestamp is when the result was first observed as it is.
	// +optional
	Timestamp metav1.Timestamp `json:"timestamp,omitempty"`
	// result is the outcome.
	// +optional
	Result PolicyResult `json:"result,omitempty"`
	// scored says whether the result counts towards a score.
	// +optional
	Scored bool `json:"scored,omitempty"`
	// resources are the objects the result is about.
	// +optional
	// +listType=atomic
	Resources []corev1.ObjectReference `json:"resources,omitempty"`
	// resourceSelector selects the objects the result is about, instead of
	// listing them.
	// +optional
	ResourceSelector *metav1.LabelSelector `json:"resourceSelector,omitempty"`
	// message explains the result to a person.
	// +optional
	Message string `json:"message,omitempty"`
	// properties are further facts about the result, as key and value.
	// +optional
	Properties map[string]string `json:"properties,omitempty"`
}

// PolicyReport holds the results of policies on the objects of one namespace.
// +kubebuilder:object:root=true
// +kubebuilder:resource:shortName=polr
// +kubebuilder:printcolumn:name="Kind",type=string,JSONPath=`.scope.kind`
// +kubebuilder:printcolumn:name="Object",type=string,JSONPath=`.scope.name`
// +kubebuilder:printcolumn:name="Pass",type=integer,JSONPath=`.summary.pass`
// +kubebuilder:printcolumn:name="Fail",type=integer,JSONPath=`.summary.fail`
// +kubebuilder:printcolumn:name="Warn",type=integer,JSONPath=`.summary.warn`
// +kubebuilder:printcolumn:name="Error",type=integer,JSONPath=`.summary.error`
// +kubebuilder:printcolumn:name="Skip",type=integer,JSONPath=`.summary.skip`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type PolicyReport struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	// scope is the object the whole report is about, when it is about one.
	// +optional
	Scope *corev1.ObjectReference `json:"scope,omitempty"`
	// scopeSelector selects the objects the report is about.
	// +optional
	ScopeSelector *metav1.LabelSelector `json:"scopeSelector,omitempty"`
	// summary counts the results by outcome.
	// +optional
	Summary PolicyReportSummary `json:"summary,omitempty"`
	// results are the outcomes of policy rules on resources.
	// +optional
	// +listType=atomic
	Results []PolicyReportResult `json:"results,omitempty"`
}

// PolicyReportList is a list of PolicyReports.
// +kubebuilder:object:root=true
type PolicyReportList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []PolicyReport `json:"items"`
}

// ClusterPolicyReport holds the results of policies on cluster-scoped
// objects. podsieve writes none (pods are namespaced); the kind is shipped so
// that tools reading both kinds find them.
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,shortName=cpolr
// +kubebuilder:printcolumn:name="Kind",type=string,JSONPath=`.scope.kind`
// +kubebuilder:printcolumn:name="Object",type=string,JSONPath=`.scope.name`
// +kubebuilder:printcolumn:name="Pass",type=integer,JSONPath=`.summary.pass`
// +kubebuilder:printcolumn:name="Fail",type=integer,JSONPath=`.summary.fail`
// +kubebuilder:printcolumn:name="Warn",type=integer,JSONPath=`.summary.warn`
// +kubebuilder:printcolumn:name="Error",type=integer,JSONPath=`.summary.error`
// +kubebuilder:printcolumn:name="Skip",type=integer,JSONPath=`.summary.skip`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type ClusterPolicyReport struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	// scope is the object the whole report is about, when it is about one.
	// +optional
	Scope *corev1.ObjectReference `json:"scope,omitempty"`
	// scopeSelector selects the objects the report is about.
	// +optional
	ScopeSelector *metav1.LabelSelector `json:"scopeSelector,omitempty"`
	// summary counts the results by outcome.
	// +optional
	Summary PolicyReportSummary `json:"summary,omitempty"`
	// results are the outcomes of policy rules on resources.
	// +optional
	// +listType=atomic
	Results []PolicyReportResult `json:"results,omitempty"`
}

// ClusterPolicyReportList is a list of ClusterPolicyReports.
// +kubebuilder:object:root=true
type ClusterPolicyReportList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ClusterPolicyReport `json:"items"`
}
