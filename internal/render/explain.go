package render

import (
	"fmt"
	"io"
	"strings"

	policyv1alpha1 "github.com/podsieve/podsieve/api/v1alpha1"
	"github.com/podsieve/podsieve/internal/engine"
	"github.com/podsieve/podsieve/internal/index"
	"github.com/podsieve/podsieve/internal/manifest"
	"github.com/podsieve/podsieve/internal/offline"
	"github.com/podsieve/podsieve/internal/words"
)

// Explain writes podsieve explain: for each workload, and every rule of
// every policy, whether the rule applies and why; each violation and, for
// each source that covers it, the entry that does as the decision recorded
// it (its first covering entry), by file, document and path; for a violation
// nothing covers, the entries of its control that come closest; the
// exceptions that name the rule but do not apply, and why. The i-th
// decision is the i-th workload's, made in mode. A control other than ""
// limits the violations shown to that control's.
func Explain(w io.Writer, decisions []engine.Decision, in *offline.Input, mode engine.Mode, control policyv1alpha1.ControlName) {
	x := &explainer{
		w: w, snap: in.Index.Snapshot(), in: in, mode: mode, control: control,
		policyDocs: map[string]*manifest.Document{}, exceptionDocs: map[engine.Source]*manifest.Document{},
	}
	for i := range in.Set.Policies {
		d := &in.Set.Policies[i]
		x.policyDocs[d.Object.(*policyv1alpha1.SecurityPolicy).Name] = d
	}
	// Only the documents compiled: a change's exception that the input
	// ignored (in the cluster exceptions namespace) or that updates the
	// cluster state's copy must not name the other's document.
	compiled := map[string]bool{}
	for _, e := range in.Exceptions {
		compiled[e.Source] = true
	}
	for i := range in.Set.Exceptions {
		d := &in.Set.Exceptions[i]
		pe := d.Object.(*policyv1alpha1.PolicyException)
		if compiled[d.Where()] {
			x.exceptionDocs[engine.ExceptionSource(pe.Namespace, pe.Name)] = d
		}
	}
	for i, wl := range in.Workloads {
		if i > 0 {
			fmt.Fprintln(w)
		}
		x.workload(wl, decisions[i])
	}
}

type explainer struct {
	w             io.Writer
	snap          *index.Snapshot
	in            *offline.Input
	mode          engine.Mode
	control       policyv1alpha1.ControlName
	policyDocs    map[string]*manifest.Document
	exceptionDocs map[engine.Source]*manifest.Document
}

// docRef is "<file>, document <n>[, item <m>]", the document counted from 1,
// as eval and every error name a document.
func docRef(d *manifest.Document) string {
	if d == nil {
		return "?"
	}
	return d.Where()
}

// workload explains one object's decision.
func (x *explainer) workload(w offline.Workload, d engine.Decision) {
	o := w.Object
	labels := x.snap.NamespaceLabels(o.Namespace)
	verdict := "admitted"
	if !d.Allowed {
		verdict = "REFUSED"
	}
	fmt.Fprintf(x.w, "%s: %s\n", w, verdict)
	if x.control != "" {
		fmt.Fprintf(x.w, "  (only control %q)\n", x.control)
	}
	results := map[*engine.Rule]*engine.RuleResult{}
	for i := range d.Results {
		results[d.Results[i].Rule] = &d.Results[i]
	}
	policies := x.snap.Policies()
	if len(policies) == 0 {
		fmt.Fprintln(x.w, "  no SecurityPolicy in the input")
	}
	for _, p := range policies {
		for ri, r := range p.Rules {
			fmt.Fprintf(x.w, "  %s/%s (%s, %s) at %s, spec.rules[%d]:\n", p.Name, r.Name, r.LevelVersion(), p.Action, docRef(x.policyDocs[p.Name]), ri)
			res := results[r]
			switch {
			case x.mode == engine.Background && !p.Background:
				fmt.Fprintln(x.w, "    does not apply: the policy sets background: false, and this is a background decision")
			case res == nil:
				why := r.WhyNotMatch(o, labels)
				if why == "" {
					why = "it does not select the object"
				}
				fmt.Fprintf(x.w, "    does not apply: %s\n", why)
			default:
				x.rule(o, labels, ri, res)
			}
		}
	}
}

