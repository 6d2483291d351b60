package background

import (
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyv1alpha1 "github.com/podsieve/podsieve/api/v1alpha1"
	"github.com/podsieve/podsieve/internal/engine"
)

// Scanned kinds: pods, which are what runs, and the pod-bearing controllers
// that no other controller owns (a ReplicaSet of a Deployment or a Job of a
// CronJob repeats its owner's template, so it is the owner that is reported).
// +kubebuilder:rbac:groups="",resources=pods;replicationcontrollers,verbs=get;list;watch
// +kubebuilder:rbac:groups=apps,resources=deployments;replicasets;statefulsets;daemonsets,verbs=get;list;watch
// +kubebuilder:rbac:groups=batch,resources=jobs;cronjobs,verbs=get;list;watch
// +kubebuilder:rbac:groups=wgpolicyk8s.io,resources=policyreports,verbs=get;list;watch;create;update;patch;delete

// scannedKind is one kind the scan reads: its group, version and kind come
// from engine.PodBearingKinds; its Go types, which the table cannot name
// generically, from kindOf's type parameters.
type scannedKind struct {
	gvk     schema.GroupVersionKind
	object  func() client.Object
	list    func() client.ObjectList
	items   func(client.ObjectList) []client.Object
	topOnly bool // skip objects that a controller owns
}

func kindOf[T any, PT interface {
	*T
	client.Object
}, L any, PL interface {
	*L
	client.ObjectList
}](kind policyv1alpha1.PodBearingKind, topOnly bool, items func(*L) []T) scannedKind {
	i := slices.IndexFunc(engine.PodBearingKinds, func(k engine.PodBearingKind) bool { return k.Kind == kind })
	if i < 0 {
		panic("background: " + string(kind) + " is not in engine.PodBearingKinds")
	}
	return scannedKind{
		gvk:    engine.PodBearingKinds[i].GroupVersionKind(),
		object: func() client.Object { return PT(new(T)) },
		list:   func() client.ObjectList { return PL(new(L)) },
		items: func(l client.ObjectList) []client.Object {
			its := items(l.(PL))
			out := make([]client.Object, len(its))
			for i := range its {
				out[i] = PT(&its[i])
			}
			return out
		},
		topOnly: topOnly,
	}
}

var scannedKinds = []scannedKind{
	kindOf[corev1.Pod](policyv1alpha1.KindPod, false, func(l *corev1.PodList) []corev1.Pod { return l.Items }),
	kindOf[appsv1.Deployment](policyv1alpha1.KindDeployment, true, func(l *appsv1.DeploymentList) []appsv1.Deployment { return l.Items }),
	kindOf[appsv1.ReplicaSet](policyv1alpha1.KindReplicaSet, true, func(l *appsv1.ReplicaSetList) []appsv1.ReplicaSet { return l.Items }),
	kindOf[appsv1.StatefulSet](policyv1alpha1.KindStatefulSet, true, func(l *appsv1.StatefulSetList) []appsv1.StatefulSet { return l.Items }),
	kindOf[appsv1.DaemonSet](policyv1alpha1.KindDaemonSet, true, func(l *appsv1.DaemonSetList) []appsv1.DaemonSet { return l.Items }),
	kindOf[batchv1.Job](policyv1alpha1.KindJob, true, func(l *batchv1.JobList) []batchv1.Job { return l.Items }),
	kindOf[batchv1.CronJob](policyv1alpha1.KindCronJob, true, func(l *batchv1.CronJobList) []batchv1.CronJob { return l.Items }),
	kindOf[corev1.ReplicationController](policyv1alpha1.KindReplicationController, true, func(l *corev1.ReplicationControllerList) []corev1.ReplicationController {
		return l.Items
	}),
}

// scanOrder is the order in which a namespace's kinds are judged: the
// controllers first, pods last, so that a pod's results can be compared with
// its controller's.
func scanOrder() []int {
	var ctrls, pods []int
	for i, k := range scannedKinds {
		if k.topOnly {
			ctrls = append(ctrls, i)
		} else {
			pods = append(pods, i)
		}
	}
	return append(ctrls, pods...)
}
