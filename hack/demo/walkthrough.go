package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// walkthrough is the demo's steps, in four acts: the policies and a mesh,
// a developer's own exceptions, from Audit to Enforce, and the API server
// enforcing while podsieve is down.
func walkthrough(root string) ([]step, error) {
	expired := time.Now().Add(-time.Hour).UTC().Format(time.RFC3339)
	inAMonth := time.Now().Add(30 * 24 * time.Hour).UTC().Format(time.RFC3339)
	sample := func(name string) string { return filepath.Join(root, "config", "samples", name) }
	// The time-boxed sample carries no date (one would rot); the baseline
	// policy requires one within 90 days, so it is applied with one, as its
	// comment says. Its spec ends the file, so the date is its last field.
	timeBoxed, err := os.ReadFile(sample("policy_v1alpha1_policyexception_expiring.yaml"))
	if err != nil {
		return nil, err
	}
	steps := meshSteps(sample, string(timeBoxed), inAMonth)
	steps = append(steps, exceptionSteps(inAMonth, expired)...)
	steps = append(steps, enforceSteps()...)
	return append(steps, outageSteps()...), nil
}

// meshSteps: a cluster admin applies the samples, a developer their
// exceptions, and a mesh-injected Deployment is admitted where an app
// container's NET_ADMIN is refused.
func meshSteps(sample func(string) string, timeBoxed, inAMonth string) []step {
	return []step{
		{title: "Two namespaces: staging (opted into the restricted profile, in Audit) and prod; the developer dev may edit both",
			manifest: namespaces},
		{title: "A cluster admin applies the sample SecurityPolicies",
			args: []string{"apply", "-f", sample("policy_v1alpha1_securitypolicy_baseline_mesh.yaml"),
				"-f", sample("policy_v1alpha1_securitypolicy_restricted.yaml")},
			settled: [][]string{ready("secpol/pod-security-standards"), ready("secpol/restricted-workloads")}},
		{title: "The developer applies the sample PolicyException for Istio's init container in staging", dev: true,
			args:    []string{"apply", "-f", sample("policy_v1alpha1_policyexception_istio_init.yaml")},
			settled: [][]string{ready("policyexception/mesh-init", "staging")}},
		{title: "And the time-boxed sample, with an expiry a month ahead: the policy's guardrails require one within 90 days (the webhook refuses it without), and a sample cannot carry a date that stays valid",
			dev: true, manifest: timeBoxed + "  expiresAt: \"" + inAMonth + "\"\n",
			settled: [][]string{{"wait", "policyexception/node-debug-hostport", "-n", "staging", "--for=condition=Ready", "--timeout=60s"}}},
		{title: "An Istio-injected Deployment: istio-init needs NET_ADMIN and NET_RAW as root. The policy's mesh exclusion admits it (baseline, Enforce); the mesh-init exception covers root in the restricted Audit rule",
			dev: true, manifest: istioDeployment},
		{title: "The ReplicaSet's pods were admitted too: kube-scheduler placed them on the fake nodes and they run",
			dev: true, args: []string{"rollout", "status", "deployment/web", "-n", "staging", "--timeout=90s"}},
		{title: "What runs in staging", args: []string{"get", "deploy,rs,pods", "-n", "staging", "-o", "wide"}},
		{title: "The same capability on an app container is refused at kubectl apply, with what to do about it: no Deployment, so no ReplicaSet and no pod",
			dev: true, manifest: netToolDeployment},
	}
}