// rule explains one rule's result, violation by violation.
func (x *explainer) rule(o *engine.Object, labels map[string]string, ri int, res *engine.RuleResult) {
	r := res.Rule
	p := r.Policy
	shown, uncovered, total := 0, 0, 0
	for i := range res.Findings {
		f := &res.Findings[i]
		total++
		if !f.Covered() {
			uncovered++
		}
		if x.control != "" && f.Control != x.control {
			continue
		}
		shown++
		fmt.Fprintf(x.w, "    %d. %s\n", shown, f.Describe(o))
		if f.Covered() {
			for _, ex := range f.ExemptedBy {
				fmt.Fprintf(x.w, "       covered by %s: %s\n", ex.Source, x.coveringEntry(r, ri, ex))
			}
			continue
		}
		if f.Field == "" {
			fmt.Fprintln(x.w, "       NOT COVERED: this failure could not be placed on a field; only an exception with an empty podSecurity (the whole rule) covers it")
			continue
		}
		fmt.Fprintln(x.w, "       NOT COVERED")
		x.nearMisses(r, ri, res.Selected, f)
	}
	switch {
	case total == 0:
		fmt.Fprintln(x.w, "    no violation: pass")
	case x.control != "" && shown == 0:
		fmt.Fprintf(x.w, "    no violation of %q (%s of other controls)\n", x.control, words.Count(total, "violation"))
	}
	x.exceptionsThatDoNotApply(o, labels, res)
	switch res.Outcome {
	case engine.Pass:
		if total > 0 {
			fmt.Fprintf(x.w, "    => pass: every violation (%d) is covered\n", total)
		}
	case engine.Skip:
		fmt.Fprintf(x.w, "    => skip: %s waives the whole rule (%s)\n", engine.JoinSources(res.Exceptions, ", "), words.Count(total, "violation"))
	case engine.Fail:
		consequence := "the object is refused"
		if !res.Enforced() {
			consequence = fmt.Sprintf("reported, not refused (%s)", p.Action)
		}
		fmt.Fprintf(x.w, "    => fail: %d of %s not covered; %s\n", uncovered, words.Count(total, "violation"), consequence)
		for _, fix := range res.PodLevelFixes(o) {
			fmt.Fprintf(x.w, "    %s\n", fix)
		}
		fmt.Fprintf(x.w, "    %s\n", res.Hint(o))
		if res.Waivable() {
			fmt.Fprintln(x.w, "    podsieve exception generate with the same -f flags prints that exception.")
		}
	}
}

// coveringEntry is the entry that covers a violation, as the decision
// recorded it (engine.Exemption), by file, document and path: the first
// covering entry of its source, which is where the engine stopped.
func (x *explainer) coveringEntry(r *engine.Rule, ri int, ex engine.Exemption) string {
	if !ex.IsException() {
		return fmt.Sprintf("%s, spec.rules[%d].podSecurity.exclude[%d]", docRef(x.policyDocs[r.Policy.Name]), ri, ex.Entry)
	}
	ref := docRef(x.exceptionDocs[ex.Source])
	if ex.Entry == engine.WholeRuleEntry {
		return ref + ", spec.podSecurity is empty: it waives the whole rule"
	}
	return fmt.Sprintf("%s, spec.podSecurity[%d]", ref, ex.Entry)
}

// nearMisses lists the entries of the violation's control, from the rule's
// exclusions and the exceptions that apply, and why each does not cover it.
func (x *explainer) nearMisses(r *engine.Rule, ri int, selected []*engine.Exception, f *engine.Finding) {
	var lines []string
	for j, e := range r.Exclusions() {
		if e.SameControl(&f.Violation) {
			lines = append(lines, fmt.Sprintf("%s, spec.rules[%d].podSecurity.exclude[%d] (policy/%s/%s): %s",
				docRef(x.policyDocs[r.Policy.Name]), ri, j, r.Policy.Name, r.Name, strings.Join(e.WhyNotAll(&f.Violation), "; and ")))
		}
	}
	for _, ex := range selected {
		for j, e := range ex.Exclusions {
			if e.SameControl(&f.Violation) {
				lines = append(lines, fmt.Sprintf("%s, spec.podSecurity[%d] (%s): %s", docRef(x.exceptionDocs[ex.Source]), j, ex.Source,
					strings.Join(e.WhyNotAll(&f.Violation), "; and ")))
			}
		}
	}
	if len(lines) == 0 {
		fmt.Fprintf(x.w, "       no entry for %s applies to this object\n", f.Control)
		return
	}
	for _, l := range lines {
		fmt.Fprintf(x.w, "       does not cover it: %s\n", l)
	}
}

// exceptionsThatDoNotApply names every input exception that names the rule
// but does not count for this object: refused (expired, guardrails), or out
// of reach (another namespace, a match that does not select it).
func (x *explainer) exceptionsThatDoNotApply(o *engine.Object, labels map[string]string, res *engine.RuleResult) {
	r := res.Rule
	for _, rf := range res.Refused {
		fmt.Fprintf(x.w, "    not applied: %s (%s): %s\n", rf.Source, docRef(x.exceptionDocs[rf.Source]), rf.Message)
	}
	// Exceptions not Ready are a refusal above when they match; eval lists them.
	var ready []*engine.Exception
	for _, er := range x.in.Exceptions {
		if e := x.snap.Exception(er.Namespace, er.Name); er.Ready && e != nil {
			ready = append(ready, e)
		}
	}
	for _, u := range r.OutOfReach(ready, o, labels, x.mode) {
		fmt.Fprintf(x.w, "    out of reach: %s (%s) names this rule, but %s\n", u.Exception.Source, docRef(x.exceptionDocs[u.Exception.Source]), u.Why)
	}
}
