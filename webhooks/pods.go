// Package webhooks holds podsieve's admission handlers: the decision on every
// pod-bearing write, served from the index, and the validation of podsieve's
// own objects beyond what CEL can express.
package webhooks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
	kjson "sigs.k8s.io/json"

	policyv1alpha1 "github.com/podsieve/podsieve/api/v1alpha1"
	podadmission "github.com/podsieve/podsieve/internal/admission"
	"github.com/podsieve/podsieve/internal/engine"
	"github.com/podsieve/podsieve/internal/index"
	"github.com/podsieve/podsieve/internal/podjson"
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
	// ExceptionsApplied, when set, is told which exceptions (their sources)
	// an admitted or refused request used, for
	// status.lastAppliedTime. It must be quick: it is on the request path,
	// and the status is written in batches elsewhere. Dry runs are not told.
	ExceptionsApplied func(sources []engine.Source, at time.Time)
	// Namespaces reads a namespace the index does not know yet (created a
	// moment ago, its informer event still in flight), as upstream Pod
	// Security Admission does; nil means such a namespace is judged with
	// only its name label.
	Namespaces client.Reader

	// MaxConcurrentReviews bounds the reviews evaluated at once, at most
	// half of them (rounded up) from one namespace; 0 means
	// DefaultMaxConcurrentReviews. ReviewQueueTimeout is how long a review
	// waits for a slot before it is refused as overloaded (0:
	// DefaultReviewQueueTimeout). MaxReviewTime caps a review's deadline
	// (0: DefaultMaxReviewTime); the API server's own timeout, less a
	// margin, is the deadline when it is shorter.
	MaxConcurrentReviews int
	ReviewQueueTimeout   time.Duration
	MaxReviewTime        time.Duration

	initOnce sync.Once
	limiter  *admissionLimiter
	// decide is the bounded decision; tests slow it down (export_test.go).
	decide decideFunc
	// limits are the engine's; tests lower the budget (export_test.go).
	limits engine.Limits
}

// decideFunc decides o from snap and stops when ctx ends. A decision it
// could not finish because ctx ended comes with an error and must not be
// used: it would be an answer about part of the policies.
type decideFunc func(ctx context.Context, snap *index.Snapshot, o *engine.Object, labels map[string]string, now time.Time) (engine.Decision, error)

func (h *PodAdmission) init() {
	h.initOnce.Do(func() {
		if h.MaxConcurrentReviews <= 0 {
			h.MaxConcurrentReviews = DefaultMaxConcurrentReviews()
		}
		if h.ReviewQueueTimeout <= 0 {
			h.ReviewQueueTimeout = DefaultReviewQueueTimeout
		}
		if h.MaxReviewTime <= 0 {
			h.MaxReviewTime = DefaultMaxReviewTime
		}
		h.limiter = newAdmissionLimiter(h.MaxConcurrentReviews)
		if h.limits.MaxSteps == 0 {
			h.limits = engine.DefaultLimits
		}
		if h.decide == nil {
			h.decide = h.decideWithin
		}
	})
}

var scheme = runtime.NewScheme()

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
//
// A review is decided by a deadline (reviewDeadline) and among a bounded
// number of others (admissionLimiter): one that cannot start in time, or
// cannot finish by its deadline, is refused with a reason, never allowed.
func (h *PodAdmission) Handle(ctx context.Context, req admission.Request) admission.Response {
	h.init()
	start := time.Now()
	ctx, cancel := context.WithDeadline(ctx, reviewDeadline(ctx, h.MaxReviewTime))
	defer cancel()
	resp, decision := h.handle(ctx, req)
	admissionDuration.WithLabelValues(decision).Observe(time.Since(start).Seconds())
	admissionRequests.WithLabelValues(metricKind(req.Kind.Kind), metricOperation(req.Operation), decision).Inc()
	return resp
}

// metricKind labels a kind the webhook configuration sends (a pod-bearing
// kind) as itself, and anything else "other". The review's fields come from whoever calls
// the endpoint, and a label taken from them as is would let a caller create
// series without bound.