// exceptionSteps: a developer's PolicyException waives a host port in its
// namespace only, and an expired one waives nothing.
func exceptionSteps(inAMonth, expired string) []step {
	return []step{
		{title: "The developer self-serves a PolicyException in staging for node-exporter's host port: one port, for the exporter app container of its image from its own registry, as the policy's guardrails require",
			dev: true, manifest: `apiVersion: policy.podsieve.dev/v1alpha1
kind: PolicyException
metadata: {name: exporter-port, namespace: staging}
spec:
  exceptions:
  - policyName: pod-security-standards
    ruleNames: ["*"]
  match: {names: ["node-exporter*"]}
  podSecurity:
  - controlName: Host Ports
    containerNames: ["exporter"]
    containerKinds: [App]
    images: ["quay.io/prometheus/node-exporter"]
    restrictedField: spec.containers[*].ports[*].hostPort
    values: ["9100"]
  justification: "node-exporter, ticket OPS-42"
  expiresAt: "` + inAMonth + `"
`, settled: [][]string{ready("policyexception/exporter-port", "staging")}},
		{title: "node-exporter's DaemonSet is admitted in staging, with a warning naming the exception, and runs a pod on every node",
			dev: true, manifest: exporterDaemonSet("staging", "node-exporter")},
		{title: "Its pods, one per fake node", dev: true,
			args: []string{"rollout", "status", "daemonset/node-exporter", "-n", "staging", "--timeout=90s"}},
		{title: "The same DaemonSet in prod is refused: an exception never leaves its namespace",
			dev: true, manifest: exporterDaemonSet("prod", "node-exporter")},
		{title: "An exception that has expired waives nothing", dev: true,
			manifest: `apiVersion: policy.podsieve.dev/v1alpha1
kind: PolicyException
metadata: {name: old-debug, namespace: prod}
spec:
  exceptions:
  - policyName: pod-security-standards
    ruleNames: ["*"]
  podSecurity:
  - controlName: Host Ports
    containerNames: ["exporter"]
    containerKinds: [App]
    images: ["quay.io/prometheus/node-exporter"]
    restrictedField: spec.containers[*].ports[*].hostPort
    values: ["9100"]
  justification: "a debugging session long over"
  expiresAt: "` + expired + `"
`, settled: [][]string{ready("policyexception/old-debug", "prod")}},
		{title: "So node-exporter is still refused in prod",
			dev: true, manifest: exporterDaemonSet("prod", "node-exporter-2")},
	}
}

// enforceSteps: the background scan's reports, then a policy moved from
// Audit to Enforce refuses new pods and keeps running ones.
func enforceSteps() []step {
	return []step{
		{title: "The background scan has judged what runs: a PolicyReport per workload, with every policy's results on it",
			args: []string{"get", "polr", "-n", "staging"},
			until: []poll{
				// web's Deployment passes the baseline policy, by its mesh
				// exclusion; node-exporter's DaemonSet is waived by
				// exporter-port. Both fail restricted, in Audit. Their pods
				// say what their controllers say, so they have no reports of
				// their own (a ReplicaSet a Deployment owns is judged as the
				// Deployment).
				{args: stagingReportsOf("pod-security-standards", ".result"), want: "DaemonSet/node-exporter: skip\nDeployment/web: pass"},
				{args: stagingReportsOf("restricted-workloads", ".result"), want: "DaemonSet/node-exporter: fail\nDeployment/web: fail"},
			}},
		{title: "A cluster admin moves restricted-workloads from Audit to Enforce",
			args: []string{"patch", "secpol", "restricted-workloads", "--type=merge", "-p", `{"spec":{"action":"Enforce"}}`},
			settled: [][]string{{"wait", "secpol/restricted-workloads", "--for=jsonpath={.status.observedGeneration}=2", "--timeout=60s"},
				{"wait", "secpol/restricted-workloads", "--for=condition=Ready", "--timeout=60s"}}},
		{title: "The developer scales web up: the running pods keep running, the new ones are refused",
			dev: true, args: []string{"scale", "deployment/web", "-n", "staging", "--replicas=3"}},
		{title: "The ReplicaSet's FailedCreate events carry podsieve's message (the first of them)",
			args: []string{"get", "events", "-n", "staging", "--field-selector", "reason=FailedCreate,involvedObject.kind=ReplicaSet",
				"-o", `jsonpath={.items[0].involvedObject.name}: {.items[0].message}{"\n"}`},
			before: [][]string{{"wait", "deployment/web", "-n", "staging",
				`--for=jsonpath={.status.conditions[?(@.type=="ReplicaFailure")].status}=True`, "--timeout=60s"}}},
		{title: "web stays at 2/3 ready: its running pods keep running",
			args: []string{"get", "deploy,rs,pods", "-n", "staging", "-l", "app=web"}},
		{title: "The reports name the running objects the policy would now refuse, and why",
			args: stagingReportsOf("restricted-workloads", `.result} ({.results[?(@.policy=="restricted-workloads")].properties.action}): {.results[?(@.policy=="restricted-workloads")].message`),
			until: []poll{{args: stagingReportsOf("restricted-workloads", ".properties.action"),
				want: "DaemonSet/node-exporter: Enforce\nDeployment/web: Enforce"}}},
	}
}

