package engine

import (
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"k8s.io/pod-security-admission/policy"

	policyv1alpha1 "github.com/podsieve/podsieve/api/v1alpha1"
)

// Outcome is a rule's result for one object.
type Outcome string

const (
	// Pass means no violation, or every violation covered entry by entry.
	Pass Outcome = "pass"
	// Fail means at least one violation is not covered.
	Fail Outcome = "fail"
	// Skip means the rule was waived whole by an exception with an empty
	// podSecurity, and there were violations to waive.
	Skip Outcome = "skip"
)

// Finding is a violation with the entries that cover it. Covered violations
// are kept, so that reports show what was waived and by whom.
type Finding struct {
	Violation
	// ExemptedBy lists every entry source that covers the violation, each
	// with the entry of it that does. JSON writes each as its source:
	// policy/<policy>/<rule> or exception/<namespace>/<name>.
	ExemptedBy []Exemption `json:"exemptedBy"`
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
	Exceptions []Source // the exceptions that covered something
	// Selected are the exceptions in force that name the rule, reach the
	// object and pass the guardrails: those the entries of Findings were
	// tested against, whether they covered something or not (set by
	// Decide; an explanation lists their entries that came close).
	Selected []*Exception
	// Refused are exceptions that name the rule and match the object but do
	// not count (expired, or refused by the guardrails), reported when the
	// rule did not pass.
	Refused []Refusal
	// Unreached are exceptions in force in the object's namespace that
	// name the rule and would waive one of its uncovered violations, but do
	// not reach the object, with why (set by Decision.NoteUnreached, for a
	// refusal to name them).
	Unreached []Unreached
}

// Evaluate decides one rule on a pod spec. exceptions are the exceptions that
// apply to the object and are permitted for this rule (SelectExceptions
// chooses them); they combine per violation. It runs within DefaultLimits.
//
// The verdict is upstream's: the checks of the rule's level and version run
// once, unforked. Only failing checks are attributed, and each violation is
// then covered or not by the rule's exclusions and the exceptions' entries.
func (r *Rule) Evaluate(o *Object, exceptions []*Exception) RuleResult {
	st := newDecideState(DefaultLimits)
	st.sizeUp(o)
	return r.evaluate(o, exceptions, st)
}

func (r *Rule) evaluate(o *Object, exceptions []*Exception, st *decideState) RuleResult {
	res := r.check(o, st)
	if st.stopped == nil && len(res.Findings) > 0 {
		r.waive(&res, exceptions, st)
	}
	return res
}

// check runs the rule's checks and attributes each failure: a result with
// every violation as a finding, none covered yet, and Outcome Pass (waive
// decides it when there are findings). A check that reaches the budget
// returns a stopped result.
func (r *Rule) check(o *Object, st *decideState) RuleResult {
	res := RuleResult{Rule: r, Outcome: Pass}
	st.checking = true
	ok := st.spend(st.checkSteps)
	st.checking = false
	if !ok {
		return stoppedResult(res, st.stopped)
	}
	// Run every check first, then attribute the failures into the findings,
	// sized once for what most checks report, one violation per container: a
	// Finding is large, and growing the slice one append at a time, or
	// copying violations into it, dominated the cost of pods with many
	// containers (BenchmarkWorstCase/many-containers).
	var failedBuf [24]failed
	failures := failedBuf[:0]
	for i := range r.checks.checks {
		// Paid for above, but polled between checks: a caller whose
		// deadline passed waits for one check, not for all of them.
		if !st.checkDone() {
			return stoppedResult(res, st.stopped)
		}
		c := &r.checks.checks[i]
		if cr := c.fn(o.Meta, o.Spec); !cr.Allowed {
			failures = append(failures, failed{check: c, result: cr})
		}
	}
	if len(failures) == 0 {
		return res
	}
	res.Findings = make([]Finding, 0, len(failures)*(1+countContainers(o.Spec)))
	for _, fl := range failures {
		if !st.checkDone() {
			res.Findings = nil
			return stoppedResult(res, st.stopped)
		}
		n := len(res.Findings)
		res.Findings = appendAttribution(res.Findings, fl.check.id, r.checks.lv.Version, o.Meta, o.Spec)
		if len(res.Findings) == n {
			// Attribution disagrees with upstream: report the failure
			// unplaced, so that no field-level entry can cover it (fail closed).
			res.Findings = append(res.Findings, Finding{
				Violation: Violation{Control: fl.check.control, CheckID: string(fl.check.id), Scope: ScopePod, Values: []string{}},
				Detail:    reasonOf(fl.result),
			})
		}
	}
	return res
}

