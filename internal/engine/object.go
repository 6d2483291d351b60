package engine

import (
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
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
// CronJob) for evaluation.
func NewObject(obj runtime.Object) (*Object, error) {
	kind, prefix := podBearing(obj)
	if kind == "" {
		return nil, fmt.Errorf("%T carries no pod spec podsieve evaluates", obj)
	}
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

// podBearing returns the kind of a typed pod-bearing object and the path from
// it to its pod template's parent, or "" for any other object.
func podBearing(obj runtime.Object) (kind, prefix string) {
	switch obj.(type) {
	case *corev1.Pod:
		return "Pod", ""
	case *corev1.PodTemplate:
		return "PodTemplate", "template."
	case *corev1.ReplicationController:
		return "ReplicationController", "spec.template."
	case *appsv1.ReplicaSet:
		return "ReplicaSet", "spec.template."
	case *appsv1.Deployment:
		return "Deployment", "spec.template."
	case *appsv1.StatefulSet:
		return "StatefulSet", "spec.template."
	case *appsv1.DaemonSet:
		return "DaemonSet", "spec.template."
	case *batchv1.Job:
		return "Job", "spec.template."
	case *batchv1.CronJob:
		return "CronJob", "spec.jobTemplate.spec.template."
	}
	return "", ""
}

// DefaultVolumes applies the one API-server default that the checks notice:
// a volume without a source is an emptyDir. Objects read from files (podsieve
// eval, upstream's fixtures) have not been through the API server, and
// without it a sourceless volume would fail restricted's volume check where
// the cluster would admit it.
func DefaultVolumes(spec *corev1.PodSpec) {
	for i := range spec.Volumes {
		if spec.Volumes[i].VolumeSource == (corev1.VolumeSource{}) {
			spec.Volumes[i].EmptyDir = &corev1.EmptyDirVolumeSource{}
		}
	}
}
