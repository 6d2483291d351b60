package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	policyv1alpha1 "github.com/podsieve/podsieve/api/v1alpha1"
	"github.com/podsieve/podsieve/internal/manifest"
)

const testNow = "2026-11-22T00:00:00Z"

// goldenRun runs a command line and compares exit status, stdout and stderr
// with testdata/<dir>/golden/<name>.txt (rewritten with -update).
func goldenRun(t *testing.T, dir, name string, args []string, stdin string, wantCode int) (stdout string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := run(args, strings.NewReader(stdin), &out, &errOut)
	if code != wantCode {
		t.Errorf("exit %d, want %d; stderr:\n%s", code, wantCode, errOut.String())
	}
	got := fmt.Sprintf("# exit %d\n# stdout\n%s# stderr\n%s", code, out.String(), errOut.String())
	compareGolden(t, filepath.Join("testdata", dir, "golden", name+".txt"), got)
	return out.String()
}

// TestExceptionGenerateGolden runs podsieve exception generate on realistic
// workloads with the repository's sample policies. Every exception it prints
// is then given to podsieve eval with the same input: a permitted one must
// admit the workload, a refused one must not.
func TestExceptionGenerateGolden(t *testing.T) {
	const dir = "testdata/exception/"
	tests := []struct {
		name     string
		args     []string
		stdin    string
		wantCode int
	}{
		// The sample policy lets exceptions waive capabilities only for
		// init containers of the meshes' registries (allowedRegistries,
		// allowedContainerKinds): the app container's NET_ADMIN is refused.
		{name: "istio-pod", args: []string{"-f", samples, "-f", dir + "istio-pod.yaml", "--justification", "Istio sidecar injection, ticket SEC-123"}, wantCode: exitDenied},
		{name: "istio-pod-without-justification", args: []string{"-f", samples, "-f", dir + "istio-pod.yaml"}, wantCode: exitDenied},
		{
			// In a restricted namespace the Audit policy reports too: left
			// alone by default, waived with --include-audit, beside what the
			// sample mesh-init exception already covers.
			name:     "istio-pod-restricted-namespace",
			args:     []string{"-f", samples, "-f", dir + "istio-pod.yaml", "--cluster-state", dir + "restricted-namespace.yaml", "--justification", "SEC-123"},
			wantCode: exitDenied,
		},
		{
			// With --include-audit the Audit policy's violations are waived
			// too, within its guardrails: the sample restricted policy lets
			// exceptions waive capabilities only for named init containers
			// of images from the meshes' registries, so both exceptions for
			// the app container's NET_ADMIN are refused, --any-tag or not.
			name:     "istio-pod-include-audit-any-tag",
			args:     []string{"-f", samples, "-f", dir + "istio-pod-hardened.yaml", "--cluster-state", dir + "restricted-namespace.yaml", "--justification", "SEC-123", "--include-audit", "--any-tag", "--expires-in", "720h"},
			wantCode: exitDenied,
		},
		{
			// What the Audit policy's guardrails do not allow (Seccomp,
			// Privilege Escalation, a missing setting under allowedValues,
			// an app container's capabilities) is marked refused, entry by
			// entry; so is the Enforce policy's exception for the app
			// container's NET_ADMIN, which eval then refuses.
			name:     "istio-pod-include-audit-refused",
			args:     []string{"-f", samples, "-f", dir + "istio-pod.yaml", "--cluster-state", dir + "restricted-namespace.yaml", "--justification", "SEC-123", "--include-audit", "--any-tag", "--expires-in", "720h"},
			wantCode: exitDenied,
		},
		{name: "istio-pod-with-expired-exception", args: []string{"-f", samples, "-f", dir + "istio-pod.yaml", "-f", "testdata/explain/exceptions.yaml", "--justification", "SEC-123"}, wantCode: exitDenied},
		{name: "privileged-daemonset", args: []string{"-f", samples, "-f", dir + "privileged-daemonset.yaml", "--justification", "node agent, OPS-7"}, wantCode: exitDenied},
		{name: "hostpath-deployment", args: []string{"-f", samples, "-f", dir + "hostpath-deployment.yaml", "--justification", "log shipping, OPS-9"}, wantCode: exitDenied},
		{
			// A policy that allows HostPath Volumes at restricted: the
			// hostPath part of Volume Types is waived as HostPath Volumes,
			// which the guardrails allow.
			name:     "hostpath-deployment-allowed",
			args:     []string{"-f", dir + "hostpath-policy.yaml", "-f", dir + "hostpath-deployment.yaml", "--name", "log-shipper-hostpath", "--expires-in", "9000h"},
			wantCode: exitOK,
		},
		{name: "admitted", args: []string{"-f", samples, "-f", dir + "admitted.yaml"}, wantCode: exitOK},
		{name: "no-workload", args: []string{"-f", samples}, wantCode: exitBadInput},
		{name: "bad-expires-in", args: []string{"-f", samples, "-f", dir + "istio-pod.yaml", "--expires-in", "-1h"}, wantCode: exitBadInput},
		{name: "justification-too-long", args: []string{"-f", samples, "-f", dir + "istio-pod.yaml", "--justification", strings.Repeat("x", 1025)}, wantCode: exitBadInput},
		{name: "name-with-two-workloads", args: []string{"-f", samples, "-f", dir + "istio-pod.yaml", "-f", dir + "admitted.yaml", "--name", "x"}, wantCode: exitBadInput},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := append([]string{"exception", "generate", "--now", testNow}, tt.args...)
			out := goldenRun(t, "exception", tt.name, args, tt.stdin, tt.wantCode)
			if tt.wantCode == exitBadInput {
				return
			}
			checkGeneratedWithEval(t, tt.args, out, tt.wantCode == exitOK)
		})
	}
}

