package engine

import (
	"fmt"
	"math"
	"slices"
	"strings"

	policyv1alpha1 "github.com/podsieve/podsieve/api/v1alpha1"
	"github.com/podsieve/podsieve/internal/words"
)

// Exclusion is a compiled PodSecurityExclusion: from a rule's
// podSecurity.exclude or from a PolicyException's podSecurity.
type Exclusion struct {
	// Source names where the entry comes from, as podsieve reports it:
	// policy/<policy>/<rule> or exception/<namespace>/<name>.
	Source Source

	control   policyv1alpha1.ControlName
	images    Globs
	names     Globs
	field     string
	values    Globs
	hasValues bool
	// kinds are the containerKinds the entry is limited to; nil for every
	// kind.
	kinds []policyv1alpha1.ContainerKind
}

// CompileExclusion checks an entry against the engine's knowledge of the
// controls and compiles its globs. path is where the entry sits in its object
// (spec.rules[0].podSecurity.exclude[1]), for error messages.
func CompileExclusion(e policyv1alpha1.PodSecurityExclusion, source Source, path string) (Exclusion, error) {
	control := e.ControlName
	if !slices.Contains(policyv1alpha1.Controls, control) {
		return Exclusion{}, fmt.Errorf("%s.controlName: unknown control %q; use one of %s", path, control, strings.Join(quoteAll(policyv1alpha1.Controls), ", "))
	}
	for _, l := range []struct {
		name string
		list []string
		what string
	}{{"images", e.Images, "image"}, {"containerNames", e.ContainerNames, "container"}, {"values", e.Values, "value"}} {
		if l.list != nil && len(l.list) == 0 {
			return Exclusion{}, fmt.Errorf("%s.%s: an empty list would match no %s; remove the field to mean any %s", path, l.name, l.what, l.what)
		}
	}
	x := Exclusion{Source: source, control: control, field: e.RestrictedField, hasValues: len(e.Values) > 0}
	if PodLevelOnly(control) && (len(e.Images) > 0 || len(e.ContainerNames) > 0 || len(e.ContainerKinds) > 0) {
		return Exclusion{}, fmt.Errorf("%s: images, containerNames and containerKinds select containers, but control %q has only pod-level fields; remove them", path, control)
	}
	if e.ContainerKinds != nil && len(e.ContainerKinds) == 0 {
		return Exclusion{}, fmt.Errorf("%s.containerKinds: an empty list would match no container; remove the field to mean every kind", path)
	}
	for i, k := range e.ContainerKinds {
		if !slices.Contains(policyv1alpha1.ContainerKinds, k) {
			return Exclusion{}, fmt.Errorf("%s.containerKinds[%d]: unknown kind %q; use Init, Sidecar, App or Ephemeral", path, i, k)
		}
		if !slices.Contains(x.kinds, k) {
			x.kinds = append(x.kinds, k)
		}
	}
	if x.hasValues && x.field == "" {
		return Exclusion{}, fmt.Errorf("%s.values: values requires restrictedField; name the field whose values are listed", path)
	}
	if x.field != "" && !slices.Contains(FieldsOf(control), x.field) {
		if hint := kyvernoHint(control, x.field); hint != "" {
			return Exclusion{}, fmt.Errorf("%s.restrictedField: %q is not a field of control %q%s", path, x.field, control, hint)
		}
		return Exclusion{}, fmt.Errorf("%s.restrictedField: %q is not a field of control %q; use one of %s",
			path, x.field, control, strings.Join(FieldsOf(control), ", "))
	}
	if err := checkValues(x.field, e.Values, path); err != nil {
		return Exclusion{}, err
	}
	var err error
	if x.images, err = CompileGlobs(e.Images); err != nil {
		return Exclusion{}, fmt.Errorf("%s.images%w", path, err)
	}
	if x.names, err = CompileGlobs(e.ContainerNames); err != nil {
		return Exclusion{}, fmt.Errorf("%s.containerNames%w", path, err)
	}
	if x.values, err = CompileGlobs(e.Values); err != nil {
		return Exclusion{}, fmt.Errorf("%s.values%w", path, err)
	}
	return x, nil
}

// quoteAll is words.Quote under the short name the engine's many messages
// use.
func quoteAll[S ~string](ss []S) []string { return words.Quote(ss) }

// covers reports whether the entry covers a violation, with no budget: it
// is for tests and tools; Rule.Evaluate goes through mismatch with the
// decision's state.
func (x *Exclusion) covers(v *Violation) bool {
	st := newDecideState(Limits{MaxSteps: math.MaxInt64})
	return x.mismatch(v, st) == noMismatch
}

// mismatchKind is the first reason an entry does not cover a violation, in
// the order covers tests them.
type mismatchKind uint8

const (
	noMismatch mismatchKind = iota
	otherControl
	// hostPathOnly: a hostPath volume is waived only by a HostPath Volumes
	// entry, never by a Volume Types one, at any level.
	hostPathOnly
	otherField
	otherName
	nameOnPodLevel
	valuesOnMissing
	otherValue
	otherImage
	imageOnPodLevel
	otherKind
	kindOnPodLevel
	// stopped: the decision's budget ran out during the test; the entry
	// does not count.
	stopped
)

