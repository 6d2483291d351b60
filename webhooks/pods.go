// Package webhooks holds podsieve's admission handlers: the decision on every
// pod-bearing write, served from the index, and the validation of podsieve's
// own objects beyond what CEL can express.
package webhooks

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	psaadmission "k8s.io/pod-security-admission/admission"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	policyv1alpha1 "github.com/podsieve/podsieve/api/v1alpha1"
	"github.com/podsieve/podsieve/internal/engine"
	"github.com/podsieve/podsieve/internal/index"
)

// PodsPath is where the API server sends pod-bearing admission reviews.
const PodsPath = "/validate-pods"

// Audit annotation keys. The API server prefixes each with the webhook's
// name (pods.podsieve.dev/audit-violations in the audit log) and refuses
// keys that contain a "/".
const (
	AnnotationAuditViolations = "audit-violations"
	AnnotationExceptions      = "exceptions"
)

// PodAdmission decides every pod-bearing write from the index: Pods (and
// their ephemeral containers), PodTemplates and the pod controllers, through
// their pod template.
type PodAdmission struct {
	Index *index.Index
	Clock clock.PassiveClock
	// ExceptionsApplied, when set, is told which exceptions (their sources,
	// exception/<namespace>/<name>) an admitted or refused request used, for
	// status.lastAppliedTime. It must be quick: it is on the request path,
	// and the status is written in batches elsewhere. Dry runs are not told.
	ExceptionsApplied func(sources []string, at time.Time)
	// Namespaces reads a namespace the index does not know yet (created a
	// moment ago, its informer event still in flight), as upstream Pod
	// Security Admission does; nil means such a namespace is judged with
	// only its name label.
	Namespaces client.Reader
}

var (
	scheme = runtime.NewScheme()
	codecs = serializer.NewCodecFactory(scheme)
)

func init() {
	for _, add := range []func(*runtime.Scheme) error{corev1.AddToScheme, appsv1.AddToScheme, batchv1.AddToScheme} {
		if err := add(scheme); err != nil {
			panic(err)
		}
	}
}

// Handle answers one review. Anything that stops podsieve from deciding
// denies the request with the reason: an admission controller that allows
// what it could not check is no control at all.
func (h *PodAdmission) Handle(ctx context.Context, req admission.Request) admission.Response {
	start := time.Now()
	resp, decision := h.handle(ctx, req)
	admissionDuration.Observe(time.Since(start).Seconds())
	admissionRequests.WithLabelValues(req.Kind.Kind, string(req.Operation), decision).Inc()
	return resp
}

// evaluatedPodSubresources are the pod subresources whose writes change
// what runs: the pod itself, ephemeral containers (kubectl debug) and
// in-place resizes. Status, binding, exec and the like are not evaluated.
var evaluatedPodSubresources = map[string]bool{"": true, "ephemeralcontainers": true, "resize": true}

func (h *PodAdmission) handle(ctx context.Context, req admission.Request) (admission.Response, string) {
	if req.Operation != admissionv1.Create && req.Operation != admissionv1.Update {
		return admission.Allowed(""), "allow"
	}
	if req.Kind.Kind == "Pod" && req.Kind.Group == "" {
		if !evaluatedPodSubresources[req.SubResource] {
			return admission.Allowed(""), "allow"
		}
	} else if req.SubResource != "" {
		return admission.Allowed(""), "allow"
	}
	if !h.Index.Ready() {
		return admission.Errored(http.StatusServiceUnavailable, fmt.Errorf(
			"podsieve is starting and cannot decide on %s %s/%s yet: its index of SecurityPolicies and PolicyExceptions is still being built; retry in a few seconds",
			req.Kind.Kind, req.Namespace, req.Name)), "error"
	}
	obj, err := h.decode(req.Object)
	if err != nil {
		return admission.Errored(http.StatusBadRequest, fmt.Errorf("podsieve cannot decode %s %s/%s: %w", req.Kind.Kind, req.Namespace, req.Name, err)), "error"
	}
	if req.Operation == admissionv1.Update && req.SubResource != "ephemeralcontainers" {
		old, err := h.decode(req.OldObject)
		if err != nil {
			return admission.Errored(http.StatusBadRequest, fmt.Errorf("podsieve cannot decode the old %s %s/%s: %w", req.Kind.Kind, req.Namespace, req.Name, err)), "error"
		}
		if !significantUpdate(obj, old) {
			// An update that cannot change what runs is not re-evaluated,
			// so that running workloads stay manageable (labels, replicas,
			// status) after a policy tightens.
			return admission.Allowed(""), "allow"
		}
	}
	o, err := engine.NewObject(obj)
	if err != nil {
		return admission.Errored(http.StatusBadRequest, fmt.Errorf("podsieve cannot read the pod template of %s %s/%s: %w", req.Kind.Kind, req.Namespace, req.Name, err)), "error"
	}
	if o.Namespace == "" {
		o.Namespace = req.Namespace
	}
	if o.Name == "" {
		o.Name = req.Name
	}
	if o.Name == "" {
		// A generated name is not known yet to every caller; its prefix is
		// what match.names can be written against.
		o.Name = objectGenerateName(obj)
	}
	snap := h.Index.Snapshot()
	labels := snap.NamespaceLabels(o.Namespace)
	if !snap.KnowsNamespace(o.Namespace) && h.Namespaces != nil {
		// Judging it without its labels would skip every rule that selects
		// namespaces by label: read it, and refuse if that fails.
		var ns corev1.Namespace
		if err := h.Namespaces.Get(ctx, client.ObjectKey{Name: o.Namespace}, &ns); err != nil {
			return admission.Errored(http.StatusServiceUnavailable, fmt.Errorf(
				"podsieve cannot read namespace %q to decide on %s %s/%s: %w", o.Namespace, o.Kind, o.Namespace, o.Name, err)), "error"
		}
		labels = ns.Labels
	}
	now := h.Clock.Now()
	d := snap.DecideIn(o, labels, now, engine.Admission)
	resp := respond(d)
	if h.ExceptionsApplied != nil && (req.DryRun == nil || !*req.DryRun) {
		if used := usedExceptions(d); len(used) > 0 {
			h.ExceptionsApplied(used, now)
		}
	}
	if !resp.Allowed {
		logf.FromContext(ctx).Info("refused", "kind", o.Kind, "namespace", o.Namespace, "name", o.Name)
		return resp, "deny"
	}
	return resp, "allow"
}

