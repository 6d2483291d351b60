package vaptest

import (
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
)

// TestAdmitParams: params by name and by selector, found or not, under
// each parameterNotFoundAction.
func TestAdmitParams(t *testing.T) {
	runAdmit(t, []admitCase{
		{
			name: "param by name in the request's namespace",
			objs: []string{params, paramPolicy, binding("prefix", "prefix", "Deny", paramByName("Deny"))},
			req:  create(pod("prod", "bad", nil)),
			want: want{denials: []string{denied("prefix", "prefix", "name bad must start with ok-")}},
		},
		{
			name: "param by name found, passing",
			objs: []string{params, paramPolicy, binding("prefix", "prefix", "Deny", paramByName("Deny"))},
			req:  create(pod("prod", "ok-1", nil)),
			want: want{allowed: true},
		},
		{
			name: "param not found with parameterNotFoundAction Allow",
			objs: []string{params, paramPolicy, binding("prefix", "prefix", "Deny", paramByName("Allow"))},
			req:  create(pod("dev", "bad", nil)),
			want: want{allowed: true},
		},
		{
			name: "param not found with parameterNotFoundAction Deny",
			objs: []string{params, paramPolicy, binding("prefix", "prefix", "Deny", paramByName("Deny"))},
			req:  create(pod("dev", "bad", nil)),
			want: want{
				denials: []string{denied("prefix", "prefix", "failed to configure binding: no params found for policy binding with `Deny` parameterNotFoundAction")},
				errs:    []wantErr{{admissionregistrationv1.Fail, "no params found"}},
			},
		},
		{
			name: "param not found with Deny under failurePolicy Ignore",
			objs: []string{params, strings.Replace(paramPolicy, "spec:\n", "spec:\n  failurePolicy: Ignore\n", 1), binding("prefix", "prefix", "Deny", paramByName("Deny"))},
			req:  create(pod("dev", "bad", nil)),
			want: want{allowed: true, errs: []wantErr{{admissionregistrationv1.Ignore, "no params found"}}},
		},
		{
			name: "param in an explicit namespace",
			objs: []string{params, paramPolicy, binding("prefix", "prefix", "Deny", `  paramRef: {name: prefix, namespace: prod, parameterNotFoundAction: Deny}
`)},
			req:  create(pod("dev", "bad", nil)),
			want: want{denials: []string{denied("prefix", "prefix", "name bad must start with ok-")}},
		},
		{
			name: "params by selector: all must pass",
			objs: []string{params, paramPolicy, binding("rules", "prefix", "Deny", paramBySelector)},
			req:  create(pod("prod", "o-1", nil)),
			want: want{denials: []string{denied("prefix", "rules", "name o-1 must start with ok")}},
		},
		{
			name: "params by selector: passing all",
			objs: []string{params, paramPolicy, binding("rules", "prefix", "Deny", paramBySelector)},
			req:  create(pod("prod", "ok-1", nil)),
			want: want{allowed: true},
		},
		{
			name: "params by selector: each failing param denies",
			objs: []string{params, paramPolicy, binding("rules", "prefix", "Deny", paramBySelector)},
			req:  create(pod("prod", "x", nil)),
			want: want{denials: []string{
				denied("prefix", "rules", "name x must start with o"),
				denied("prefix", "rules", "name x must start with ok"),
			}},
		},
		{
			name: "params by selector: none selected with Allow",
			objs: []string{params, paramPolicy, binding("rules", "prefix", "Deny", paramBySelector)},
			req:  create(pod("dev", "x", nil)),
			want: want{allowed: true},
		},
	})
}

// paramPolicy reads its prefix from a ConfigMap.
const paramPolicy = `
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: prefix}
spec:
  paramKind: {apiVersion: v1, kind: ConfigMap}
  matchConstraints:
    resourceRules:
    - {apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [pods]}
  validations:
  - expression: object.metadata.name.startsWith(params.data.prefix)
    messageExpression: "'name ' + object.metadata.name + ' must start with ' + params.data.prefix"
`

func paramByName(notFound string) string {
	return "  paramRef: {name: prefix, parameterNotFoundAction: " + notFound + "}\n"
}

const paramBySelector = `  paramRef:
    selector: {matchLabels: {role: rule}}
    parameterNotFoundAction: Allow
`
