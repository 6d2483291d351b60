package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The inputs of TestEvalTrustsOnlyClusterState. Each policy is Enforce; the
// pod runs with hostPID, which baseline refuses.
const (
	// byLabel applies in namespaces labelled restricted, as the sample
	// restricted-workloads does, and exempts namespaces labelled exempt.
	byLabelPolicy = `apiVersion: policy.podsieve.dev/v1alpha1
kind: SecurityPolicy
metadata: {name: by-label}
spec:
  rules:
  - name: restricted-namespaces
    match: {namespaceSelector: {matchLabels: {profile: restricted}}}
    podSecurity: {level: baseline}
`
	exemptByLabelPolicy = `apiVersion: policy.podsieve.dev/v1alpha1
kind: SecurityPolicy
metadata: {name: exempt-by-label}
spec:
  rules:
  - name: baseline
    exclude: {namespaceSelector: {matchLabels: {exempt: "true"}}}
    podSecurity: {level: baseline}
`
	// timeBoxed honours exceptions for at most 30 days from creation.
	timeBoxedPolicy = `apiVersion: policy.podsieve.dev/v1alpha1
kind: SecurityPolicy
metadata: {name: time-boxed}
spec:
  rules: [{name: baseline, podSecurity: {level: baseline}}]
  exceptions: {allowedControls: [Host Namespaces], maxDuration: 720h}
`
	// clusterOnly honours only a cluster admin's exceptions.
	clusterOnlyPolicy = `apiVersion: policy.podsieve.dev/v1alpha1
kind: SecurityPolicy
metadata: {name: cluster-only}
spec:
  rules: [{name: baseline, podSecurity: {level: baseline}}]
  exceptions: {allowedControls: [Host Namespaces], clusterExceptionsOnly: true}
`
	trustHostPIDPod = `apiVersion: v1
kind: Pod
metadata: {name: debug, namespace: staging}
spec: {hostPID: true, containers: [{name: debug, image: registry.example/debug:1}]}
`
	unlabelledStaging = "apiVersion: v1\nkind: Namespace\nmetadata: {name: staging}\n"
	restrictedStaging = "apiVersion: v1\nkind: Namespace\nmetadata: {name: staging, labels: {profile: restricted}}\n"
	exemptStaging     = "apiVersion: v1\nkind: Namespace\nmetadata: {name: staging, labels: {exempt: \"true\"}}\n"
	// futureException was "created" in 2027 by its author: its expiresAt is
	// within 30 days of that, and seven months from the decision.
	futureException = `apiVersion: policy.podsieve.dev/v1alpha1
kind: PolicyException
metadata: {name: debug-hostpid, namespace: staging, creationTimestamp: "2027-06-01T00:00:00Z"}
spec:
  exceptions: [{policyName: time-boxed, ruleNames: ["*"]}]
  podSecurity: [{controlName: Host Namespaces, restrictedField: spec.hostPID, values: ["true"]}]
  expiresAt: "2027-06-20T00:00:00Z"
`
	// existingException is in the cluster since January; renewedException
	// is a change to it that moves expiresAt within 30 days of the decision,
	// not of its creation.
	existingException = `apiVersion: policy.podsieve.dev/v1alpha1
kind: PolicyException
metadata: {name: debug-hostpid, namespace: staging, creationTimestamp: "2026-01-01T00:00:00Z"}
spec:
  exceptions: [{policyName: time-boxed, ruleNames: ["*"]}]
  podSecurity: [{controlName: Host Namespaces, restrictedField: spec.hostPID, values: ["true"]}]
  expiresAt: "2026-01-20T00:00:00Z"
`
	renewedException = `apiVersion: policy.podsieve.dev/v1alpha1
kind: PolicyException
metadata: {name: debug-hostpid, namespace: staging}
spec:
  exceptions: [{policyName: time-boxed, ruleNames: ["*"]}]
  podSecurity: [{controlName: Host Namespaces, restrictedField: spec.hostPID, values: ["true"]}]
  expiresAt: "2026-12-01T00:00:00Z"
`
	// clusterException is in the cluster exceptions namespace, reaching
	// staging, as only a cluster admin may write it.
	clusterException = `apiVersion: policy.podsieve.dev/v1alpha1
kind: PolicyException
metadata: {name: debug-hostpid, namespace: podsieve-system}
spec:
  exceptions: [{policyName: cluster-only, ruleNames: ["*"]}]
  match: {namespaces: [staging]}
  podSecurity: [{controlName: Host Namespaces, restrictedField: spec.hostPID, values: ["true"]}]
`
	// clusterExceptionByLabel reaches the namespaces labelled debug.
	clusterExceptionByLabel = `apiVersion: policy.podsieve.dev/v1alpha1
kind: PolicyException
metadata: {name: debug-hostpid, namespace: podsieve-system}
spec:
  exceptions: [{policyName: cluster-only, ruleNames: ["*"]}]
  match: {namespaceSelector: {matchLabels: {debug: "true"}}}
  podSecurity: [{controlName: Host Namespaces, restrictedField: spec.hostPID, values: ["true"]}]
`
	debugStaging = "apiVersion: v1\nkind: Namespace\nmetadata: {name: staging, labels: {debug: \"true\"}}\n"
)