func metricKind(kind string) string {
	if engine.IsPodBearingKind(kind) {
		return kind
	}
	return "other"
}

func metricOperation(op admissionv1.Operation) string {
	switch op {
	case admissionv1.Create, admissionv1.Update, admissionv1.Delete, admissionv1.Connect:
		return string(op)
	}
	return "other"
}

func (h *PodAdmission) handle(ctx context.Context, req admission.Request) (admission.Response, string) {
	if !podadmission.Judged(req.Operation, req.Kind, req.SubResource) {
		return admission.Allowed(""), "allow"
	}
	if !h.Index.Ready() {
		return admission.Errored(http.StatusServiceUnavailable, fmt.Errorf(
			"podsieve is starting and cannot decide on %s %s/%s yet: its index of SecurityPolicies and PolicyExceptions is still being built; retry in a few seconds",
			req.Kind.Kind, req.Namespace, req.Name)), "error"
	}
	// Everything from here costs CPU in proportion to the object: take a
	// slot first.
	release, ok := h.admit(ctx, req)
	if !ok {
		return h.overloaded(ctx, req), "error"
	}
	defer release()
	o, unknown, early := h.readObject(ctx, req)
	if early != nil {
		return *early, verdictOf(*early)
	}
	snap := h.Index.Snapshot()
	labels, err := h.namespaceLabels(ctx, snap, o)
	if err != nil {
		return admission.Errored(http.StatusServiceUnavailable, err), "error"
	}
	now := h.Clock.Now()
	d, err := h.decide(ctx, snap, o, labels, now)
	if err != nil {
		return h.stopped(ctx, req, o, err), "error"
	}
	if !d.Allowed {
		// Name the exceptions of the namespace that would waive a
		// violation but do not reach the object (a selector a chart
		// upgrade changed): only on a refusal, with bounded work.
		d.NoteUnreached(snap.InForceIn(o.Namespace), labels, now)
	}
	resp := respond(d)
	if h.ExceptionsApplied != nil && (req.DryRun == nil || !*req.DryRun) {
		if used := d.Applied(); len(used) > 0 {
			h.ExceptionsApplied(used, now)
		}
	}
	if !resp.Allowed {
		logRefusal(ctx, req, d)
		if len(unknown) > 0 {
			// Say why a volume "sets spec.volumes[*]": its source was dropped.
			resp.Result.Message += fmt.Sprintf("\nThis build of podsieve does not know %s, dropped when decoding: a volume with a source it does not know is refused at restricted.",
				strings.Join(unknown, ", "))
		}
		return resp, "deny"
	}
	return resp, "allow"
}

// decideWithin is the index's decision within the engine's work budget,
// stopped when ctx ends (the review's deadline, or the API server gone),
// which is an error: the caller refuses the review. A decision that ran out
// of budget is an answer: the engine failed every rule it did not finish,
// so an Enforce rule refuses with the engine's message, and an Audit or
// Warn rule reports it without turning into enforcement.
func (h *PodAdmission) decideWithin(ctx context.Context, snap *index.Snapshot, o *engine.Object, labels map[string]string, now time.Time) (engine.Decision, error) {
	if err := ctx.Err(); err != nil {
		return engine.Decision{}, err
	}
	limits := h.limits
	limits.Done = ctx.Done()
	d := snap.DecideWithin(limits, o, labels, now, engine.Admission)
	if d.Err != nil {
		if err := ctx.Err(); err != nil {
			return d, err
		}
	}
	return d, nil
}

// admit waits for an evaluation slot for the review's namespace, until the
// queue timeout or the review's deadline, whichever comes first.
func (h *PodAdmission) admit(ctx context.Context, req admission.Request) (func(), bool) {
	return h.limiter.acquire(ctx, req.Namespace, h.ReviewQueueTimeout)
}

