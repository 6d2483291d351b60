package engine

import (
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	policyv1alpha1 "github.com/podsieve/podsieve/api/v1alpha1"
)

// Exception is a compiled PolicyException.
type Exception struct {
	Namespace, Name string
	// UID and Generation identify the object and spec compiled, as for
	// Policy; empty for an exception read from a file.
	UID        string
	Generation int64
	// Source is exception/<namespace>/<name>.
	Source     Source
	Background bool
	// WholeRule is true when podSecurity is empty: the targeted rules are
	// waived entirely for matched objects.
	WholeRule bool
	crossNS   bool
	// entriesDropped marks a copy made by WithoutEntries, which cannot
	// say what it was compiled from (APIObject).
	entriesDropped bool
	Exclusions     []Exclusion
	ExpiresAt      *time.Time

	targets       []target
	match         *filter
	created       time.Time
	justification string
	// clusterNS is the cluster exceptions namespace it was compiled with.
	clusterNS string
	controls  []policyv1alpha1.ControlName
	// groups are Exclusions by control.
	groups entryGroups
	// permitted remembers what the entry guardrails of the policies it
	// names said (permittedEntries).
	permitted atomic.Pointer[[]permitMemo]
}

type target struct {
	policy string
	rules  Globs
}

// CompileException compiles a PolicyException. clusterNamespace is the cluster
// exceptions namespace: only there may match.namespaces and
// match.namespaceSelector reach other namespaces.
func CompileException(pe *policyv1alpha1.PolicyException, clusterNamespace string) (*Exception, error) {
	return compileException(pe, clusterNamespace, nil)
}

// compileException is CompileException. With errs nil it stops at the
// first error; otherwise it collects each error in errs and goes on with
// the parts it can still check (ValidateException), and what it returns is
// no exception when errs failed.
func compileException(pe *policyv1alpha1.PolicyException, clusterNamespace string, errs *fieldErrors) (*Exception, error) {
	e := &Exception{
		Namespace:     pe.Namespace,
		Name:          pe.Name,
		UID:           string(pe.UID),
		Generation:    pe.Generation,
		Source:        ExceptionSource(pe.Namespace, pe.Name),
		Background:    pe.Spec.Background == nil || *pe.Spec.Background,
		WholeRule:     len(pe.Spec.PodSecurity) == 0,
		created:       pe.CreationTimestamp.Time,
		justification: pe.Spec.Justification,
		clusterNS:     clusterNamespace,
	}
	if pe.Spec.ExpiresAt != nil {
		t := pe.Spec.ExpiresAt.Time
		e.ExpiresAt = &t
	}
	// Each part stops compiling at its error (errs nil), or notes it and
	// goes on with what does not depend on the part in error.
	if err := e.compileTargets(pe, errs); err != nil {
		return nil, err
	}
	if err := errs.note(emptyPodSecurity(pe), "spec.podSecurity"); err != nil {
		return nil, err
	}
	if err := e.compileMatch(pe, errs); err != nil {
		return nil, err
	}
	if err := e.compileEntries(pe, errs); err != nil {
		return nil, err
	}
	if errs.failed() {
		return nil, nil
	}
	e.groups = groupEntries(e.Exclusions)
	return e, nil
}

// compileTargets compiles spec.exceptions: the policies and rules named.
func (e *Exception) compileTargets(pe *policyv1alpha1.PolicyException, errs *fieldErrors) error {
	if len(pe.Spec.Exceptions) == 0 {
		if err := errs.note(fmt.Errorf("spec.exceptions: name at least one policy and its rules"), "spec.exceptions"); err != nil {
			return err
		}
	}
	for i, t := range pe.Spec.Exceptions {
		path := fmt.Sprintf("spec.exceptions[%d]", i)
		if t.PolicyName == "" {
			if err := errs.note(fmt.Errorf("%s.policyName: name the SecurityPolicy to waive", path), path+".policyName"); err != nil {
				return err
			}
		}
		if len(t.RuleNames) == 0 {
			if err := errs.note(fmt.Errorf("%s.ruleNames: name the rules to waive, or [\"*\"] for all", path), path+".ruleNames"); err != nil {
				return err
			}
			continue
		}
		rules, err := CompileGlobs(t.RuleNames)
		if err != nil {
			if err := errs.note(fmt.Errorf("%s.ruleNames%w", path, err), path+".ruleNames"); err != nil {
				return err
			}
			continue
		}
		e.targets = append(e.targets, target{policy: t.PolicyName, rules: rules})
	}
	return nil
}