// TestEvalTrustsOnlyClusterState: podsieve eval trusts what a change (-f)
// holds only as far as the cluster would. Each attack a developer could
// write into a change, which exited 0 before --cluster-state existed, is
// refused (1) or asks for the cluster's state (2); the same documents given
// as the cluster's state (--cluster-state) decide as the cluster would with
// them, which is what eval used to do with them in -f.
func TestEvalTrustsOnlyClusterState(t *testing.T) {
	tests := []struct {
		name     string
		policy   string
		change   []string // -f, with the pod
		state    []string // --cluster-state
		args     []string // more flags
		wantCode int
		// wantStderr are substrings of stderr, in order.
		wantStderr []string
	}{
		// (a) A Namespace in the change does not label the namespace.
		{name: "change's unlabelled Namespace escapes a policy by label", policy: byLabelPolicy, change: []string{unlabelledStaging}, wantCode: exitBadInput,
			wantStderr: []string{
				"Warning: change.yaml, document 1: Namespace staging is ignored: a change does not give a namespace its labels; give the cluster's Namespaces with --cluster-state",
				`Error: change.yaml, document 2: Pod staging/debug: whether rule "restricted-namespaces" of SecurityPolicy "by-label" (Enforce) applies depends on the labels of namespace "staging" ` +
					`(spec.rules[0].match.namespaceSelector "profile=restricted"), and the cluster state holds no Namespace "staging": ` +
					"give the cluster's Namespace with --cluster-state (kubectl get namespace staging -o yaml); a Namespace in the change does not count",
			}},
		{name: "no Namespace at all under a policy by label", policy: byLabelPolicy, wantCode: exitBadInput,
			wantStderr: []string{`depends on the labels of namespace "staging"`}},
		{name: "the cluster's labelled Namespace", policy: byLabelPolicy, state: []string{restrictedStaging}, wantCode: exitDenied},
		{name: "the cluster's labelled Namespace, the change's unlabelled one ignored", policy: byLabelPolicy, change: []string{unlabelledStaging}, state: []string{restrictedStaging}, wantCode: exitDenied,
			wantStderr: []string{"Warning: change.yaml, document 1: Namespace staging is ignored"}},
		{name: "the cluster's unlabelled Namespace", policy: byLabelPolicy, state: []string{unlabelledStaging}, wantCode: exitOK},
		{name: "change's Namespace labels itself exempt", policy: exemptByLabelPolicy, change: []string{exemptStaging}, wantCode: exitBadInput,
			wantStderr: []string{"Namespace staging is ignored", `(spec.rules[0].exclude.namespaceSelector "exempt=true")`}},
		{name: "the cluster's exempt Namespace", policy: exemptByLabelPolicy, state: []string{exemptStaging}, wantCode: exitOK},
		{name: "a policy by label that the background scan does not run", policy: strings.Replace(byLabelPolicy, "spec:\n", "spec:\n  background: false\n", 1),
			args: []string{"--background"}, wantCode: exitOK},
		{name: "a policy by label that the background scan runs", policy: byLabelPolicy, args: []string{"--background"}, wantCode: exitBadInput},

		// (b) The change's creationTimestamp does not start the window.
		{name: "change's future creationTimestamp stretches maxDuration", policy: timeBoxedPolicy, change: []string{futureException}, wantCode: exitDenied,
			wantStderr: []string{"Warning: change.yaml, document 1: PolicyException staging/debug-hostpid: metadata.creationTimestamp 2027-06-01T00:00:00Z is ignored: " +
				"the API server sets it when the exception is created; spec.expiresAt is judged as if it was created at 2026-11-22T00:00:00Z, the time of the decision"}},
		{name: "the cluster's exception with its creationTimestamp", policy: timeBoxedPolicy, state: []string{futureException}, wantCode: exitOK},
		{name: "change renews the cluster's exception past maxDuration", policy: timeBoxedPolicy, change: []string{renewedException}, state: []string{existingException}, wantCode: exitDenied},
		{name: "change renews an exception the cluster state does not hold", policy: timeBoxedPolicy, change: []string{renewedException}, wantCode: exitOK},
		// A cluster state written by hand (from git, say) has no
		// creationTimestamp: read as created now, the renewal would pass.
		{name: "change renews the cluster's exception, its creationTimestamp not given", policy: timeBoxedPolicy, change: []string{renewedException},
			state: []string{strings.Replace(existingException, `, creationTimestamp: "2026-01-01T00:00:00Z"`, "", 1)}, wantCode: exitBadInput,
			wantStderr: []string{"state.yaml, document 1: PolicyException staging/debug-hostpid in the cluster state has no metadata.creationTimestamp, which starts its window under " +
				"the maxDuration of SecurityPolicy time-boxed: give the cluster's copy as `kubectl get policyexceptions -A -o yaml` exports it"}},

		// (c) An exception in the cluster exceptions namespace is a cluster
		// admin's.
		{name: "change's exception in the cluster exceptions namespace", policy: clusterOnlyPolicy, change: []string{clusterException}, wantCode: exitDenied,
			wantStderr: []string{`Warning: change.yaml, document 1: PolicyException podsieve-system/debug-hostpid is ignored: it is in the cluster exceptions namespace "podsieve-system", ` +
				"where a cluster admin, not a change, creates exceptions; give the cluster's own exceptions with --cluster-state"}},
		{name: "the cluster's exception in the cluster exceptions namespace", policy: clusterOnlyPolicy, state: []string{clusterException}, wantCode: exitOK},
		{name: "the cluster's exception by label, the namespace unknown", policy: clusterOnlyPolicy, state: []string{clusterExceptionByLabel}, wantCode: exitBadInput,
			wantStderr: []string{`Pod staging/debug: whether PolicyException podsieve-system/debug-hostpid applies depends on the labels of namespace "staging" (its spec.match.namespaceSelector "debug=true")`}},
		{name: "the cluster's exception by label and the namespace", policy: clusterOnlyPolicy, state: []string{clusterExceptionByLabel, debugStaging}, wantCode: exitOK},
		{name: "the cluster's exception by label, the change's Namespace ignored", policy: clusterOnlyPolicy, change: []string{debugStaging}, state: []string{clusterExceptionByLabel}, wantCode: exitBadInput},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			write := func(name string, docs []string) string {
				p := filepath.Join(dir, name)
				if err := os.WriteFile(p, []byte(strings.Join(docs, "---\n")), 0o644); err != nil {
					t.Fatal(err)
				}
				return p
			}
			// Relative names, so that messages name change.yaml.
			t.Chdir(dir)
			args := []string{"eval", "--now", "2026-11-22T00:00:00Z", "-f", filepath.Base(write("policy.yaml", []string{tt.policy})),
				"-f", filepath.Base(write("change.yaml", append(tt.change, trustHostPIDPod)))}
			if len(tt.state) > 0 {
				args = append(args, "--cluster-state", filepath.Base(write("state.yaml", tt.state)))
			}
			args = append(args, tt.args...)
			var stdout, stderr bytes.Buffer
			code := run(args, nil, &stdout, &stderr)
			if code != tt.wantCode {
				t.Errorf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, tt.wantCode, stdout.String(), stderr.String())
			}
			rest := stderr.String()
			for _, want := range tt.wantStderr {
				i := strings.Index(rest, want)
				if i < 0 {
					t.Errorf("stderr lacks, or has out of order, %q:\n%s", want, stderr.String())
					break
				}
				rest = rest[i+len(want):]
			}
		})
	}
}

