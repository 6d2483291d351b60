package vaptest

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/authentication/user"
	"sigs.k8s.io/yaml"
)

// objects parses YAML documents separated by "---" into unstructured objects.
func objects(tb testing.TB, docs ...string) []*unstructured.Unstructured {
	tb.Helper()
	var out []*unstructured.Unstructured
	for _, doc := range docs {
		for _, part := range strings.Split(doc, "\n---\n") {
			if strings.TrimSpace(part) == "" {
				continue
			}
			m := map[string]any{}
			if err := yaml.UnmarshalStrict([]byte(part), &m); err != nil {
				tb.Fatalf("parse %q: %v", part, err)
			}
			out = append(out, &unstructured.Unstructured{Object: m})
		}
	}
	return out
}

const namespaces = `
apiVersion: v1
kind: Namespace
metadata: {name: prod, labels: {enforce: "true", tier: prod}}
---
apiVersion: v1
kind: Namespace
metadata: {name: dev}
`

// params: ns prod has ConfigMap "prefix" and two ConfigMaps labelled
// role=rule; ns dev has none.
const params = `
apiVersion: v1
kind: ConfigMap
metadata: {name: prefix, namespace: prod}
data: {prefix: ok-}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: rule-o, namespace: prod, labels: {role: rule}}
data: {prefix: o}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: rule-ok, namespace: prod, labels: {role: rule}}
data: {prefix: ok}
`

// podPolicy is a policy on CREATE and UPDATE of pods named name, with the
// given failurePolicy (empty: unset) and the validations, variables and
// other spec fields in extra (YAML at spec indentation).
func podPolicy(name, failurePolicy, extra string) string {
	fp := ""
	if failurePolicy != "" {
		fp = "  failurePolicy: " + failurePolicy + "\n"
	}
	return fmt.Sprintf(`
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: %s}
spec:
%s  matchConstraints:
    resourceRules:
    - {apiGroups: [""], apiVersions: [v1], operations: [CREATE, UPDATE], resources: [pods]}
%s`, name, fp, extra)
}

// binding binds policy with the given actions and extra spec fields.
func binding(name, policy, actions, extra string) string {
	return fmt.Sprintf(`
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: %s}
spec:
  policyName: %s
  validationActions: [%s]
%s`, name, policy, actions, extra)
}

// namePrefix fails pods whose name does not start with "ok-".
const namePrefix = `  validations:
  - expression: object.metadata.name.startsWith('ok-')
    messageExpression: "'name ' + object.metadata.name + ' must start with ok-'"
`

func pod(ns, name string, labels map[string]string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Pod",
		"metadata": map[string]any{"name": name, "namespace": ns},
		"spec":     map[string]any{"containers": []any{map[string]any{"name": "c", "image": "i"}}},
	}}
	u.SetLabels(labels)
	return u
}

var podsGVR = schema.GroupVersionResource{Version: "v1", Resource: "pods"}

func create(obj *unstructured.Unstructured) Request {
	return Request{Operation: admission.Create, Object: obj, Namespace: obj.GetNamespace(), Resource: podsGVR}
}

func update(old, obj *unstructured.Unstructured) Request {
	return Request{Operation: admission.Update, Object: obj, OldObject: old, Namespace: obj.GetNamespace(), Resource: podsGVR}
}

func denied(policy, binding, msg string) string {
	return fmt.Sprintf("ValidatingAdmissionPolicy '%s' with binding '%s' denied request: %s", policy, binding, msg)
}

// want is the expected Result; errors are matched by substring, one per
// error, in order, and each must be an *EvalError with the failure policy.
type want struct {
	allowed  bool
	denials  []string
	warnings []string
	audit    []string
	errs     []wantErr
}

type wantErr struct {
	failurePolicy admissionregistrationv1.FailurePolicyType
	contains      string
}

