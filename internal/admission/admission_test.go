package admission

import (
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
)

var (
	podKind        = metav1.GroupVersionKind{Version: "v1", Kind: "Pod"}
	deploymentKind = metav1.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}
	podTemplate    = metav1.GroupVersionKind{Version: "v1", Kind: "PodTemplate"}
	// A Pod of another group is no core Pod: its subresources are not
	// the pod's.
	otherPodKind = metav1.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Pod"}
)

func TestJudged(t *testing.T) {
	for _, tc := range []struct {
		name        string
		op          admissionv1.Operation
		kind        metav1.GroupVersionKind
		subresource string
		want        bool
	}{
		{"pod create", admissionv1.Create, podKind, "", true},
		{"pod update", admissionv1.Update, podKind, "", true},
		{"pod delete", admissionv1.Delete, podKind, "", false},
		{"pod connect", admissionv1.Connect, podKind, "exec", false},
		{"pod ephemeralcontainers (kubectl debug)", admissionv1.Update, podKind, "ephemeralcontainers", true},
		{"pod resize", admissionv1.Update, podKind, "resize", true},
		// Upstream's ignoredPodSubresources (admission.go): ignored here too.
		{"upstream ignores pod status", admissionv1.Update, podKind, "status", false},
		{"upstream ignores pod binding", admissionv1.Create, podKind, "binding", false},
		{"upstream ignores pod eviction", admissionv1.Create, podKind, "eviction", false},
		{"upstream ignores pod exec", admissionv1.Create, podKind, "exec", false},
		{"upstream ignores pod attach", admissionv1.Create, podKind, "attach", false},
		{"upstream ignores pod log", admissionv1.Create, podKind, "log", false},
		{"upstream ignores pod portforward", admissionv1.Create, podKind, "portforward", false},
		{"upstream ignores pod proxy", admissionv1.Create, podKind, "proxy", false},
		// Upstream judges a pod subresource it does not know; podsieve's
		// webhook configurations never send one (see judgedPodSubresources).
		{"pod subresource podsieve does not know", admissionv1.Update, podKind, "future", false},
		// Upstream's ValidatePodController short-circuits every subresource.
		{"deployment create", admissionv1.Create, deploymentKind, "", true},
		{"deployment update", admissionv1.Update, deploymentKind, "", true},
		{"deployment scale", admissionv1.Update, deploymentKind, "scale", false},
		{"deployment status", admissionv1.Update, deploymentKind, "status", false},
		{"deployment delete", admissionv1.Delete, deploymentKind, "", false},
		{"podtemplate create", admissionv1.Create, podTemplate, "", true},
		{"pod of another group with a pod subresource", admissionv1.Update, otherPodKind, "ephemeralcontainers", false},
		{"pod of another group", admissionv1.Create, otherPodKind, "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Judged(tc.op, tc.kind, tc.subresource); got != tc.want {
				t.Errorf("Judged(%s, %s, %q) = %v, want %v", tc.op, tc.kind.Kind, tc.subresource, got, tc.want)
			}
		})
	}
}

func TestComparesOld(t *testing.T) {
	for _, tc := range []struct {
		name        string
		op          admissionv1.Operation
		subresource string
		want        bool
	}{
		{"create", admissionv1.Create, "", false},
		{"update", admissionv1.Update, "", true},
		{"resize", admissionv1.Update, "resize", true},
		{"ephemeralcontainers is always judged", admissionv1.Update, "ephemeralcontainers", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := ComparesOld(tc.op, tc.subresource); got != tc.want {
				t.Errorf("ComparesOld(%s, %q) = %v, want %v", tc.op, tc.subresource, got, tc.want)
			}
		})
	}
}

func pod(edit func(*corev1.Pod)) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", Labels: map[string]string{"app": "a"}},
		Spec: corev1.PodSpec{
			InitContainers: []corev1.Container{{Name: "init", Image: "init:1"}},
			Containers:     []corev1.Container{{Name: "app", Image: "app:1"}},
			EphemeralContainers: []corev1.EphemeralContainer{{EphemeralContainerCommon: corev1.EphemeralContainerCommon{
				Name: "debug", Image: "debug:1"}}},
		},
	}
	if edit != nil {
		edit(p)
	}
	return p
}

