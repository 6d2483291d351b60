package convert

import (
	"encoding/json"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Minimal copies of Kyverno's kyverno.io ClusterPolicy, Policy and
// PolicyException, with every documented field so that decodeStrict can tell
// a misspelt field from one that convert deliberately does not translate.
// Fields convert does not translate are json.RawMessage: their presence is
// reported, their content is not read.

type kyvernoPolicy struct {
	metav1.TypeMeta `json:",inline"`
	Metadata        metav1.ObjectMeta `json:"metadata"`
	Spec            kyvernoPolicySpec `json:"spec"`
	Status          json.RawMessage   `json:"status,omitempty"`
}

type kyvernoPolicySpec struct {
	Rules                            []kyvernoRule   `json:"rules"`
	ValidationFailureAction          string          `json:"validationFailureAction,omitempty"`
	ValidationFailureActionOverrides json.RawMessage `json:"validationFailureActionOverrides,omitempty"`
	Background                       *bool           `json:"background,omitempty"`
	Admission                        *bool           `json:"admission,omitempty"`
	FailurePolicy                    *string         `json:"failurePolicy,omitempty"`
	ApplyRules                       *string         `json:"applyRules,omitempty"`
	EmitWarning                      *bool           `json:"emitWarning,omitempty"`
	WebhookTimeoutSeconds            json.RawMessage `json:"webhookTimeoutSeconds,omitempty"`
	WebhookConfiguration             json.RawMessage `json:"webhookConfiguration,omitempty"`
	SchemaValidation                 json.RawMessage `json:"schemaValidation,omitempty"`
	MutateExistingOnPolicyUpdate     json.RawMessage `json:"mutateExistingOnPolicyUpdate,omitempty"`
	GenerateExisting                 json.RawMessage `json:"generateExisting,omitempty"`
	GenerateExistingOnPolicyUpdate   json.RawMessage `json:"generateExistingOnPolicyUpdate,omitempty"`
	UseServerSideApply               json.RawMessage `json:"useServerSideApply,omitempty"`
}

type kyvernoRule struct {
	Name                   string          `json:"name"`
	Match                  kyvernoMatch    `json:"match"`
	Exclude                *kyvernoMatch   `json:"exclude,omitempty"`
	Validate               *kyvernoValid   `json:"validate,omitempty"`
	Context                json.RawMessage `json:"context,omitempty"`
	Preconditions          json.RawMessage `json:"preconditions,omitempty"`
	CELPreconditions       json.RawMessage `json:"celPreconditions,omitempty"`
	Mutate                 json.RawMessage `json:"mutate,omitempty"`
	Generate               json.RawMessage `json:"generate,omitempty"`
	VerifyImages           json.RawMessage `json:"verifyImages,omitempty"`
	ImageExtractors        json.RawMessage `json:"imageExtractors,omitempty"`
	SkipBackgroundRequests json.RawMessage `json:"skipBackgroundRequests,omitempty"`
	ReportProperties       json.RawMessage `json:"reportProperties,omitempty"`
}

// kyvernoMatch is a MatchResources: any (OR) or all (AND) of filters, or
// the older single filter written directly under match.
type kyvernoMatch struct {
	Any []kyvernoFilter `json:"any,omitempty"`
	All []kyvernoFilter `json:"all,omitempty"`
	kyvernoFilter
}

type kyvernoFilter struct {
	Resources    *kyvernoResources `json:"resources,omitempty"`
	Subjects     json.RawMessage   `json:"subjects,omitempty"`
	Roles        json.RawMessage   `json:"roles,omitempty"`
	ClusterRoles json.RawMessage   `json:"clusterRoles,omitempty"`
}

type kyvernoResources struct {
	Kinds             []string              `json:"kinds,omitempty"`
	Name              string                `json:"name,omitempty"`
	Names             []string              `json:"names,omitempty"`
	Namespaces        []string              `json:"namespaces,omitempty"`
	Annotations       map[string]string     `json:"annotations,omitempty"`
	Selector          *metav1.LabelSelector `json:"selector,omitempty"`
	NamespaceSelector *metav1.LabelSelector `json:"namespaceSelector,omitempty"`
	Operations        []string              `json:"operations,omitempty"`
}

type kyvernoValid struct {
	FailureAction           *string             `json:"failureAction,omitempty"`
	FailureActionOverrides  json.RawMessage     `json:"failureActionOverrides,omitempty"`
	AllowExistingViolations json.RawMessage     `json:"allowExistingViolations,omitempty"`
	Message                 string              `json:"message,omitempty"`
	PodSecurity             *kyvernoPodSecurity `json:"podSecurity,omitempty"`
	Pattern                 json.RawMessage     `json:"pattern,omitempty"`
	AnyPattern              json.RawMessage     `json:"anyPattern,omitempty"`
	Deny                    json.RawMessage     `json:"deny,omitempty"`
	ForEach                 json.RawMessage     `json:"foreach,omitempty"`
	Manifests               json.RawMessage     `json:"manifests,omitempty"`
	CEL                     json.RawMessage     `json:"cel,omitempty"`
	Assert                  json.RawMessage     `json:"assert,omitempty"`
}

type kyvernoPodSecurity struct {
	Level   string         `json:"level,omitempty"`
	Version string         `json:"version,omitempty"`
	Exclude []kyvernoEntry `json:"exclude,omitempty"`
}

// kyvernoEntry is Kyverno's PodSecurityStandard: one excluded control.
type kyvernoEntry struct {
	ControlName     string   `json:"controlName"`
	Images          []string `json:"images,omitempty"`
	RestrictedField string   `json:"restrictedField,omitempty"`
	Values          []string `json:"values,omitempty"`
}

type kyvernoException struct {
	metav1.TypeMeta `json:",inline"`
	Metadata        metav1.ObjectMeta    `json:"metadata"`
	Spec            kyvernoExceptionSpec `json:"spec"`
	Status          json.RawMessage      `json:"status,omitempty"`
}

type kyvernoExceptionSpec struct {
	Background  *bool              `json:"background,omitempty"`
	Match       kyvernoMatch       `json:"match"`
	Conditions  json.RawMessage    `json:"conditions,omitempty"`
	Exceptions  []kyvernoExcTarget `json:"exceptions"`
	PodSecurity []kyvernoEntry     `json:"podSecurity,omitempty"`
}

type kyvernoExcTarget struct {
	PolicyName string   `json:"policyName"`
	RuleNames  []string `json:"ruleNames"`
}