// checkGeneratedWithEval feeds generated exceptions back to podsieve eval
// with the input that produced them.
func checkGeneratedWithEval(t *testing.T, args []string, generated string, wantAdmitted bool) {
	t.Helper()
	var files []string
	for i := 0; i < len(args)-1; i++ {
		if args[i] == "-f" || args[i] == "--cluster-state" {
			files = append(files, args[i], args[i+1])
		}
	}
	tmp := filepath.Join(t.TempDir(), "generated.yaml")
	if err := os.WriteFile(tmp, []byte(generated), 0o644); err != nil {
		t.Fatal(err)
	}
	set, err := manifest.Load([]string{tmp}, nil)
	if err != nil {
		t.Fatalf("the generated YAML does not load: %v\n%s", err, generated)
	}
	// Exceptions in the cluster exceptions namespace are a cluster admin's
	// to create: eval honours them as the cluster's state only.
	as := "-f"
	for _, d := range set.Exceptions {
		pe := d.Object.(*policyv1alpha1.PolicyException)
		if pe.APIVersion != "policy.podsieve.dev/v1alpha1" || pe.Kind != "PolicyException" || pe.Namespace == "" {
			t.Errorf("%s: apiVersion %q kind %q namespace %q", d.Where(), pe.APIVersion, pe.Kind, pe.Namespace)
		}
		if pe.Namespace == "podsieve-system" {
			as = "--cluster-state"
		}
	}
	var stdout, stderr bytes.Buffer
	code := run(append([]string{"eval", "--now", testNow, as, tmp}, files...), nil, &stdout, &stderr)
	if wantAdmitted && code != exitOK {
		t.Errorf("eval with the generated exceptions: exit %d, want 0:\n%s%s", code, stdout.String(), stderr.String())
	}
	if !wantAdmitted && code != exitDenied {
		t.Errorf("eval with exceptions the guardrails refuse: exit %d, want 1:\n%s%s", code, stdout.String(), stderr.String())
	}
}