func TestSignificantPodUpdate(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(*corev1.Pod)
		want bool
	}{
		{"no change", nil, false},
		// Upstream's TestValidatePodAndController "insignificant update":
		// a privileged pod given tolerations is not judged again.
		{"upstream: tolerations added", func(p *corev1.Pod) {
			p.Spec.Tolerations = []corev1.Toleration{{Key: "k", Operator: corev1.TolerationOpExists}}
		}, false},
		// Upstream's "significant update denied/allowed": a new image.
		{"upstream: container image changed", func(p *corev1.Pod) { p.Spec.Containers[0].Image = "app:2" }, true},
		{"init container image changed", func(p *corev1.Pod) { p.Spec.InitContainers[0].Image = "init:2" }, true},
		{"container added", func(p *corev1.Pod) {
			p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: "b", Image: "app:1"})
		}, true},
		{"init container removed", func(p *corev1.Pod) { p.Spec.InitContainers = nil }, true},
		{"ephemeral container added", func(p *corev1.Pod) {
			p.Spec.EphemeralContainers = append(p.Spec.EphemeralContainers, corev1.EphemeralContainer{
				EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: "debug2", Image: "debug:1"}})
		}, true},
		{"ephemeral container image changed", func(p *corev1.Pod) { p.Spec.EphemeralContainers[0].Image = "debug:2" }, true},
		// Upstream compares images only: a security context written
		// through an update is the API server's to refuse (immutable).
		{"container security context changed", func(p *corev1.Pod) {
			p.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{Privileged: ptr.To(true)}
		}, false},
		{"labels and annotations changed", func(p *corev1.Pod) {
			p.Labels = map[string]string{"app": "b"}
			p.Annotations = map[string]string{"a": "b"}
		}, false},
		{"container resources resized", func(p *corev1.Pod) {
			p.Spec.Containers[0].Resources.Limits = corev1.ResourceList{corev1.ResourceCPU: {}}
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := SignificantPodUpdate(pod(tc.edit), pod(nil)); got != tc.want {
				t.Errorf("SignificantPodUpdate = %v, want %v", got, tc.want)
			}
			if got := SignificantUpdate(pod(tc.edit), pod(nil)); got != tc.want {
				t.Errorf("SignificantUpdate = %v, want %v", got, tc.want)
			}
		})
	}
}

func deployment(edit func(*appsv1.Deployment)) *appsv1.Deployment {
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "d", Namespace: "ns", Labels: map[string]string{"app": "a"}},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](1),
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "a"}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "app:1"}}},
			},
		},
	}
	if edit != nil {
		edit(d)
	}
	return d
}

func TestSignificantUpdate(t *testing.T) {
	cronJob := func(template bool) *batchv1.CronJob {
		c := &batchv1.CronJob{}
		if template {
			c.Spec.JobTemplate.Spec.Template.Spec.Containers = []corev1.Container{{Name: "app", Image: "app:1"}}
		}
		return c
	}
	for _, tc := range []struct {
		name     string
		obj, old runtime.Object
		want     bool
	}{
		{"deployment unchanged", deployment(nil), deployment(nil), false},
		{"deployment scaled", deployment(func(d *appsv1.Deployment) { d.Spec.Replicas = ptr.To[int32](3) }), deployment(nil), false},
		{"deployment relabelled", deployment(func(d *appsv1.Deployment) { d.Labels = map[string]string{"app": "b"} }), deployment(nil), false},
		{"deployment being deleted", deployment(func(d *appsv1.Deployment) {
			d.DeletionTimestamp = &metav1.Time{}
			d.Spec.Template.Spec.HostNetwork = true
		}), deployment(nil), true},
		{"template spec changed", deployment(func(d *appsv1.Deployment) { d.Spec.Template.Spec.HostNetwork = true }), deployment(nil), true},
		{"template labels changed", deployment(func(d *appsv1.Deployment) { d.Spec.Template.Labels = map[string]string{"app": "b"} }), deployment(nil), true},
		{"template annotations changed (seccomp on old versions)", deployment(func(d *appsv1.Deployment) {
			d.Spec.Template.Annotations = map[string]string{"seccomp.security.alpha.kubernetes.io/pod": "unconfined"}
		}), deployment(nil), true},
		{"cronjob template added", cronJob(true), cronJob(false), true},
		{"cronjob without a template", cronJob(false), cronJob(false), false},
		{"old object of another kind", deployment(nil), &appsv1.StatefulSet{}, true},
		{"pod whose old object is no pod", pod(nil), deployment(nil), true},
		{"kind upstream does not read", &corev1.ConfigMap{}, &corev1.ConfigMap{}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := SignificantUpdate(tc.obj, tc.old); got != tc.want {
				t.Errorf("SignificantUpdate = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestObjectName(t *testing.T) {
	for _, tc := range []struct {
		name                              string
		objectName, requestName, generate string
		want                              string
	}{
		{"named object", "web-0", "web-0", "", "web-0"},
		{"object name first", "web-0", "other", "web-", "web-0"},
		{"request name when the object has none", "", "web-0", "", "web-0"},
		// Upstream judges this under the request's name, "".
		{"generated name: its prefix", "", "", "web-", "web-"},
		{"no name at all", "", "", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := ObjectName(tc.objectName, tc.requestName, tc.generate); got != tc.want {
				t.Errorf("ObjectName(%q, %q, %q) = %q, want %q", tc.objectName, tc.requestName, tc.generate, got, tc.want)
			}
		})
	}
}

func TestGenerateName(t *testing.T) {
	for _, tc := range []struct {
		name string
		obj  runtime.Object
		want string
	}{
		{"pod", &corev1.Pod{ObjectMeta: metav1.ObjectMeta{GenerateName: "web-"}}, "web-"},
		{"job", &batchv1.Job{ObjectMeta: metav1.ObjectMeta{GenerateName: "run-"}}, "run-"},
		{"none", &corev1.Pod{}, ""},
		{"no object metadata", &metav1.Status{}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := GenerateName(tc.obj); got != tc.want {
				t.Errorf("GenerateName = %q, want %q", got, tc.want)
			}
		})
	}
}
