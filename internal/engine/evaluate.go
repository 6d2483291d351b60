package engine

import (
	"fmt"
	"slices"
	"strings"

	"k8s.io/pod-security-admission/policy"

	policyv1alpha1 "github.com/podsieve/podsieve/api/v1alpha1"
)

// Outcome is a rule's result for one object.
type Outcome string

const (
	// Pass: no violation, or every violation covered entry by entry.
	Pass Outcome = "pass"
	// Fail: at least one violation is not covered.
	Fail Outcome = "fail"
	// Skip: the rule was waived whole by an exception with an empty
	// podSecurity, and there were violations to waive.
	Skip Outcome = "skip"
)

// Finding is a violation with the entries that cover it. Covered violations
// are kept, so that reports show what was waived and by whom.
type Finding struct {
	Violation
	// ExemptedBy lists every entry source that covers the violation:
	// policy/<policy>/<rule> or exception/<namespace>/<name>.
	ExemptedBy []string `json:"exemptedBy"`
	// Detail is upstream's reason, kept for a violation that attribution could
	// not place on a field (which only a whole-rule waiver can cover).
	Detail string `json:"detail,omitempty"`
}

// Covered reports whether some entry covers the finding.
func (f *Finding) Covered() bool { return len(f.ExemptedBy) > 0 }

// RuleResult is the decision of one rule on one object.
type RuleResult struct {
	Rule       *Rule
	Outcome    Outcome
	Findings   []Finding
	Exceptions []string // the exceptions that covered something
	// Refused are exceptions that name the rule and match the object but do
	// not count (expired, or refused by the guardrails), reported when the
	// rule did not pass.
	Refused []Refusal
}

// Evaluate decides one rule on a pod spec. exceptions are the exceptions that
// apply to the object and are permitted for this rule (SelectExceptions
// chooses them); they combine per violation.
//
// The verdict is upstream's: the checks of the rule's level and version run
// once, unforked. Only failing checks are attributed, and each violation is
// then covered or not by the rule's exclusions and the exceptions' entries.
func (r *Rule) Evaluate(o *Object, exceptions []*Exception) RuleResult {
	res := RuleResult{Rule: r, Outcome: Pass}
	// Attribute first and size the findings once: a Finding is large, and
	// growing the slice one append at a time dominated the cost.
	var failedBuf [24]failed
	failures := failedBuf[:0]
	n := 0
	for i := range r.checks.checks {
		c := &r.checks.checks[i]
		cr := c.fn(o.Meta, o.Spec)
		if cr.Allowed {
			continue
		}
		vs := attribute(c.id, r.checks.lv.Version, o.Meta, o.Spec)
		failures = append(failures, failed{check: c, result: cr, violations: vs})
		n += max(len(vs), 1)
	}
	if n > 0 {
		res.Findings = make([]Finding, 0, n)
	}
	for _, fl := range failures {
		if len(fl.violations) == 0 {
			// Attribution disagrees with upstream: report the failure
			// unplaced, so that no field-level entry can cover it (fail closed).
			res.Findings = append(res.Findings, Finding{
				Violation: Violation{Control: fl.check.control, CheckID: string(fl.check.id), Scope: ScopePod, Values: []string{}},
				Detail:    reasonOf(fl.result),
			})
			continue
		}
		for _, v := range fl.violations {
			res.Findings = append(res.Findings, Finding{Violation: v})
		}
	}
	if len(res.Findings) == 0 {
		return res
	}
	for _, e := range exceptions {
		if e.WholeRule {
			res.Outcome = Skip
			for i := range res.Findings {
				res.Findings[i].ExemptedBy = append(res.Findings[i].ExemptedBy, e.Source)
			}
			res.Exceptions = append(res.Exceptions, e.Source)
		}
	}
	if res.Outcome == Skip {
		return res
	}
	used := map[string]bool{}
	// Parsing an image reference is the costliest step of covering; a pod
	// has few images and many findings, so each image is parsed once.
	var formsBuf [4]imageFormsOf
	parsed := formsBuf[:0]
	formsOf := func(image string) []string {
		for _, p := range parsed {
			if p.image == image {
				return p.forms
			}
		}
		forms := imageForms(image)
		parsed = append(parsed, imageFormsOf{image, forms})
		return forms
	}
	for i := range res.Findings {
		f := &res.Findings[i]
		if f.Field == "" {
			res.Outcome = Fail
			continue
		}
		var forms []string
		formsDone := false
		cover := func(xs []Exclusion) {
			for j := range xs {
				x := &xs[j]
				if len(x.images) > 0 && !formsDone && f.Scope == ScopeContainer {
					forms, formsDone = formsOf(f.Image), true
				}
				if x.covers(&f.Violation, forms) && !slices.Contains(f.ExemptedBy, x.Source) {
					f.ExemptedBy = append(f.ExemptedBy, x.Source)
				}
			}
		}
		cover(r.exclusions)
		for _, e := range exceptions {
			before := len(f.ExemptedBy)
			cover(e.Exclusions)
			if len(f.ExemptedBy) > before && !used[e.Source] {
				used[e.Source] = true
				res.Exceptions = append(res.Exceptions, e.Source)
			}
		}
		if !f.Covered() {
			res.Outcome = Fail
		}
	}
	return res
}

