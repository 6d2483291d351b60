package engine

import (
	"fmt"
	"iter"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/labels"
)

// This file answers "why not" for podsieve explain. Each function decides
// with the same code as the decision itself (filter.mismatch behind
// filter.matches, Exception.inScope behind Exception.Matches,
// Exclusion.mismatch behind Exclusion.covers) and only adds the words, so an
// explanation cannot disagree with a verdict.

// SameControl reports whether the entry is about the violation's control,
// including a HostPath Volumes entry for the hostPath part of Volume Types:
// the entries worth explaining when the violation is not covered.
func (x *Exclusion) SameControl(v *Violation) bool {
	return x.control == v.Control || x.coversOverride(v)
}

// WhyNotMatch says why the rule does not apply to an object whose namespace
// has nsLabels, or "" when it does.
func (r *Rule) WhyNotMatch(o *Object, nsLabels map[string]string) string {
	if r.match != nil {
		if why := r.match.whyNot(o, nsLabels); why != "" {
			return "match." + why
		}
	}
	if r.exclude != nil && r.exclude.matches(o, nsLabels) {
		if what := r.exclude.exemption(o); what != "" {
			return "its exclude selects the object and exempts " + what
		}
		return "its exclude selects the object"
	}
	return ""
}

// WhyNotMatch says why the exception does not reach an object whose
// namespace has nsLabels (Matches is false): scope when the object is out of
// its namespaces, match when its match does not select the object (checked
// whatever the namespace, so that an exception written for the object but
// created in the wrong namespace can be told apart). Both are "" when it
// reaches the object.
func (e *Exception) WhyNotMatch(o *Object, nsLabels map[string]string) (scope, match string) {
	if !e.inScope(o) {
		scope = fmt.Sprintf("it is in namespace %q, and an exception applies only in its own namespace", e.Namespace)
	}
	if e.match != nil {
		if why := e.match.whyNot(o, nsLabels); why != "" {
			match = "its match." + why
		}
	}
	return scope, match
}

// Waivable reports whether the policy's guardrails let a PolicyException
// waive every uncovered violation of the result: what the last line of a
// denial (Hint) says.
func (res *RuleResult) Waivable() bool {
	refused, limited := res.Rule.Policy.unwaivableControls(res)
	return res.Rule.Policy.PermitsAny() && len(refused) == 0 && len(limited) == 0
}

// whyNot names the first part of the filter that does not select the
// object, in the order matches tests them, or "".
func (f *filter) whyNot(o *Object, nsLabels map[string]string) string {
	switch f.mismatch(o, nsLabels) {
	case filterNamespaces:
		return fmt.Sprintf("namespaces %s do not match namespace %q", strings.Join(quoteAll(f.namespaces.Patterns()), ", "), o.Namespace)
	case filterNamespaceSelector:
		return fmt.Sprintf("namespaceSelector %q does not match the labels of namespace %q (%s)", f.nsSelector.String(), o.Namespace, labels.Set(nsLabels).String())
	case filterSelector:
		return fmt.Sprintf("selector %q does not match the object's pod labels (%s)", f.selector.String(), labels.Set(o.Labels).String())
	case filterNames:
		return fmt.Sprintf("names %s do not match %q", strings.Join(quoteAll(f.names.Patterns()), ", "), o.Name)
	case filterKinds:
		return fmt.Sprintf("kinds %s do not include %s", strings.Join(quoteAll(f.kinds), ", "), o.Kind)
	case filterExemptions:
		return "runtimeClassNames and usernames exempt neither its runtime class nor its requester"
	}
	return ""
}

// Unreached is an exception that names a rule but does not reach an object,
// and why.
type Unreached struct {
	Exception *Exception
	Why       string
}

