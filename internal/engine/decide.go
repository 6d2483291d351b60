package engine

import (
	"fmt"
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

// Candidates returns the exceptions that may apply to the rules of one
// policy: every exception, or an index's pick for the object's namespace.
// SelectExceptions narrows them.
type Candidates func(policy string) []*Exception

// AllExceptions offers every exception to every policy.
func AllExceptions(excs []*Exception) Candidates {
	return func(string) []*Exception { return excs }
}

// Refusal is an exception that names a rule and matches an object but does
// not count, with the reason: it expired, or the policy's guardrails refuse
// it. Reporting it tells the developer why their exception did not help.
type Refusal struct {
	Source  string `json:"exception"`
	Message string `json:"message"`
}

// SelectExceptions returns the exceptions that count for one rule on one
// object: they name the rule, apply to the object (scope and match), have not
// expired at now, pass the policy's guardrails, and, in background mode,
// opted in. Those that name the rule and match the object but expired or are
// refused by the guardrails come back as refusals. It is the one place that
// chooses exceptions; the webhook, the scanner and the CLI all go through it.
func SelectExceptions(r *Rule, candidates []*Exception, o *Object, nsLabels map[string]string, now time.Time, mode Mode) (selected []*Exception, refused []Refusal) {
	for _, e := range candidates {
		if mode == Background && !e.Background {
			continue
		}
		if !e.Targets(r.Policy.Name, r.Name) || !e.Matches(o, nsLabels) {
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

// Decide evaluates an object against every rule of every policy that matches
// it, with the exceptions that candidates offers for each policy.
func Decide(policies []*Policy, candidates Candidates, o *Object, nsLabels map[string]string, now time.Time, mode Mode) Decision {
	d := Decision{Object: o, Allowed: true}
	for _, p := range policies {
		if mode == Background && !p.Background {
			continue
		}
		var offered []*Exception
		offeredDone := false
		for _, r := range p.Rules {
			if !r.Matches(o, nsLabels) {
				continue
			}
			if !offeredDone {
				offered, offeredDone = candidates(p.Name), true
			}
			selected, refused := SelectExceptions(r, offered, o, nsLabels, now, mode)
			res := r.Evaluate(o, selected)
			if res.Outcome != Pass {
				// A refusal matters only where it could have helped.
				res.Refused = refused
			}
			if res.Enforced() {
				d.Allowed = false
			}
			d.Results = append(d.Results, res)
		}
	}
	return d
}
