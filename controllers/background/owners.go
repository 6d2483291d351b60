package background

import (
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyv1alpha1 "github.com/podsieve/podsieve/api/v1alpha1"
	"github.com/podsieve/podsieve/internal/engine"
	"github.com/podsieve/podsieve/internal/report"
)

// owners answers, for one namespace's scanned objects, which controller a
// pod repeats. ownerReferences are written by whoever writes the object, so
// a claim counts only when it is one the Kubernetes controllers make and
// keep: a pod owned by a ReplicaSet, Job, StatefulSet, DaemonSet or
// ReplicationController listed in the namespace under that kind, name and
// UID, whose selector matches the pod's labels (a controller releases or
// deletes pods it does not select, so a forged claim does not last); a
// ReplicaSet owned by a Deployment, a Job by a CronJob, likewise. A pod whose
// claim does not hold is reported in full.
type owners struct {
	byUID map[types.UID]listed
}

// listed is a scanned object and its kind (the cache's typed objects carry
// no TypeMeta).
type listed struct {
	obj client.Object
	gvk schema.GroupVersionKind
}

// newOwners indexes a namespace's objects; lists is indexed like
// scannedKinds.
func newOwners(lists [][]client.Object) owners {
	o := owners{byUID: map[types.UID]listed{}}
	for i, l := range lists {
		for _, obj := range l {
			o.byUID[obj.GetUID()] = listed{obj: obj, gvk: scannedKinds[i].gvk}
		}
	}
	return o
}

func (o owners) kind(obj client.Object) string { return o.byUID[obj.GetUID()].gvk.Kind }

// podOwnerKinds are the kinds that create pods and own them as controller.
var podOwnerKinds = func() map[string]bool {
	m := map[string]bool{}
	for _, k := range engine.PodBearingKinds {
		if k.Creates == policyv1alpha1.KindPod {
			m[string(k.Kind)] = true
		}
	}
	return m
}()

// parentKinds: the controller a ReplicaSet or Job repeats.
var parentKinds = func() map[string]metav1.TypeMeta {
	m := map[string]metav1.TypeMeta{}
	for _, k := range engine.PodBearingKinds {
		if parent, ok := engine.CreatorOf(k.Kind); ok {
			m[string(k.Kind)] = metav1.TypeMeta{APIVersion: parent.GroupVersion.String(), Kind: string(parent.Kind)}
		}
	}
	return m
}()

// controller returns the object obj's controller reference names, when it
// is listed under that kind, API version, name and UID.
func (o owners) controller(obj client.Object) (client.Object, string) {
	c := metav1.GetControllerOf(obj)
	if c == nil {
		return nil, ""
	}
	owner, ok := o.byUID[c.UID]
	if !ok || owner.obj.GetName() != c.Name || owner.gvk.Kind != c.Kind || owner.gvk.GroupVersion().String() != c.APIVersion {
		return nil, ""
	}
	return owner.obj, c.Kind
}

// repeatsParent reports whether a controller (ReplicaSet, Job) is one its
// parent (Deployment, CronJob) created, so that the parent is judged in its
// place. Any other controlled controller is judged itself: a ReplicaSet of
// an Argo Rollout, or one that names a CronJob as its controller.
func (o owners) repeatsParent(obj client.Object) bool {
	want, ok := parentKinds[o.kind(obj)]
	if !ok {
		// A Deployment, StatefulSet, ... that another controller (an
		// operator's resource) owns: that owner is not scanned, and its
		// pods are reported in full.
		return metav1.GetControllerOf(obj) != nil
	}
	_, kind := o.controller(obj)
	return kind == want.Kind && metav1.GetControllerOf(obj).APIVersion == want.APIVersion
}

// judgedController returns the entries of the judged controller a pod
// repeats: its own controller, or that controller's parent when the parent
// is judged in its place.
func (o owners) judgedController(pod client.Object, judged map[types.UID][]report.Entry) ([]report.Entry, bool) {
	owner, kind := o.controller(pod)
	if owner == nil || !podOwnerKinds[kind] || !selects(owner, pod.GetLabels()) {
		return nil, false
	}
	if es, ok := judged[owner.GetUID()]; ok {
		return es, true
	}
	if !o.repeatsParent(owner) {
		return nil, false
	}
	parent, _ := o.controller(owner)
	es, ok := judged[parent.GetUID()]
	return es, ok
}

// selects reports whether a pod owner's selector selects these labels.
func selects(owner client.Object, podLabels map[string]string) bool {
	var sel *metav1.LabelSelector
	switch o := owner.(type) {
	case *appsv1.ReplicaSet:
		sel = o.Spec.Selector
	case *appsv1.StatefulSet:
		sel = o.Spec.Selector
	case *appsv1.DaemonSet:
		sel = o.Spec.Selector
	case *batchv1.Job:
		sel = o.Spec.Selector
	case *corev1.ReplicationController:
		return len(o.Spec.Selector) > 0 && labels.SelectorFromSet(o.Spec.Selector).Matches(labels.Set(podLabels))
	default:
		return false
	}
	if sel == nil {
		return false
	}
	s, err := metav1.LabelSelectorAsSelector(sel)
	return err == nil && !s.Empty() && s.Matches(labels.Set(podLabels))
}
