package convert

import (
	"encoding/json"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Minimal copies of Kyverno's policies.kyverno.io ValidatingPolicy and
// PolicyException (v1alpha1, v1beta1 and v1 share these fields), with every
// documented field so that decodeStrict can tell a misspelt field from one
// that convert deliberately does not translate.

type kyvernoVPol struct {
	metav1.TypeMeta `json:",inline"`
	Metadata        metav1.ObjectMeta `json:"metadata"`
	Spec            kyvernoVPolSpec   `json:"spec"`
	Status          json.RawMessage   `json:"status,omitempty"`
}

type kyvernoVPolSpec struct {
	MatchConstraints     *admissionregistrationv1.MatchResources    `json:"matchConstraints,omitempty"`
	Validations          []admissionregistrationv1.Validation       `json:"validations,omitempty"`
	FailurePolicy        *string                                    `json:"failurePolicy,omitempty"`
	AuditAnnotations     json.RawMessage                            `json:"auditAnnotations,omitempty"`
	MatchConditions      []admissionregistrationv1.MatchCondition   `json:"matchConditions,omitempty"`
	Variables            []admissionregistrationv1.Variable         `json:"variables,omitempty"`
	Autogen              json.RawMessage                            `json:"autogen,omitempty"`
	ValidationActions    []admissionregistrationv1.ValidationAction `json:"validationActions,omitempty"`
	WebhookConfiguration json.RawMessage                            `json:"webhookConfiguration,omitempty"`
	Evaluation           *kyvernoEvaluation                         `json:"evaluation,omitempty"`
}

type kyvernoEvaluation struct {
	Mode       *string         `json:"mode,omitempty"`
	Admission  *kyvernoEnabled `json:"admission,omitempty"`
	Background *kyvernoEnabled `json:"background,omitempty"`
}

type kyvernoEnabled struct {
	Enabled *bool `json:"enabled,omitempty"`
}

type kyvernoCELException struct {
	metav1.TypeMeta `json:",inline"`
	Metadata        metav1.ObjectMeta       `json:"metadata"`
	Spec            kyvernoCELExceptionSpec `json:"spec"`
	Status          json.RawMessage         `json:"status,omitempty"`
}

type kyvernoCELExceptionSpec struct {
	PolicyRefs      []kyvernoPolicyRef                       `json:"policyRefs"`
	MatchConditions []admissionregistrationv1.MatchCondition `json:"matchConditions,omitempty"`
	Images          []string                                 `json:"images,omitempty"`
	AllowedValues   []string                                 `json:"allowedValues,omitempty"`
	ReportResult    string                                   `json:"reportResult,omitempty"`
	ExpiresAt       *metav1.Time                             `json:"expiresAt,omitempty"`
}

type kyvernoPolicyRef struct {
	Name string `json:"name"`
	Kind string `json:"kind"`
}