// waive covers the findings of check with the rule's exclusions and the
// exceptions' entries, or skips the rule when an exception waives it whole,
// and sets the outcome.
func (r *Rule) waive(res *RuleResult, exceptions []*Exception, st *decideState) {
	for _, e := range exceptions {
		if e.WholeRule {
			res.Outcome = Skip
			for i := range res.Findings {
				res.Findings[i].ExemptedBy = append(res.Findings[i].ExemptedBy, Exemption{Source: e.Source, Entry: WholeRuleEntry})
			}
			res.Exceptions = append(res.Exceptions, e.Source)
		}
	}
	if res.Outcome == Skip {
		return
	}
	if !r.cover(res, exceptions, st) {
		*res = stoppedResult(*res, st.stopped)
	}
}

// cover tests each finding against the entries of its control, source by
// source (the rule's own entries, then each exception's), and records in
// ExemptedBy every source that covers it with its first entry that does: a
// source stops there. It returns false when the decision's budget ran out.
func (r *Rule) cover(res *RuleResult, exceptions []*Exception, st *decideState) bool {
	nsrc := 1 + len(exceptions)
	entries := len(r.exclusions)
	for _, e := range exceptions {
		entries += len(e.Exclusions)
	}
	st.entries, st.exceptions = entries, len(exceptions)
	if !st.spend(int64(entries)) {
		return false
	}
	// Sources are distinct unless the same exception was offered twice;
	// only then does ExemptedBy need a look before each append.
	dup := hasDuplicateSources(exceptions)
	var usedBuf [8]bool
	var used []bool
	if len(exceptions) > len(usedBuf) {
		used = make([]bool, len(exceptions))
	} else {
		used = usedBuf[:len(exceptions)]
	}
	for i := range res.Findings {
		f := &res.Findings[i]
		if f.Field == "" {
			res.Outcome = Fail
			continue
		}
		ids := f.controlIDs()
		for s := range nsrc {
			xs, groups := r.entriesOf(s, exceptions)
			if !st.spend(2) {
				return false
			}
			if len(xs) == 0 {
				continue // no call for a source without entries (most rules)
			}
			k, ok := firstCovering(xs, groups, ids, &f.Violation, st)
			if !ok {
				return false
			}
			if k < 0 {
				continue
			}
			f.exempt(Exemption{Source: xs[k].Source, Entry: k}, dup)
			if s > 0 && !used[s-1] {
				used[s-1] = true
				res.usedException(exceptions[s-1].Source, dup)
			}
		}
		if !f.Covered() {
			res.Outcome = Fail
		}
	}
	return true
}

// usedException records in Exceptions an exception that covered something.
// Sources are distinct unless the same exception was offered twice (dup);
// only then does it look for src before it appends.
func (res *RuleResult) usedException(src Source, dup bool) {
	if !dup || !slices.Contains(res.Exceptions, src) {
		res.Exceptions = append(res.Exceptions, src)
	}
}

// entriesOf are source s's entries, grouped by control: the rule's own for
// 0, exceptions[s-1]'s after.
func (r *Rule) entriesOf(s int, exceptions []*Exception) ([]Exclusion, *entryGroups) {
	if s == 0 {
		return r.exclusions, &r.groups
	}
	return exceptions[s-1].Exclusions, &exceptions[s-1].groups
}

// firstCovering is the index in xs of the first entry of the controls ids
// (groups holds xs by control) that covers v, or -1 when none does. ok is
// false when the decision's budget ran out.
func firstCovering(xs []Exclusion, groups *entryGroups, ids [2]int, v *Violation, st *decideState) (k int, ok bool) {
	for _, id := range ids {
		if id < 0 {
			continue
		}
		for _, j := range groups.of(id) {
			switch xs[j].mismatch(v, st) {
			case noMismatch:
				return int(j), true
			case stopped:
				return -1, false
			}
		}
	}
	return -1, true
}

// stoppedResult is the result of a rule whose evaluation stopped: it fails,
// with the findings found so far (those not yet covered may be violations an
// entry would have covered) and one more that says why it stopped, which no
// entry covers.
func stoppedResult(res RuleResult, err *StoppedError) RuleResult {
	res.Outcome = Fail
	res.Findings = append(res.Findings, stoppedFinding(err))
	return res
}

// entryGroups are one source's entries grouped by control, so that a finding
// tests only the entries of its control: the indices of control c's entries
// are idx[start[c]:start[c+1]]. They are built once, when the rule or the
// exception is compiled (groupEntries). The zero value holds no entry.
type entryGroups struct {
	start [maxControls + 1]uint8
	idx   []uint8
}

// maxControls bounds len(policyv1alpha1.Controls), for entryGroups.
const maxControls = 24

