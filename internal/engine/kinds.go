package engine

import (
	"reflect"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	policyv1alpha1 "github.com/podsieve/podsieve/api/v1alpha1"
)

// PodBearingKind is one kind of object that carries a pod spec: its group
// and version, and the path from the object to its pod template's parent.
type PodBearingKind struct {
	Kind policyv1alpha1.PodBearingKind
	// GroupVersion is the API version podsieve reads the kind in.
	GroupVersion schema.GroupVersion
	// FieldPrefix is the path from the object to the pod's metadata and
	// spec: "" for a Pod, "spec.template." for most controllers.
	FieldPrefix string
	// Creates is the kind of the objects its Kubernetes controller creates
	// from the template and owns: Pod for the controllers that run pods,
	// ReplicaSet for a Deployment, Job for a CronJob; "" for a Pod or a
	// PodTemplate.
	Creates policyv1alpha1.PodBearingKind
	goType  reflect.Type
}

// GroupVersionKind is the kind's group, version and kind.
func (k PodBearingKind) GroupVersionKind() schema.GroupVersionKind {
	return k.GroupVersion.WithKind(string(k.Kind))
}

// GroupKind is the kind's group and kind.
func (k PodBearingKind) GroupKind() schema.GroupKind {
	return schema.GroupKind{Group: k.GroupVersion.Group, Kind: string(k.Kind)}
}

func kindOf[T any](gv schema.GroupVersion, kind policyv1alpha1.PodBearingKind, prefix string, creates policyv1alpha1.PodBearingKind) PodBearingKind {
	return PodBearingKind{Kind: kind, GroupVersion: gv, FieldPrefix: prefix, Creates: creates, goType: reflect.TypeFor[*T]()}
}

// PodBearingKinds is the one table of the kinds podsieve evaluates, in the
// order messages list them (the CRD's enum of PodBearingKind too): the
// webhook's, the scanner's, the CLI's and the converters' lists are read
// from it.
var PodBearingKinds = []PodBearingKind{
	kindOf[corev1.Pod](corev1.SchemeGroupVersion, policyv1alpha1.KindPod, "", ""),
	kindOf[appsv1.Deployment](appsv1.SchemeGroupVersion, policyv1alpha1.KindDeployment, "spec.template.", policyv1alpha1.KindReplicaSet),
	kindOf[appsv1.ReplicaSet](appsv1.SchemeGroupVersion, policyv1alpha1.KindReplicaSet, "spec.template.", policyv1alpha1.KindPod),
	kindOf[appsv1.StatefulSet](appsv1.SchemeGroupVersion, policyv1alpha1.KindStatefulSet, "spec.template.", policyv1alpha1.KindPod),
	kindOf[appsv1.DaemonSet](appsv1.SchemeGroupVersion, policyv1alpha1.KindDaemonSet, "spec.template.", policyv1alpha1.KindPod),
	kindOf[batchv1.Job](batchv1.SchemeGroupVersion, policyv1alpha1.KindJob, "spec.template.", policyv1alpha1.KindPod),
	kindOf[batchv1.CronJob](batchv1.SchemeGroupVersion, policyv1alpha1.KindCronJob, "spec.jobTemplate.spec.template.", policyv1alpha1.KindJob),
	kindOf[corev1.ReplicationController](corev1.SchemeGroupVersion, policyv1alpha1.KindReplicationController, "spec.template.", policyv1alpha1.KindPod),
	kindOf[corev1.PodTemplate](corev1.SchemeGroupVersion, policyv1alpha1.KindPodTemplate, "template.", ""),
}

// Descendants are the kinds of the objects k's controllers create, directly
// or through what they create, nearest first: ReplicaSet and Pod for a
// Deployment; none for a Pod or a PodTemplate.
func (k PodBearingKind) Descendants() []policyv1alpha1.PodBearingKind {
	var out []policyv1alpha1.PodBearingKind
	for c := k.Creates; c != ""; {
		out = append(out, c)
		next, ok := KindNamed(c)
		if !ok {
			break
		}
		c = next.Creates
	}
	return out
}

// CreatorOf returns the kind whose controller creates the objects of a kind
// that only one kind creates (a ReplicaSet's Deployment, a Job's CronJob),
// or false for a kind that none or several create (a Pod).
func CreatorOf(kind policyv1alpha1.PodBearingKind) (PodBearingKind, bool) {
	var creator PodBearingKind
	n := 0
	for _, k := range PodBearingKinds {
		if k.Creates == kind {
			creator = k
			n++
		}
	}
	if n != 1 {
		return PodBearingKind{}, false
	}
	return creator, true
}

// KindNamed returns the pod-bearing kind of this name, in any group, or
// false for any other name.
func KindNamed[K ~string](kind K) (PodBearingKind, bool) {
	for _, k := range PodBearingKinds {
		if string(k.Kind) == string(kind) {
			return k, true
		}
	}
	return PodBearingKind{}, false
}

// KindFor returns the pod-bearing kind of a group and kind (the version does
// not matter), or false for any other kind.
func KindFor(gk schema.GroupKind) (PodBearingKind, bool) {
	for _, k := range PodBearingKinds {
		if k.GroupKind() == gk {
			return k, true
		}
	}
	return PodBearingKind{}, false
}

// IsPodBearingKind reports whether kind names a pod-bearing kind, in any
// group: for input that names the kind alone (a Kyverno match, a metric
// label).
func IsPodBearingKind(kind string) bool {
	for _, k := range PodBearingKinds {
		if string(k.Kind) == kind {
			return true
		}
	}
	return false
}

// podBearing returns the kind of a typed pod-bearing object, or false for any
// other object.
func podBearing(obj runtime.Object) (PodBearingKind, bool) {
	t := reflect.TypeOf(obj)
	for _, k := range PodBearingKinds {
		if k.goType == t {
			return k, true
		}
	}
	return PodBearingKind{}, false
}