// overloaded is the refusal of a review that found no slot in time: 429, so
// that clients retry with backoff, and never an allow.
func (h *PodAdmission) overloaded(ctx context.Context, req admission.Request) admission.Response {
	rejectedOverload.Inc()
	logf.FromContext(ctx).Info("refused: overloaded", "requestID", req.UID, "user", req.UserInfo.Username,
		"kind", req.Kind.Kind, "namespace", req.Namespace, "name", req.Name)
	resp := admission.Errored(http.StatusTooManyRequests, fmt.Errorf(overloadMessage,
		req.Kind.Kind, req.Namespace, req.Name, h.limiter.load(), h.limiter.capacity, h.limiter.perNamespace))
	// No RetryAfterSeconds: the API server would turn it into a Retry-After
	// header, and client-go would retry by itself, up to ten times, so
	// that the user would see a hang instead of the reason, and podsieve
	// would get ten times the load it just refused.
	resp.Result.Reason = metav1.StatusReasonTooManyRequests
	return resp
}

// stopped is the refusal of a review whose deadline passed (or whose API
// server went away) before its decision was complete.
func (h *PodAdmission) stopped(ctx context.Context, req admission.Request, o *engine.Object, err error) admission.Response {
	logf.FromContext(ctx).Info("refused: decision not complete", "requestID", req.UID, "user", req.UserInfo.Username,
		"kind", o.Kind, "namespace", o.Namespace, "name", o.Name, "reason", err.Error())
	if errors.Is(err, context.DeadlineExceeded) {
		err = errors.New("the review's deadline, the API server's timeout less a margin, passed")
	} else if errors.Is(err, context.Canceled) {
		err = errors.New("the API server went away")
	}
	return admission.Errored(http.StatusServiceUnavailable, fmt.Errorf(
		"podsieve could not finish deciding on %s %s/%s (%w) and refuses what it has not checked; retry in a few seconds, and if this persists tell your cluster admin",
		o.Kind, o.Namespace, o.Name, err))
}

// logRefusal logs one line per refusing rule, with what an operator needs
// to find it again: the policy, the rule, the controls, the request and who
// sent it.
func logRefusal(ctx context.Context, req admission.Request, d engine.Decision) {
	log := logf.FromContext(ctx)
	o := d.Object
	for i := range d.Results {
		res := &d.Results[i]
		if res.Outcome != engine.Fail || !res.Enforced() {
			continue
		}
		var controls []policyv1alpha1.ControlName
		for j := range res.Findings {
			if f := &res.Findings[j]; !f.Covered() && !slices.Contains(controls, f.Control) {
				controls = append(controls, f.Control)
			}
		}
		log.Info("refused", "policy", res.Rule.Policy.Name, "rule", res.Rule.Name, "controls", controls,
			"requestID", req.UID, "user", req.UserInfo.Username, "operation", req.Operation,
			"kind", o.Kind, "namespace", o.Namespace, "name", o.Name)
	}
}

// decode reads the review's object (JSON, which is what the API server
// sends) as the kind the review names: with podsieve's generated decoders
// when they read it completely, else in one strict pass that also reports
// the fields this build does not know, which a lenient decode drops without
// a word. The kind is taken from the review rather than sniffed from the
// object: that saves a pass over the object, and an object that says it is
// another kind is refused.
func (h *PodAdmission) decode(ctx context.Context, gvk schema.GroupVersionKind, raw runtime.RawExtension) (runtime.Object, []string, error) {
	if len(raw.Raw) == 0 {
		return nil, nil, fmt.Errorf("the review carries no object")
	}
	// The generated decoders first: they take only what they read
	// completely, and anything else (an unknown field, malformed input)
	// goes to the strict decoder, which says what is wrong or dropped.
	obj, ok := podjson.Decode(raw.Raw, gvk)
	var strict []error
	if !ok {
		var err error
		obj, err = scheme.New(gvk)
		if err != nil {
			return nil, nil, fmt.Errorf("%s is not a kind podsieve evaluates: %w", gvk, err)
		}
		strict, err = kjson.UnmarshalStrict(raw.Raw, obj, kjson.DisallowUnknownFields)
		if err != nil {
			return nil, nil, err
		}
	}
	if got := obj.GetObjectKind().GroupVersionKind(); got != gvk && !got.Empty() {
		return nil, nil, fmt.Errorf("the object is a %s, but the review is for a %s", got, gvk)
	}
	obj.GetObjectKind().SetGroupVersionKind(gvk)
	var err error
	if len(strict) > 0 {
		err = runtime.NewStrictDecodingError(strict)
	}
	if err != nil && runtime.IsStrictDecodingError(err) && obj != nil {
		// The object is decoded; what was dropped is counted and logged. A
		// field podsieve does not know is no field it can check: the
		// checks judge the object as this build reads it, and a volume
		// source dropped this way is refused (NewAdmissionObject).
		return obj, unknownFields.record(ctx, obj, err), nil
	}
	return obj, nil, err
}