// TestExceptionGenerateGuardrails: each guardrail shapes the exception or
// refuses it with exit 1 and a comment, and eval agrees with the verdict.
func TestExceptionGenerateGuardrails(t *testing.T) {
	const workload = `apiVersion: v1
kind: Pod
metadata: {name: tool, namespace: team-a}
spec:
  containers:
  - name: tool
    image: registry.example/tools/net:2
    securityContext: {capabilities: {add: [NET_ADMIN]}}
`
	policy := func(guardrails string) string {
		return "apiVersion: policy.podsieve.dev/v1alpha1\nkind: SecurityPolicy\nmetadata: {name: base}\nspec:\n  rules: [{name: baseline, podSecurity: {level: baseline}}]\n" +
			guardrails + "---\n" + workload
	}
	tests := []struct {
		name       string
		guardrails string
		args       []string
		wantCode   int
		want       []string // substrings of stdout
		notWant    []string
	}{
		// A policy without spec.exceptions honours none (secure by default).
		{name: "not-opted-in", args: []string{"--justification", "x"}, wantCode: exitDenied,
			want: []string{`#   policy "base" honours no PolicyExceptions: it has no spec.exceptions`, "ask a cluster admin"}},
		{name: "opted-in-without-limits", guardrails: "  exceptions: {}\n", wantCode: exitOK, notWant: []string{"expiresAt", "justification", "REFUSED"}},
		{name: "expires-in-without-limit", guardrails: "  exceptions: {}\n", args: []string{"--expires-in", "48h"}, wantCode: exitOK, want: []string{`expiresAt: "2026-11-24T00:00:00Z"`}},
		{name: "max-duration-fills-expiry", guardrails: "  exceptions: {maxDuration: 720h}\n", wantCode: exitOK, want: []string{`expiresAt: "2026-12-22T00:00:00Z"`}},
		{name: "max-duration-shortens-expiry", guardrails: "  exceptions: {maxDuration: 24h}\n", args: []string{"--expires-in", "720h"}, wantCode: exitOK,
			want: []string{`expiresAt: "2026-11-23T00:00:00Z"`, "# Note: --expires-in 720h is longer than policy \"base\" permits"}},
		{name: "max-duration-keeps-shorter-expiry", guardrails: "  exceptions: {maxDuration: 720h}\n", args: []string{"--expires-in", "1h"}, wantCode: exitOK, want: []string{`expiresAt: "2026-11-22T01:00:00Z"`}},
		{name: "justification-required-and-given", guardrails: "  exceptions: {requireJustification: true}\n", args: []string{"--justification", "needs raw sockets: NET-1"}, wantCode: exitOK,
			want: []string{`justification: "needs raw sockets: NET-1"`}},
		{name: "justification-required-and-missing", guardrails: "  exceptions: {requireJustification: true}\n", wantCode: exitDenied,
			want: []string{"#   policy \"base\" requires a justification", "# Rerun with --justification TEXT"}},
		{name: "control-allowed", guardrails: "  exceptions: {allowedControls: [Capabilities]}\n", wantCode: exitOK, notWant: []string{"REFUSED"}},
		{name: "control-not-allowed", guardrails: "  exceptions: {allowedControls: [Host Ports], requireJustification: true}\n", wantCode: exitDenied,
			want: []string{"  # REFUSED: policy \"base\" allows exceptions only for controls \"Host Ports\"; remove control \"Capabilities\"", "# Rerun with --justification TEXT", "ask a cluster admin"}},
		{name: "no-exceptions", guardrails: "  exceptions: {allow: false}\n", args: []string{"--justification", "x"}, wantCode: exitDenied,
			want: []string{"#   policy \"base\" allows no exceptions"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := policy(tt.guardrails)
			generated := generateChecked(t, in, tt.args, tt.wantCode, tt.want, tt.notWant)
			// eval agrees: admitted exactly when the exception is permitted.
			var evalOut, stderr bytes.Buffer
			evalCode := run([]string{"eval", "--now", testNow, "-f", "-"}, strings.NewReader(in+"---\n"+generated), &evalOut, &stderr)
			if want := map[int]int{exitOK: exitOK, exitDenied: exitDenied}[tt.wantCode]; evalCode != want {
				t.Errorf("eval with the generated exception: exit %d, want %d:\n%s", evalCode, want, evalOut.String())
			}
		})
	}
}