// compileMatch compiles spec.match: which objects, and for an exception of
// the cluster exceptions namespace which namespaces, it reaches.
func (e *Exception) compileMatch(pe *policyv1alpha1.PolicyException, errs *fieldErrors) error {
	clusterNamespace := e.clusterNS
	m := pe.Spec.Match
	if m == nil {
		return nil
	}
	if m.Names != nil && len(m.Names) == 0 {
		if err := errs.note(fmt.Errorf("spec.match.names: an empty list would match no object; remove the field to mean any name"), "spec.match.names"); err != nil {
			return err
		}
	}
	if m.Kinds != nil && len(m.Kinds) == 0 {
		if err := errs.note(fmt.Errorf("spec.match.kinds: an empty list would match no object; remove the field to mean any kind"), "spec.match.kinds"); err != nil {
			return err
		}
	}
	e.crossNS = len(m.Namespaces) > 0 || m.NamespaceSelector != nil
	if e.crossNS && pe.Namespace != clusterNamespace {
		err := fmt.Errorf("spec.match: namespaces and namespaceSelector are honoured only for exceptions in the cluster exceptions namespace %q; "+
			"remove them (this exception applies to namespace %q only) or ask a cluster admin to create it in %q", clusterNamespace, pe.Namespace, clusterNamespace)
		if err := errs.note(err, "spec.match"); err != nil {
			return err
		}
	}
	for _, sel := range []struct {
		path string
		s    *metav1.LabelSelector
	}{{"spec.match.selector", m.Selector}, {"spec.match.namespaceSelector", m.NamespaceSelector}} {
		if err := errs.note(checkSelectorSize(sel.s, sel.path), sel.path); err != nil {
			return err
		}
	}
	f, err := compileFilter(&policyv1alpha1.ResourceFilter{Namespaces: m.Namespaces, NamespaceSelector: m.NamespaceSelector, Selector: m.Selector}, "spec.match")
	if err != nil {
		if err := errs.note(err, "spec.match"); err != nil {
			return err
		}
		f = &filter{}
	}
	if f.names, err = CompileGlobs(m.Names); err != nil {
		if err := errs.note(fmt.Errorf("spec.match.names%w", err), "spec.match.names"); err != nil {
			return err
		}
	}
	for _, k := range m.Kinds {
		f.kinds = append(f.kinds, string(k))
	}
	e.match = f
	return nil
}

// emptyPodSecurity refuses podSecurity: [].
func emptyPodSecurity(pe *policyv1alpha1.PolicyException) error {
	if pe.Spec.PodSecurity != nil && len(pe.Spec.PodSecurity) == 0 {
		return fmt.Errorf("spec.podSecurity: an empty list is ambiguous; remove the field to waive the named rules entirely, or list the violations to waive")
	}
	return nil
}

// compileEntries compiles spec.podSecurity: the violations waived.
func (e *Exception) compileEntries(pe *policyv1alpha1.PolicyException, errs *fieldErrors) error {
	entries := pe.Spec.PodSecurity
	if n := len(entries); n > MaxExceptionEntries {
		err := fmt.Errorf("spec.podSecurity: %d entries; a PolicyException may have at most %d (the schema's limit): merge entries that differ only in images or values, or split the exception", n, MaxExceptionEntries)
		if err := errs.note(err, "spec.podSecurity"); err != nil {
			return err
		}
		// Collecting, the entries within the limit are checked: the work
		// stays what compiling an exception that fits costs.
		entries = entries[:MaxExceptionEntries]
	}
	for i, ps := range entries {
		path := fmt.Sprintf("spec.podSecurity[%d]", i)
		x, err := CompileExclusion(ps, e.Source, path)
		if err != nil {
			if err := errs.note(err, path); err != nil {
				return err
			}
			continue
		}
		e.Exclusions = append(e.Exclusions, x)
		if !slices.Contains(e.controls, x.control) {
			e.controls = append(e.controls, x.control)
		}
	}
	return nil
}

