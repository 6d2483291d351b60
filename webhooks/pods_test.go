package webhooks

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/podsieve/podsieve/internal/engine"
	"github.com/podsieve/podsieve/internal/enginetest"
	"github.com/podsieve/podsieve/internal/index"
)

var now = time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC)

func raw(t *testing.T, obj runtime.Object) runtime.RawExtension {
	t.Helper()
	b, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	return runtime.RawExtension{Raw: b}
}

func capsPod(name string, caps ...corev1.Capability) *corev1.Pod {
	return &corev1.Pod{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"}, ObjectMeta: metav1.ObjectMeta{Namespace: "staging", Name: name},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "nginx:1.25",
			SecurityContext: &corev1.SecurityContext{Capabilities: &corev1.Capabilities{Add: caps}}}}}}
}

func podRequest(t *testing.T, op admissionv1.Operation, sub string, obj, old runtime.Object) admission.Request {
	req := admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
		UID: "1", Kind: metav1.GroupVersionKind{Version: "v1", Kind: "Pod"}, Operation: op, SubResource: sub,
		Namespace: "staging", Name: "web",
	}}
	if obj != nil {
		req.Object = raw(t, obj)
	}
	if old != nil {
		req.OldObject = raw(t, old)
	}
	return req
}

func TestPodAdmission(t *testing.T) {
	ready := index.New("podsieve-system")
	ready.Load([]*engine.Policy{
		enginetest.MustPolicy(t, "enforced", "exceptions: {allowedControls: [Capabilities]}\nrules:\n- name: baseline\n  podSecurity: {level: baseline}"),
		enginetest.MustPolicy(t, "audited", "action: Audit\nrules:\n- name: restricted\n  podSecurity: {level: restricted, version: v1.30}"),
	}, []*engine.Exception{
		enginetest.MustException(t, "staging", "net-admin", "exceptions: [{policyName: enforced, ruleNames: [baseline]}]\nmatch: {names: [waived]}\npodSecurity: [{controlName: Capabilities, restrictedField: 'spec.containers[*].securityContext.capabilities.add', values: [NET_ADMIN]}]"),
	}, []*engine.Exception{
		enginetest.MustException(t, "staging", "old-sys-admin", "exceptions: [{policyName: enforced, ruleNames: [baseline]}]\nmatch: {names: [old]}\npodSecurity: [{controlName: Capabilities}]\nexpiresAt: '2026-01-01T00:00:00Z'"),
	}, nil)
	ready.MarkReady()
	starting := index.New("podsieve-system")

	relabelled := capsPod("web", "SYS_ADMIN")
	relabelled.Labels = map[string]string{"touched": "yes"}
	reimaged := capsPod("web", "SYS_ADMIN")
	reimaged.Spec.Containers[0].Image = "nginx:1.26"
	debugged := capsPod("web")
	debugged.Spec.EphemeralContainers = []corev1.EphemeralContainer{{EphemeralContainerCommon: corev1.EphemeralContainerCommon{
		Name: "debugger", Image: "busybox", SecurityContext: &corev1.SecurityContext{Privileged: ptr.To(true)}}}}

	deployment := func(replicas int32, caps ...corev1.Capability) *appsv1.Deployment {
		pod := capsPod("web", caps...)
		return &appsv1.Deployment{TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
			ObjectMeta: metav1.ObjectMeta{Namespace: "staging", Name: "web"},
			Spec:       appsv1.DeploymentSpec{Replicas: ptr.To(replicas), Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}}, Spec: pod.Spec}}}
	}
	deploymentRequest := func(obj, old *appsv1.Deployment) admission.Request {
		r := podRequest(t, admissionv1.Update, "", obj, old)
		r.Kind = metav1.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}
		return r
	}
	deleting := deployment(3, "SYS_ADMIN")
	deleting.DeletionTimestamp = &metav1.Time{Time: now}

	tests := []struct {
		name        string
		index       *index.Index
		req         admission.Request
		wantAllowed bool
		wantCode    int32
		wantMessage string
		wantAudit   map[string]string
		wantWarning string
	}{
		{
			name:        "a violation under Enforce is refused with the engine's message",
			index:       ready,
			req:         podRequest(t, admissionv1.Create, "", capsPod("web", "SYS_ADMIN"), nil),
			wantCode:    http.StatusForbidden,
			wantMessage: `Pod staging/web is refused by SecurityPolicy "enforced" rule "baseline" (baseline:latest):` + "\n" + `- Capabilities: container "app" (image nginx:1.25) sets spec.containers[*].securityContext.capabilities.add to SYS_ADMIN`,
		},
		{
			name:        "an expired exception that would have applied is named in the refusal, with why",
			index:       ready,
			req:         podRequest(t, admissionv1.Create, "", capsPod("old", "SYS_ADMIN"), nil),
			wantCode:    http.StatusForbidden,
			wantMessage: "\nexception/staging/old-sys-admin does not apply: expired at 2026-01-01T00:00:00Z\n",
		},
		{
			name:        "a waived violation is admitted, named in an audit annotation and a warning",
			index:       ready,
			req:         podRequest(t, admissionv1.Create, "", capsPod("waived", "NET_ADMIN"), nil),
			wantAllowed: true,
			wantAudit: map[string]string{
				AnnotationExceptions:      "exception/staging/net-admin",
				AnnotationAuditViolations: `{"policy":"audited","rule":"restricted","control":"Capabilities","container":"app","field":"spec.containers[*].securityContext.capabilities.add","values":["NET_ADMIN"]}`,
			},
			wantWarning: "Pod staging/waived is admitted under PolicyException staging/net-admin",
		},
		{
			name:        "Audit failures are admitted and annotated",
			index:       ready,
			req:         podRequest(t, admissionv1.Create, "", capsPod("web"), nil),
			wantAllowed: true,
			wantAudit:   map[string]string{AnnotationAuditViolations: `{"policy":"audited","rule":"restricted","control":"Seccomp","container":"app","field":"spec.containers[*].securityContext.seccompProfile.type","values":[]}`},
		},
		{
			name:        "an index still being built fails closed",
			index:       starting,
			req:         podRequest(t, admissionv1.Create, "", capsPod("web"), nil),
			wantCode:    http.StatusServiceUnavailable,
			wantMessage: "podsieve is starting and cannot decide on Pod staging/web yet",
		},
		{
			name:  "an object that does not decode fails closed",
			index: ready,
			req: func() admission.Request {
				r := podRequest(t, admissionv1.Create, "", nil, nil)
				r.Object.Raw = []byte(`{"kind":`)
				return r
			}(),
			wantCode:    http.StatusBadRequest,
			wantMessage: "podsieve cannot decode Pod staging/web",
		},
		{
			name:        "a review without an object fails closed",
			index:       ready,
			req:         podRequest(t, admissionv1.Create, "", nil, nil),
			wantCode:    http.StatusBadRequest,
			wantMessage: "the review carries no object",
		},
		{
			name:        "a label change on a running pod is not re-evaluated",
			index:       ready,
			req:         podRequest(t, admissionv1.Update, "", relabelled, capsPod("web", "SYS_ADMIN")),
			wantAllowed: true,
		},
		{
			name:        "an image change is re-evaluated",
			index:       ready,
			req:         podRequest(t, admissionv1.Update, "", reimaged, capsPod("web", "SYS_ADMIN")),
			wantCode:    http.StatusForbidden,
			wantMessage: "(image nginx:1.26) sets spec.containers[*].securityContext.capabilities.add to SYS_ADMIN",
		},
		{
			name:        "an ephemeral container is evaluated",
			index:       ready,
			req:         podRequest(t, admissionv1.Update, "ephemeralcontainers", debugged, capsPod("web")),
			wantCode:    http.StatusForbidden,
			wantMessage: `ephemeral container "debugger" (image busybox) sets spec.ephemeralContainers[*].securityContext.privileged to true`,
		},
		{
			name:        "scaling a Deployment whose template a policy now refuses is not re-evaluated",
			index:       ready,
			req:         deploymentRequest(deployment(5, "SYS_ADMIN"), deployment(3, "SYS_ADMIN")),
			wantAllowed: true,
		},
		{
			name:        "changing a Deployment's template is evaluated",
			index:       ready,
			req:         deploymentRequest(deployment(3, "SYS_ADMIN"), deployment(3)),
			wantCode:    http.StatusForbidden,
			wantMessage: "Deployment staging/web is refused",
		},
		{
			name:        "an object being deleted gets no pass",
			index:       ready,
			req:         deploymentRequest(deleting, deployment(3)),
			wantCode:    http.StatusForbidden,
			wantMessage: "sets spec.template.spec.containers[*].securityContext.capabilities.add to SYS_ADMIN",
		},
		{
			name:        "the status subresource is not evaluated",
			index:       ready,
			req:         podRequest(t, admissionv1.Update, "status", capsPod("web", "SYS_ADMIN"), capsPod("web", "SYS_ADMIN")),
			wantAllowed: true,
		},
		{
			name:        "a delete is not evaluated",
			index:       ready,
			req:         podRequest(t, admissionv1.Delete, "", nil, capsPod("web", "SYS_ADMIN")),
			wantAllowed: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := &admission.Webhook{Handler: &PodAdmission{Index: tt.index, Clock: clocktesting.NewFakePassiveClock(now)}}
			resp := h.Handle(context.Background(), tt.req)
			if resp.Allowed != tt.wantAllowed {
				t.Fatalf("allowed=%v, want %v; result %+v", resp.Allowed, tt.wantAllowed, resp.Result)
			}
			if tt.wantCode != 0 && (resp.Result == nil || resp.Result.Code != tt.wantCode) {
				t.Errorf("result %+v, want code %d", resp.Result, tt.wantCode)
			}
			if tt.wantMessage != "" && (resp.Result == nil || !strings.Contains(resp.Result.Message, tt.wantMessage)) {
				t.Errorf("message %q lacks %q", resp.Result.Message, tt.wantMessage)
			}
			for k, want := range tt.wantAudit {
				if got := resp.AuditAnnotations[k]; !strings.Contains(got, want) {
					t.Errorf("audit annotation %s = %q, want it to contain %q", k, got, want)
				}
			}
			if tt.wantAudit == nil && tt.wantAllowed && len(resp.AuditAnnotations) > 0 {
				t.Errorf("unexpected audit annotations %v", resp.AuditAnnotations)
			}
			if tt.wantWarning != "" && !slices.Contains(resp.Warnings, tt.wantWarning) {
				t.Errorf("warnings %q lack %q", resp.Warnings, tt.wantWarning)
			}
			if resp.UID != tt.req.UID {
				t.Errorf("response UID %q, want %q", resp.UID, tt.req.UID)
			}
		})
	}
}