// mismatch tests the entry against a violation, charging the decision's
// budget for the entry and the globs it runs.
func (x *Exclusion) mismatch(v *Violation, st *decideState) mismatchKind {
	if !st.spend(stepsPerEntry) {
		return stopped
	}
	if x.control != v.Control && !x.coversOverride(v) {
		return otherControl
	}
	if v.CheckID == string(checkRestrictedVolumes) && v.Field == fHostPathVolume && x.control != policyv1alpha1.ControlHostPathVolumes {
		return hostPathOnly
	}
	// Cheapest tests first; image globs, which may need the image's other
	// forms, last.
	if x.field != "" && x.field != v.Field {
		return otherField
	}
	if len(x.kinds) > 0 {
		if v.Scope != ScopeContainer {
			return kindOnPodLevel
		}
		if !slices.Contains(x.kinds, v.Kind()) {
			return otherKind
		}
	}
	if m := x.mismatchName(v, st); m != noMismatch {
		return m
	}
	if m := x.mismatchValues(v, st); m != noMismatch {
		return m
	}
	return x.mismatchImage(v, st)
}

// mismatchName tests the entry's containerNames.
func (x *Exclusion) mismatchName(v *Violation, st *decideState) mismatchKind {
	if len(x.names) == 0 {
		return noMismatch
	}
	if v.Scope != ScopeContainer {
		return nameOnPodLevel
	}
	ok, steps := x.names.matchCounted(v.Container, &st.sc)
	switch {
	case !st.spend(steps):
		return stopped
	case !ok:
		return otherName
	}
	return noMismatch
}

// mismatchValues tests the entry's values: each of the violation's values
// must match one. A missing required setting has no value to match: only
// an entry without values may cover it.
func (x *Exclusion) mismatchValues(v *Violation, st *decideState) mismatchKind {
	if !x.hasValues {
		return noMismatch
	}
	if len(v.Values) == 0 {
		return valuesOnMissing
	}
	for _, val := range v.Values {
		ok, steps := x.values.matchCounted(val, &st.sc)
		switch {
		case !st.spend(steps):
			return stopped
		case !ok:
			return otherValue
		}
	}
	return noMismatch
}

// mismatchImage tests the entry's image globs, remembered per image for
// the decision.
func (x *Exclusion) mismatchImage(v *Violation, st *decideState) mismatchKind {
	if len(x.images) == 0 {
		return noMismatch
	}
	if v.Scope != ScopeContainer {
		return imageOnPodLevel
	}
	img := st.image(v.Image)
	ok, found := img.memo.get(x)
	if !found {
		var steps int64
		ok, steps = img.matches(x.images, &st.sc)
		if !st.spend(steps) {
			return stopped
		}
		img.memo.put(x, ok)
	}
	if !ok {
		return otherImage
	}
	return noMismatch
}

// Control is the control the entry names.
func (x *Exclusion) Control() policyv1alpha1.ControlName { return x.control }

// WhyNot says why the entry does not cover a violation, or "" when it does:
// the first of its fields that does not match, for podsieve explain. It
// decides exactly as Rule.Evaluate does.
func (x *Exclusion) WhyNot(v *Violation) string {
	switch x.mismatch(v, newDecideState(Limits{MaxSteps: math.MaxInt64})) {
	case otherControl:
		return fmt.Sprintf("its controlName is %q, not %q", x.control, v.Control)
	case hostPathOnly:
		return fmt.Sprintf("its controlName is %q, and a hostPath volume is waived only by a %q entry", x.control, policyv1alpha1.ControlHostPathVolumes)
	case otherField:
		return fmt.Sprintf("its restrictedField is %s, not %s", x.field, v.Field)
	case nameOnPodLevel:
		return "it selects containers by name, and the violation is in a pod-level field"
	case otherName:
		return fmt.Sprintf("its containerNames %s do not match container %q", strings.Join(quoteAll(x.names.Patterns()), ", "), v.Container)
	case valuesOnMissing:
		return "it lists values, and the violation is a missing setting, which only an entry without values covers"
	case otherValue:
		for _, val := range v.Values {
			if !x.values.Match(val) {
				return fmt.Sprintf("its values %s do not match %q", strings.Join(quoteAll(x.values.Patterns()), ", "), val)
			}
		}
	case imageOnPodLevel:
		return "it selects containers by image, and the violation is in a pod-level field"
	case kindOnPodLevel:
		return "it selects containers by kind, and the violation is in a pod-level field"
	case otherKind:
		return fmt.Sprintf("its containerKinds %s do not include %s, the kind of %s %q", strings.Join(quoteAll(x.kinds), ", "), v.Kind(), kindWord(v), v.Container)
	case otherImage:
		if len(v.Image) > maxImageReference {
			return fmt.Sprintf("the image is %d bytes long, longer than any image reference can be (%d), and matches no image glob", len(v.Image), maxImageReference)
		}
		return fmt.Sprintf("its images %s do not match image %q", strings.Join(quoteAll(x.images.Patterns()), ", "), v.Image)
	}
	return ""
}

// coversOverride lets an entry written for a baseline control keep working
// when the policy moves to restricted and a restricted check replaces the
// baseline one. Only HostPath Volumes needs it: the other overriding checks
// (Capabilities, Seccomp, /proc Mount Type) report under the baseline
// control's own name, with the same fields and values where the baseline
// check would have failed.
func (x *Exclusion) coversOverride(v *Violation) bool {
	return x.control == policyv1alpha1.ControlHostPathVolumes &&
		v.CheckID == string(checkRestrictedVolumes) && v.Field == fHostPathVolume
}