// admitCase is one request to a cluster of objs (after the namespaces) and
// the Result Admit must give.
type admitCase struct {
	name string
	objs []string
	opts []Option
	req  Request
	want want
}

// TestAdmit: the actions of a binding and what a policy and its bindings
// match.
func TestAdmit(t *testing.T) {
	runAdmit(t, []admitCase{
		{
			name: "messageExpression worded denial",
			objs: []string{podPolicy("names", "", namePrefix), binding("names", "names", "Deny", "")},
			req:  create(pod("prod", "bad", nil)),
			want: want{denials: []string{denied("names", "names", "name bad must start with ok-")}},
		},
		{
			name: "passing validation is allowed",
			objs: []string{podPolicy("names", "", namePrefix), binding("names", "names", "Deny", "")},
			req:  create(pod("prod", "ok-1", nil)),
			want: want{allowed: true},
		},
		{
			name: "message used when messageExpression is absent",
			objs: []string{podPolicy("names", "", `  validations:
  - {expression: "object.metadata.name.startsWith('ok-')", message: "names start with ok-"}
`), binding("names", "names", "Deny", "")},
			req:  create(pod("prod", "bad", nil)),
			want: want{denials: []string{denied("names", "names", "names start with ok-")}},
		},
		{
			name: "Warn action warns and allows",
			objs: []string{podPolicy("names", "", namePrefix), binding("names-warn", "names", "Warn", "")},
			req:  create(pod("prod", "bad", nil)),
			want: want{allowed: true, warnings: []string{"Validation failed for ValidatingAdmissionPolicy 'names' with binding 'names-warn': name bad must start with ok-"}},
		},
		{
			name: "Audit action records and allows",
			objs: []string{podPolicy("names", "", namePrefix), binding("names-audit", "names", "Audit", "")},
			req:  create(pod("prod", "bad", nil)),
			want: want{allowed: true, audit: []string{"ValidatingAdmissionPolicy 'names' with binding 'names-audit': name bad must start with ok-"}},
		},
		{
			name: "Deny, Warn and Audit together",
			objs: []string{podPolicy("names", "", namePrefix), binding("names-all", "names", "Deny, Warn, Audit", "")},
			req:  create(pod("prod", "bad", nil)),
			want: want{
				denials:  []string{denied("names", "names-all", "name bad must start with ok-")},
				warnings: []string{"Validation failed for ValidatingAdmissionPolicy 'names' with binding 'names-all': name bad must start with ok-"},
				audit:    []string{"ValidatingAdmissionPolicy 'names' with binding 'names-all': name bad must start with ok-"},
			},
		},
		{
			name: "every denying binding is listed",
			objs: []string{podPolicy("names", "", namePrefix), binding("first", "names", "Deny", ""), binding("second", "names", "Deny", "")},
			req:  create(pod("prod", "bad", nil)),
			want: want{denials: []string{
				denied("names", "first", "name bad must start with ok-"),
				denied("names", "second", "name bad must start with ok-"),
			}},
		},
		{
			name: "policy without binding does nothing",
			objs: []string{podPolicy("names", "", namePrefix)},
			req:  create(pod("prod", "bad", nil)),
			want: want{allowed: true},
		},
		{
			name: "operation not in the rule is not matched",
			objs: []string{`
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: names}
spec:
  matchConstraints:
    resourceRules:
    - {apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [pods]}
` + namePrefix, binding("names", "names", "Deny", "")},
			req:  update(pod("prod", "bad", nil), pod("prod", "bad", nil)),
			want: want{allowed: true},
		},
		{
			name: "subresource rule matches the subresource",
			objs: []string{ephemeralPolicy, binding("eph", "eph", "Deny", "")},
			req: func() Request {
				r := update(pod("prod", "p", nil), pod("prod", "p", nil))
				r.Subresource = "ephemeralcontainers"
				return r
			}(),
			want: want{denials: []string{denied("eph", "eph", "no ephemeral containers")}},
		},
		{
			name: "subresource rule does not match the resource",
			objs: []string{ephemeralPolicy, binding("eph", "eph", "Deny", "")},
			req:  update(pod("prod", "p", nil), pod("prod", "p", nil)),
			want: want{allowed: true},
		},
		{
			name: "resource rule does not match a subresource",
			objs: []string{podPolicy("names", "", namePrefix), binding("names", "names", "Deny", "")},
			req: func() Request {
				r := update(pod("prod", "bad", nil), pod("prod", "bad", nil))
				r.Subresource = "status"
				return r
			}(),
			want: want{allowed: true},
		},
		{
			name: "excludeResourceRules by resource name",
			objs: []string{`
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: names}
spec:
  matchConstraints:
    resourceRules:
    - {apiGroups: [""], apiVersions: [v1], operations: ["*"], resources: [pods]}
    excludeResourceRules:
    - {apiGroups: [""], apiVersions: [v1], operations: ["*"], resources: [pods], resourceNames: [bad-but-exempt]}
` + namePrefix, binding("names", "names", "Deny", "")},
			req:  create(pod("prod", "bad-but-exempt", nil)),
			want: want{allowed: true},
		},
		{
			name: "namespaceSelector not matching",
			objs: []string{podPolicy("names", "", `    namespaceSelector: {matchLabels: {enforce: "true"}}
`+namePrefix), binding("names", "names", "Deny", "")},
			req:  create(pod("dev", "bad", nil)),
			want: want{allowed: true},
		},
		{
			name: "namespaceSelector matching",
			objs: []string{podPolicy("names", "", `    namespaceSelector: {matchLabels: {enforce: "true"}}
`+namePrefix), binding("names", "names", "Deny", "")},
			req:  create(pod("prod", "bad", nil)),
			want: want{denials: []string{denied("names", "names", "name bad must start with ok-")}},
		},
		{
			name: "objectSelector opt-out",
			objs: []string{podPolicy("names", "", optOut+namePrefix), binding("names", "names", "Deny", "")},
			req:  create(pod("prod", "bad", map[string]string{"opt-out": "yes"})),
			want: want{allowed: true},
		},
		{
			name: "objectSelector matches the old object of an update",
			objs: []string{podPolicy("names", "", optOut+namePrefix), binding("names", "names", "Deny", "")},
			req:  update(pod("prod", "bad", nil), pod("prod", "bad", map[string]string{"opt-out": "yes"})),
			want: want{denials: []string{denied("names", "names", "name bad must start with ok-")}},
		},
		{
			name: "binding matchResources narrows the policy",
			objs: []string{podPolicy("names", "", namePrefix), binding("names", "names", "Deny", `  matchResources:
    namespaceSelector: {matchLabels: {tier: prod}}
`)},
			req:  create(pod("dev", "bad", nil)),
			want: want{allowed: true},
		},
		{
			name: "false matchCondition skips the policy",
			objs: []string{podPolicy("names", "", namePrefix+`  matchConditions:
  - {name: only-prod, expression: "request.namespace == 'prod'"}
`), binding("names", "names", "Deny", "")},
			req:  create(pod("dev", "bad", nil)),
			want: want{allowed: true},
		},
		{
			name: "true matchCondition keeps the policy",
			objs: []string{podPolicy("names", "", namePrefix+`  matchConditions:
  - {name: only-prod, expression: "request.namespace == 'prod'"}
`), binding("names", "names", "Deny", "")},
			req:  create(pod("prod", "bad", nil)),
			want: want{denials: []string{denied("names", "names", "name bad must start with ok-")}},
		},
	})
}

