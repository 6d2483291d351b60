package convert

import (
	"fmt"
	"slices"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"

	policyv1alpha1 "github.com/podsieve/podsieve/api/v1alpha1"
)

// policies.kyverno.io PolicyExceptions: each waives the ValidatingPolicies
// its policyRefs name for the objects its matchConditions select. It becomes
// podsieve PolicyExceptions that waive the controls of those policies, in the
// rule they were converted into, for the namespaces and names the
// matchConditions test; anything wider is left out.

// maxExceptionNamespaces bounds the exceptions one Kyverno exception is
// written as (one per namespace).
const maxExceptionNamespaces = 16

// celException converts one policies.kyverno.io PolicyException: the
// controls its refs waive, for the namespaces and names its matchConditions
// test, one exception per converted policy and namespace.
func (c *kyvernoConverter) celException(d *Document, ke *kyvernoCELException) {
	n := newNoter(c.res, d)
	if len(ke.Spec.Images) > 0 || len(ke.Spec.AllowedValues) > 0 {
		n.warn("spec.images", "images and allowedValues are only read by policies whose CEL uses exceptions.allowedImages or exceptions.allowedValues, which the recognised library policies do not: the exception waives the whole policy for what it matches, and is converted so")
	}
	if ke.Spec.ReportResult == "pass" {
		n.warn("spec.reportResult", "pass: podsieve reports a waived violation as waived, naming the exception")
	}
	waivers := c.celWaivers(n, ke)
	if len(waivers) == 0 {
		n.untranslated("spec.policyRefs", "waives no converted control; the exception was left out")
		return
	}
	namespaces, names, nsSet, ok := celMatch(n, ke.Spec.MatchConditions)
	if !ok {
		return
	}
	places := slices.Clone(namespaces)
	if !nsSet {
		places = []string{c.opts.ExceptionsNamespace}
		n.warn("spec.matchConditions", "apply in every namespace: converted into the cluster exceptions namespace %q, which only cluster admins should write", c.opts.ExceptionsNamespace)
	}
	for _, w := range waivers {
		slices.Sort(w.controls)
		targets := []policyv1alpha1.ExceptionTarget{{PolicyName: w.ref.policy, RuleNames: []string{w.ref.rule}}}
		var entries []policyv1alpha1.PodSecurityExclusion
		for _, ctl := range w.controls {
			entries = append(entries, policyv1alpha1.PodSecurityExclusion{ControlName: ctl})
		}
		for _, ns := range places {
			pe := newException(ns, c.exceptionName(ns, ke.Metadata.Name))
			c.recordOptIn(n, targets, entries)
			pe.Spec.Exceptions = targets
			pe.Spec.PodSecurity = entries
			pe.Spec.ExpiresAt = ke.Spec.ExpiresAt
			m := policyv1alpha1.ExceptionMatch{Names: slices.Clone(names)}
			if !nsSet {
				// An exception in the cluster exceptions namespace reaches
				// the namespaces its match names.
				m.Namespaces = []string{"*"}
			}
			if len(m.Names) > 0 || len(m.Namespaces) > 0 {
				pe.Spec.Match = &m
			}
			c.res.Objects = append(c.res.Objects, Output{From: fmt.Sprintf("%s (%s %s)", d.Where(), d.Kind, d.Name), Object: pe})
		}
	}
	if k := len(places) * len(waivers); k > 1 {
		n.warn("spec.matchConditions", "a podsieve exception applies in its own namespace and to one policy: written as %d exceptions", k)
	}
}

// celWaiver is which controls, of which converted policy, an exception's
// refs waive.
type celWaiver struct {
	ref      vpolRef
	controls []policyv1alpha1.ControlName
}

