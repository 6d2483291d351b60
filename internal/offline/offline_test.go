package offline

import (
	"strings"
	"testing"
	"time"

	policyv1alpha1 "github.com/podsieve/podsieve/api/v1alpha1"
	"github.com/podsieve/podsieve/internal/engine"
	"github.com/podsieve/podsieve/internal/manifest"
)

var opts = Options{Namespace: "team-a", ExceptionsNamespace: "podsieve-system", Now: time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC)}

// policy is one baseline SecurityPolicy that honours exceptions.
const policy = "apiVersion: policy.podsieve.dev/v1alpha1\nkind: SecurityPolicy\nmetadata: {name: base}\n" +
	"spec: {exceptions: {}, rules: [{name: baseline, podSecurity: {level: baseline}}]}\n---\n"

// TestLoad: namespaces default to Options.Namespace, exceptions are judged
// at Options.Now, and Decide decides every workload with them.
func TestLoad(t *testing.T) {
	in, err := Load([]string{manifest.Stdin}, strings.NewReader(policy+`apiVersion: policy.podsieve.dev/v1alpha1
kind: PolicyException
metadata: {name: hostpid}
spec:
  exceptions: [{policyName: base, ruleNames: ["*"]}]
  podSecurity: [{controlName: Host Namespaces, restrictedField: spec.hostPID, values: ["true"]}]
---
apiVersion: policy.podsieve.dev/v1alpha1
kind: PolicyException
metadata: {name: old}
spec:
  exceptions: [{policyName: base, ruleNames: ["*"]}]
  expiresAt: "2026-01-01T00:00:00Z"
---
apiVersion: v1
kind: Pod
metadata: {name: a}
spec: {hostPID: true, containers: [{name: a, image: x}]}
---
apiVersion: v1
kind: Pod
metadata: {name: b, namespace: team-b}
spec: {hostIPC: true, containers: [{name: a, image: x}]}
---
apiVersion: v1
kind: Service
metadata: {name: s}
`), opts)
	if err != nil {
		t.Fatal(err)
	}
	if len(in.Set.Ignored) != 1 {
		t.Errorf("ignored %v, want the Service", in.Set.Ignored)
	}
	var got []string
	for _, e := range in.Exceptions {
		got = append(got, e.Namespace+"/"+e.Name+" "+e.Reason+" "+e.Source)
	}
	want := []string{"team-a/hostpid " + policyv1alpha1.ReasonActive + " <stdin>, document 2", "team-a/old " + policyv1alpha1.ReasonExpired + " <stdin>, document 3"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("exceptions:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	decisions := in.Decide(engine.Admission)
	if len(decisions) != 2 || len(in.Workloads) != 2 {
		t.Fatalf("%d decisions of %d workloads, want 2", len(decisions), len(in.Workloads))
	}
	for i, want := range []struct {
		name    string
		allowed bool
	}{{"Pod team-a/a (<stdin>, document 4)", true}, {"Pod team-b/b (<stdin>, document 5)", false}} {
		if got := in.Workloads[i].String(); got != want.name {
			t.Errorf("workload %d is %q, want %q", i, got, want.name)
		}
		if decisions[i].Object != in.Workloads[i].Object || decisions[i].Allowed != want.allowed {
			t.Errorf("%s: allowed %v, want %v", want.name, decisions[i].Allowed, want.allowed)
		}
	}
}

// TestCompileProblems: every problem of the input is reported, in input
// order, each naming its document.
func TestCompileProblems(t *testing.T) {
	tests := []struct {
		name  string
		input string
		want  []string
	}{
		{
			name:  "two objects of one name",
			input: policy + policy + "apiVersion: v1\nkind: Pod\nmetadata: {name: a}\n---\napiVersion: v1\nkind: Pod\nmetadata: {name: a, namespace: team-a}\n",
			want: []string{
				"<stdin>, document 2: SecurityPolicy base is also defined in <stdin>, document 1; names must be unique",
				"<stdin>, document 4: Pod team-a/a is also defined in <stdin>, document 3; names must be unique",
			},
		},
		{
			name: "exceptions naming what the input does not hold, in input order",
			input: "apiVersion: policy.podsieve.dev/v1alpha1\nkind: PolicyException\nmetadata: {name: e1}\nspec: {exceptions: [{policyName: other, ruleNames: ['*']}]}\n---\n" +
				policy + "apiVersion: policy.podsieve.dev/v1alpha1\nkind: PolicyException\nmetadata: {name: e2}\nspec: {exceptions: [{policyName: base, ruleNames: [restricted]}]}\n",
			want: []string{
				"<stdin>, document 1: PolicyException team-a/e1: ",
				"in the input; add the policy's file with -f, or fix the name",
				"<stdin>, document 3: PolicyException team-a/e2: ",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			set, err := manifest.Load([]string{manifest.Stdin}, strings.NewReader(tt.input))
			if err != nil {
				t.Fatal(err)
			}
			in, err := Compile(set, opts)
			if err == nil {
				t.Fatalf("compiled: %+v", in)
			}
			last := -1
			for _, w := range tt.want {
				i := strings.Index(err.Error(), w)
				if i < 0 {
					t.Errorf("error lacks %q:\n%v", w, err)
				} else if i < last {
					t.Errorf("%q is out of order:\n%v", w, err)
				}
				last = max(last, i)
			}
		})
	}
}