// What an answer carries at most. The findings of one decision are bounded
// by its budget, but a pod with thousands of violations, or values of
// megabytes, must not make an answer the API server cuts or an audit log
// entry of megabytes: the denial is cut (each rule's message already lists at
// most 64 violations), and the audit annotation and the warnings keep their
// first maxAnswerItems entries (the API server keeps 4 KiB of warnings).
const (
	maxDenialBytes = 64 << 10
	maxAnswerItems = 64
)

// auditViolation is one entry of the audit-violations annotation.
type auditViolation struct {
	Policy    string                     `json:"policy"`
	Rule      string                     `json:"rule"`
	Control   policyv1alpha1.ControlName `json:"control"`
	Container string                     `json:"container,omitempty"`
	Field     string                     `json:"field"`
	Values    []string                   `json:"values"`
}

// verdictOf is the metric's verdict of an answer given before any decision.
func verdictOf(resp admission.Response) string {
	if resp.Allowed {
		return "allow"
	}
	return "error"
}

// readObject decodes the request's object into what the engine judges. It
// returns the answer instead when there is nothing to judge (an update
// that cannot change what runs) or the object cannot be read.
func (h *PodAdmission) readObject(ctx context.Context, req admission.Request) (*engine.Object, []string, *admission.Response) {
	answer := func(r admission.Response) (*engine.Object, []string, *admission.Response) { return nil, nil, &r }
	gvk := schema.GroupVersionKind{Group: req.Kind.Group, Version: req.Kind.Version, Kind: req.Kind.Kind}
	obj, unknown, err := h.decode(ctx, gvk, req.Object)
	if err != nil {
		return answer(admission.Errored(http.StatusBadRequest, fmt.Errorf("podsieve cannot decode %s %s/%s: %w", req.Kind.Kind, req.Namespace, req.Name, err)))
	}
	if podadmission.ComparesOld(req.Operation, req.SubResource) {
		old, _, err := h.decode(ctx, gvk, req.OldObject)
		if err != nil {
			return answer(admission.Errored(http.StatusBadRequest, fmt.Errorf("podsieve cannot decode the old %s %s/%s: %w", req.Kind.Kind, req.Namespace, req.Name, err)))
		}
		if !podadmission.SignificantUpdate(obj, old) {
			// An update that cannot change what runs is not re-evaluated,
			// so that running workloads stay manageable (labels, replicas,
			// status) after a policy tightens.
			return answer(admission.Allowed(""))
		}
	}
	// NewAdmissionObject, not NewObject: the API server has defaulted every
	// volume, so one without a source has a source this build does not know,
	// which restricted refuses as type "unknown".
	o, err := engine.NewAdmissionObject(obj)
	if err != nil {
		return answer(admission.Errored(http.StatusBadRequest, fmt.Errorf("podsieve cannot read the pod template of %s %s/%s: %w", req.Kind.Kind, req.Namespace, req.Name, err)))
	}
	if o.Namespace == "" {
		o.Namespace = req.Namespace
	}
	o.Name = podadmission.ObjectName(o.Name, req.Name, podadmission.GenerateName(obj))
	// A rule's exclude.usernames exempts requests by these users, as Pod
	// Security Admission's exemptions do.
	o.RequestUser = req.UserInfo.Username
	return o, unknown, nil
}