// TestPanicFailsClosed: a panic in the handler is a refusal, never an allow.
func TestPanicFailsClosed(t *testing.T) {
	h := &admission.Webhook{Handler: &PodAdmission{Index: nil, Clock: clocktesting.NewFakePassiveClock(now)}}
	resp := h.Handle(context.Background(), podRequest(t, admissionv1.Create, "", capsPod("web"), nil))
	if resp.Allowed || resp.Result == nil || resp.Result.Code != http.StatusInternalServerError {
		t.Fatalf("a panic answered %+v", resp.AdmissionResponse)
	}
}

// TestNamespaceNotYetIndexed: a pod in a namespace the index has not seen
// (created a moment ago) is judged with the namespace's labels read from the
// API server, and refused when they cannot be read.
func TestNamespaceNotYetIndexed(t *testing.T) {
	ix := index.New("podsieve-system")
	ix.Load([]*engine.Policy{enginetest.MustPolicy(t, "prod", "rules:\n- name: baseline\n  match: {namespaceSelector: {matchLabels: {env: prod}}}\n  podSecurity: {level: baseline}")}, nil, nil, nil)
	ix.MarkReady()
	req := podRequest(t, admissionv1.Create, "", capsPod("web", "SYS_ADMIN"), nil)
	tests := []struct {
		name        string
		namespaces  []client.Object
		wantCode    int32
		wantMessage string
	}{
		{
			name:        "its labels are read, and the rule that selects them applies",
			namespaces:  []client.Object{&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "staging", Labels: map[string]string{"env": "prod"}}}},
			wantCode:    http.StatusForbidden,
			wantMessage: `Pod staging/web is refused by SecurityPolicy "prod" rule "baseline"`,
		},
		{
			name:        "a namespace that cannot be read fails closed",
			wantCode:    http.StatusServiceUnavailable,
			wantMessage: `podsieve cannot read namespace "staging" to decide on Pod staging/web`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			reader := fake.NewClientBuilder().WithObjects(tt.namespaces...).Build()
			h := &admission.Webhook{Handler: &PodAdmission{Index: ix, Clock: clocktesting.NewFakePassiveClock(now), Namespaces: reader}}
			resp := h.Handle(context.Background(), req)
			if resp.Allowed || resp.Result.Code != tt.wantCode || !strings.Contains(resp.Result.Message, tt.wantMessage) {
				t.Fatalf("allowed=%v result %+v, want code %d and %q", resp.Allowed, resp.Result, tt.wantCode, tt.wantMessage)
			}
		})
	}
}

