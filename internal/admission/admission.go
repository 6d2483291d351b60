// Package admission holds podsieve's admission rules as pure functions:
// which requests are judged (operations, kinds, subresources), which updates
// are significant enough to judge again, and what name an object is judged
// under. The webhook (webhooks.PodAdmission) only transports: it decodes a
// review, bounds the work, calls these rules and the engine, and answers.
//
// The rules mirror upstream Pod Security Admission's library,
// k8s.io/pod-security-admission/admission/admission.go, where podsieve's
// behaviour is the same, and say where it differs. This package imports
// the Kubernetes API types and Pod Security Admission only: no
// controller-runtime, no client, no podsieve package (.golangci.yml,
// depguard rule "admission").
package admission

import (
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	psaadmission "k8s.io/pod-security-admission/admission"
)

// SubresourceEphemeralContainers is the pod subresource kubectl debug
// writes: its update is always judged (ComparesOld).
const SubresourceEphemeralContainers = "ephemeralcontainers"

// judgedPodSubresources are the pod subresources whose writes change what
// runs: the pod itself, ephemeral containers (kubectl debug) and in-place
// resizes. Status, binding, exec and the like are not judged.
//
// Upstream (admission.go, ignoredPodSubresources and ValidatePod) lists
// the subresources it ignores instead (exec, attach, binding, eviction,
// log, portforward, proxy, status) and judges any other, so that a webhook
// older than its API server judges a new subresource that may change the
// spec. podsieve lists those it judges; its webhook configurations send
// exactly these (config/webhook/manifests.yaml, and the
// ValidatingAdmissionPolicy's rules in internal/admissionpolicy), so the
// two agree on every request the API server sends.
var judgedPodSubresources = map[string]bool{"": true, SubresourceEphemeralContainers: true, "resize": true}

// Judged reports whether a request is judged at all: creates and updates
// (deletes and connects change nothing that runs); of a core Pod, the
// object itself and the subresources that change what runs; of any other
// kind (a pod controller, a PodTemplate), the object itself only, as
// upstream's ValidatePodController ("short-circuit on subresources":
// scale, status).
func Judged(op admissionv1.Operation, kind metav1.GroupVersionKind, subresource string) bool {
	if op != admissionv1.Create && op != admissionv1.Update {
		return false
	}
	if kind.Group == "" && kind.Kind == "Pod" {
		return judgedPodSubresources[subresource]
	}
	return subresource == ""
}

// ComparesOld reports whether a judged request is first compared with the
// old object (SignificantUpdate): updates, except of the ephemeralcontainers
// subresource, whose writes are always judged: kubectl debug adds a
// container, and nothing else is written through it. Upstream's ValidatePod
// compares those too (isSignificantPodUpdate on every update); judging
// each is never more lenient than that.
func ComparesOld(op admissionv1.Operation, subresource string) bool {
	return op == admissionv1.Update && subresource != SubresourceEphemeralContainers
}

// SignificantUpdate reports whether an update can change what runs, and so
// is judged again. For a Pod it is upstream's test (SignificantPodUpdate).
// For a pod controller or PodTemplate it is a change of the pod template's
// spec, labels or annotations (which hold seccomp and AppArmor profiles on
// old versions), or a template added or removed: scaling a Deployment or
// relabelling it creates nothing that was not already admitted (upstream
// judges every controller update; it only warns and audits for them).
// Objects being deleted get no pass: the same test applies to them. Any
// object whose pod template cannot be read is significant.
func SignificantUpdate(obj, old runtime.Object) bool {
	if pod, ok := obj.(*corev1.Pod); ok {
		oldPod, ok := old.(*corev1.Pod)
		return !ok || SignificantPodUpdate(pod, oldPod)
	}
	meta, spec, err := extractor.ExtractPodSpec(obj)
	if err != nil {
		return true
	}
	oldMeta, oldSpec, err := extractor.ExtractPodSpec(old)
	if err != nil || (meta == nil) != (oldMeta == nil) {
		return true
	}
	if meta == nil {
		return false
	}
	return !apiequality.Semantic.DeepEqual(spec, oldSpec) ||
		!apiequality.Semantic.DeepEqual(meta.Labels, oldMeta.Labels) ||
		!apiequality.Semantic.DeepEqual(meta.Annotations, oldMeta.Annotations)
}

// extractor is upstream's, as the engine uses it: the same pod templates
// Pod Security Admission reads.
var extractor psaadmission.DefaultPodSpecExtractor

// SignificantPodUpdate is upstream's isSignificantPodUpdate
// (admission.go): a pod update is judged again when its number of
// containers or init containers changes, a container or init container
// changes image, or an ephemeral container is added or changes image. The
// rest of a running pod's spec that a check reads is immutable.
func SignificantPodUpdate(pod, old *corev1.Pod) bool {
	if len(pod.Spec.Containers) != len(old.Spec.Containers) || len(pod.Spec.InitContainers) != len(old.Spec.InitContainers) {
		return true
	}
	for i := range pod.Spec.Containers {
		if pod.Spec.Containers[i].Image != old.Spec.Containers[i].Image {
			return true
		}
	}
	for i := range pod.Spec.InitContainers {
		if pod.Spec.InitContainers[i].Image != old.Spec.InitContainers[i].Image {
			return true
		}
	}
	for _, c := range pod.Spec.EphemeralContainers {
		found := false
		for _, oc := range old.Spec.EphemeralContainers {
			if oc.Name == c.Name {
				found = true
				if oc.Image != c.Image {
					return true
				}
			}
		}
		if !found {
			return true
		}
	}
	return false
}

// ObjectName is the name an object is judged under, which a rule's or an
// exception's match.names is written against: the object's name, else the
// request's, else (a create with metadata.generateName, whose name the API
// server has not generated yet when it calls the webhook) the generateName
// prefix, so that a glob on the prefix (app-*) matches every generated
// name. Upstream judges such an object under the request's name, ""; its
// exemptions have no names to match.
func ObjectName(objectName, requestName, generateName string) string {
	switch {
	case objectName != "":
		return objectName
	case requestName != "":
		return requestName
	}
	return generateName
}

// GenerateName is obj's metadata.generateName, "" when it has none.
func GenerateName(obj runtime.Object) string {
	if m, ok := obj.(interface{ GetGenerateName() string }); ok {
		return m.GetGenerateName()
	}
	return ""
}
