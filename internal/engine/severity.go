package engine

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	policyv1alpha1 "github.com/podsieve/podsieve/api/v1alpha1"
)

// How serious a rule's violations are, and under which category they are
// reported: spec.rules[].severity, .category and .controlSeverities. They
// change what PolicyReports, the scan's events and SARIF say, never what is
// admitted. Every output reads them through Rule.Severity, Rule.Category and
// RuleResult.Reporting, so that they agree.

// maxCategory and categoryPattern are the schema's bounds on a category
// (api/v1alpha1, PolicyRule.category and ControlSeverity.category).
const maxCategory = 64

var categoryPattern = regexp.MustCompile(`^[A-Za-z0-9(]([-A-Za-z0-9 ._/()&:,+]*[A-Za-z0-9.)])?$`)

// reporting is a severity and a category as written; "" is unset.
type reporting struct {
	severity policyv1alpha1.Severity
	category string
}

// Severity is the severity of the rule's violations: spec.rules[].severity,
// else the default, high for a baseline rule (a known privilege escalation)
// and medium for the others (a missing hardening).
func (r *Rule) Severity() policyv1alpha1.Severity {
	if r.reporting.severity != "" {
		return r.reporting.severity
	}
	if r.Level == "baseline" {
		return policyv1alpha1.SeverityHigh
	}
	return policyv1alpha1.SeverityMedium
}

// Category is the category of the rule's results: spec.rules[].category,
// else the standard and level, "Pod Security Standards (Baseline)", which
// Policy Reporter groups by.
func (r *Rule) Category() string {
	if r.reporting.category != "" {
		return r.reporting.category
	}
	level := string(r.Level)
	if level != "" {
		level = strings.ToUpper(level[:1]) + level[1:]
	}
	return "Pod Security Standards (" + level + ")"
}

// ControlSeverity is the severity of the rule's violations of control c:
// its controlSeverities entry, else the rule's.
func (r *Rule) ControlSeverity(c policyv1alpha1.ControlName) policyv1alpha1.Severity {
	if cr, ok := r.controls[c]; ok {
		return cr.severity
	}
	return r.Severity()
}

// ControlCategory is the category of the rule's violations of control c
// (and of a result whose severity c gives): its controlSeverities entry's,
// else the rule's.
func (r *Rule) ControlCategory(c policyv1alpha1.ControlName) string {
	if cr, ok := r.controls[c]; ok && cr.category != "" {
		return cr.category
	}
	return r.Category()
}

// Reporting is the severity and category of the rule's result: for a
// result with uncovered violations, the highest severity among their
// controls (ControlSeverity), and the category of the control that gives
// it (the first in the standard's order when several do); otherwise,
// covered or clean, the rule's.
func (res *RuleResult) Reporting() (policyv1alpha1.Severity, string) {
	r := res.Rule
	var control policyv1alpha1.ControlName
	best := -1
	for i := range res.Findings {
		f := &res.Findings[i]
		if f.Covered() {
			continue
		}
		rank := SeverityRank(r.ControlSeverity(f.Control))
		if best < 0 || rank < best ||
			(rank == best && slices.Index(policyv1alpha1.Controls, f.Control) < slices.Index(policyv1alpha1.Controls, control)) {
			best, control = rank, f.Control
		}
	}
	if best < 0 {
		return r.Severity(), r.Category()
	}
	return r.ControlSeverity(control), r.ControlCategory(control)
}

// SeverityRank orders severities, 0 the most serious (critical); a word
// that is not a severity ranks after info.
func SeverityRank(s policyv1alpha1.Severity) int {
	if i := slices.Index(policyv1alpha1.Severities, s); i >= 0 {
		return i
	}
	return len(policyv1alpha1.Severities)
}

// compileReporting checks a rule's severity, category and
// controlSeverities. path is the rule's field path.
func compileReporting(pr *policyv1alpha1.PolicyRule, path string) (reporting, map[policyv1alpha1.ControlName]reporting, error) {
	own, err := checkReporting(pr.Severity, pr.Category, path)
	if err != nil {
		return reporting{}, nil, err
	}
	if pr.ControlSeverities == nil {
		return own, nil, nil
	}
	if len(pr.ControlSeverities) == 0 {
		return reporting{}, nil, fmt.Errorf("%s.controlSeverities: an empty list sets nothing; remove the field, or list the controls whose severity to set", path)
	}
	if n := len(pr.ControlSeverities); n > len(policyv1alpha1.Controls) {
		return reporting{}, nil, fmt.Errorf("%s.controlSeverities: %d entries; there are %d controls", path, n, len(policyv1alpha1.Controls))
	}
	controls := make(map[policyv1alpha1.ControlName]reporting, len(pr.ControlSeverities))
	for i, cs := range pr.ControlSeverities {
		entry := fmt.Sprintf("%s.controlSeverities[%d]", path, i)
		if !slices.Contains(policyv1alpha1.Controls, cs.ControlName) {
			return reporting{}, nil, fmt.Errorf("%s.controlName: %q is not a Pod Security Standards control", entry, cs.ControlName)
		}
		if _, dup := controls[cs.ControlName]; dup {
			return reporting{}, nil, fmt.Errorf("%s.controlName: %q is listed twice; list each control once", entry, cs.ControlName)
		}
		if cs.Severity == "" {
			return reporting{}, nil, fmt.Errorf("%s.severity: required; use one of %s", entry, severityWords())
		}
		cr, err := checkReporting(&cs.Severity, cs.Category, entry)
		if err != nil {
			return reporting{}, nil, err
		}
		controls[cs.ControlName] = cr
	}
	return own, controls, nil
}

// ValidateReporting is the check a rule's severity and category pass when
// the policy compiles (an empty one is unset), with its message naming the
// field at path: for tools that write policies (convert).
func ValidateReporting(severity policyv1alpha1.Severity, category, path string) error {
	var sp *policyv1alpha1.Severity
	if severity != "" {
		sp = &severity
	}
	var cp *string
	if category != "" {
		cp = &category
	}
	_, err := checkReporting(sp, cp, path)
	return err
}

// checkReporting checks a severity and a category that may be unset (nil);
// set, neither may be empty, as the schema has it.
func checkReporting(severity *policyv1alpha1.Severity, category *string, path string) (reporting, error) {
	var rp reporting
	if severity != nil {
		if !slices.Contains(policyv1alpha1.Severities, *severity) {
			return reporting{}, fmt.Errorf("%s.severity: %q is not a severity; use one of %s", path, *severity, severityWords())
		}
		rp.severity = *severity
	}
	if category != nil {
		if c := *category; len(c) > maxCategory || !categoryPattern.MatchString(c) {
			return reporting{}, fmt.Errorf("%s.category: %q is not a category: 1 to %d letters, digits, spaces and -._/()&:,+, starting with a letter, digit or \"(\"", path, c, maxCategory)
		}
		rp.category = *category
	}
	return rp, nil
}

func severityWords() string {
	words := make([]string, len(policyv1alpha1.Severities))
	for i, s := range policyv1alpha1.Severities {
		words[i] = string(s)
	}
	return strings.Join(words, ", ")
}
