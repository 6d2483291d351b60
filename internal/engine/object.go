package engine

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/pod-security-admission/admission"
)

// extractor is upstream's: the same pod templates Pod Security Admission reads.
var extractor admission.DefaultPodSpecExtractor

// NewObject wraps a typed pod-bearing object (Pod, PodTemplate,
// ReplicationController, ReplicaSet, Deployment, StatefulSet, DaemonSet, Job,
// CronJob) for evaluation. It applies ApplyPodDefaults to the object's pod
// spec, in place.
func NewObject(obj runtime.Object) (*Object, error) {
	return newObject(obj, ApplyPodDefaults)
}

// NewAdmissionObject is NewObject for an object the API server has already
// defaulted, as in an admission review: a volume without a source stays
// without one. The API server turns a volume with no source into an emptyDir
// before any webhook sees it, so in a review such a volume can only have a
// source that this build of k8s.io/api does not know (the decoder dropped
// it). Upstream's restricted check reports it as type "unknown", attributed
// to spec.volumes[*] (fRestrictedVolume), and refuses it: defaulting it to an
// emptyDir would admit a volume podsieve has not seen.
func NewAdmissionObject(obj runtime.Object) (*Object, error) {
	return newObject(obj, applyHostPortDefaults)
}

func newObject(obj runtime.Object, defaults func(*corev1.PodSpec)) (*Object, error) {
	pk, ok := podBearing(obj)
	if !ok {
		return nil, fmt.Errorf("%T carries no pod spec podsieve evaluates", obj)
	}
	kind, prefix := string(pk.Kind), pk.FieldPrefix
	accessor, err := meta.Accessor(obj)
	if err != nil {
		return nil, err
	}
	podMeta, spec, err := extractor.ExtractPodSpec(obj)
	if err != nil {
		return nil, err
	}
	if spec == nil {
		// A ReplicationController without a template creates no pods, so
		// there is nothing to refuse; upstream allows it too.
		podMeta, spec = &metav1.ObjectMeta{}, &corev1.PodSpec{}
	}
	defaults(spec)
	gvk := obj.GetObjectKind().GroupVersionKind()
	if gvk.Kind != "" {
		kind = gvk.Kind
	}
	return &Object{
		APIVersion:  gvk.GroupVersion().String(),
		Kind:        kind,
		Namespace:   accessor.GetNamespace(),
		Name:        accessor.GetName(),
		Labels:      podMeta.Labels,
		Meta:        podMeta,
		Spec:        spec,
		FieldPrefix: prefix,
	}, nil
}

// ApplyPodDefaults applies, in place, the API server's defaults that the
// checks notice, so that a pod spec is judged as the pod will be created:
//   - a volume without a source is an emptyDir;
//   - with hostNetwork, a container port without a hostPort gets
//     hostPort = containerPort (SetDefaults_Pod). Pods created from a
//     template get it too, so a template is judged with it, and a DaemonSet
//     whose pods would be refused for their host ports is refused itself.
//
// Objects read from files (podsieve eval, upstream's fixtures) have not been
// through the API server; on a Pod that has, these are no-ops.
func ApplyPodDefaults(spec *corev1.PodSpec) {
	for i := range spec.Volumes {
		if spec.Volumes[i].VolumeSource == (corev1.VolumeSource{}) {
			spec.Volumes[i].EmptyDir = &corev1.EmptyDirVolumeSource{}
		}
	}
	applyHostPortDefaults(spec)
}

// applyHostPortDefaults is the host port default of ApplyPodDefaults.
func applyHostPortDefaults(spec *corev1.PodSpec) {
	if spec.HostNetwork {
		for _, cs := range [][]corev1.Container{spec.InitContainers, spec.Containers} {
			for i := range cs {
				for j := range cs[i].Ports {
					if p := &cs[i].Ports[j]; p.HostPort == 0 {
						p.HostPort = p.ContainerPort
					}
				}
			}
		}
	}
}
