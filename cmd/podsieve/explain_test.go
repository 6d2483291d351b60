package main

import (
	"bytes"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	policyv1alpha1 "github.com/podsieve/podsieve/api/v1alpha1"
	"github.com/podsieve/podsieve/internal/manifest"
	"github.com/podsieve/podsieve/internal/render"
	"github.com/podsieve/podsieve/internal/words"
)

// TestExplainGolden runs podsieve explain on realistic workloads with the
// repository's sample policies; regenerate with -update and review the diff.
func TestExplainGolden(t *testing.T) {
	const (
		ex  = "testdata/exception/"
		dir = "testdata/explain/"
	)
	tests := []struct {
		name     string
		args     []string
		stdin    string
		wantCode int
	}{
		{name: "istio-pod", args: []string{"-f", samples, "-f", ex + "istio-pod.yaml", "--cluster-state", ex + "restricted-namespace.yaml"}, wantCode: exitDenied},
		{name: "istio-pod-exceptions-that-do-not-help", args: []string{"-f", samples, "-f", ex + "istio-pod.yaml", "-f", dir + "exceptions.yaml"}, wantCode: exitDenied},
		{name: "istio-pod-control", args: []string{"-f", samples, "-f", ex + "istio-pod.yaml", "-f", dir + "exceptions.yaml", "--control", "capabilities"}, wantCode: exitDenied},
		{name: "privileged-daemonset", args: []string{"-f", samples, "-f", ex + "privileged-daemonset.yaml"}, wantCode: exitDenied},
		{name: "privileged-daemonset-control-absent", args: []string{"-f", samples, "-f", ex + "privileged-daemonset.yaml", "--control", "Seccomp"}, wantCode: exitDenied},
		{name: "hostpath-deployment", args: []string{"-f", samples, "-f", ex + "hostpath-deployment.yaml"}, wantCode: exitDenied},
		{
			// The exception exception generate wrote admits the Deployment:
			// every violation names the entry that covers it.
			name:     "hostpath-deployment-with-generated-exception",
			args:     []string{"-f", ex + "hostpath-policy.yaml", "-f", ex + "hostpath-deployment.yaml", "-f", dir + "log-shipper-exception.yaml"},
			wantCode: exitOK,
		},
		{
			// Two entries of a source cover a violation: the decision records
			// the first, where the source stopped, and explain names that one.
			name:     "first-covering-entry",
			args:     []string{"-f", dir + "first-covering-entry.yaml"},
			wantCode: exitOK,
		},
		{
			name: "whole-rule-waiver-from-stdin",
			args: []string{"-f", "-", "-n", "lab"},
			stdin: `apiVersion: policy.podsieve.dev/v1alpha1
kind: SecurityPolicy
metadata: {name: base}
spec:
  rules: [{name: baseline, podSecurity: {level: baseline}}]
  exceptions: {}
---
apiVersion: policy.podsieve.dev/v1alpha1
kind: PolicyException
metadata: {name: debug}
spec:
  exceptions: [{policyName: base, ruleNames: ["*"]}]
  match: {names: [debug]}
---
apiVersion: v1
kind: Pod
metadata: {name: debug}
spec:
  hostPID: true
  containers: [{name: shell, image: busybox:1.36, securityContext: {privileged: true}}]
`,
			wantCode: exitOK,
		},
		{name: "bad-control", args: []string{"-f", samples, "-f", ex + "istio-pod.yaml", "--control", "Capabilites"}, wantCode: exitBadInput},
		{name: "no-workload", args: []string{"-f", samples}, wantCode: exitBadInput},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := append([]string{"explain", "--now", testNow}, tt.args...)
			out := goldenRun(t, "explain", tt.name, args, tt.stdin, tt.wantCode)
			if tt.stdin == "" {
				checkEntryReferences(t, out)
			}
		})
	}
}

var entryRef = regexp.MustCompile(`(\S+\.yaml):(\d+) spec\.(?:rules\[(\d+)\]\.podSecurity\.exclude\[(\d+)\]|podSecurity\[(\d+)\])`)