// ExceptionEntriesFit checks a PolicyException's entries against the
// schema's bounds, each entry's and all of them together: what the API
// server would take. Compiling does not check them (the engine's work is
// bounded by its budget, not by the schema), so a tool that writes
// exceptions (exception generate) checks its output with this.
func ExceptionEntriesFit(entries []policyv1alpha1.PodSecurityExclusion) error {
	var images, names, values int
	for i, x := range entries {
		path := fmt.Sprintf("spec.podSecurity[%d]", i)
		switch {
		case len(x.Images) > MaxEntryImages:
			return fmt.Errorf("%s.images: %d globs; an entry lists at most %d (the schema's limit): split the entry, each with a share of the images", path, len(x.Images), MaxEntryImages)
		case len(x.ContainerNames) > MaxEntryContainerNames:
			return fmt.Errorf("%s.containerNames: %d globs; an entry lists at most %d (the schema's limit): split the entry, each with a share of the names", path, len(x.ContainerNames), MaxEntryContainerNames)
		case len(x.Values) > MaxEntryValues:
			return fmt.Errorf("%s.values: %d values; an entry lists at most %d (the schema's limit), and a violation is covered only by one entry that lists all its values: "+
				"change the workload to set fewer, or ask a cluster admin for a policy exclusion", path, len(x.Values), MaxEntryValues)
		}
		images, names, values = images+len(x.Images), names+len(x.ContainerNames), values+len(x.Values)
	}
	switch {
	case images > MaxExceptionImages:
		return fmt.Errorf("spec.podSecurity: %d image globs in all; a PolicyException holds at most %d (the schema's limit): split the exception", images, MaxExceptionImages)
	case names > MaxExceptionContainerNames:
		return fmt.Errorf("spec.podSecurity: %d container name globs in all; a PolicyException holds at most %d (the schema's limit): split the exception", names, MaxExceptionContainerNames)
	case values > MaxExceptionValues:
		return fmt.Errorf("spec.podSecurity: %d values in all; a PolicyException holds at most %d (the schema's limit): split the exception", values, MaxExceptionValues)
	}
	return nil
}

// Targets reports whether the exception names this rule.
func (e *Exception) Targets(policy, rule string) bool {
	for _, t := range e.targets {
		if t.policy == policy && t.rules.Match(rule) {
			return true
		}
	}
	return false
}

// Expired reports whether the exception has stopped applying at now.
func (e *Exception) Expired(now time.Time) bool {
	return e.ExpiresAt != nil && !now.Before(*e.ExpiresAt)
}

// Matches reports whether the exception reaches an object: in scope (its own
// namespace, or what match.namespaces and namespaceSelector select from the
// cluster exceptions namespace) and matched by match. It checks neither
// expiry (Expired) nor the policy's guardrails (Permits).
func (e *Exception) Matches(o *Object, nsLabels map[string]string) bool {
	if !e.inScope(o) {
		return false
	}
	return e.match == nil || e.match.matches(o, nsLabels)
}

// inScope reports whether the object is in the exception's reach by
// namespace: its own namespace, unless it is a cross-namespace exception of
// the cluster exceptions namespace (whose match says which namespaces).
func (e *Exception) inScope(o *Object) bool {
	return e.crossNS || o.Namespace == e.Namespace
}

// ReachesNamespace reports whether the exception may apply to objects in a
// namespace with nsLabels: its own, or those its match.namespaces and
// match.namespaceSelector select when it is a cross-namespace exception of
// the cluster exceptions namespace. The rest of match (names, kinds,
// selector) is left to each object.
func (e *Exception) ReachesNamespace(namespace string, nsLabels map[string]string) bool {
	if !e.crossNS {
		return namespace == e.Namespace
	}
	f := e.match
	return (len(f.namespaces) == 0 || f.namespaces.Match(namespace)) &&
		(f.nsSelector == nil || f.nsSelector.Matches(labels.Set(nsLabels)))
}
