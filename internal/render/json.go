package render

import (
	"encoding/json"
	"io"

	policyv1alpha1 "github.com/podsieve/podsieve/api/v1alpha1"
	"github.com/podsieve/podsieve/internal/engine"
	"github.com/podsieve/podsieve/internal/manifest"
	"github.com/podsieve/podsieve/internal/offline"
)

// JSONReport is podsieve eval -o json; tools parse its keys.
type JSONReport struct {
	Results []ObjectResult `json:"results"`
	// Exceptions are the input's exceptions and whether each is in force,
	// as their Ready condition would say in the cluster.
	Exceptions []offline.ExceptionStatus `json:"exceptions"`
}

// ObjectResult is one object's decision in JSONReport.
type ObjectResult struct {
	APIVersion string         `json:"apiVersion"`
	Kind       string         `json:"kind"`
	Namespace  string         `json:"namespace"`
	Name       string         `json:"name"`
	Source     string         `json:"source"`
	Allowed    bool           `json:"allowed"`
	Policies   []PolicyResult `json:"policies"`
}

// PolicyResult is one policy rule's result for an object in JSONReport.
type PolicyResult struct {
	Policy  string `json:"policy"`
	Rule    string `json:"rule"`
	Action  string `json:"action"`
	Level   string `json:"level"`
	Version string `json:"version"`
	Result  string `json:"result"`
	// Severity and Category are the result's, as its PolicyReport result
	// would have them (engine.RuleResult.Reporting).
	Severity   string            `json:"severity"`
	Category   string            `json:"category"`
	Violations []ViolationResult `json:"violations"`
	// RefusedExceptions name the rule and match the object but do not count.
	RefusedExceptions []engine.Refusal `json:"refusedExceptions,omitempty"`
	// Message is what the webhook would answer when the rule refuses.
	Message string `json:"message,omitempty"`
}

// ViolationResult is one violation, covered or not, in JSONReport.
type ViolationResult struct {
	Control       policyv1alpha1.ControlName `json:"control"`
	Check         string                     `json:"check"`
	Scope         string                     `json:"scope"`
	Container     string                     `json:"container,omitempty"`
	ContainerType string                     `json:"containerType,omitempty"`
	Image         string                     `json:"image,omitempty"`
	Field         string                     `json:"field"`
	Path          string                     `json:"path"`
	Values        []string                   `json:"values"`
	ExemptedBy    []engine.Source            `json:"exemptedBy"`
	Detail        string                     `json:"detail,omitempty"`
}

// JSON writes the decisions as one indented JSONReport. The i-th decision
// is the i-th workload's.
func JSON(w io.Writer, decisions []engine.Decision, in *offline.Input) error {
	out := JSONReport{Results: []ObjectResult{}, Exceptions: in.Exceptions}
	for i, d := range decisions {
		out.Results = append(out.Results, newObjectResult(in.Workloads[i].Doc, d))
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}

func newObjectResult(doc *manifest.Document, d engine.Decision) ObjectResult {
	o := d.Object
	r := ObjectResult{APIVersion: o.APIVersion, Kind: o.Kind, Namespace: o.Namespace, Name: o.Name,
		Source: doc.Where(), Allowed: d.Allowed, Policies: []PolicyResult{}}
	for i := range d.Results {
		res := &d.Results[i]
		severity, category := res.Reporting()
		pr := PolicyResult{
			Policy: res.Rule.Policy.Name, Rule: res.Rule.Name, Action: string(res.Rule.Policy.Action),
			Level: string(res.Rule.Level), Version: res.Rule.Version, Result: string(res.Outcome),
			Severity: string(severity), Category: category,
			Violations: []ViolationResult{}, RefusedExceptions: res.Refused,
		}
		if res.Outcome == engine.Fail {
			pr.Message = res.DenyMessage(o)
		}
		for j := range res.Findings {
			f := &res.Findings[j]
			pr.Violations = append(pr.Violations, ViolationResult{
				Control: f.Control, Check: f.CheckID, Scope: string(f.Scope), Container: f.Container,
				ContainerType: string(f.ContainerType), Image: f.Image, Field: f.Field, Path: f.FieldPath(o),
				Values: nonNil(f.Values), ExemptedBy: nonNil(f.ExemptingSources()), Detail: f.Detail,
			})
		}
		r.Policies = append(r.Policies, pr)
	}
	return r
}

// nonNil makes an absent list [] in JSON, never null, as tools expect.
func nonNil[T any](ss []T) []T {
	if ss == nil {
		return []T{}
	}
	return ss
}
