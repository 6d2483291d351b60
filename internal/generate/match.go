package generate

import (
	"maps"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	policyv1alpha1 "github.com/podsieve/podsieve/api/v1alpha1"
	"github.com/podsieve/podsieve/internal/engine"
	"github.com/podsieve/podsieve/internal/words"
)

// nameGlob is what a generated exception is named after and the glob that
// matches the object's name: its name, literally; or, for an object the API
// server names (engine.GeneratedName), its generateName prefix (without a
// trailing "-" or ".") and the prefix followed by *, which every name the
// API server may generate matches.
func nameGlob(o *engine.Object) (base, glob string) {
	if prefix, ok := o.NamePrefix(); ok {
		base = strings.TrimRight(prefix, "-.")
		if base == "" {
			base = "generated"
		}
		return base, literal(prefix) + "*"
	}
	return o.Name, literal(o.Name)
}

// scopedMatch is the match of one generated exception, the suffix of its
// name, and what it matches in words (Exception.Of).
type scopedMatch struct {
	match  *policyv1alpha1.ExceptionMatch
	suffix string
	of     string
}

// childrenSuffix ends the name of a controller's second exception.
const childrenSuffix = "-pods"

// matchesFor narrows the exceptions to the workload. A Pod (or PodTemplate)
// gets one, by its name. A controller gets two, since one match cannot pair
// names with kinds: the controller by its exact name and kind; and the
// objects it creates by their names (name-*, which is how ReplicaSets, Jobs
// and pods created from it are named) and kinds. Both also select its pod
// template labels, which those objects carry. A single match with names
// [web, web-*] and the controller's kind would also cover a sibling
// controller named web-admin.
func matchesFor(o *engine.Object) []scopedMatch {
	_, name := nameGlob(o)
	own := &policyv1alpha1.ExceptionMatch{Names: []string{name}, Kinds: []policyv1alpha1.PodBearingKind{policyv1alpha1.PodBearingKind(o.Kind)}}
	k, _ := engine.KindNamed(o.Kind)
	kinds := k.Descendants()
	if len(kinds) == 0 {
		return []scopedMatch{{match: own}}
	}
	var plurals []string
	for _, k := range kinds {
		plurals = append(plurals, words.Plural(2, string(k)))
	}
	of := strings.Join(plurals, " and ")
	children := &policyv1alpha1.ExceptionMatch{Names: []string{name + "-*"}, Kinds: kinds}
	if labels := selectorLabels(o.Labels); labels != nil {
		own.Selector = &metav1.LabelSelector{MatchLabels: labels}
		children.Selector = &metav1.LabelSelector{MatchLabels: maps.Clone(labels)}
	}
	return []scopedMatch{{match: own}, {match: children, suffix: childrenSuffix, of: of}}
}

// volatileLabels are labels that change on every release or rollout of a
// workload, or differ between the objects one controller creates: a
// selector requiring them would stop matching at the next chart upgrade or
// rollout (and, for per-replica labels, match one replica only). Generated
// selectors leave them out.
var volatileLabels = map[string]bool{
	// Helm charts and the recommended labels: the release's version.
	"app.kubernetes.io/version": true,
	"helm.sh/chart":             true,
	"chart":                     true,
	// Set by controllers on what they create, per revision or per object.
	"pod-template-hash":                        true,
	"controller-revision-hash":                 true,
	"pod-template-generation":                  true,
	"statefulset.kubernetes.io/pod-name":       true,
	"apps.kubernetes.io/pod-index":             true,
	"controller-uid":                           true,
	"batch.kubernetes.io/controller-uid":       true,
	"job-name":                                 true,
	"batch.kubernetes.io/job-name":             true,
	"batch.kubernetes.io/job-completion-index": true,
}

// selectorLabels are the labels a generated selector requires: all but the
// volatile ones, or the first engine.MaxSelectorRequirements of those in
// key order when there are more than an exception's selector may hold. The
// names and kinds pin the objects either way; the labels only narrow them
// further. Nil when no label is left.
func selectorLabels(labels map[string]string) map[string]string {
	keys := slices.Sorted(maps.Keys(labels))
	keys = slices.DeleteFunc(keys, func(k string) bool { return volatileLabels[k] })
	if len(keys) == 0 {
		return nil
	}
	out := make(map[string]string, min(len(keys), engine.MaxSelectorRequirements))
	for _, k := range keys[:min(len(keys), engine.MaxSelectorRequirements)] {
		out[k] = labels[k]
	}
	return out
}

// withSuffix appends a suffix to an object name, shortening the name first
// so that the suffix survives truncation.
func withSuffix(name, suffix string) string {
	if suffix == "" {
		return name
	}
	const maxLen = 253
	if len(name)+len(suffix) > maxLen {
		name = strings.TrimRight(name[:maxLen-len(suffix)], "-.")
	}
	return name + suffix
}

// exceptionNames names one exception per policy: Name when there is one and
// it is set, else <base>-<policy>, kept to a valid object name's length.
func exceptionNames[T any](workload, name string, groups []T, policy func(T) string) []string {
	out := make([]string, len(groups))
	for i, g := range groups {
		switch {
		case name != "" && len(groups) == 1:
			out[i] = name
		case name != "":
			out[i] = truncateName(name + "-" + policy(g))
		default:
			out[i] = truncateName(workload + "-" + policy(g))
		}
	}
	return out
}

func truncateName(s string) string {
	const maxLen = 253
	if len(s) <= maxLen {
		return s
	}
	return strings.TrimRight(s[:maxLen], "-.")
}
