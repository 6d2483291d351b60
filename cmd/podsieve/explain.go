package main

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	policyv1alpha1 "github.com/podsieve/podsieve/api/v1alpha1"
	"github.com/podsieve/podsieve/internal/engine"
	"github.com/podsieve/podsieve/internal/index"
	"github.com/podsieve/podsieve/internal/manifest"
)

// explainOptions are podsieve explain's flags.
type explainOptions struct {
	inputFlags
	control string
}

func newExplainCommand() *cobra.Command {
	o := &explainOptions{}
	cmd := &cobra.Command{
		Use:   "explain -f WORKLOAD [-f POLICIES ...] [--control NAME]",
		Short: "Say, violation by violation, why a workload is admitted or refused",
		Long: `explain decides each pod-bearing object in the input as podsieve eval does,
and says for every rule of every policy why: whether the rule applies (and
which part of its match or exclude decides when it does not); each violation
and the entries that cover it, by file, document and path (a policy's
spec.rules[i].podSecurity.exclude[j], an exception's spec.podSecurity[j]);
for a violation nothing covers, the entries of its control that come closest
and the field that does not match; the exceptions that name the rule but do
not apply, and why.

Exit status: as podsieve eval: 0 when every object is admitted, 1 when an
Enforce policy refuses an object, 2 on bad input.`,
		Example: `  # Why is this Deployment refused?
  podsieve explain -f policies/ -f deploy.yaml

  # Only the Capabilities control
  podsieve explain -f policies/ -f deploy.yaml --control Capabilities`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return o.run(cmd.InOrStdin(), cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	f := cmd.Flags()
	o.bind(f, true)
	f.StringVar(&o.control, "control", "", `explain only the violations of this control, for example "Capabilities"`)
	_ = cmd.MarkFlagRequired("filename")
	return cmd
}

func (o *explainOptions) run(stdin io.Reader, stdout, stderr io.Writer) error {
	var control policyv1alpha1.ControlName
	if o.control != "" {
		for _, c := range policyv1alpha1.Controls {
			if strings.EqualFold(string(c), strings.TrimSpace(o.control)) {
				control = c
			}
		}
		if control == "" {
			return fmt.Errorf("--control %q: not a control; use one of %s", o.control, strings.Join(quoteEach(policyv1alpha1.Controls), ", "))
		}
	}
	set, in, now, err := o.load(stdin)
	if err != nil {
		return err
	}
	if err := requireWorkloads(in); err != nil {
		return err
	}
	if len(set.Policies) == 0 {
		fmt.Fprintln(stderr, "Warning: the input holds no SecurityPolicy, so nothing is enforced; add the cluster's policies with -f")
	}
	mode := o.mode()
	x := &explainer{
		w: stdout, snap: in.index.Snapshot(), in: in, now: now, mode: mode, control: control,
		policyDocs: map[string]*manifest.Document{}, exceptionDocs: map[engine.Source]*manifest.Document{},
	}
	for i := range set.Policies {
		d := &set.Policies[i]
		x.policyDocs[d.Object.(*policyv1alpha1.SecurityPolicy).Name] = d
	}
	for i := range set.Exceptions {
		d := &set.Exceptions[i]
		pe := d.Object.(*policyv1alpha1.PolicyException)
		x.exceptionDocs[engine.ExceptionSource(pe.Namespace, pe.Name)] = d
	}
	refused := 0
	for i, w := range in.workloads {
		if i > 0 {
			fmt.Fprintln(stdout)
		}
		if !x.workload(w) {
			refused++
		}
	}
	if refused > 0 {
		return &exitError{code: exitDenied, err: fmt.Errorf("%s refused by an Enforce policy", plural(refused, "object"))}
	}
	return nil
}

type explainer struct {
	w             io.Writer
	snap          *index.Snapshot
	in            *input
	now           time.Time
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

// workload explains one object and reports whether it is admitted.
func (x *explainer) workload(w workload) bool {
	o := w.object
	labels := x.snap.NamespaceLabels(o.Namespace)
	d := x.snap.DecideIn(o, labels, x.now, x.mode)
	verdict := "admitted"
	if !d.Allowed {
		verdict = "REFUSED"
	}
	fmt.Fprintf(x.w, "%s %s/%s (%s): %s\n", o.Kind, o.Namespace, o.Name, w.doc.Where(), verdict)
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
	return d.Allowed
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
			for _, src := range f.ExemptedBy {
				for _, entry := range x.coveringEntries(r, ri, src, &f.Violation) {
					fmt.Fprintf(x.w, "       covered by %s: %s\n", src, entry)
				}
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
		fmt.Fprintf(x.w, "    no violation of %q (%s of other controls)\n", x.control, plural(total, "violation"))
	}
	x.exceptionsThatDoNotApply(o, labels, res)
	switch res.Outcome {
	case engine.Pass:
		if total > 0 {
			fmt.Fprintf(x.w, "    => pass: every violation (%d) is covered\n", total)
		}
	case engine.Skip:
		fmt.Fprintf(x.w, "    => skip: %s waives the whole rule (%s)\n", engine.JoinSources(res.Exceptions, ", "), plural(total, "violation"))
	case engine.Fail:
		consequence := "the object is refused"
		if !res.Enforced() {
			consequence = fmt.Sprintf("reported, not refused (%s)", p.Action)
		}
		fmt.Fprintf(x.w, "    => fail: %d of %s not covered; %s\n", uncovered, plural(total, "violation"), consequence)
		fmt.Fprintf(x.w, "    %s\n", res.Hint(o))
		if res.Waivable() {
			fmt.Fprintln(x.w, "    podsieve exception generate with the same -f flags prints that exception.")
		}
	}
}

// coveringEntries are the entries of one source (policy/<p>/<r> or
// exception/<ns>/<name>) that cover a violation, each as file, document and
// path.
func (x *explainer) coveringEntries(r *engine.Rule, ri int, src engine.Source, v *engine.Violation) []string {
	var out []string
	if src.Kind == engine.SourcePolicyRule {
		for j, e := range r.Exclusions() {
			if e.WhyNot(v) == "" {
				out = append(out, fmt.Sprintf("%s, spec.rules[%d].podSecurity.exclude[%d]", docRef(x.policyDocs[r.Policy.Name]), ri, j))
			}
		}
		return out
	}
	e := x.snap.Exception(src.Namespace, src.Name)
	if e == nil {
		return []string{"(not in the input)"}
	}
	ref := docRef(x.exceptionDocs[src])
	if e.WholeRule {
		return []string{ref + ", spec.podSecurity is empty: it waives the whole rule"}
	}
	for j, ex := range e.Exclusions {
		if ex.WhyNot(v) == "" {
			out = append(out, fmt.Sprintf("%s, spec.podSecurity[%d]", ref, j))
		}
	}
	return out
}

// nearMisses lists the entries of the violation's control, from the rule's
// exclusions and the exceptions that apply, and why each does not cover it.
func (x *explainer) nearMisses(r *engine.Rule, ri int, selected []*engine.Exception, f *engine.Finding) {
	var lines []string
	for j, e := range r.Exclusions() {
		if e.SameControl(&f.Violation) {
			lines = append(lines, fmt.Sprintf("%s, spec.rules[%d].podSecurity.exclude[%d] (policy/%s/%s): %s",
				docRef(x.policyDocs[r.Policy.Name]), ri, j, r.Policy.Name, r.Name, e.WhyNot(&f.Violation)))
		}
	}
	for _, ex := range selected {
		for j, e := range ex.Exclusions {
			if e.SameControl(&f.Violation) {
				lines = append(lines, fmt.Sprintf("%s, spec.podSecurity[%d] (%s): %s", docRef(x.exceptionDocs[ex.Source]), j, ex.Source, e.WhyNot(&f.Violation)))
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
	for _, er := range x.in.exceptions {
		if e := x.snap.Exception(er.Namespace, er.Name); er.Ready && e != nil {
			ready = append(ready, e)
		}
	}
	for _, u := range r.OutOfReach(ready, o, labels, x.mode) {
		fmt.Fprintf(x.w, "    out of reach: %s (%s) names this rule, but %s\n", u.Exception.Source, docRef(x.exceptionDocs[u.Exception.Source]), u.Why)
	}
}
