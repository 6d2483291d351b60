package engine

import (
	"fmt"
	"slices"
	"strings"
	"time"

	policyv1alpha1 "github.com/podsieve/podsieve/api/v1alpha1"
)

// ExceptionState is what a PolicyException's Ready condition says: whether it
// is honoured and, when it is not, why and what to change.
type ExceptionState struct {
	Ready   bool
	Reason  string
	Message string
}

// State judges an exception against the policies it names at now. policy
// returns the compiled policy in force by name, or nil when there is none.
// The first problem found wins, in the order a developer fixes them: expiry,
// a missing policy, a rule pattern that matches no rule, the guardrails.
//
// An exception is in force only when it is Ready: one that names two policies
// and has a problem with either waives nothing until it is fixed, so that a
// half-broken exception never applies half-way.
func (e *Exception) State(policy func(string) *Policy, now time.Time) ExceptionState {
	if e.Expired(now) {
		return ExceptionState{Reason: policyv1alpha1.ReasonExpired,
			Message: fmt.Sprintf("spec.expiresAt %s has passed; the exception no longer applies: renew it with a later expiresAt or delete it",
				e.ExpiresAt.UTC().Format(time.RFC3339))}
	}
	for i, t := range e.targets {
		p := policy(t.policy)
		switch {
		case p == nil:
			return ExceptionState{Reason: policyv1alpha1.ReasonPolicyNotFound,
				Message: fmt.Sprintf("spec.exceptions[%d].policyName: SecurityPolicy %q does not exist or is not in force; fix the name or ask a cluster admin for the policy", i, t.policy)}
		case !slices.ContainsFunc(p.Rules, func(r *Rule) bool { return t.rules.Match(r.Name) }):
			return ExceptionState{Reason: policyv1alpha1.ReasonRuleNotFound,
				Message: fmt.Sprintf("spec.exceptions[%d].ruleNames: no rule of SecurityPolicy %q matches %s; its rules are %s",
					i, t.policy, strings.Join(quoteAll(t.rules.Patterns()), ", "), strings.Join(quoteAll(p.RuleNames()), ", "))}
		}
		if err := p.Permits(e, now); err != nil {
			return ExceptionState{Reason: policyv1alpha1.ReasonNotPermitted, Message: err.Error()}
		}
	}
	msg := "honoured for " + strings.Join(quoteAll(e.Policies()), ", ")
	if e.ExpiresAt != nil {
		msg += " until " + e.ExpiresAt.UTC().Format(time.RFC3339)
	}
	return ExceptionState{Ready: true, Reason: policyv1alpha1.ReasonActive, Message: msg}
}

// Policies are the names of the policies the exception targets, in order.
func (e *Exception) Policies() []string {
	out := make([]string, 0, len(e.targets))
	for _, t := range e.targets {
		if !slices.Contains(out, t.policy) {
			out = append(out, t.policy)
		}
	}
	return out
}

// CrossNamespace reports whether the exception reaches other namespaces: it
// lives in the cluster exceptions namespace and uses match.namespaces or
// match.namespaceSelector.
func (e *Exception) CrossNamespace() bool { return e.crossNS }

// RuleNames are the policy's rule names in order.
func (p *Policy) RuleNames() []string {
	out := make([]string, len(p.Rules))
	for i, r := range p.Rules {
		out[i] = r.Name
	}
	return out
}
