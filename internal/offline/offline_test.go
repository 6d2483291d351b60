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

// TestCompileTrust: documents of the change (not ClusterState) are taken
// only as the cluster would take them, each ignored part reported in input
// order; the cluster state's are taken as they are.
func TestCompileTrust(t *testing.T) {
	const (
		future = "apiVersion: policy.podsieve.dev/v1alpha1\nkind: PolicyException\nmetadata: {name: e, namespace: team-a, creationTimestamp: '2027-06-01T00:00:00Z'}\n" +
			"spec: {exceptions: [{policyName: timed, ruleNames: ['*']}], expiresAt: '2027-06-20T00:00:00Z'}\n"
		renewal = "apiVersion: policy.podsieve.dev/v1alpha1\nkind: PolicyException\nmetadata: {name: e, namespace: team-a}\n" +
			"spec: {exceptions: [{policyName: timed, ruleNames: ['*']}], expiresAt: '2026-12-01T00:00:00Z'}\n"
		old = "apiVersion: policy.podsieve.dev/v1alpha1\nkind: PolicyException\nmetadata: {name: e, namespace: team-a, creationTimestamp: '2026-01-01T00:00:00Z'}\n" +
			"spec: {exceptions: [{policyName: timed, ruleNames: ['*']}], expiresAt: '2026-01-20T00:00:00Z'}\n"
		cluster = "apiVersion: policy.podsieve.dev/v1alpha1\nkind: PolicyException\nmetadata: {name: c, namespace: podsieve-system, creationTimestamp: '2026-11-20T00:00:00Z'}\n" +
			"spec: {exceptions: [{policyName: timed, ruleNames: ['*']}], expiresAt: '2026-12-01T00:00:00Z'}\n"
		ns     = "apiVersion: v1\nkind: Namespace\nmetadata: {name: team-a, labels: {profile: restricted}}\n"
		timed  = "apiVersion: policy.podsieve.dev/v1alpha1\nkind: SecurityPolicy\nmetadata: {name: timed}\nspec: {exceptions: {maxDuration: 720h}, rules: [{name: baseline, podSecurity: {level: baseline}}]}\n"
		sep    = "---\n"
		active = policyv1alpha1.ReasonActive
		denied = policyv1alpha1.ReasonNotPermitted
	)
	tests := []struct {
		name           string
		change, state  string
		wantExceptions []string // namespace/name reason
		wantNamespaces int
		wantWarnings   []string
		wantErr        string
	}{
		{name: "a change's future creationTimestamp is the time of the decision", change: timed + sep + future,
			wantExceptions: []string{"team-a/e " + denied},
			wantWarnings:   []string{"<stdin>, document 2: PolicyException team-a/e: metadata.creationTimestamp 2027-06-01T00:00:00Z is ignored"}},
		{name: "the cluster's creationTimestamp is kept", state: timed + sep + future, wantExceptions: []string{"team-a/e " + active}},
		{name: "a change updating the cluster's exception keeps its creationTimestamp", change: renewal, state: timed + sep + old,
			wantExceptions: []string{"team-a/e " + denied}},
		{name: "a change's cluster exception and Namespace are ignored, in input order", change: timed + sep + ns + sep + cluster,
			wantWarnings: []string{"<stdin>, document 2: Namespace team-a is ignored", "<stdin>, document 3: PolicyException podsieve-system/c is ignored"}},
		{name: "the cluster's are taken", state: timed + sep + ns + sep + cluster, wantExceptions: []string{"podsieve-system/c " + active}, wantNamespaces: 1},
		{name: "the cluster's exception without its creationTimestamp, under maxDuration", state: timed + sep + strings.Replace(cluster, ", creationTimestamp: '2026-11-20T00:00:00Z'", "", 1),
			wantErr: "PolicyException podsieve-system/c in the cluster state has no metadata.creationTimestamp"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			set := &manifest.Set{}
			for _, part := range []struct {
				text    string
				trusted bool
			}{{tt.state, true}, {tt.change, false}} {
				if part.text == "" {
					continue
				}
				s, err := manifest.Load([]string{manifest.Stdin}, strings.NewReader(part.text))
				if err != nil {
					t.Fatal(err)
				}
				for _, list := range []*[]manifest.Document{&s.Policies, &s.Exceptions, &s.Namespaces} {
					for i := range *list {
						(*list)[i].ClusterState = part.trusted
					}
				}
				set.Policies = append(set.Policies, s.Policies...)
				set.Exceptions = append(set.Exceptions, s.Exceptions...)
				set.Namespaces = append(set.Namespaces, s.Namespaces...)
			}
			var warnings []string
			o := opts
			o.Warn = func(msg string) { warnings = append(warnings, msg) }
			in, err := Compile(set, o)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, e := range in.Exceptions {
				got = append(got, e.Namespace+"/"+e.Name+" "+e.Reason)
			}
			if strings.Join(got, "\n") != strings.Join(tt.wantExceptions, "\n") {
				t.Errorf("exceptions:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tt.wantExceptions, "\n"))
			}
			if n := in.Index.Snapshot().NamespaceCount(); n != tt.wantNamespaces {
				t.Errorf("%d namespaces, want %d", n, tt.wantNamespaces)
			}
			if len(warnings) != len(tt.wantWarnings) {
				t.Fatalf("warnings:\n%s\nwant %d", strings.Join(warnings, "\n"), len(tt.wantWarnings))
			}
			for i, w := range tt.wantWarnings {
				if !strings.HasPrefix(warnings[i], w) {
					t.Errorf("warning %d is %q, want it to start with %q", i, warnings[i], w)
				}
			}
		})
	}
}
