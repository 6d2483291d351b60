package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/podsieve/podsieve/internal/testenv"
	"github.com/podsieve/podsieve/test/utils"
)

// step is one thing a user does, with what they read.
type step struct {
	title string
	// dev runs the step as the developer "dev", an editor of staging and
	// prod (kubectl --as=dev); the cluster admin runs it otherwise.
	dev bool
	// manifest is applied with kubectl apply -f - when set; args run
	// kubectl otherwise.
	manifest string
	args     []string
	// before are kubectl commands, not shown, that must succeed before the
	// step runs: waits for what it shows (the background scan's results, a
	// ReplicaSet's refused creates).
	before [][]string
	// until are kubectl commands, not shown, run again until their output
	// is the one wanted, before the step runs (what a wait by name cannot
	// express: a report per object, found by label).
	until []poll
	// replicas, when set, stops every podsieve replica ("stop") or starts
	// them again ("start") before the step's command, if any.
	replicas string
	// settled are kubectl commands, not shown, that must succeed after it:
	// waits until the controllers have judged what it applied, so that the
	// next step's decision sees it.
	settled [][]string
}

// poll is a kubectl command and the output it must come to.
type poll struct {
	args []string
	want string
}

// await runs p until it prints p.want, for at most a minute.
func (p poll) await(ctx context.Context, k *utils.Kubectl) error {
	var got string
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); {
		out, err := k.Run(ctx, p.args...)
		if got = strings.TrimSpace(out); err == nil && got == p.want {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
	return fmt.Errorf("kubectl %s printed %q for a minute, not %q", strings.Join(p.args, " "), got, p.want)
}

// reportsOf lists the results of one policy in a namespace's reports, one
// line per object, ordered by its name.
func reportsOf(ns, policy, what string) []string {
	return []string{"get", "polr", "-n", ns, "-l", "policy.podsieve.dev/" + policy, "--sort-by=.scope.name", "-o",
		`jsonpath={range .items[*]}{.scope.kind}/{.scope.name}: {.results[?(@.policy=="` + policy + `")]` + what + `}{"\n"}{end}`}
}

// developer is the user a developer's steps impersonate.
const developer = "dev"

func run(ctx context.Context, assets, podsieve string, out io.Writer, exitAfter bool) (err error) {
	say := func(format string, args ...any) { fmt.Fprintf(out, format+"\n", args...) }
	root := testenv.RepoRoot()
	dir, err := os.MkdirTemp("", "podsieve-demo-")
	if err != nil {
		return err
	}
	defer func() {
		// Whatever failed: nothing the demo started outlives it.
		err = errors.Join(err, utils.StopAll())
		if err == nil {
			_ = os.RemoveAll(dir)
		} else {
			err = fmt.Errorf("%w\n(cluster data, kubeconfigs and logs kept in %s)", err, dir)
		}
	}()

	say("==> Starting a cluster built from Go modules: etcd, kube-apiserver, kube-controller-manager, kube-scheduler, and kwok running 3 fake nodes (hack/setup-cluster.sh built them)")
	cluster, err := utils.StartCluster(ctx, utils.ClusterOptions{Assets: assets, Dir: dir})
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, cluster.Stop()) }()
	say("==> Installing podsieve with kubectl apply -k config/default; the manager runs as a local process with its ServiceAccount's token (no container runtime here: see test/e2e/README.md)")
	ps, err := utils.Install(ctx, cluster, utils.InstallOptions{Root: root, Binary: podsieve, Replicas: 1})
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, ps.Stop()) }()

	admin := cluster.Kubectl()
	admin.Timeout = 2 * time.Minute
	dev := admin.AsUser(developer)
	steps, err := walkthrough(root)
	if err != nil {
		return err
	}
	for _, s := range steps {
		for _, w := range s.before {
			if _, err := admin.Run(ctx, w...); err != nil {
				return fmt.Errorf("before %q: %w", s.title, err)
			}
		}
		for _, p := range s.until {
			if err := p.await(ctx, admin); err != nil {
				return fmt.Errorf("before %q: %w", s.title, err)
			}
		}
		k, as := admin, ""
		if s.dev {
			k, as = dev, " --as="+developer
		}
		say("\n==> %s", s.title)
		if err := replicas(ctx, ps, s.replicas, say); err != nil {
			return fmt.Errorf("%q: %w", s.title, err)
		}
		if s.manifest == "" && len(s.args) == 0 {
			continue
		}
		var r utils.Result
		if s.manifest != "" {
			say("$ kubectl%s apply -f - <<EOF\n%sEOF", as, s.manifest)
			r, err = k.Exec(ctx, s.manifest, "apply", "-f", "-")
		} else {
			say("$ kubectl%s %s", as, strings.Join(s.args, " "))
			r, err = k.Exec(ctx, "", s.args...)
		}
		// As a terminal shows them: warnings, then the result; a refusal
		// is the step's point, not the demo's failure.
		fmt.Fprint(out, r.Stderr+r.Stdout)
		if err != nil && !errors.As(err, new(*utils.Error)) {
			return err
		}
		for _, w := range s.settled {
			if _, err := admin.Run(ctx, w...); err != nil {
				return fmt.Errorf("after %q: %w", s.title, err)
			}
		}
	}

	if exitAfter {
		return nil
	}
	say("\n==> The cluster keeps running. Try it yourself:\n    export KUBECONFIG=%s\n    alias kubectl=%s\nPress Ctrl-C to stop.",
		cluster.Kubeconfig, filepath.Join(assets, "kubectl"))
	<-ctx.Done()
	return nil
}

