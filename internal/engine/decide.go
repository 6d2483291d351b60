package engine

import (
	"fmt"
	"math"
	"slices"
	"time"
)

// Decision is every matching rule's result for one object.
type Decision struct {
	Object  *Object
	Results []RuleResult
	// Allowed is false only when an Enforce policy's rule fails, or was not
	// finished within the decision's Limits.
	Allowed bool
	// Err is set when the decision stopped before every rule was decided
	// (a *StoppedError): its work budget ran out or its caller cancelled it.
	// Each rule not finished has Outcome Fail and a finding with CheckID
	// StoppedCheckID whose Detail is Err's message, so an Enforce rule refuses.
	Err error
	// Steps is the work the decision did, in the steps of Limits.MaxSteps.
	Steps int64
}

// Applied is the exceptions that covered something in the decision, each
// once, in the order the rules used them: what an admission names in its
// annotation and warning and what status.lastAppliedTime records.
func (d *Decision) Applied() []Source {
	var used []Source
	for i := range d.Results {
		for _, src := range d.Results[i].Exceptions {
			if !slices.Contains(used, src) {
				used = append(used, src)
			}
		}
	}
	return used
}

// Mode says who asks: admission honours every active exception; a
// background scan honours only those with background: true.
type Mode int

const (
	// Admission is a review of an object being created or updated.
	Admission Mode = iota
	// Background is the scan of objects already in the cluster.
	Background
)

// Candidates returns the exceptions that may apply to the rules of one
// policy: every exception, or an index's pick for the object's namespace.
// SelectExceptions narrows them. left is what the decision's budget has
// left, in steps; spent is what handing the exceptions over cost, charged
// to the decision: an index that holds exceptions in a form of its own
// compiles them for the decision, and stops before it spends more than
// left. considered is how many exceptions it was to hand over, offered or
// not: one that stops short hands over fewer, and the decision's stop
// message counts them all. A decision charged more than it has left stops
// and fails closed, whatever it was handed.
type Candidates func(policy string, left int64) (offered []*Exception, spent int64, considered int)

// AllExceptions offers every exception to every policy, at no cost.
func AllExceptions(excs []*Exception) Candidates {
	return func(string, int64) ([]*Exception, int64, int) { return excs, 0, len(excs) }
}

// Refusal is an exception that names a rule and matches an object but does
// not count, with the reason: it expired, or the policy's guardrails refuse
// it. Reporting it tells the developer why their exception did not help.
type Refusal struct {
	Source  Source `json:"exception"`
	Message string `json:"message"`
}

// SelectExceptions returns the exceptions that count for one rule on one
// object: they name the rule, apply to the object (scope and match), have not
// expired at now, pass the policy's guardrails, and, in background mode,
// opted in. Those that name the rule and match the object but expired or are
// refused by the guardrails come back as refusals. It is the one place that
// chooses exceptions; the webhook, the scanner and the CLI all go through it.
func SelectExceptions(r *Rule, candidates []*Exception, o *Object, nsLabels map[string]string, now time.Time, mode Mode) (selected []*Exception, refused []Refusal) {
	st := newDecideState(Limits{MaxSteps: math.MaxInt64})
	return selectExceptions(r, candidates, o, nsLabels, now, mode, st)
}

// RefusalsWithin is what SelectExceptions refuses, within limits: for a
// caller that names, after a decision, the exceptions that would have
// applied. It returns the steps it spent, and ok false when limits stopped
// it, with the refusals found until then.
func RefusalsWithin(limits Limits, r *Rule, candidates []*Exception, o *Object, nsLabels map[string]string, now time.Time, mode Mode) (refused []Refusal, steps int64, ok bool) {
	st := newDecideState(limits)
	_, refused = selectExceptions(r, candidates, o, nsLabels, now, mode, st)
	return refused, st.max - st.left, st.stopped == nil
}

// selectExceptions is SelectExceptions within a decision's budget. It
// stops early when the budget runs out (st.stopped is then set).
func selectExceptions(r *Rule, candidates []*Exception, o *Object, nsLabels map[string]string, now time.Time, mode Mode, st *decideState) (selected []*Exception, refused []Refusal) {
	for _, e := range candidates {
		if st.stopped != nil {
			return selected, refused
		}
		if mode == Background && !e.Background {
			continue
		}
		targets := e.Targets(r.Policy.Name, r.Name)
		matches := targets && e.Matches(o, nsLabels)
		if !st.spend(selectSteps(e, r, o, targets)) {
			return selected, refused
		}
		if !matches {
			continue
		}
		if e.Expired(now) {
			refused = append(refused, Refusal{Source: e.Source, Message: fmt.Sprintf("expired at %s", e.ExpiresAt.UTC().Format(time.RFC3339))})
			continue
		}
		if err := r.Policy.Permits(e, now); err != nil {
			refused = append(refused, Refusal{Source: e.Source, Message: err.Error()})
			continue
		}
		selected = append(selected, e)
	}
	return selected, refused
}