// TestEvalClusterStateInput: how --cluster-state is read beside -f.
func TestEvalClusterStateInput(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	policy := write("policy.yaml", timeBoxedPolicy)
	pod := write("pod.yaml", trustHostPIDPod)
	withPod := write("state-with-pod.yaml", unlabelledStaging+"---\n"+trustHostPIDPod+"---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: c, namespace: staging}\n")
	tests := []struct {
		name       string
		args       []string
		stdin      string
		wantCode   int
		wantStderr string
	}{
		{name: "stdin for both", args: []string{"-f", "-", "--cluster-state", "-"}, wantCode: exitBadInput,
			wantStderr: "Error: -f - and --cluster-state -: standard input can be read only once; write one of them to a file"},
		{name: "a missing cluster state file", args: []string{"-f", policy, "-f", pod, "--cluster-state", filepath.Join(dir, "missing.yaml")}, wantCode: exitBadInput,
			wantStderr: "--cluster-state " + filepath.Join(dir, "missing.yaml") + ": no such file or directory"},
		{name: "the cluster state from stdin", args: []string{"-f", pod, "--cluster-state", "-"}, stdin: timeBoxedPolicy + "---\n" + futureException, wantCode: exitOK},
		{name: "a change cannot replace the cluster's policy", args: []string{"-f", policy, "-f", pod, "--cluster-state", policy}, wantCode: exitBadInput,
			wantStderr: "SecurityPolicy time-boxed is also defined in " + policy + ", document 1; names must be unique"},
		{name: "workloads in the cluster state are not decided", args: []string{"-f", policy, "--cluster-state", withPod}, wantCode: exitOK,
			wantStderr: "Warning: " + withPod + ", document 2: Pod staging/debug is in --cluster-state, which says what the cluster holds, and is not decided; give the objects to decide with -f"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := run(append([]string{"eval", "--now", "2026-11-22T00:00:00Z"}, tt.args...), strings.NewReader(tt.stdin), &stdout, &stderr)
			if code != tt.wantCode {
				t.Errorf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, tt.wantCode, stdout.String(), stderr.String())
			}
			if !strings.Contains(stderr.String(), tt.wantStderr) {
				t.Errorf("stderr lacks %q:\n%s", tt.wantStderr, stderr.String())
			}
		})
	}
}