// groupEntries groups xs by control. A source has at most 64 entries (the
// schema's limit on a rule's exclude; an exception has 16), so a uint8
// index holds them.
func groupEntries(xs []Exclusion) entryGroups {
	var g entryGroups
	if len(xs) == 0 {
		return g
	}
	if len(xs) > 255 {
		panic("engine: more than 255 entries in one source")
	}
	var counts [maxControls]uint8
	for i := range xs {
		if c := controlID(xs[i].control); c >= 0 {
			counts[c]++
		}
	}
	for c := range maxControls {
		g.start[c+1] = g.start[c] + counts[c]
	}
	g.idx = make([]uint8, g.start[maxControls])
	var filled [maxControls]uint8
	for i := range xs {
		if c := controlID(xs[i].control); c >= 0 {
			g.idx[g.start[c]+filled[c]] = uint8(i)
			filled[c]++
		}
	}
	return g
}

// of returns the indices of control id's entries.
func (g *entryGroups) of(id int) []uint8 {
	if g.idx == nil {
		return nil
	}
	return g.idx[g.start[id]:g.start[id+1]]
}

var controlIDs = func() map[policyv1alpha1.ControlName]int {
	if len(policyv1alpha1.Controls) > maxControls {
		panic("engine: raise maxControls")
	}
	m := make(map[policyv1alpha1.ControlName]int, len(policyv1alpha1.Controls))
	for i, c := range policyv1alpha1.Controls {
		m[c] = i
	}
	return m
}()

// controlID is the index of a control in policyv1alpha1.Controls, or -1.
func controlID(control policyv1alpha1.ControlName) int {
	if id, ok := controlIDs[control]; ok {
		return id
	}
	return -1
}

// hostPathVolumesID is HostPath Volumes' index, whose entries also cover the
// restricted volume check's hostPath findings (coversOverride).
var hostPathVolumesID = controlID(policyv1alpha1.ControlHostPathVolumes)

// controlIDs are the controls whose entries may cover the finding: its own,
// and HostPath Volumes for the restricted volume check's hostPath findings.
func (f *Finding) controlIDs() [2]int {
	ids := [2]int{controlID(f.Control), -1}
	if f.CheckID == string(checkRestrictedVolumes) && f.Field == fHostPathVolume && ids[0] != hostPathVolumesID {
		ids[1] = hostPathVolumesID
	}
	return ids
}

// hasDuplicateSources reports whether two exceptions share a source.
func hasDuplicateSources(excs []*Exception) bool {
	if len(excs) <= 16 {
		for i := range excs {
			for j := range i {
				if excs[i].Source == excs[j].Source {
					return true
				}
			}
		}
		return false
	}
	seen := make(map[Source]bool, len(excs))
	for _, e := range excs {
		if seen[e.Source] {
			return true
		}
		seen[e.Source] = true
	}
	return false
}

// failed is a failing check and upstream's result.
type failed struct {
	check  *check
	result policy.CheckResult
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
	b.WriteString(string(f.Control))
	if f.Scope == ScopeContainer {
		fmt.Fprintf(&b, ": %s %q", kindWord(&f.Violation), f.Container)
		if f.Image != "" {
			fmt.Fprintf(&b, " (image %s)", Clip(f.Image, maxDescribedBytes))
		}
	} else {
		b.WriteString(": pod")
	}
	switch {
	case f.Field == "":
		fmt.Fprintf(&b, ": %s", Clip(f.Detail, 4*maxDescribedBytes))
	case len(f.Values) == 0:
		fmt.Fprintf(&b, " must set %s", f.FieldPath(o))
	default:
		fmt.Fprintf(&b, " sets %s to ", f.FieldPath(o))
		for i, v := range f.Values[:min(len(f.Values), maxDescribedValues)] {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(Clip(v, maxDescribedBytes))
		}
		if more := len(f.Values) - maxDescribedValues; more > 0 {
			fmt.Fprintf(&b, " and %d more", more)
		}
	}
	return b.String()
}

// What Describe prints of a finding at most: a pod may set thousands of
// values (made-up capabilities, host ports) and strings of megabytes (an
// image, an SELinux type), and a message that holds them all is one the
// API server cuts, no one reads, and that costs each rule that repeats it
// their size again.
const (
	maxDescribedValues = 32
	maxDescribedBytes  = 256
)

// ClipValues are values as Describe lists them: at most 32, each at most
// 256 bytes. It returns values itself when it cuts nothing, which is the
// usual case, so a caller that records values (the webhook's audit
// annotation) allocates only for the long ones.
func ClipValues(values []string) []string {
	long := len(values) > maxDescribedValues
	for _, v := range values[:min(len(values), maxDescribedValues)] {
		long = long || len(v) > maxDescribedBytes
	}
	if !long {
		return values
	}
	out := make([]string, 0, min(len(values), maxDescribedValues))
	for _, v := range values[:min(len(values), maxDescribedValues)] {
		out = append(out, Clip(v, maxDescribedBytes))
	}
	return out
}

