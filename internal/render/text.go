package render

import (
	"fmt"
	"io"

	"github.com/podsieve/podsieve/internal/engine"
	"github.com/podsieve/podsieve/internal/offline"
	"github.com/podsieve/podsieve/internal/words"
)

// Text writes podsieve eval -o text, what a person reads in a CI log: a
// block per object, then the exceptions, then one summary line. The i-th
// decision is the i-th workload's.
func Text(w io.Writer, decisions []engine.Decision, in *offline.Input) {
	admitted, refused, warned := 0, 0, 0
	for i, d := range decisions {
		verdict := "admitted"
		if d.Allowed {
			admitted++
		} else {
			verdict = "REFUSED"
			refused++
		}
		fmt.Fprintf(w, "%s: %s\n", in.Workloads[i], verdict)
		if len(d.Results) == 0 {
			fmt.Fprintln(w, "  no policy rule matches")
		}
		softFail := false
		for j := range d.Results {
			res := &d.Results[j]
			textResult(w, d.Object, res)
			softFail = softFail || (res.Outcome == engine.Fail && !res.Enforced())
		}
		if softFail && d.Allowed {
			warned++
		}
	}
	if len(in.Exceptions) > 0 {
		fmt.Fprintln(w, "Exceptions:")
		for _, e := range in.Exceptions {
			fmt.Fprintf(w, "  %s/%s (%s): %s: %s\n", e.Namespace, e.Name, e.Source, e.Reason, e.Message)
		}
	}
	summary := fmt.Sprintf("%s: %d admitted, %d refused", words.Count(len(decisions), "object"), admitted, refused)
	if warned > 0 {
		summary += fmt.Sprintf(", %d admitted with Audit or Warn violations", warned)
	}
	if ignored := in.Set.Ignored; len(ignored) > 0 {
		summary += fmt.Sprintf("; %s of other kinds ignored", words.Count(len(ignored), "object"))
	}
	fmt.Fprintln(w, summary)
}

// textResult writes one rule's result: its outcome, each violation, covered
// or not, and for a failure what could be done.
func textResult(w io.Writer, o *engine.Object, res *engine.RuleResult) {
	r := res.Rule
	fmt.Fprintf(w, "  %s/%s (%s, %s): %s\n", r.Policy.Name, r.Name, r.LevelVersion(), r.Policy.Action, res.Outcome)
	for k := range res.Findings {
		f := &res.Findings[k]
		if f.Covered() {
			fmt.Fprintf(w, "    exempt: %s [by %s]\n", f.Describe(o), engine.JoinSources(f.ExemptingSources(), ", "))
		} else {
			fmt.Fprintf(w, "    VIOLATION: %s\n", f.Describe(o))
		}
	}
	for _, fix := range res.PodLevelFixes(o) {
		fmt.Fprintf(w, "    %s\n", fix)
	}
	for _, rf := range res.Refused {
		fmt.Fprintf(w, "    not applied: %s: %s\n", rf.Source, rf.Message)
	}
	if res.Outcome == engine.Fail {
		fmt.Fprintf(w, "    %s\n", res.Hint(o))
	}
}
