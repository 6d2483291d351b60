package engine

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	policyv1alpha1 "github.com/podsieve/podsieve/api/v1alpha1"
)

// Kyverno's podSecurity exclusions name the annotation fields of AppArmor
// and (for policy versions before v1.19) seccomp with the annotation key in
// brackets, container name included, as its denials print them:
// metadata.annotations[container.apparmor.security.beta.kubernetes.io/app].
// podsieve names one field for every container's annotation and selects the
// container with containerNames. KyvernoField reads Kyverno's spelling, for
// `podsieve convert --from kyverno` and for the hint a podsieve entry
// written in Kyverno's spelling gets.

// appArmorAnnotationPrefix is the per-container AppArmor annotation key,
// as upstream's check reads it.
const appArmorAnnotationPrefix = corev1.DeprecatedAppArmorBetaContainerAnnotationKeyPrefix

// KyvernoField is what a Kyverno restrictedField of control becomes in
// podsieve: the field, and the one container it selects (none for a
// pod-level field). ok is false when field is not one of Kyverno's
// bracketed annotation spellings, or names a container by something other
// than a literal container name (a pattern, whose meaning in Kyverno would
// have to be guessed).
func KyvernoField(control policyv1alpha1.ControlName, field string) (podsieve, container string, ok bool) {
	key, found := strings.CutPrefix(field, "metadata.annotations[")
	if !found || !strings.HasSuffix(key, "]") {
		return "", "", false
	}
	key = strings.Trim(strings.TrimSuffix(key, "]"), `"'`)
	var prefix string
	switch {
	case control == policyv1alpha1.ControlAppArmor && strings.HasPrefix(key, appArmorAnnotationPrefix):
		podsieve, prefix = fAppArmorAnnotation, appArmorAnnotationPrefix
	case control == policyv1alpha1.ControlSeccomp && key == seccompPodAnnotation:
		return fPodSeccompAnnotation, "", true
	case control == policyv1alpha1.ControlSeccomp && strings.HasPrefix(key, seccompContainerAnnotationPrefix):
		podsieve, prefix = fCtrSeccompAnnotation, seccompContainerAnnotationPrefix
	default:
		return "", "", false
	}
	container = strings.TrimPrefix(key, prefix)
	if len(validation.IsDNS1123Label(container)) > 0 {
		return "", "", false
	}
	return podsieve, container, true
}

// KyvernoSeccompContainerField is podsieve's field that Kyverno's
// per-container seccomp annotation spelling becomes.
const KyvernoSeccompContainerField = fCtrSeccompAnnotation

// KyvernoAppArmorBare is Kyverno's AppArmor field without a key, which
// Kyverno lists but never matches (its violations name the annotation).
const KyvernoAppArmorBare = "metadata.annotations"

// kyvernoHint is what to write instead of a restrictedField in Kyverno's
// spelling; "" when field is not one.
func kyvernoHint(control policyv1alpha1.ControlName, field string) string {
	if control == policyv1alpha1.ControlAppArmor && field == KyvernoAppArmorBare {
		return fmt.Sprintf("; for the AppArmor annotations write restrictedField: %s with containerNames: [<container>]", fAppArmorAnnotation)
	}
	f, c, ok := KyvernoField(control, field)
	switch {
	case !ok:
		return ""
	case c == "":
		return fmt.Sprintf("; that is Kyverno's spelling: write restrictedField: %s", f)
	}
	return fmt.Sprintf("; that is Kyverno's spelling: write restrictedField: %s with containerNames: [%q], so that the entry stays with that container", f, c)
}