// TestExceptionsAppliedRecorded: a request that an exception admits tells
// ExceptionsApplied which one and when, once; a dry run, and a request no
// exception helps, tell nothing.
func TestExceptionsAppliedRecorded(t *testing.T) {
	ix := index.New("podsieve-system")
	ix.Load([]*engine.Policy{enginetest.MustPolicy(t, "enforced", "exceptions: {allowedControls: [Capabilities]}\nrules:\n- name: baseline\n  podSecurity: {level: baseline}\n- name: again\n  podSecurity: {level: baseline}")},
		[]*engine.Exception{enginetest.MustException(t, "staging", "net-admin", "exceptions: [{policyName: enforced, ruleNames: ['*']}]\npodSecurity: [{controlName: Capabilities, restrictedField: 'spec.containers[*].securityContext.capabilities.add', values: [NET_ADMIN]}]")},
		nil, nil)
	ix.MarkReady()
	dryRun := podRequest(t, admissionv1.Create, "", capsPod("web", "NET_ADMIN"), nil)
	dryRun.DryRun = ptr.To(true)
	tests := []struct {
		name        string
		req         admission.Request
		wantAllowed bool
		want        []string
	}{
		{name: "an admitted pod names its exception once, though two rules used it",
			req: podRequest(t, admissionv1.Create, "", capsPod("web", "NET_ADMIN"), nil), wantAllowed: true, want: []string{"exception/staging/net-admin"}},
		{name: "a dry run is not a use", req: dryRun, wantAllowed: true},
		{name: "a pod no exception helps names none", req: podRequest(t, admissionv1.Create, "", capsPod("web", "SYS_ADMIN"), nil)},
		{name: "a clean pod names none", req: podRequest(t, admissionv1.Create, "", capsPod("web"), nil), wantAllowed: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			var at time.Time
			h := &admission.Webhook{Handler: &PodAdmission{Index: ix, Clock: clocktesting.NewFakePassiveClock(now),
				ExceptionsApplied: func(sources []engine.Source, t time.Time) {
					for _, s := range sources {
						got = append(got, s.String())
					}
					at = t
				}}}
			resp := h.Handle(context.Background(), tt.req)
			if resp.Allowed != tt.wantAllowed {
				t.Fatalf("allowed = %v, want %v: %+v", resp.Allowed, tt.wantAllowed, resp.Result)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("ExceptionsApplied heard %v, want %v", got, tt.want)
			}
			if len(tt.want) > 0 && !at.Equal(now) {
				t.Errorf("at %v, want the decision's time %v", at, now)
			}
		})
	}
}
