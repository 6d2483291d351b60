package engine

import (
	"k8s.io/apimachinery/pkg/labels"
)

// NamespaceNameLabel is the label the API server sets on every namespace to
// its name. It is the one label of a namespace that an offline caller knows
// without being given the Namespace.
const NamespaceNameLabel = "kubernetes.io/metadata.name"

// Offline callers (podsieve eval) decide objects in namespaces whose labels
// they may not hold: a Namespace written in a developer's change is not what
// the cluster holds, so it does not count. These functions say when a
// decision depends on such labels, so that the caller can ask for them
// instead of deciding with only the name label (which, for a rule whose
// match.namespaceSelector needs a label, is a pass the cluster would not
// give). They use the same filters as the decision; only the namespace
// selector's answer is left open.

// NamespaceLabelsDecide reports whether the rule applies to o
// depends on labels of o's namespace other than NamespaceNameLabel, and
// which of its fields asks for them ("match.namespaceSelector" or
// "exclude.namespaceSelector"); "" when the rest of the rule decides, or
// when the selectors ask only for the name.
func (r *Rule) NamespaceLabelsDecide(o *Object) string {
	m := r.match.labelDependence(o) // nil: selects everything
	x := knownFalse                 // nil: excludes nothing
	if r.exclude != nil {
		x = r.exclude.labelDependence(o)
	}
	switch {
	case m == knownFalse || x == knownTrue:
		return "" // does not apply, whatever the labels
	case m == unknown:
		return "match.namespaceSelector"
	case x == unknown:
		return "exclude.namespaceSelector"
	}
	return ""
}

// NamespaceLabelsDecide reports whether the exception reaches o
// depends on labels of o's namespace other than NamespaceNameLabel: its
// match.namespaceSelector (a cross-namespace exception of the cluster
// exceptions namespace) asks for one, and the rest of its match selects o.
func (e *Exception) NamespaceLabelsDecide(o *Object) bool {
	return e.inScope(o) && e.match.labelDependence(o) == unknown
}

// tristate is a filter's answer when a namespace's labels are not known.
type tristate uint8

const (
	knownFalse tristate = iota
	knownTrue
	unknown
)

// labelDependence is whether the filter selects o, given only the name
// label of o's namespace: known when the rest of the filter, or the
// selector's requirements on the name label, decide; unknown when a
// requirement on another label would. A nil filter selects everything.
func (f *filter) labelDependence(o *Object) tristate {
	if f == nil {
		return knownTrue
	}
	nameOnly := labels.Set{NamespaceNameLabel: o.Namespace}
	rest := *f
	rest.nsSelector = nil
	if !rest.matches(o, nameOnly) {
		return knownFalse
	}
	if f.nsSelector == nil {
		return knownTrue
	}
	reqs, selectable := f.nsSelector.Requirements()
	if !selectable {
		return knownFalse // selects nothing
	}
	out := knownTrue
	for _, req := range reqs {
		if req.Key() != NamespaceNameLabel {
			out = unknown
			continue
		}
		if !req.Matches(nameOnly) {
			return knownFalse // requirements are ANDed
		}
	}
	return out
}