// checkEntryReferences resolves every <file>:<document> path explain printed
// to the entry in that file, so that a reference never points at nothing.
func checkEntryReferences(t *testing.T, out string) {
	t.Helper()
	matches := entryRef.FindAllStringSubmatch(out, -1)
	for _, m := range matches {
		set, err := manifest.Load([]string{m[1]}, nil)
		if err != nil {
			t.Fatalf("%s: %v", m[0], err)
		}
		doc, _ := strconv.Atoi(m[2])
		var found bool
		for _, d := range append(set.Policies, set.Exceptions...) {
			if d.Index != doc {
				continue
			}
			found = true
			switch o := d.Object.(type) {
			case *policyv1alpha1.SecurityPolicy:
				ri, _ := strconv.Atoi(m[3])
				j, _ := strconv.Atoi(m[4])
				if m[3] == "" || ri >= len(o.Spec.Rules) || j >= len(o.Spec.Rules[ri].PodSecurity.Exclude) {
					t.Errorf("%s: no such entry in SecurityPolicy %s", m[0], o.Name)
				}
			case *policyv1alpha1.PolicyException:
				j, _ := strconv.Atoi(m[5])
				if m[5] == "" || j >= len(o.Spec.PodSecurity) {
					t.Errorf("%s: no such entry in PolicyException %s", m[0], o.Name)
				}
			}
		}
		if !found {
			t.Errorf("%s: document %d is not a policy or exception", m[0], doc)
		}
	}
}

// TestExplainExitMatchesEval: explain's verdict is eval's, on every input
// eval's golden tests use.
func TestExplainExitMatchesEval(t *testing.T) {
	inputs, err := filepath.Glob("testdata/eval/*.yaml")
	if err != nil || len(inputs) == 0 {
		t.Fatalf("no eval inputs: %v", err)
	}
	inputs = append(inputs, "testdata/exception/istio-pod.yaml", "testdata/exception/admitted.yaml")
	for _, in := range inputs {
		for _, now := range []string{testNow, "2026-10-30T00:00:00Z"} {
			t.Run(filepath.Base(in)+"@"+now, func(t *testing.T) {
				var evalOut, explainOut, stderr bytes.Buffer
				evalCode := run([]string{"eval", "--now", now, "-f", samples, "-f", in}, nil, &evalOut, &stderr)
				explainCode := run([]string{"explain", "--now", now, "-f", samples, "-f", in}, nil, &explainOut, &stderr)
				if evalCode != explainCode {
					t.Fatalf("eval exits %d, explain %d:\n%s\n%s", evalCode, explainCode, evalOut.String(), explainOut.String())
				}
				// Every object eval names is explained with the same verdict.
				for _, line := range strings.Split(evalOut.String(), "\n") {
					if strings.HasSuffix(line, ": REFUSED") || strings.HasSuffix(line, ": admitted") {
						if !strings.Contains(explainOut.String(), line+"\n") {
							t.Errorf("explain lacks %q", line)
						}
					}
				}
			})
		}
	}
}

// TestExplainCoveredCountsMatchEval: for each rule, explain's number of
// uncovered violations is eval's (-o json), with and without exceptions.
func TestExplainCoveredCountsMatchEval(t *testing.T) {
	args := []string{"--now", testNow, "-f", samples, "-f", "testdata/exception/istio-pod.yaml", "--cluster-state", "testdata/exception/restricted-namespace.yaml", "-f", "testdata/explain/exceptions.yaml"}
	var evalOut, explainOut, stderr bytes.Buffer
	run(append([]string{"eval", "-o", "json"}, args...), nil, &evalOut, &stderr)
	run(append([]string{"explain"}, args...), nil, &explainOut, &stderr)
	var doc render.JSONReport
	if err := yaml.Unmarshal(evalOut.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	for _, r := range doc.Results {
		for _, p := range r.Policies {
			uncovered := 0
			for _, v := range p.Violations {
				if len(v.ExemptedBy) == 0 {
					uncovered++
				}
			}
			if p.Result != "fail" {
				continue
			}
			want := "=> fail: " + strconv.Itoa(uncovered) + " of " + words.Count(len(p.Violations), "violation") + " not covered"
			if !strings.Contains(explainOut.String(), want) {
				t.Errorf("%s/%s: explain lacks %q:\n%s", p.Policy, p.Rule, want, explainOut.String())
			}
		}
	}
	if got := strings.Count(explainOut.String(), "NOT COVERED"); got == 0 {
		t.Fatal("explain shows no uncovered violation")
	}
}