// TestExceptionGenerateControlGuardrails: generate writes what a policy's
// per-control guardrails (spec.exceptions.controls) permit: images fully
// qualified, so that their registry is pinned, and the workload's containers
// and values; a value outside allowedValues, a missing setting (which has no
// value) under allowedValues, or a control the policy does not allow is marked
// refused with the guardrail's message. eval agrees with every verdict.
func TestExceptionGenerateControlGuardrails(t *testing.T) {
	const capture = `apiVersion: v1
kind: Pod
metadata: {name: capture, namespace: team-a}
spec:
  containers:
  - name: capture
    image: nicolaka/netshoot:v0.13
    securityContext: {capabilities: {add: [NET_ADMIN, NET_RAW]}}
`
	// Hardened for restricted but for its capabilities: it adds NET_ADMIN
	// and drops nothing.
	const restrictedCapture = `apiVersion: v1
kind: Pod
metadata: {name: capture, namespace: team-a}
spec:
  securityContext: {runAsNonRoot: true, seccompProfile: {type: RuntimeDefault}}
  containers:
  - name: capture
    image: nicolaka/netshoot:v0.13
    securityContext: {allowPrivilegeEscalation: false, capabilities: {add: [NET_ADMIN]}}
`
	const logs = `apiVersion: v1
kind: Pod
metadata: {name: logs, namespace: team-a}
spec:
  securityContext: {runAsNonRoot: true, seccompProfile: {type: RuntimeDefault}}
  containers:
  - name: logs
    image: registry.example/logs:1
    securityContext: {allowPrivilegeEscalation: false, capabilities: {drop: [ALL]}}
  volumes:
  - {name: varlog, hostPath: {path: /var/log}}
`
	policy := func(level, guardrails string) string {
		return "apiVersion: policy.podsieve.dev/v1alpha1\nkind: SecurityPolicy\nmetadata: {name: base}\nspec:\n  rules: [{name: r, podSecurity: {level: " + level + "}}]\n" +
			"  exceptions:\n" + guardrails + "---\n"
	}
	const pinned = `    allowedControls: [Capabilities]
    controls:
    - controlName: Capabilities
      allowedValues: [NET_ADMIN, NET_RAW]
      requireContainerNames: true
      requirePinnedRegistry: true
`
	tests := []struct {
		name     string
		in       string
		args     []string
		wantCode int
		want     []string // substrings of stdout
		notWant  []string
	}{
		{
			name: "pinned-registry-and-allowed-values", in: policy("baseline", pinned) + capture, wantCode: exitOK,
			want: []string{
				`images: ["docker.io/nicolaka/netshoot:v0.13"]`, `containerNames: ["capture"]`,
				"restrictedField: spec.containers[*].securityContext.capabilities.add", `values: ["NET_ADMIN", "NET_RAW"]`,
			},
			notWant: []string{"REFUSED", `"nicolaka/netshoot`},
		},
		{
			name: "pinned-registry-any-tag", in: policy("baseline", pinned) + capture, args: []string{"--any-tag"}, wantCode: exitOK,
			want:    []string{`images: ["docker.io/nicolaka/netshoot:*"]`},
			notWant: []string{"REFUSED"},
		},
		{
			name: "allowed-values-glob", wantCode: exitOK,
			in:      policy("baseline", "    controls: [{controlName: Capabilities, allowedValues: [\"NET_*\"]}]\n") + capture,
			want:    []string{`values: ["NET_ADMIN", "NET_RAW"]`},
			notWant: []string{"REFUSED"},
		},
		{
			name: "value-outside-allowed-values", wantCode: exitDenied,
			in: policy("baseline", strings.Replace(pinned, "[NET_ADMIN, NET_RAW]", "[NET_RAW]", 1)) + capture,
			want: []string{
				`# REFUSED: policy "base"'s guardrails will not let this exception apply:`,
				`  # REFUSED: spec.podSecurity[0].values[0]: "NET_ADMIN" is not within the values policy "base" allows for control "Capabilities": "NET_RAW"`,
				"ask a cluster admin",
			},
		},
		{
			// A missing setting has no value: an entry for it would waive
			// any value, which allowedValues forbids.
			name: "missing-setting-under-allowed-values", wantCode: exitDenied,
			in: policy("restricted", "    controls: [{controlName: Capabilities, allowedValues: [NET_ADMIN]}]\n") + restrictedCapture,
			want: []string{
				"restrictedField: spec.containers[*].securityContext.capabilities.add",
				`policy "base" allows exceptions for control "Capabilities" only for the values "NET_ADMIN" (spec.exceptions.controls); this entry has no values`,
			},
		},
		{
			// A hostPath volume is waived only by a HostPath Volumes entry,
			// also at restricted, where Volume Types reports it: a policy
			// that allows Volume Types alone does not let it through.
			name: "hostpath-needs-hostpath-volumes", wantCode: exitDenied,
			in: policy("restricted", "    allowedControls: [Volume Types]\n") + logs,
			want: []string{
				"- controlName: HostPath Volumes",
				`# REFUSED: policy "base" allows exceptions only for controls "Volume Types"; remove control "HostPath Volumes" from spec.podSecurity`,
			},
			notWant: []string{"- controlName: Volume Types"},
		},
		{
			name: "hostpath-allowed", wantCode: exitOK,
			in:      policy("restricted", "    allowedControls: [HostPath Volumes]\n    controls: [{controlName: HostPath Volumes, allowedValues: [\"/var/log\"]}]\n") + logs,
			want:    []string{"- controlName: HostPath Volumes", `values: ["/var/log"]`},
			notWant: []string{"REFUSED", "- controlName: Volume Types"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			generated := generateChecked(t, tt.in, append([]string{"--justification", "packet capture, NET-9"}, tt.args...), tt.wantCode, tt.want, tt.notWant)
			// eval agrees: admitted exactly when the exception is permitted.
			var evalOut, evalErr bytes.Buffer
			evalCode := run([]string{"eval", "--now", testNow, "-f", "-"}, strings.NewReader(tt.in+"---\n"+generated), &evalOut, &evalErr)
			if evalCode != tt.wantCode {
				t.Errorf("eval with the generated exception: exit %d, want %d:\n%s%s", evalCode, tt.wantCode, evalOut.String(), evalErr.String())
			}
			if tt.wantCode == exitDenied && !strings.Contains(evalOut.String(), "NotPermitted") {
				t.Errorf("eval does not say the generated exception is NotPermitted:\n%s", evalOut.String())
			}
		})
	}
}

