package engine

import (
	"time"
)

// Decision is every matching rule's result for one object.
type Decision struct {
	Object  *Object
	Results []RuleResult
	// Allowed is false only when an Enforce policy's rule fails.
	Allowed bool
}

// Mode says who asks: admission honours every active exception; a
// background scan honours only those with background: true.
type Mode int

const (
	Admission Mode = iota
	Background
)

// SelectExceptions returns the exceptions that count for one rule on one
// object: they name the rule, apply to the object at now (scope, match,
// expiry), pass the policy's guardrails, and, in background mode, opted in.
// It is the one place that chooses exceptions; the webhook, the scanner and
// the CLI all go through it.
func SelectExceptions(r *Rule, candidates []*Exception, o *Object, nsLabels map[string]string, now time.Time, mode Mode) []*Exception {
	var out []*Exception
	for _, e := range candidates {
		if mode == Background && !e.Background {
			continue
		}
		if !e.Targets(r.Policy.Name, r.Name) || !e.AppliesTo(o, nsLabels, now) {
			continue
		}
		if r.Policy.Permits(e, now) != nil {
			continue
		}
		out = append(out, e)
	}
	return out
}

// Decide evaluates an object against every rule of every policy that matches
// it. candidates are the exceptions that may apply (all of them, or the
// index's pick for the object's namespace); SelectExceptions narrows them.
func Decide(policies []*Policy, candidates []*Exception, o *Object, nsLabels map[string]string, now time.Time, mode Mode) Decision {
	d := Decision{Object: o, Allowed: true}
	for _, p := range policies {
		if mode == Background && !p.Background {
			continue
		}
		for _, r := range p.Rules {
			if !r.Matches(o, nsLabels) {
				continue
			}
			res := r.Evaluate(o, SelectExceptions(r, candidates, o, nsLabels, now, mode))
			if res.Enforced() {
				d.Allowed = false
			}
			d.Results = append(d.Results, res)
		}
	}
	return d
}