// outageSteps: the API server enforces the compiled policies while every
// podsieve replica is down, and the webhooks fail closed again after.
func outageSteps() []step {
	return []step{
		{title: "The API server enforces the policies itself: podsieve keeps a ValidatingAdmissionPolicy compiled from each (API-SERVER: True)",
			args: []string{"get", "secpol", "-o", "custom-columns=NAME:.metadata.name,ACTION:.spec.action,API-SERVER:.status.conditions[?(@.type==\"EnforcedByAPIServer\")].status,VAP:.status.conditions[?(@.type==\"EnforcedByAPIServer\")].message"},
			before: [][]string{
				{"wait", "secpol/pod-security-standards", `--for=jsonpath={.status.conditions[?(@.type=="EnforcedByAPIServer")].status}=True`, "--timeout=60s"},
				{"wait", "secpol/restricted-workloads", `--for=jsonpath={.status.conditions[?(@.type=="EnforcedByAPIServer")].observedGeneration}=2`, "--timeout=60s"},
			}},
		{title: "So the webhooks may fail open (failurePolicy: Ignore): a podsieve outage then blocks no write and admits no violation",
			args: []string{"patch", "validatingwebhookconfiguration", "podsieve", "--type=json", "-p", webhooksFailurePolicy("Ignore")}},
		{title: "Every podsieve replica stops", replicas: "stop"},
		{title: "With no replica running, the API server itself refuses the developer's NET_ADMIN Deployment, with podsieve's message",
			dev: true, manifest: netToolDeployment},
		{title: "... and admits what the policies admit, in every namespace",
			dev: true, args: []string{"run", "nginx", "-n", "prod", "--image=docker.io/library/nginx:1.27"}},
		{title: "podsieve returns, and the webhooks fail closed again", replicas: "start",
			args: []string{"patch", "validatingwebhookconfiguration", "podsieve", "--type=json", "-p", webhooksFailurePolicy("Fail")}},
		{title: "What everyone reads: the policies and exceptions with their status, violations and use",
			args: []string{"get", "secpol,podex", "-A", "-o", "wide"},
			before: [][]string{
				{"wait", "--for=jsonpath={.status.violations}=0", "secpol/pod-security-standards", "--timeout=60s"},
				{"wait", "--for=jsonpath={.status.matchedObjects}=4", "policyexception/exporter-port", "-n", "staging", "--timeout=60s"},
			}},
	}
}

// webhooksFailurePolicy is a JSON patch setting the failurePolicy of
// podsieve's four webhooks (config/webhook/manifests.yaml).
func webhooksFailurePolicy(policy string) string {
	var ops []string
	for i := range 4 {
		ops = append(ops, fmt.Sprintf(`{"op":"replace","path":"/webhooks/%d/failurePolicy","value":%q}`, i, policy))
	}
	return "[" + strings.Join(ops, ",") + "]"
}

const namespaces = `apiVersion: v1
kind: Namespace
metadata:
  name: staging
  labels: {security.podsieve.dev/profile: restricted}
---
apiVersion: v1
kind: Namespace
metadata: {name: prod}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: dev-edit, namespace: staging}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: edit}
subjects: [{apiGroup: rbac.authorization.k8s.io, kind: User, name: dev}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: dev-edit, namespace: prod}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: edit}
subjects: [{apiGroup: rbac.authorization.k8s.io, kind: User, name: dev}]
`

// istioDeployment is shaped as Istio's injector leaves a Deployment
// (test/e2e has the full output): istio-init runs as root with NET_ADMIN
// and NET_RAW, istio-proxy beside the app.
const istioDeployment = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: staging
  labels: {app: web}
spec:
  replicas: 2
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web, security.istio.io/tlsMode: istio}
    spec:
      initContainers:
      - name: istio-init
        image: docker.io/istio/proxyv2:1.24.0
        args: [istio-iptables, -p, "15001", -z, "15006", -u, "1337", -m, REDIRECT]
        securityContext:
          runAsUser: 0
          runAsNonRoot: false
          capabilities: {add: [NET_ADMIN, NET_RAW], drop: [ALL]}
      containers:
      - name: app
        image: docker.io/library/nginx:1.27
      - name: istio-proxy
        image: docker.io/istio/proxyv2:1.24.0
        securityContext:
          allowPrivilegeEscalation: false
          capabilities: {drop: [ALL]}
          runAsNonRoot: true
          runAsUser: 1337
`

const netToolDeployment = `apiVersion: apps/v1
kind: Deployment
metadata: {name: net-tool, namespace: staging}
spec:
  selector:
    matchLabels: {app: net-tool}
  template:
    metadata:
      labels: {app: net-tool}
    spec:
      containers:
      - name: app
        image: docker.io/library/nginx:1.27
        securityContext:
          capabilities: {add: [NET_ADMIN]}
`

func exporterDaemonSet(ns, name string) string {
	return `apiVersion: apps/v1
kind: DaemonSet
metadata: {name: ` + name + `, namespace: ` + ns + `}
spec:
  selector:
    matchLabels: {app: ` + name + `}
  template:
    metadata:
      labels: {app: ` + name + `}
    spec:
      containers:
      - name: exporter
        image: quay.io/prometheus/node-exporter:v1.8.0
        ports: [{containerPort: 9100, hostPort: 9100}]
`
}