func (h *PodAdmission) decode(raw runtime.RawExtension) (runtime.Object, error) {
	if len(raw.Raw) == 0 {
		return nil, fmt.Errorf("the review carries no object")
	}
	obj, _, err := codecs.UniversalDeserializer().Decode(raw.Raw, nil, nil)
	return obj, err
}

func objectGenerateName(obj runtime.Object) string {
	if m, ok := obj.(interface{ GetGenerateName() string }); ok {
		return m.GetGenerateName()
	}
	return ""
}

// significantUpdate reports whether an update can change what runs. For a
// Pod it is upstream Pod Security Admission's test (a change of container
// count or image, or an added ephemeral container). For a pod controller it
// is a change of the pod template's spec, labels or annotations (which hold
// seccomp and AppArmor profiles on old versions): scaling a Deployment or
// relabelling it creates nothing that was not already admitted. Objects
// being deleted get no pass: the same test applies to them.
func significantUpdate(obj, old runtime.Object) bool {
	if pod, ok := obj.(*corev1.Pod); ok {
		oldPod, ok := old.(*corev1.Pod)
		return !ok || significantPodUpdate(pod, oldPod)
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
	return !equality.Semantic.DeepEqual(spec, oldSpec) ||
		!equality.Semantic.DeepEqual(meta.Labels, oldMeta.Labels) ||
		!equality.Semantic.DeepEqual(meta.Annotations, oldMeta.Annotations)
}

// extractor is upstream's, as the engine uses it.
var extractor psaadmission.DefaultPodSpecExtractor

func significantPodUpdate(pod, old *corev1.Pod) bool {
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

// auditViolation is one entry of the audit-violations annotation.
type auditViolation struct {
	Policy    string   `json:"policy"`
	Rule      string   `json:"rule"`
	Control   string   `json:"control"`
	Container string   `json:"container,omitempty"`
	Field     string   `json:"field"`
	Values    []string `json:"values"`
}

// respond turns a decision into the answer: Enforce failures deny with the
// engine's message; Audit failures become an audit annotation; Warn failures
// become warnings kubectl prints; exceptions used are named in an annotation
// and a warning, so the developer sees that one was needed.
func respond(d engine.Decision) admission.Response {
	o := d.Object
	var denials, warnings []string
	var audit []auditViolation
	used := usedExceptions(d)
	for i := range d.Results {
		res := &d.Results[i]
		r := res.Rule
		if res.Outcome != engine.Fail {
			continue
		}
		for j := range res.Findings {
			f := &res.Findings[j]
			if f.Covered() {
				continue
			}
			violations.WithLabelValues(r.Policy.Name, r.Name, f.Control, string(r.Policy.Action)).Inc()
			switch r.Policy.Action {
			case policyv1alpha1.ActionAudit:
				audit = append(audit, auditViolation{Policy: r.Policy.Name, Rule: r.Name, Control: f.Control,
					Container: f.Container, Field: f.FieldPath(o), Values: f.Values})
			case policyv1alpha1.ActionWarn:
				warnings = append(warnings, fmt.Sprintf("SecurityPolicy %q rule %q (%s): %s", r.Policy.Name, r.Name, r.LevelVersion(), f.Describe(o)))
			}
		}
		if res.Enforced() {
			denials = append(denials, res.DenyMessage(o))
		}
	}
	var resp admission.Response
	if len(denials) > 0 {
		resp = admission.Denied(strings.Join(denials, "\n"))
	} else {
		resp = admission.Allowed("")
	}
	if len(audit) > 0 {
		b, _ := json.Marshal(audit)
		resp.AuditAnnotations = map[string]string{AnnotationAuditViolations: string(b)}
	}
	if len(used) > 0 {
		if resp.AuditAnnotations == nil {
			resp.AuditAnnotations = map[string]string{}
		}
		resp.AuditAnnotations[AnnotationExceptions] = strings.Join(used, ",")
		for _, src := range used {
			ns, name, _ := strings.Cut(strings.TrimPrefix(src, "exception/"), "/")
			exceptionsApplied.WithLabelValues(ns, name).Inc()
		}
		if resp.Allowed {
			// First: the API server keeps 4 KiB of warnings and drops the rest.
			warnings = append([]string{fmt.Sprintf("%s %s/%s is admitted under %s", o.Kind, o.Namespace, o.Name, describeExceptions(used))}, warnings...)
		}
	}
	resp.Warnings = warnings
	return resp
}

// usedExceptions are the sources of the exceptions that covered something
// in a decision, each once, in order.
func usedExceptions(d engine.Decision) []string {
	var used []string
	for i := range d.Results {
		for _, src := range d.Results[i].Exceptions {
			if !slices.Contains(used, src) {
				used = append(used, src)
			}
		}
	}
	return used
}

func describeExceptions(sources []string) string {
	names := make([]string, len(sources))
	for i, s := range sources {
		names[i] = "PolicyException " + strings.TrimPrefix(s, "exception/")
	}
	return strings.Join(names, ", ")
}
