package engine

import (
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	policyv1alpha1 "github.com/podsieve/podsieve/api/v1alpha1"
)

// APIObject returns what CompileException read from the PolicyException e
// was compiled from (its identity, creation time and spec; no labels,
// annotations or status), and the cluster exceptions namespace it was
// compiled with: compiling them again gives an exception that decides as e
// does. It is for a holder of many exceptions (the index) that keeps them
// in a form of its own and compiles them again when a decision needs them.
// ok is false when e cannot say: its match has label selectors, whose
// compiled form keeps no API form, or it is a copy made by WithoutEntries.
func (e *Exception) APIObject() (pe *policyv1alpha1.PolicyException, clusterNamespace string, ok bool) {
	if e.entriesDropped || !e.WholeRule && len(e.Exclusions) == 0 || e.match != nil && (e.match.selector != nil || e.match.nsSelector != nil) {
		return nil, "", false
	}
	pe = &policyv1alpha1.PolicyException{ObjectMeta: metav1.ObjectMeta{
		Namespace: e.Namespace, Name: e.Name, UID: types.UID(e.UID), Generation: e.Generation,
		CreationTimestamp: metav1.NewTime(e.created),
	}}
	s := &pe.Spec
	s.Exceptions = make([]policyv1alpha1.ExceptionTarget, len(e.targets))
	for i, t := range e.targets {
		s.Exceptions[i] = policyv1alpha1.ExceptionTarget{PolicyName: t.policy, RuleNames: rawGlobs(t.rules)}
	}
	if m := e.match; m != nil {
		s.Match = &policyv1alpha1.ExceptionMatch{Names: rawGlobs(m.names), Namespaces: rawGlobs(m.namespaces)}
		for _, k := range m.kinds {
			s.Match.Kinds = append(s.Match.Kinds, policyv1alpha1.PodBearingKind(k))
		}
	}
	for i := range e.Exclusions {
		x := &e.Exclusions[i]
		s.PodSecurity = append(s.PodSecurity, policyv1alpha1.PodSecurityExclusion{
			ControlName:     x.control,
			Images:          rawGlobs(x.images),
			ContainerNames:  rawGlobs(x.names),
			ContainerKinds:  slices.Clone(x.kinds),
			RestrictedField: x.field,
			Values:          rawGlobs(x.values),
		})
	}
	s.Justification = e.justification
	if e.ExpiresAt != nil {
		t := metav1.NewTime(*e.ExpiresAt)
		s.ExpiresAt = &t
	}
	background := e.Background
	s.Background = &background
	return pe, e.clusterNS, true
}

// rawGlobs are the patterns gs was compiled from; nil for none.
func rawGlobs(gs Globs) []string {
	if len(gs) == 0 {
		return nil
	}
	return gs.Patterns()
}