// TestExceptionGenerateNarrow: with an exception already covering part of
// what refuses a workload, only the rest is generated; and the generated
// exception does not reach a workload of another name, namespace or image.
func TestExceptionGenerateNarrow(t *testing.T) {
	const input = `apiVersion: policy.podsieve.dev/v1alpha1
kind: SecurityPolicy
metadata: {name: base}
spec:
  rules: [{name: baseline, podSecurity: {level: baseline}}]
  exceptions: {}
---
apiVersion: policy.podsieve.dev/v1alpha1
kind: PolicyException
metadata: {name: ports, namespace: team-a}
spec:
  exceptions: [{policyName: base, ruleNames: ["*"]}]
  podSecurity: [{controlName: Host Ports, restrictedField: "spec.containers[*].ports[*].hostPort", values: ["9100"]}]
---
`
	const deploy = `apiVersion: apps/v1
kind: Deployment
metadata: {name: NAME, namespace: NS}
spec:
  selector: {matchLabels: {app: exporter}}
  template:
    metadata: {labels: {app: exporter}}
    spec:
      containers:
      - name: e
        image: IMAGE
        ports: [{containerPort: 9100, hostPort: 9100}]
        securityContext: {capabilities: {add: [SYS_PTRACE]}}
`
	workload := func(name, ns, image string) string {
		return strings.NewReplacer("NAME", name, "NS", ns, "IMAGE", image).Replace(deploy)
	}
	var stdout, stderr bytes.Buffer
	if code := run([]string{"exception", "generate", "--now", testNow, "-f", "-"}, strings.NewReader(input+workload("exporter", "team-a", "quay.io/prom/exporter:1")), &stdout, &stderr); code != exitOK {
		t.Fatalf("exit %d:\n%s%s", code, stdout.String(), stderr.String())
	}
	generated := stdout.String()
	if strings.Contains(generated, "Host Ports") || !strings.Contains(generated, "SYS_PTRACE") {
		t.Fatalf("want only the Capabilities violation waived, the host port being covered already:\n%s", generated)
	}
	tests := []struct {
		name, workload string
		wantCode       int
	}{
		{"same-workload", workload("exporter", "team-a", "quay.io/prom/exporter:1"), exitOK},
		{"other-name", workload("other", "team-a", "quay.io/prom/exporter:1"), exitDenied},
		{"other-namespace", workload("exporter", "team-b", "quay.io/prom/exporter:1"), exitDenied},
		{"other-tag", workload("exporter", "team-a", "quay.io/prom/exporter:2"), exitDenied},
		{"other-repository", workload("exporter", "team-a", "quay.io/evil/exporter:1"), exitDenied},
		// A sibling Deployment whose name starts with the workload's and
		// whose pods carry the same labels.
		{"sibling-name-x", workload("exporter-x", "team-a", "quay.io/prom/exporter:1"), exitDenied},
		{"its-replicaset", strings.Replace(workload("exporter-5d4f8c7b9", "team-a", "quay.io/prom/exporter:1"), "kind: Deployment", "kind: ReplicaSet", 1), exitOK},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			code := run([]string{"eval", "--now", testNow, "-f", "-"}, strings.NewReader(input+tt.workload+"---\n"+generated), &out, &stderr)
			if code != tt.wantCode {
				t.Errorf("eval: exit %d, want %d:\n%s", code, tt.wantCode, out.String())
			}
		})
	}

	// An untagged image is pinned to the tag it runs (latest), not left to
	// match every tag.
	stdout.Reset()
	if code := run([]string{"exception", "generate", "--now", testNow, "-f", "-"}, strings.NewReader(input+workload("web", "team-a", "nginx")), &stdout, &stderr); code != exitOK {
		t.Fatalf("exit %d:\n%s%s", code, stdout.String(), stderr.String())
	}
	untagged := stdout.String()
	for _, tt := range []struct {
		name, image string
		wantCode    int
	}{
		{"untagged-as-generated", "nginx", exitOK},
		{"untagged-latest-spelled-out", "docker.io/library/nginx:latest", exitOK},
		{"untagged-other-tag", "nginx:1.0-debug", exitDenied},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			code := run([]string{"eval", "--now", testNow, "-f", "-"}, strings.NewReader(input+workload("web", "team-a", tt.image)+"---\n"+untagged), &out, &stderr)
			if code != tt.wantCode {
				t.Errorf("eval: exit %d, want %d:\n%s\nexception:\n%s", code, tt.wantCode, out.String(), untagged)
			}
		})
	}
}