// TestExplainNamesTheTrustedDocument: explain reads the input as eval does,
// and names the document of the exception in force, not the change's
// ignored copy of it.
func TestExplainNamesTheTrustedDocument(t *testing.T) {
	t.Chdir(t.TempDir())
	for name, content := range map[string]string{
		"policy.yaml": clusterOnlyPolicy, "state.yaml": clusterException, "change.yaml": clusterException + "---\n" + trustHostPIDPod,
	} {
		if err := os.WriteFile(name, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var stdout, stderr bytes.Buffer
	code := run([]string{"explain", "--now", "2026-11-22T00:00:00Z", "-f", "policy.yaml", "-f", "change.yaml", "--cluster-state", "state.yaml"}, nil, &stdout, &stderr)
	if code != exitOK {
		t.Fatalf("exit %d:\n%s%s", code, stdout.String(), stderr.String())
	}
	if want := "covered by exception/podsieve-system/debug-hostpid: state.yaml, document 1, spec.podSecurity[0]"; !strings.Contains(stdout.String(), want) {
		t.Errorf("stdout lacks %q:\n%s", want, stdout.String())
	}
	if want := "Warning: change.yaml, document 1: PolicyException podsieve-system/debug-hostpid is ignored"; !strings.Contains(stderr.String(), want) {
		t.Errorf("stderr lacks %q:\n%s", want, stderr.String())
	}
}