// TestAdmitCEL: the variables a validation reads (variables,
// namespaceObject, request, oldObject, authorizer).
func TestAdmitCEL(t *testing.T) {
	runAdmit(t, []admitCase{
		{
			name: "variables",
			objs: []string{podPolicy("vars", "", `  variables:
  - {name: containerCount, expression: "size(object.spec.containers)"}
  validations:
  - expression: variables.containerCount <= 0
    messageExpression: "'pod has ' + string(variables.containerCount) + ' containers'"
`), binding("vars", "vars", "Deny", "")},
			req:  create(pod("prod", "ok-1", nil)),
			want: want{denials: []string{denied("vars", "vars", "pod has 1 containers")}},
		},
		{
			name: "namespaceObject",
			objs: []string{podPolicy("tier", "", `  validations:
  - expression: "!has(namespaceObject.metadata.labels) || namespaceObject.metadata.labels['tier'] != 'prod'"
    messageExpression: "'namespace ' + namespaceObject.metadata.name + ' is prod'"
`), binding("tier", "tier", "Deny", "")},
			req:  create(pod("prod", "ok-1", nil)),
			want: want{denials: []string{denied("tier", "tier", "namespace prod is prod")}},
		},
		{
			name: "namespaceObject of another namespace",
			objs: []string{podPolicy("tier", "", `  validations:
  - expression: "!has(namespaceObject.metadata.labels) || namespaceObject.metadata.labels['tier'] != 'prod'"
`), binding("tier", "tier", "Deny", "")},
			req:  create(pod("dev", "ok-1", nil)),
			want: want{allowed: true},
		},
		{
			name: "request.userInfo",
			objs: []string{podPolicy("users", "", `  validations:
  - expression: request.userInfo.username != 'mallory' && !('evil' in request.userInfo.groups)
    messageExpression: "'user ' + request.userInfo.username + ' ' + request.operation + ' ' + request.resource.resource"
`), binding("users", "users", "Deny", "")},
			req: func() Request {
				r := create(pod("prod", "ok-1", nil))
				r.UserInfo = &user.DefaultInfo{Name: "alice", Groups: []string{"evil"}}
				return r
			}(),
			want: want{denials: []string{denied("users", "users", "user alice CREATE pods")}},
		},
		{
			name: "oldObject",
			objs: []string{podPolicy("owner", "", `  validations:
  - expression: oldObject == null || object.metadata.labels.owner == oldObject.metadata.labels.owner
    message: owner is immutable
`), binding("owner", "owner", "Deny", "")},
			req:  update(pod("prod", "ok-1", map[string]string{"owner": "a"}), pod("prod", "ok-1", map[string]string{"owner": "b"})),
			want: want{denials: []string{denied("owner", "owner", "owner is immutable")}},
		},
		{
			name: "oldObject is null on create",
			objs: []string{podPolicy("owner", "", `  validations:
  - expression: oldObject == null || object.metadata.labels.owner == oldObject.metadata.labels.owner
`), binding("owner", "owner", "Deny", "")},
			req:  create(pod("prod", "ok-1", map[string]string{"owner": "b"})),
			want: want{allowed: true},
		},
		{
			name: "authorizer without an authorizer allows nothing",
			objs: []string{podPolicy("authz", "", `  validations:
  - expression: authorizer.group('').resource('pods').namespace('prod').check('delete').allowed()
    message: may not delete pods
`), binding("authz", "authz", "Deny", "")},
			req:  create(pod("prod", "ok-1", nil)),
			want: want{denials: []string{denied("authz", "authz", "may not delete pods")}},
		},
	})
}

