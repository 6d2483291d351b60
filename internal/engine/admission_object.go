package engine

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// NewAdmissionObject is NewObject for an object the API server has already
// defaulted, as in an admission review: every default but one is applied
// the same, and a volume without a source stays without one.
//
// The API server turns a volume with no source into an emptyDir before any
// webhook sees it, so in a review a volume without a source can only have a
// source that this build of k8s.io/api does not know (the decoder dropped
// it). Upstream's restricted check reports such a volume as type "unknown",
// attributed to spec.volumes[*] (fRestrictedVolume), and refuses it, as the
// API server's own Pod Security Admission, which knows the source, would if
// the source is not in the allowed list. Defaulting it to an emptyDir would
// admit a volume podsieve has not seen. Objects read from files (NewObject)
// keep the default: they have not been through the API server.
func NewAdmissionObject(obj runtime.Object) (*Object, error) {
	var sourceless []int
	if _, spec, err := extractor.ExtractPodSpec(obj); err == nil && spec != nil {
		for i := range spec.Volumes {
			if spec.Volumes[i].VolumeSource == (corev1.VolumeSource{}) {
				sourceless = append(sourceless, i)
			}
		}
	}
	o, err := NewObject(obj)
	if err != nil {
		return nil, err
	}
	// NewObject defaulted the spec in place: undo the volume default only.
	for _, i := range sourceless {
		o.Spec.Volumes[i].VolumeSource = corev1.VolumeSource{}
	}
	return o, nil
}
