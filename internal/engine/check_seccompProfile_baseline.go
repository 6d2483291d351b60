package engine

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/pod-security-admission/api"
	"k8s.io/pod-security-admission/policy"

	policyv1alpha1 "github.com/podsieve/podsieve/api/v1alpha1"
)

// checkSeccompProfileBaseline is upstream's seccompProfile_baseline check (policy/check_seccompProfile_baseline.go).
const checkSeccompProfileBaseline policy.CheckID = "seccompProfile_baseline"

func init() {
	addAttribution(checkSeccompProfileBaseline, attribution{
		control:   policyv1alpha1.ControlSeccomp,
		revisions: []api.Version{api.MajorMinorVersion(1, 0), api.MajorMinorVersion(1, 19)},
		attribute: attributeSeccompProfileBaseline,
	})
}

// Annotation keys of the pre-v1.19 seccomp policy. Upstream keeps them
// unexported and the corev1 equivalents are deprecated, hence the literals.
const (
	seccompPodAnnotation             = "seccomp.security.alpha.kubernetes.io/pod"
	seccompContainerAnnotationPrefix = "container.seccomp.security.alpha.kubernetes.io/"
)

func attributeSeccompProfileBaseline(a attributor, v api.Version, meta *metav1.ObjectMeta, spec *corev1.PodSpec) []Finding {
	if !since(v, 0) {
		return nil
	}
	if since(v, 19) {
		if sc := spec.SecurityContext; sc != nil && sc.SeccompProfile != nil && !validSeccompType(sc.SeccompProfile.Type) {
			a.pod(fPodSeccompType, []string{string(sc.SeccompProfile.Type)})
		}
		for k, c := range containers(spec) {
			if sc := c.SecurityContext; sc != nil && sc.SeccompProfile != nil && !validSeccompType(sc.SeccompProfile.Type) {
				a.ctr(k, c, fCtrSeccompType, []string{string(sc.SeccompProfile.Type)})
			}
		}
		return a.out
	}
	// Before v1.19 only the alpha annotations count, and, unlike AppArmor,
	// only container annotations naming a container of the pod.
	if meta == nil || len(meta.Annotations) == 0 {
		return a.out
	}
	if val, ok := meta.Annotations[seccompPodAnnotation]; ok && !validSeccompAnnotation(val) {
		a.pod(fPodSeccompAnnotation, []string{val})
	}
	hasContainerAnnotations := false
	for key := range meta.Annotations {
		if strings.HasPrefix(key, seccompContainerAnnotationPrefix) {
			hasContainerAnnotations = true
			break
		}
	}
	if !hasContainerAnnotations {
		return a.out
	}
	for k, c := range containers(spec) {
		if val, ok := meta.Annotations[seccompContainerAnnotationPrefix+c.Name]; ok && !validSeccompAnnotation(val) {
			a.ctrPath(k, c, fCtrSeccompAnnotation, []string{val})
		}
	}
	return a.out
}

// validSeccompType is shared with seccompProfile_restricted, as upstream's
// validSeccomp is.
func validSeccompType(t corev1.SeccompProfileType) bool {
	return t == corev1.SeccompProfileTypeLocalhost || t == corev1.SeccompProfileTypeRuntimeDefault
}

func validSeccompAnnotation(v string) bool {
	return v == "runtime/default" || v == "docker/default" || strings.HasPrefix(v, "localhost/")
}
