package engine

import (
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/pod-security-admission/api"
	"k8s.io/pod-security-admission/policy"

	policyv1alpha1 "github.com/podsieve/podsieve/api/v1alpha1"
)

// checkAppArmorProfile is upstream's appArmorProfile check (policy/check_appArmorProfile.go).
const checkAppArmorProfile policy.CheckID = "appArmorProfile"

func init() {
	addAttribution(checkAppArmorProfile, attribution{
		control:   policyv1alpha1.ControlAppArmor,
		revisions: []api.Version{api.MajorMinorVersion(1, 0)},
		attribute: attributeAppArmorProfile,
	})
}

func attributeAppArmorProfile(a attributor, v api.Version, meta *metav1.ObjectMeta, spec *corev1.PodSpec) []Finding {
	if !since(v, 0) {
		return nil
	}
	if sc := spec.SecurityContext; sc != nil && sc.AppArmorProfile != nil && !allowedAppArmorType(sc.AppArmorProfile.Type) {
		a.pod(fPodAppArmorType, []string{string(sc.AppArmorProfile.Type)})
	}
	for k, c := range containers(spec) {
		if sc := c.SecurityContext; sc != nil && sc.AppArmorProfile != nil && !allowedAppArmorType(sc.AppArmorProfile.Type) {
			a.ctr(k, c, fCtrAppArmorType, []string{string(sc.AppArmorProfile.Type)})
		}
	}
	if meta == nil {
		return a.out
	}
	// Upstream judges every annotation with the prefix, whether or not a
	// container of that name exists, so attribution must too. Map order is
	// random; key order keeps the output stable.
	var keys []string
	for key, val := range meta.Annotations {
		if strings.HasPrefix(key, appArmorAnnotationPrefix) && !allowedAppArmorAnnotation(val) {
			keys = append(keys, key)
		}
	}
	slices.Sort(keys)
	for _, key := range keys {
		name := key[len(appArmorAnnotationPrefix):]
		viol := Violation{
			Control:   a.control,
			CheckID:   a.id,
			Scope:     ScopeContainer,
			Container: name,
			Field:     fAppArmorAnnotation,
			Values:    []string{meta.Annotations[key]},
		}
		for k, c := range containers(spec) {
			if c.Name == name {
				viol.ContainerType, viol.Sidecar, viol.Image = kindTypes[k], isSidecar(k, c), c.Image
				break
			}
		}
		a.out = append(a.out, Finding{Violation: viol})
	}
	return a.out
}

func allowedAppArmorType(t corev1.AppArmorProfileType) bool {
	return t == corev1.AppArmorProfileTypeRuntimeDefault || t == corev1.AppArmorProfileTypeLocalhost
}

func allowedAppArmorAnnotation(v string) bool {
	return v == "" ||
		v == corev1.DeprecatedAppArmorBetaProfileRuntimeDefault ||
		strings.HasPrefix(v, corev1.DeprecatedAppArmorBetaProfileNamePrefix)
}