// namespaceLabels are the labels of o's namespace: the index's, or, for a
// namespace the index does not know yet, the API server's. Judging it
// without its labels would skip every rule that selects namespaces by
// label, so a failed read is an error, never no labels.
func (h *PodAdmission) namespaceLabels(ctx context.Context, snap *index.Snapshot, o *engine.Object) (map[string]string, error) {
	if snap.KnowsNamespace(o.Namespace) || h.Namespaces == nil {
		return snap.NamespaceLabels(o.Namespace), nil
	}
	var ns corev1.Namespace
	if err := h.Namespaces.Get(ctx, client.ObjectKey{Name: o.Namespace}, &ns); err != nil {
		return nil, fmt.Errorf("podsieve cannot read namespace %q to decide on %s %s/%s: %w", o.Namespace, o.Kind, o.Namespace, o.Name, err)
	}
	return ns.Labels, nil
}

// respond turns a decision into the answer: Enforce failures deny with the
// engine's message; Audit failures become an audit annotation; Warn failures
// become warnings kubectl prints; exceptions used are named in an annotation
// and a warning, so the developer sees that one was needed.
func respond(d engine.Decision) admission.Response {
	o := d.Object
	used := d.Applied()
	denials, warnings, audit := refusals(d)
	var resp admission.Response
	if len(denials) > 0 {
		resp = admission.Denied(engine.Clip(strings.Join(denials, "\n"), maxDenialBytes))
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
		resp.AuditAnnotations[AnnotationExceptions] = engine.JoinSources(used, ",")
		for _, src := range used {
			countExceptionApplied(src.Namespace, src.Name)
		}
		if resp.Allowed {
			// First: the API server keeps 4 KiB of warnings and drops the rest.
			warnings = append([]string{fmt.Sprintf("%s %s/%s is admitted under %s", o.Kind, o.Namespace, o.Name, describeExceptions(used))}, warnings...)
		}
	}
	resp.Warnings = warnings
	return resp
}

// refusals are what a decision's failed rules say: the denial of each
// enforced one, and, each list bounded, a warning for each uncovered
// finding of a warn rule and an audit entry for each of an audit rule. It
// counts every uncovered finding in the violations metric.
func refusals(d engine.Decision) (denials, warnings []string, audit []auditViolation) {
	o := d.Object
	for i := range d.Results {
		res := &d.Results[i]
		if res.Outcome != engine.Fail {
			continue
		}
		r := res.Rule
		for j := range res.Findings {
			f := &res.Findings[j]
			if f.Covered() {
				continue
			}
			violations.WithLabelValues(r.Policy.Name, r.Name, string(f.Control), string(r.Policy.Action)).Inc()
			switch {
			case r.Policy.Action == policyv1alpha1.ActionAudit && len(audit) < maxAnswerItems:
				audit = append(audit, auditViolation{Policy: r.Policy.Name, Rule: r.Name, Control: f.Control,
					Container: f.Container, Field: f.FieldPath(o), Values: engine.ClipValues(f.Values)})
			case r.Policy.Action == policyv1alpha1.ActionWarn && len(warnings) < maxAnswerItems:
				warnings = append(warnings, fmt.Sprintf("SecurityPolicy %q rule %q (%s): %s", r.Policy.Name, r.Name, r.LevelVersion(), f.Describe(o)))
			}
		}
		if res.Enforced() {
			denials = append(denials, res.DenyMessage(o))
		}
	}
	return denials, warnings, audit
}

func describeExceptions(sources []engine.Source) string {
	names := make([]string, len(sources))
	for i, s := range sources {
		names[i] = "PolicyException " + s.NamespacedName()
	}
	return strings.Join(names, ", ")
}
