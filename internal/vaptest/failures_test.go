package vaptest

import (
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
)

// TestAdmitFailures: runtime errors, exceeded cost limits, compile and
// configuration errors under each failurePolicy, and a request whose
// namespace is missing.
func TestAdmitFailures(t *testing.T) {
	bigList := make([]any, 200)
	for i := range bigList {
		bigList[i] = int64(i)
	}
	bigPod := pod("prod", "ok-big", nil)
	bigPod.Object["spec"].(map[string]any)["items"] = bigList
	bigString := pod("prod", "ok-big-string", nil)
	bigString.SetAnnotations(map[string]string{"big": strings.Repeat("A", 9_000_000)})

	runAdmit(t, []admitCase{
		{
			name: "runtime error under failurePolicy Ignore",
			objs: []string{podPolicy("replicas", "Ignore", missingField), binding("replicas", "replicas", "Deny", "")},
			req:  create(pod("prod", "ok-1", nil)),
			want: want{allowed: true, errs: []wantErr{{admissionregistrationv1.Ignore, "no such key: replicas"}}},
		},
		{
			name: "runtime error under default failurePolicy Fail",
			objs: []string{podPolicy("replicas", "", missingField), binding("replicas", "replicas", "Deny", "")},
			req:  create(pod("prod", "ok-1", nil)),
			want: want{
				denials: []string{denied("replicas", "replicas", "expression 'object.spec.replicas > 1' resulted in error: no such key: replicas")},
				errs:    []wantErr{{admissionregistrationv1.Fail, "no such key: replicas"}},
			},
		},
		{
			name: "runtime error under Fail with only the Warn action warns",
			objs: []string{podPolicy("replicas", "Fail", missingField), binding("replicas", "replicas", "Warn", "")},
			req:  create(pod("prod", "ok-1", nil)),
			want: want{
				allowed:  true,
				warnings: []string{"Validation failed for ValidatingAdmissionPolicy 'replicas' with binding 'replicas': expression 'object.spec.replicas > 1' resulted in error: no such key: replicas"},
				errs:     []wantErr{{admissionregistrationv1.Fail, "no such key: replicas"}},
			},
		},
		{
			name: "per-call cost limit exceeded under Fail",
			objs: []string{podPolicy("cost", "Fail", expensive), binding("cost", "cost", "Deny", "")},
			req:  create(bigPod),
			want: want{
				denials: []string{denied("cost", "cost", "expression 'object.spec.items.all(x, object.spec.items.all(y, object.spec.items.all(z, x + y + z >= 0)))' resulted in error: operation cancelled: actual cost limit exceeded")},
				errs:    []wantErr{{admissionregistrationv1.Fail, "cost limit exceeded"}},
			},
		},
		{
			name: "per-call cost limit exceeded under Ignore",
			objs: []string{podPolicy("cost", "Ignore", expensive), binding("cost", "cost", "Deny", "")},
			req:  create(bigPod),
			want: want{allowed: true, errs: []wantErr{{admissionregistrationv1.Ignore, "cost limit exceeded"}}},
		},
		{
			name: "per-binding runtime budget exceeded",
			objs: []string{podPolicy("budget", "Fail", budgetValidations()), binding("budget", "budget", "Deny", "")},
			req:  create(bigString),
			want: want{
				denials: []string{denied("budget", "budget", "validation failed due to running out of cost budget, no further validation rules will be run")},
				errs:    []wantErr{{admissionregistrationv1.Fail, "running out of cost budget"}},
			},
		},
		{
			name: "matchCondition error under Fail",
			objs: []string{podPolicy("names", "Fail", namePrefix+matchConditionError), binding("names", "names", "Deny", "")},
			req:  create(pod("prod", "ok-1", nil)),
			want: want{
				denials: []string{denied("names", "names", "expression 'object.spec.replicas > 1' resulted in error: no such key: replicas")},
				errs:    []wantErr{{admissionregistrationv1.Fail, "no such key: replicas"}},
			},
		},
		{
			name: "matchCondition error under Ignore",
			objs: []string{podPolicy("names", "Ignore", namePrefix+matchConditionError), binding("names", "names", "Deny", "")},
			req:  create(pod("prod", "bad", nil)),
			// The library's matchConditions matcher applies Ignore itself
			// and reports no error.
			want: want{allowed: true},
		},
		{
			name: "compile error kept under Fail denies",
			opts: []Option{KeepCompileErrors()},
			objs: []string{podPolicy("broken", "Fail", brokenValidation), binding("broken", "broken", "Deny", "")},
			req:  create(pod("prod", "ok-1", nil)),
			want: want{
				denials: []string{denied("broken", "broken", "compilation error: compilation failed: ERROR: <input>:1:6: undeclared reference to 'nosuchvariable' (in container '')\n | 1 == nosuchvariable\n | .....^")},
				errs:    []wantErr{{admissionregistrationv1.Fail, "undeclared reference"}},
			},
		},
		{
			name: "compile error kept under Ignore",
			opts: []Option{KeepCompileErrors()},
			objs: []string{podPolicy("broken", "Ignore", brokenValidation), binding("broken", "broken", "Deny", "")},
			req:  create(pod("prod", "ok-1", nil)),
			want: want{allowed: true, errs: []wantErr{{admissionregistrationv1.Ignore, "undeclared reference"}}},
		},
		{
			name: "missing Namespace object fails the request",
			objs: []string{podPolicy("names", "", namePrefix), binding("names", "names", "Deny", "")},
			req:  create(pod("ghost", "ok-1", nil)),
			want: want{errs: []wantErr{{"", `namespaces "ghost" not found`}}},
		},
	})
}

const missingField = `  validations:
  - expression: object.spec.replicas > 1
`

// expensive is a cubic comprehension: over 200 items it needs 8e6 steps,
// more than the per-call limit of 1e6.
const expensive = `  validations:
  - expression: object.spec.items.all(x, object.spec.items.all(y, object.spec.items.all(z, x + y + z >= 0)))
`

// budgetValidations are 12 validations that each cost 9e5, under the
// per-call limit of 1e6 (lowerAscii costs a tenth of the length of a 9e6
// byte string), and together exceed the per-binding budget of 1e7.
func budgetValidations() string {
	var b strings.Builder
	b.WriteString("  validations:\n")
	for range 12 {
		b.WriteString("  - expression: size(object.metadata.annotations.big.lowerAscii()) > 0\n")
	}
	return b.String()
}

const matchConditionError = `  matchConditions:
  - {name: replicas, expression: "object.spec.replicas > 1"}
`

const brokenValidation = `  validations:
  - expression: 1 == nosuchvariable
`

func TestNewCompileError(t *testing.T) {
	_, err := New(objects(t, podPolicy("broken", "", `  variables:
  - {name: ok, expression: "true"}
  validations:
  - expression: variables.ok
  - expression: 1 == nosuchvariable
    messageExpression: "42"
`)))
	if err == nil {
		t.Fatal("New accepted a policy that does not compile")
	}
	for _, want := range []string{
		`ValidatingAdmissionPolicy "broken": spec.validations[1].expression "1 == nosuchvariable": compilation failed`,
		`ValidatingAdmissionPolicy "broken": spec.validations[1].messageExpression "42": must evaluate to string but got int`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("New error = %v\nwant it to contain %q", err, want)
		}
	}
	if n := strings.Count(err.Error(), "ValidatingAdmissionPolicy"); n != 2 {
		t.Errorf("New error names %d failures, want 2: %v", n, err)
	}
}