// selectSteps bounds the work of offering an exception to a rule: an entry's
// worth, and the globs and label selectors Targets and Matches may run (each
// glob as if it scanned its whole subject; most stop at their literal
// prefix).
func selectSteps(e *Exception, r *Rule, o *Object, targeted bool) int64 {
	n := int64(stepsPerEntry)
	for i := range e.targets {
		if t := &e.targets[i]; t.policy == r.Policy.Name {
			n += globsSteps(t.rules, len(r.Name))
		}
	}
	if targeted && e.match != nil {
		n += globsSteps(e.match.names, len(o.Name)) + globsSteps(e.match.namespaces, len(o.Namespace)) + e.match.selectorSteps
	}
	return n
}

// globsSteps is the most a Globs.Match on a subject of n bytes can cost.
func globsSteps(gs Globs, n int) int64 {
	var steps int64
	for i := range gs {
		w := max(1, (int64(gs[i].npos)+63)/64)
		steps += 1 + (3*int64(len(gs[i].raw))+int64(n)+5)*w
	}
	return steps
}

// Decide evaluates an object against every rule of every policy that matches
// it, with the exceptions that candidates offers for each policy, within
// DefaultLimits.
func Decide(policies []*Policy, candidates Candidates, o *Object, nsLabels map[string]string, now time.Time, mode Mode) Decision {
	return DecideWithin(DefaultLimits, policies, candidates, o, nsLabels, now, mode)
}

// DecideWithin is Decide within limits. A decision that reaches them stops
// and fails closed: every rule it did not finish fails (an Enforce one
// refuses the object), and Decision.Err says why. A rule that was finished
// keeps its result.
func DecideWithin(limits Limits, policies []*Policy, candidates Candidates, o *Object, nsLabels map[string]string, now time.Time, mode Mode) Decision {
	var state decideState
	st := &state
	st.init(limits)
	st.sizeUp(o)
	d := Decision{Object: o, Allowed: true}
	for _, p := range policies {
		if mode == Background && !p.Background {
			continue
		}
		of := offer{policy: p.Name}
		for _, r := range p.Rules {
			if !r.Matches(o, nsLabels) {
				continue
			}
			res := decideRule(r, candidates, &of, o, nsLabels, now, mode, st)
			if res.Enforced() {
				d.Allowed = false
			}
			d.Results = append(d.Results, res)
		}
	}
	if st.stopped != nil {
		d.Err = st.stopped
	}
	d.Steps = st.max - st.left
	return d
}

// offer is the exceptions handed over for one policy's rules: asked for
// once, when a rule first has something to waive, and charged to the
// decision.
type offer struct {
	policy  string
	offered []*Exception
	// considered is how many the candidates were asked to hand over, which
	// a stop counts: more than offered when the budget ran out first.
	considered int
	done       bool
}

func (of *offer) get(candidates Candidates, st *decideState) []*Exception {
	if !of.done {
		var spent int64
		of.offered, spent, of.considered = candidates(of.policy, st.left)
		of.considered = max(of.considered, len(of.offered))
		st.exceptions, of.done = of.considered, true
		st.spend(spent)
	}
	return of.offered
}

// decideRule is one rule's result in a decision: the checks first (an
// object with nothing to waive, most of them, needs no exception looked
// at), then the exceptions the policy offers. A rule reached after the
// decision stopped fails closed too.
func decideRule(r *Rule, candidates Candidates, of *offer, o *Object, nsLabels map[string]string, now time.Time, mode Mode, st *decideState) RuleResult {
	if !st.checkDone() {
		return stoppedResult(RuleResult{Rule: r}, st.stopped)
	}
	st.policy, st.rule, st.entries, st.exceptions = of.policy, r.Name, len(r.exclusions), 0
	res := r.check(o, st)
	if st.stopped != nil || len(res.Findings) == 0 {
		return res
	}
	offered := of.get(candidates, st)
	st.exceptions = of.considered
	selected, refused := selectExceptions(r, offered, o, nsLabels, now, mode, st)
	if st.stopped == nil {
		r.waive(&res, selected, st)
		res.Selected = selected
	} else {
		res = stoppedResult(res, st.stopped)
	}
	if res.Outcome != Pass {
		// A refusal matters only where it could have helped.
		res.Refused = refused
	}
	return res
}