// Clip keeps at most n bytes of s, on a rune boundary, and says how long s
// was when it cut it.
func Clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return fmt.Sprintf("%s…(%d bytes)", s[:cut], len(s))
}

// kindWord names a violation's kind of container in messages.
func kindWord(v *Violation) string {
	switch v.Kind() {
	case policyv1alpha1.ContainerKindInit:
		return "init container"
	case policyv1alpha1.ContainerKindSidecar:
		return "sidecar container"
	case policyv1alpha1.ContainerKindEphemeral:
		return "ephemeral container"
	}
	return "container"
}

// DenyMessage explains a failed rule to the person whose request it refused:
// the policy, rule and level, every uncovered violation, and whether a
// PolicyException in the namespace could waive them.
func (res *RuleResult) DenyMessage(o *Object) string { return res.message(o, "is refused by") }

// ViolationMessage says the same of an object that exists already (the
// background scan's events): the same lines, with "violates" for "is
// refused by".
func (res *RuleResult) ViolationMessage(o *Object) string { return res.message(o, "violates") }

// maxMessageFindings is the most violations a rule's message lists.
const maxMessageFindings = 64

func (res *RuleResult) message(o *Object, verb string) string {
	var b strings.Builder
	r := res.Rule
	fmt.Fprintf(&b, "%s %s/%s %s SecurityPolicy %q rule %q (%s):",
		o.Kind, o.Namespace, o.Name, verb, r.Policy.Name, r.Name, r.LevelVersion())
	listed, more := 0, 0
	for i := range res.Findings {
		if f := &res.Findings[i]; !f.Covered() {
			if listed == maxMessageFindings {
				more++
				continue
			}
			listed++
			b.WriteString("\n- ")
			b.WriteString(f.Describe(o))
		}
	}
	if more > 0 {
		fmt.Fprintf(&b, "\n- and %d more violations of this rule", more)
	}
	b.WriteString(res.podLevelFixLines(o))
	for _, rf := range res.Refused {
		fmt.Fprintf(&b, "\n%s does not apply: %s", rf.Source, rf.Message)
	}
	for _, u := range res.Unreached {
		fmt.Fprintf(&b, "\n%s would waive a violation here but does not reach this object: %s", u.Exception.Source, u.Why)
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
	if refused, limited := p.unwaivableControls(res); len(refused) > 0 || len(limited) > 0 {
		// What no exception may waive, and why: the control is not
		// allowed, or its guardrails allow other fields, kinds, images or
		// values than these.
		var parts []string
		if len(refused) > 0 {
			parts = append(parts, fmt.Sprintf("does not allow PolicyExceptions for %s", strings.Join(quoteAll(refused), ", ")))
		}
		if len(limited) > 0 {
			them := "them"
			if len(refused) == 0 {
				them = "PolicyExceptions"
			}
			only := make([]string, len(limited))
			for i, l := range limited {
				only[i] = fmt.Sprintf("for %q only %s", l.control, l.only)
			}
			parts = append(parts, fmt.Sprintf("allows %s %s", them, strings.Join(only, " and ")))
		}
		return fmt.Sprintf("Policy %q %s: change the workload.", p.Name, strings.Join(parts, ", and "))
	}
	if g := p.guardrails; g.ClusterExceptionsOnly != nil && *g.ClusterExceptionsOnly {
		return fmt.Sprintf("Only a PolicyException in the cluster exceptions namespace, written by a cluster admin with match.namespaces: [%q], naming policy %q rule %q can waive these (spec.exceptions.clusterExceptionsOnly).",
			o.Namespace, p.Name, res.Rule.Name)
	}
	return fmt.Sprintf("A PolicyException in namespace %q naming policy %q rule %q can waive these.", o.Namespace, p.Name, res.Rule.Name)
}

// unwaivableControls are the controls of the result's uncovered violations
// that no exception the guardrails permit could waive (Waivable), in order
// of appearance: refused are those the policy allows no exception for,
// limited those whose per-control guardrails allow exceptions, but not for
// these violations, with the first guardrail that refuses.
func (p *Policy) unwaivableControls(res *RuleResult) (refused []policyv1alpha1.ControlName, limited []limitedControl) {
	for i := range res.Findings {
		f := &res.Findings[i]
		control := WaiverControl(f)
		if f.Covered() || slices.Contains(refused, control) || slices.ContainsFunc(limited, func(l limitedControl) bool { return l.control == control }) {
			continue
		}
		if !p.AllowsControl(control) {
			refused = append(refused, control)
		} else if only := p.limitRefusing(f); only != "" {
			limited = append(limited, limitedControl{control: control, only: only})
		}
	}
	return refused, limited
}

// limitedControl is a control whose guardrails allow exceptions only for
// what a violation is not: only says for what ("for the values ...").
type limitedControl struct {
	control policyv1alpha1.ControlName
	only    string
}