// celWaivers are the controls the exception's policyRefs waive, by the
// converted policy each ref went into, in the order first referenced; a
// ref that was not converted is left out, with a note.
func (c *kyvernoConverter) celWaivers(n *noter, ke *kyvernoCELException) []*celWaiver {
	var waivers []*celWaiver
	// A NamespacedValidatingPolicy is named in the exception's namespace.
	keyOf := func(r kyvernoPolicyRef) vpolID { return vpolIDOf(r.Kind, ke.Metadata.Namespace, r.Name) }
	referenced := map[vpolID]bool{}
	for _, r := range ke.Spec.PolicyRefs {
		referenced[keyOf(r)] = true
	}
	for i, r := range ke.Spec.PolicyRefs {
		path := fmt.Sprintf("spec.policyRefs[%d]", i)
		if !isVPol(r.Kind) {
			n.untranslated(path+".kind", "%q: only ValidatingPolicies and NamespacedValidatingPolicies are converted; this reference was left out, so the exception waives less", r.Kind)
			continue
		}
		ref, ok := c.vpolRefs[keyOf(r)]
		if !ok {
			n.untranslated(path+".name", "%s %q was not converted in this run (convert it in the same run); this reference was left out, so the exception waives less", r.Kind, r.Name)
			continue
		}
		at := slices.IndexFunc(waivers, func(w *celWaiver) bool { return w.ref.policy == ref.policy })
		if at < 0 {
			waivers = append(waivers, &celWaiver{ref: ref})
			at = len(waivers) - 1
		}
		waivers[at].add(n, ref, referenced, path)
	}
	return slices.DeleteFunc(waivers, func(w *celWaiver) bool { return len(w.controls) == 0 })
}

// add adds the controls ref's policy checks. Waiving a control waives every
// check of it in the rule: so only when the exception names (referenced)
// every policy that checks it.
func (w *celWaiver) add(n *noter, ref vpolRef, referenced map[vpolID]bool, path string) {
	for _, p := range ref.member.check.parts {
		if slices.Contains(w.controls, p.control) {
			continue
		}
		var others []string
		for _, m := range ref.group.members {
			if !referenced[m.key] && slices.ContainsFunc(m.check.parts, func(q controlPart) bool { return q.control == p.control }) {
				others = append(others, m.vp.Metadata.Name)
			}
		}
		if len(others) > 0 {
			n.untranslated(path+".name", "%s is also checked by %v in SecurityPolicy %q, which the exception does not name: podsieve waives whole controls, so %s is not waived and the exception waives less",
				p.control, others, ref.policy, p.control)
			continue
		}
		w.controls = append(w.controls, p.control)
	}
}

// celMatch is what the matchConditions select: the namespaces and names
// they test (nsSet when they test namespaces at all), each list the
// intersection of the tests of its field. false, with a note, when the
// exception is left out: a test a match cannot say, or nothing matched.
func celMatch(n *noter, conditions []admissionregistrationv1.MatchCondition) (namespaces, names []string, nsSet, ok bool) {
	atoms, why, ok := matchConditionAtoms(conditions)
	if !ok {
		n.untranslated("spec.matchConditions", "%s; the exception was left out rather than waive more", why)
		return nil, nil, false, false
	}
	atoms = literalAtoms(n, "spec.matchConditions", atoms)
	nameSet := false
	for _, a := range atoms {
		if a.negated {
			n.untranslated("spec.matchConditions", "a negated test of the %s cannot be said by a podsieve exception's match; the exception was left out rather than waive more", a.field)
			return nil, nil, false, false
		}
		target, set := &namespaces, &nsSet
		if a.field == "name" {
			target, set = &names, &nameSet
		}
		if !*set {
			*target, *set = slices.Clone(a.values), true
			continue
		}
		*target = slices.DeleteFunc(*target, func(v string) bool { return !slices.Contains(a.values, v) })
	}
	if (nsSet && len(namespaces) == 0) || (nameSet && len(names) == 0) {
		n.warn("spec.matchConditions", "no object satisfies them: the exception waives nothing; it was left out")
		return nil, nil, false, false
	}
	if len(namespaces) > maxExceptionNamespaces || len(names) > maxExceptionNamespaces {
		n.untranslated("spec.matchConditions", "more than %d namespaces or names; the exception was left out", maxExceptionNamespaces)
		return nil, nil, false, false
	}
	return namespaces, names, nsSet, true
}