// replicas stops every replica of ps ("stop") or starts one again and
// waits until it is ready ("start"), as the demo's steps ask.
func replicas(ctx context.Context, ps *utils.Podsieve, what string, say func(string, ...any)) error {
	switch what {
	case "stop":
		for _, r := range append(ps.Replicas[:0:0], ps.Replicas...) {
			if _, err := ps.Terminate(r, 0, 30*time.Second); err != nil {
				return err
			}
		}
		say("(podsieve's manager processes are stopped: %d replicas run)", len(ps.Replicas))
	case "start":
		r, err := ps.AddReplica(ctx)
		if err != nil {
			return err
		}
		if err := ps.WaitReady(ctx, r, 2*time.Minute); err != nil {
			return err
		}
		say("(podsieve's manager runs again: %d replica ready)", len(ps.Replicas))
	}
	return nil
}

// ready waits until the controllers have written obj's Ready condition
// (true or not) for its current generation: the index has judged it.
func ready(obj string, ns ...string) []string {
	args := []string{"wait", obj, "--for=jsonpath={.status.conditions[0].type}=Ready", "--timeout=60s"}
	return append(args, nsArgs(ns)...)
}

func nsArgs(ns []string) []string {
	if len(ns) == 0 {
		return nil
	}
	return []string{"-n", ns[0]}
}

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
			dev: true, manifest: string(timeBoxed) + "  expiresAt: \"" + inAMonth + "\"\n",
			settled: [][]string{{"wait", "policyexception/node-debug-hostport", "-n", "staging", "--for=condition=Ready", "--timeout=60s"}}},
		{title: "An Istio-injected Deployment: istio-init needs NET_ADMIN and NET_RAW as root. The policy's mesh exclusion admits it (baseline, Enforce); the mesh-init exception covers root in the restricted Audit rule",
			dev: true, manifest: istioDeployment},
		{title: "The ReplicaSet's pods were admitted too: kube-scheduler placed them on the fake nodes and they run",
			dev: true, args: []string{"rollout", "status", "deployment/web", "-n", "staging", "--timeout=90s"}},
		{title: "What runs in staging", args: []string{"get", "deploy,rs,pods", "-n", "staging", "-o", "wide"}},
		{title: "The same capability on an app container is refused at kubectl apply, with what to do about it: no Deployment, so no ReplicaSet and no pod",
			dev: true, manifest: netToolDeployment},
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
		{title: "The background scan has judged what runs: a PolicyReport per workload, with every policy's results on it",
			args: []string{"get", "polr", "-n", "staging"},
			until: []poll{
				// web's Deployment passes the baseline policy, by its mesh
				// exclusion; node-exporter's DaemonSet is waived by
				// exporter-port. Both fail restricted, in Audit. Their pods
				// say what their controllers say, so they have no reports of
				// their own (a ReplicaSet a Deployment owns is judged as the
				// Deployment).
				{args: reportsOf("staging", "pod-security-standards", ".result"), want: "DaemonSet/node-exporter: skip\nDeployment/web: pass"},
				{args: reportsOf("staging", "restricted-workloads", ".result"), want: "DaemonSet/node-exporter: fail\nDeployment/web: fail"},
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
			args: reportsOf("staging", "restricted-workloads", `.result} ({.results[?(@.policy=="restricted-workloads")].properties.action}): {.results[?(@.policy=="restricted-workloads")].message`),
			until: []poll{{args: reportsOf("staging", "restricted-workloads", ".properties.action"),
				want: "DaemonSet/node-exporter: Enforce\nDeployment/web: Enforce"}}},
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
	}, nil
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