// runAdmit admits each case's request in a new cluster and compares the
// Result with the case's want.
func runAdmit(t *testing.T, cases []admitCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := New(objects(t, append([]string{namespaces}, tc.objs...)...), tc.opts...)
			if err != nil {
				t.Fatalf("New: %v", err)
			}
			got := c.Admit(context.Background(), tc.req)
			if got.Allowed != tc.want.allowed {
				t.Errorf("Allowed = %t, want %t", got.Allowed, tc.want.allowed)
			}
			check := func(field string, got, want []string) {
				if len(got) != 0 || len(want) != 0 {
					if !reflect.DeepEqual(got, want) {
						t.Errorf("%s =\n  %q\nwant\n  %q", field, got, want)
					}
				}
			}
			check("Denials", got.Denials, tc.want.denials)
			check("Warnings", got.Warnings, tc.want.warnings)
			check("Audit", got.Audit, tc.want.audit)
			if len(got.Errors) != len(tc.want.errs) {
				t.Fatalf("Errors = %v, want %d errors", got.Errors, len(tc.want.errs))
			}
			for i, w := range tc.want.errs {
				e := got.Errors[i]
				if !strings.Contains(e.Error(), w.contains) {
					t.Errorf("Errors[%d] = %v, want it to contain %q", i, e, w.contains)
				}
				var ee *EvalError
				if w.failurePolicy == "" {
					if errors.As(e, &ee) {
						t.Errorf("Errors[%d] = %#v, want a request error", i, ee)
					}
					continue
				}
				if !errors.As(e, &ee) || ee.FailurePolicy != w.failurePolicy {
					t.Errorf("Errors[%d] = %#v, want an *EvalError under %s", i, e, w.failurePolicy)
				}
			}
		})
	}
}

