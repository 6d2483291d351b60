package engine

import (
	"slices"
	"strings"

	policyv1alpha1 "github.com/podsieve/podsieve/api/v1alpha1"
)

// This file gives the index what it needs to hold exceptions cheaply: the
// keys that spec.match pins, so that a lookup offers an object only the
// exceptions that may match it; the API object an exception was compiled
// from, for an index that keeps that instead and compiles it again when a
// decision needs it; and a copy without entries, for exceptions that cannot
// apply and are kept only to explain refusals. How the index holds them is
// its own business: the engine only ever sees compiled exceptions.

// MatchKeys are what the exception's spec.match pins about an object's name
// and kind, for an index that offers the exception only to the objects it
// may match. pinned is true when match.names is set and every one of its
// globs starts with a literal: then every object the exception matches has a
// name that is one of names, or starts with one of prefixes. kinds is
// match.kinds: when it is not empty, every object matched is of one of them.
//
// A glob's literal prefix (the text before its first wildcard) is a
// necessary condition of a match whatever follows it, so an index may offer
// the exception to every object whose name starts with it and leave the rest
// of the glob to Matches. A glob that starts with a wildcard ("*", "*-web")
// pins nothing, and neither does an exception without match.names. The lists
// hold no duplicates.
func (e *Exception) MatchKeys() (names, prefixes, kinds []string, pinned bool) {
	if e.match == nil {
		return nil, nil, nil, false
	}
	kinds = slices.Clip(e.match.kinds)
	if len(e.match.names) == 0 {
		return nil, nil, kinds, false
	}
	for _, g := range e.match.names {
		raw := g.String()
		i := strings.IndexAny(raw, "*?")
		switch {
		case i < 0:
			if !slices.Contains(names, raw) {
				names = append(names, raw)
			}
		case i == 0:
			return nil, nil, kinds, false
		default:
			if p := raw[:i]; !slices.Contains(prefixes, p) {
				prefixes = append(prefixes, p)
			}
		}
	}
	return names, prefixes, kinds, true
}

// noEntriesJustification stands in for a non-blank justification in a
// copy made by WithoutEntries: Permits asks only whether there is one.
const noEntriesJustification = "(kept out of the index)"

// WithoutEntries returns a copy of the exception that keeps only what a
// refusal needs: its identity and source, the rules it targets, its match
// (for Matches), the background flag, expiry, and what the guardrails
// judge: the controls it waives, whether it waives whole rules, whether it
// has a justification, its creation time, and what the entry guardrails
// (permittedEntries) of the policies in force that it names said about its
// podSecurity entries, which it drops. policy returns the compiled policy
// in force by name, or nil.
//
// An index holds exceptions that are not Ready (expired, refused, naming a
// policy that does not exist) in this form, only to name them in refusals:
// the entries are most of an exception's memory. The copy waives no
// violation that the exception would not (no entries, and WholeRule as
// compiled); to apply it, compile the API object again. Against a policy
// compiled after the copy was made (before the exception is judged again),
// its entries are judged as if it had none: the refusal may then be
// missing.
func (e *Exception) WithoutEntries(policy func(string) *Policy) *Exception {
	s := &Exception{
		Namespace:  e.Namespace,
		Name:       e.Name,
		UID:        e.UID,
		Generation: e.Generation,
		Source:     e.Source,
		Background: e.Background,
		WholeRule:  e.WholeRule,
		ExpiresAt:  e.ExpiresAt,
		crossNS:    e.crossNS,
		targets:    e.targets,
		// Whole-rule or not, it cannot say what it was compiled from: its
		// justification is not the object's.
		entriesDropped: true,
		match:          e.match,
		created:        e.created,
		clusterNS:      e.clusterNS,
	}
	if strings.TrimSpace(e.justification) != "" {
		s.justification = noEntriesJustification
	}
	// The canonical names, not the API object's copies of them.
	s.controls = make([]policyv1alpha1.ControlName, len(e.controls))
	for i, c := range e.controls {
		if j := slices.Index(policyv1alpha1.Controls, c); j >= 0 {
			c = policyv1alpha1.Controls[j]
		}
		s.controls[i] = c
	}
	var memo []permitMemo
	for _, name := range e.Policies() {
		if p := policy(name); p != nil && p.guardrails != nil {
			memo = append(memo, permitMemo{policy: p, err: e.permittedEntries(p)})
		}
	}
	if len(memo) > 0 {
		s.permitted.Store(&memo)
	}
	return s
}

// SameJudgement reports whether e, fresh from WithoutEntries, says about
// the entry guardrails of the policies it was made against what held
// remembers: an
// index may then keep held for the same object rather than publish e.
func (e *Exception) SameJudgement(held *Exception) bool {
	seeds := e.permitted.Load()
	if seeds == nil {
		return true
	}
	memo := held.permitted.Load()
	if memo == nil {
		return false
	}
	for _, s := range *seeds {
		i := slices.IndexFunc(*memo, func(m permitMemo) bool { return m.policy == s.policy })
		if i < 0 || !sameError((*memo)[i].err, s.err) {
			return false
		}
	}
	return true
}

func sameError(a, b error) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return a.Error() == b.Error()
}