// TestExceptionGenerateUniqueNames: a Deployment and a Pod of one name get
// exceptions of different names, and eval admits both with them.
func TestExceptionGenerateUniqueNames(t *testing.T) {
	const in = `apiVersion: policy.podsieve.dev/v1alpha1
kind: SecurityPolicy
metadata: {name: base}
spec:
  rules: [{name: baseline, podSecurity: {level: baseline}}]
  exceptions: {}
---
apiVersion: v1
kind: Pod
metadata: {name: web}
spec: {hostPID: true, containers: [{name: a, image: x}]}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec: {hostIPC: true, containers: [{name: a, image: x}]}
`
	var stdout, stderr bytes.Buffer
	if code := run([]string{"exception", "generate", "--now", testNow, "-f", "-"}, strings.NewReader(in), &stdout, &stderr); code != exitOK {
		t.Fatalf("exit %d:\n%s%s", code, stdout.String(), stderr.String())
	}
	for _, want := range []string{"name: web-base\n", "name: web-base-deployment\n"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("stdout lacks %q:\n%s", want, stdout.String())
		}
	}
	var out bytes.Buffer
	if code := run([]string{"eval", "--now", testNow, "-f", "-"}, strings.NewReader(in+"---\n"+stdout.String()), &out, &stderr); code != exitOK {
		t.Errorf("eval: exit %d:\n%s%s", code, out.String(), stderr.String())
	}
}

// generateChecked runs exception generate on in (from stdin) with args,
// checks its exit code and what its output must and must not hold, and
// returns the output.
func generateChecked(t *testing.T, in string, args []string, wantCode int, want, notWant []string) string {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := run(append([]string{"exception", "generate", "--now", testNow, "-f", "-"}, args...), strings.NewReader(in), &stdout, &stderr)
	if code != wantCode {
		t.Fatalf("exit %d, want %d:\n%s%s", code, wantCode, stdout.String(), stderr.String())
	}
	for _, w := range want {
		if !strings.Contains(stdout.String(), w) {
			t.Errorf("stdout lacks %q:\n%s", w, stdout.String())
		}
	}
	for _, w := range notWant {
		if strings.Contains(stdout.String(), w) {
			t.Errorf("stdout has %q:\n%s", w, stdout.String())
		}
	}
	return stdout.String()
}