const ephemeralPolicy = `
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: eph}
spec:
  matchConstraints:
    resourceRules:
    - {apiGroups: [""], apiVersions: [v1], operations: [UPDATE], resources: [pods/ephemeralcontainers]}
  validations:
  - {expression: "request.subResource != 'ephemeralcontainers'", message: no ephemeral containers}
`

const optOut = `    objectSelector: {matchExpressions: [{key: opt-out, operator: DoesNotExist}]}
`

func TestNewRejects(t *testing.T) {
	cases := []struct {
		name, obj, want string
	}{
		{
			name: "unknown field",
			obj:  podPolicy("typo", "", "  validation: []\n"),
			want: `ValidatingAdmissionPolicy "typo": `,
		},
		{
			name: "paramRef without parameterNotFoundAction",
			obj:  binding("b", "p", "Deny", "  paramRef: {name: x}\n"),
			want: `ValidatingAdmissionPolicyBinding "b": spec.paramRef.parameterNotFoundAction: Required value`,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(objects(t, tc.obj))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("New error = %v, want it to contain %q", err, tc.want)
			}
		})
	}
}

func TestDefaults(t *testing.T) {
	c, err := New(objects(t, podPolicy("p", "", ""), binding("b", "p", "Deny", `  matchResources: {}
`)))
	if err != nil {
		t.Fatal(err)
	}
	p := c.hooks[0].Policy
	if *p.Spec.FailurePolicy != admissionregistrationv1.Fail {
		t.Errorf("failurePolicy = %s, want Fail", *p.Spec.FailurePolicy)
	}
	for _, m := range []*admissionregistrationv1.MatchResources{p.Spec.MatchConstraints, c.hooks[0].Bindings[0].Spec.MatchResources} {
		if *m.MatchPolicy != admissionregistrationv1.Equivalent || m.NamespaceSelector == nil || m.ObjectSelector == nil {
			t.Errorf("matchResources = %+v, want Equivalent and empty selectors", m)
		}
	}
}

func TestAuditAnnotations(t *testing.T) {
	c, err := New(objects(t, namespaces, podPolicy("names", "", `  validations:
  - expression: "true"
  auditAnnotations:
  - {key: name, valueExpression: "string(object.metadata.name)"}
  - {key: skipped, valueExpression: "null"}
`), binding("names", "names", "Deny", "")))
	if err != nil {
		t.Fatal(err)
	}
	got := c.Admit(context.Background(), create(pod("prod", "p1", nil)))
	want := map[string]string{"names/name": "p1"}
	if !got.Allowed || len(got.Errors) != 0 || !reflect.DeepEqual(got.AuditAnnotations, want) {
		t.Errorf("Admit = %+v, want allowed with audit annotations %v", got, want)
	}
}
