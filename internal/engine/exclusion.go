package engine

import (
	"fmt"
	"slices"
	"strings"

	policyv1alpha1 "github.com/podsieve/podsieve/api/v1alpha1"
)

// Exclusion is a compiled PodSecurityExclusion: from a rule's
// podSecurity.exclude or from a PolicyException's podSecurity.
type Exclusion struct {
	// Source names where the entry comes from, as podsieve reports it:
	// policy/<policy>/<rule> or exception/<namespace>/<name>.
	Source string

	control   string
	images    Globs
	names     Globs
	field     string
	values    Globs
	hasValues bool
}

// CompileExclusion checks an entry against the engine's knowledge of the
// controls and compiles its globs. path is where the entry sits in its object
// (spec.rules[0].podSecurity.exclude[1]), for error messages.
func CompileExclusion(e policyv1alpha1.PodSecurityExclusion, source, path string) (Exclusion, error) {
	control := string(e.ControlName)
	if !slices.Contains(Controls, control) {
		return Exclusion{}, fmt.Errorf("%s.controlName: unknown control %q; use one of %s", path, control, strings.Join(quoteAll(Controls), ", "))
	}
	x := Exclusion{Source: source, control: control, field: e.RestrictedField, hasValues: len(e.Values) > 0}
	if PodLevelOnly(control) && (len(e.Images) > 0 || len(e.ContainerNames) > 0) {
		return Exclusion{}, fmt.Errorf("%s: images and containerNames select containers, but control %q has only pod-level fields; remove them", path, control)
	}
	if x.hasValues && x.field == "" {
		return Exclusion{}, fmt.Errorf("%s.values: values requires restrictedField; name the field whose values are listed", path)
	}
	if x.field != "" && !slices.Contains(FieldsOf(control), x.field) {
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

func quoteAll(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = fmt.Sprintf("%q", s)
	}
	return out
}

// covers reports whether the entry covers a violation. forms are the other
// spellings of the container's image (imageForms); the caller computes them
// once per violation, and only when some entry has images.
func (x *Exclusion) covers(v *Violation, forms []string) bool {
	return x.mismatch(v, forms) == noMismatch
}

// mismatchKind is the first reason an entry does not cover a violation, in
// the order covers tests them.
type mismatchKind uint8

const (
	noMismatch mismatchKind = iota
	otherControl
	otherField
	otherName
	nameOnPodLevel
	valuesOnMissing
	otherValue
	otherImage
	imageOnPodLevel
)

func (x *Exclusion) mismatch(v *Violation, forms []string) mismatchKind {
	if x.control != v.Control && !x.coversOverride(v) {
		return otherControl
	}
	// Cheapest tests first; image globs, which may need the image's other
	// forms, last.
	if x.field != "" && x.field != v.Field {
		return otherField
	}
	if len(x.names) > 0 {
		if v.Scope != ScopeContainer {
			return nameOnPodLevel
		}
		if !x.names.Match(v.Container) {
			return otherName
		}
	}
	if x.hasValues {
		// A missing required setting has no value to match: only an entry
		// without values may cover it.
		if len(v.Values) == 0 {
			return valuesOnMissing
		}
		for _, val := range v.Values {
			if !x.values.Match(val) {
				return otherValue
			}
		}
	}
	if len(x.images) > 0 {
		if v.Scope != ScopeContainer {
			return imageOnPodLevel
		}
		if !imageMatches(x.images, v.Image, forms) {
			return otherImage
		}
	}
	return noMismatch
}

// Control is the control the entry names.
func (x *Exclusion) Control() string { return x.control }

// WhyNot says why the entry does not cover a violation, or "" when it does:
// the first of its fields that does not match, for podsieve explain. It
// decides exactly as Rule.Evaluate does.
func (x *Exclusion) WhyNot(v *Violation) string {
	var forms []string
	if len(x.images) > 0 && v.Scope == ScopeContainer {
		forms = imageForms(v.Image)
	}
	switch x.mismatch(v, forms) {
	case otherControl:
		return fmt.Sprintf("its controlName is %q, not %q", x.control, v.Control)
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
	case otherImage:
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
	return x.control == string(policyv1alpha1.ControlHostPathVolumes) &&
		v.CheckID == string(checkRestrictedVolumes) && v.Field == fHostPathVolume
}