type imageFormsOf struct {
	image string
	forms []string
}

// failed is a failing check with its attribution.
type failed struct {
	check      *check
	result     policy.CheckResult
	violations []Violation
}

func reasonOf(cr policy.CheckResult) string {
	if cr.ForbiddenDetail == "" {
		return cr.ForbiddenReason
	}
	return cr.ForbiddenReason + " (" + cr.ForbiddenDetail + ")"
}

// FieldPath is the finding's field as the object spells it, for messages:
// spec.template.spec.containers[*]... for a Deployment. Exclusions keep the
// pod-relative path.
func (f *Finding) FieldPath(o *Object) string {
	if f.Field == "" {
		return ""
	}
	return o.FieldPrefix + f.Field
}

// Describe is one line a person can act on: control, where, field and values.
func (f *Finding) Describe(o *Object) string {
	var b strings.Builder
	b.WriteString(f.Control)
	if f.Scope == ScopeContainer {
		fmt.Fprintf(&b, ": %s %q", singular(f.ContainerType), f.Container)
		if f.Image != "" {
			fmt.Fprintf(&b, " (image %s)", f.Image)
		}
	} else {
		b.WriteString(": pod")
	}
	switch {
	case f.Field == "":
		fmt.Fprintf(&b, ": %s", f.Detail)
	case len(f.Values) == 0:
		fmt.Fprintf(&b, " must set %s", f.FieldPath(o))
	default:
		fmt.Fprintf(&b, " sets %s to %s", f.FieldPath(o), strings.Join(f.Values, ", "))
	}
	return b.String()
}

func singular(t ContainerType) string {
	switch t {
	case InitContainers:
		return "init container"
	case EphemeralContainers:
		return "ephemeral container"
	case Containers:
		return "container"
	}
	return "container"
}

// DenyMessage explains a failed rule to the person whose request it refused:
// the policy, rule and level, every uncovered violation, and whether a
// PolicyException in the namespace could waive them.
func (res *RuleResult) DenyMessage(o *Object) string {
	var b strings.Builder
	r := res.Rule
	fmt.Fprintf(&b, "%s %s/%s is refused by SecurityPolicy %q rule %q (%s):",
		o.Kind, o.Namespace, o.Name, r.Policy.Name, r.Name, r.LevelVersion())
	for i := range res.Findings {
		if f := &res.Findings[i]; !f.Covered() {
			b.WriteString("\n- ")
			b.WriteString(f.Describe(o))
		}
	}
	for _, rf := range res.Refused {
		fmt.Fprintf(&b, "\n%s does not apply: %s", rf.Source, rf.Message)
	}
	b.WriteString("\n")
	b.WriteString(res.Hint(o))
	return b.String()
}

// Hint says whether a PolicyException could waive the rule's uncovered
// violations, as the policy's guardrails decide: the last line of a denial.
func (res *RuleResult) Hint(o *Object) string { return res.Rule.Policy.exceptionHint(res, o) }

// Enforced reports whether a failing result refuses the request.
func (res *RuleResult) Enforced() bool {
	return res.Outcome == Fail && res.Rule.Policy.Action == policyv1alpha1.ActionEnforce
}

// exceptionHint says whether a PolicyException could waive the uncovered
// violations, as the policy's guardrails decide.
func (p *Policy) exceptionHint(res *RuleResult, o *Object) string {
	if !p.PermitsAny() {
		return fmt.Sprintf("Policy %q allows no PolicyExceptions: change the workload.", p.Name)
	}
	if refused := p.unwaivableControls(res); len(refused) > 0 {
		return fmt.Sprintf("Policy %q does not allow PolicyExceptions for %s: change the workload.", p.Name, strings.Join(quoteAll(refused), ", "))
	}
	return fmt.Sprintf("A PolicyException in namespace %q naming policy %q rule %q can waive these.", o.Namespace, p.Name, res.Rule.Name)
}

// unwaivableControls are the controls of the result's uncovered violations
// that the guardrails' allowedControls leave out, in order of appearance.
func (p *Policy) unwaivableControls(res *RuleResult) []string {
	var refused []string
	if allowed := p.guardrails.AllowedControls; len(allowed) > 0 {
		for i := range res.Findings {
			f := &res.Findings[i]
			if f.Covered() || slices.Contains(refused, f.Control) {
				continue
			}
			ok := false
			for _, c := range allowed {
				ok = ok || string(c) == f.Control
			}
			if !ok {
				refused = append(refused, f.Control)
			}
		}
	}
	return refused
}