// OutOfReach lists the exceptions among excs that name the rule but do not
// reach the object (Matches is false), with why (WhyNotMatch). An exception
// both out of scope and not matching was written for other objects
// elsewhere, and is left out; so are exceptions a background decision does
// not consider.
func (r *Rule) OutOfReach(excs []*Exception, o *Object, nsLabels map[string]string, mode Mode) []Unreached {
	var out []Unreached
	for _, e := range excs {
		if !e.Targets(r.Policy.Name, r.Name) || e.Matches(o, nsLabels) || (mode == Background && !e.Background) {
			continue
		}
		scope, match := e.WhyNotMatch(o, nsLabels)
		if scope != "" && match != "" {
			continue
		}
		out = append(out, Unreached{Exception: e, Why: scope + match})
	}
	return out
}

// maxUnreached is the most exceptions a refusal names as out of reach, per
// rule; MaxUnreachedExamined the most of the namespace's exceptions a
// refusal looks at in all, and unreachedSteps the work it may spend testing
// their entries: the refusal of a pod-only user's pod must stay cheap
// whatever the namespace holds.
const (
	maxUnreached         = 4
	MaxUnreachedExamined = 64
	unreachedSteps       = 1_000_000
)

// NoteUnreached records, in each result of the decision that refuses, the
// exceptions among excs (those in force that reach the object's namespace)
// that are in the object's own namespace, name the rule, pass the policy's
// guardrails and would waive at least one of its uncovered violations, but
// do not reach the object, so that the refusal names them, and which part
// of their match leaves the object out (a selector that a chart upgrade
// changed, a name the workload no longer has). It says no more of them than
// their name and that part (not its patterns, nor the object's labels): the
// requester may only create pods. It looks at no more than
// MaxUnreachedExamined exceptions and spends at most unreachedSteps,
// including what each exception cost to hand over (the steps excs yields
// with it: a holder that must compile an exception says what that cost).
// It draws from excs as it looks (and may range over it again, from the
// start, for each result), so that a holder compiles only those looked at.
func (d *Decision) NoteUnreached(excs iter.Seq2[*Exception, int64], nsLabels map[string]string, now time.Time) {
	st := newDecideState(Limits{MaxSteps: unreachedSteps})
	examined := 0
	for i := range d.Results {
		res := &d.Results[i]
		if !res.Enforced() || len(res.Unreached) > 0 {
			continue
		}
		for e, cost := range excs {
			examined++
			if !st.spend(cost) {
				return
			}
			if e.Namespace == d.Object.Namespace && st.spend(stepsPerEntry) && e.Targets(res.Rule.Policy.Name, res.Rule.Name) &&
				!e.Matches(d.Object, nsLabels) && res.Rule.Policy.Permits(e, now) == nil && e.wouldCover(res, st) {
				res.Unreached = append(res.Unreached, Unreached{Exception: e, Why: e.matchPartMissing(d.Object, nsLabels)})
			}
			// Before drawing another: drawing may compile it.
			if len(res.Unreached) == maxUnreached || examined == MaxUnreachedExamined || st.stopped != nil {
				return
			}
		}
	}
}

// matchPartMissing names the part of the exception's match that leaves the
// object out, without its patterns: "its match.selector does not select
// it".
func (e *Exception) matchPartMissing(o *Object, nsLabels map[string]string) string {
	part := "match"
	if e.match != nil {
		switch e.match.mismatch(o, nsLabels) {
		case filterNamespaces:
			part = "match.namespaces"
		case filterNamespaceSelector:
			part = "match.namespaceSelector"
		case filterSelector:
			part = "match.selector"
		case filterNames:
			part = "match.names"
		case filterKinds:
			part = "match.kinds"
		}
	}
	return fmt.Sprintf("its %s does not select it", part)
}

// wouldCover reports whether one of the exception's entries covers one of
// the result's uncovered violations, as if the exception reached the
// object; false once st's budget runs out.
func (e *Exception) wouldCover(res *RuleResult, st *decideState) bool {
	for i := range res.Findings {
		f := &res.Findings[i]
		if f.Covered() || f.Field == "" {
			continue
		}
		for _, id := range f.controlIDs() {
			if id < 0 {
				continue
			}
			for _, k := range e.groups.of(id) {
				if !st.spend(2) {
					return false
				}
				switch e.Exclusions[k].mismatch(&f.Violation, st) {
				case noMismatch:
					return true
				case stopped:
					return false
				}
			}
		}
	}
	return false
}
