package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/podsieve/podsieve/internal/testenv"
)

// step is one thing the user does, with what they read.
type step struct {
	title string
	// manifest is applied with kubectl apply -f - when set; args run
	// kubectl otherwise.
	manifest string
	args     []string
	// settled names objects (kind/name -n namespace) whose Ready condition
	// the controllers must have written before the next step, so that the
	// webhook decides with them in its index.
	settled [][]string
	// before are kubectl wait commands (arguments after "wait") that must
	// succeed before the step runs: the background scan's results.
	before [][]string
}

func run(ctx context.Context, podsieve string, out io.Writer, exitAfter bool) error {
	say := func(format string, args ...any) { fmt.Fprintf(out, format+"\n", args...) }
	say("==> Starting a local control plane (etcd and kube-apiserver built by hack/setup-envtest.sh)")
	env, _, err := testenv.StartWithWebhooks()
	if err != nil {
		return err
	}
	defer func() { _ = env.Stop() }()

	dir, err := os.MkdirTemp("", "podsieve-demo-")
	if err != nil {
		return err
	}
	kubeconfig, kubectlPath, err := adminKubeconfig(env, dir)
	if err != nil {
		return err
	}

	probe, err := freeAddress()
	if err != nil {
		return err
	}
	logPath := filepath.Join(dir, "manager.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return err
	}
	defer func() { _ = logFile.Close() }()
	wo := env.WebhookInstallOptions
	manager := exec.CommandContext(ctx, podsieve, "manager", "--kubeconfig", kubeconfig,
		"--metrics-bind-address", "0", "--health-probe-bind-address", probe,
		"--webhook-port", strconv.Itoa(wo.LocalServingPort), "--webhook-cert-dir", wo.LocalServingCertDir,
		// envtest generated the certificate and installed its CA.
		"--cert-rotation=false")
	manager.Stdout, manager.Stderr = logFile, logFile
	say("==> Starting the podsieve manager (logs: %s)", logPath)
	if err := manager.Start(); err != nil {
		return fmt.Errorf("start %s: %w", podsieve, err)
	}
	defer func() {
		_ = manager.Process.Signal(syscall.SIGTERM)
		_ = manager.Wait()
	}()
	if err := waitReady(ctx, "http://"+probe+"/readyz"); err != nil {
		return fmt.Errorf("the manager did not become ready (see %s): %w", logPath, err)
	}

	kubectl := func(stdin string, args ...string) string {
		cmd := exec.CommandContext(ctx, kubectlPath, append([]string{"--kubeconfig", kubeconfig}, args...)...)
		cmd.Stdin = strings.NewReader(stdin)
		b, _ := cmd.CombinedOutput()
		return string(b)
	}
	for _, s := range walkthrough(testenv.RepoRoot()) {
		for _, w := range s.before {
			args := append([]string{"wait", "--timeout=60s"}, w...)
			if out := kubectl("", args...); !strings.Contains(out, "condition met") && !strings.Contains(out, "created") {
				return fmt.Errorf("waiting for %s: %s", strings.Join(w, " "), out)
			}
		}
		say("\n==> %s", s.title)
		if s.manifest != "" {
			say("$ kubectl apply -f - <<EOF\n%sEOF", s.manifest)
			fmt.Fprint(out, kubectl(s.manifest, "apply", "-f", "-"))
		} else {
			say("$ kubectl %s", strings.Join(s.args, " "))
			fmt.Fprint(out, kubectl("", s.args...))
		}
		for _, obj := range s.settled {
			args := append([]string{"wait", "--for=jsonpath={.status.conditions[0].type}=Ready", "--timeout=60s"}, obj...)
			if out := kubectl("", args...); !strings.Contains(out, "condition met") {
				return fmt.Errorf("waiting for %s: %s", strings.Join(obj, " "), out)
			}
		}
	}

	if exitAfter {
		return nil
	}
	say("\n==> The control plane keeps running. Try it yourself:\n    export KUBECONFIG=%s\n    alias kubectl=%s\nPress Ctrl-C to stop.", kubeconfig, kubectlPath)
	<-ctx.Done()
	return nil
}

func walkthrough(root string) []step {
	expired := time.Now().Add(-time.Hour).UTC().Format(time.RFC3339)
	inAMonth := time.Now().Add(30 * 24 * time.Hour).UTC().Format(time.RFC3339)
	return []step{
		{title: "Two namespaces: staging (opted into the restricted profile, in Audit) and prod",
			manifest: "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: staging\n  labels: {security.podsieve.dev/profile: restricted}\n---\napiVersion: v1\nkind: Namespace\nmetadata:\n  name: prod\n"},
		{title: "A cluster admin applies the sample SecurityPolicies",
			args: []string{"apply", "-f", filepath.Join(root, "config", "samples", "policy_v1alpha1_securitypolicy_baseline_mesh.yaml"),
				"-f", filepath.Join(root, "config", "samples", "policy_v1alpha1_securitypolicy_restricted.yaml")},
			settled: [][]string{{"secpol/pod-security-standards"}, {"secpol/restricted-workloads"}}},
		{title: "A developer applies the sample PolicyExceptions in staging",
			args: []string{"apply", "-f", filepath.Join(root, "config", "samples", "policy_v1alpha1_policyexception_istio_init.yaml"),
				"-f", filepath.Join(root, "config", "samples", "policy_v1alpha1_policyexception_expiring.yaml")},
			settled: [][]string{{"polex/mesh-init", "-n", "staging"}, {"polex/node-debug-hostport", "-n", "staging"}}},
		{title: "An Istio-injected pod: istio-init needs NET_ADMIN and NET_RAW as root. The policy's exclusion admits it (baseline, Enforce); the mesh-init exception covers root in the restricted Audit rule",
			manifest: `apiVersion: v1
kind: Pod
metadata: {name: web-istio, namespace: staging}
spec:
  initContainers:
  - name: istio-init
    image: docker.io/istio/proxyv2:1.24.0
    securityContext:
      runAsUser: 0
      runAsNonRoot: false
      capabilities: {add: [NET_ADMIN, NET_RAW]}
  containers:
  - name: app
    image: nginx:1.25
`},
		{title: "The same capability on the app container is refused, with what to do about it",
			manifest: `apiVersion: v1
kind: Pod
metadata: {name: net-tool, namespace: staging}
spec:
  containers:
  - name: app
    image: nginx:1.25
    securityContext:
      capabilities: {add: [NET_ADMIN]}
`},
		{title: "A developer self-serves a PolicyException in staging for node-exporter's host port: one port, for the exporter container of its image from its own registry, as the policy's guardrails require",
			manifest: `apiVersion: policy.podsieve.dev/v1alpha1
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
    images: ["quay.io/prometheus/node-exporter"]
    restrictedField: spec.containers[*].ports[*].hostPort
    values: ["9100"]
  justification: "node-exporter, ticket OPS-42"
  expiresAt: "` + inAMonth + `"
`, settled: [][]string{{"polex/exporter-port", "-n", "staging"}}},
		{title: "node-exporter is admitted in staging, with a warning naming the exception",
			manifest: exporterPod("staging")},
		{title: "The same pod in prod is refused: an exception never leaves its namespace",
			manifest: exporterPod("prod")},
		{title: "An exception that has expired waives nothing",
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
    images: ["quay.io/prometheus/node-exporter"]
    restrictedField: spec.containers[*].ports[*].hostPort
    values: ["9100"]
  justification: "a debugging session long over"
  expiresAt: "` + expired + `"
`, settled: [][]string{{"polex/old-debug", "-n", "prod"}}},
		{title: "So node-exporter is still refused in prod",
			manifest: strings.Replace(exporterPod("prod"), "name: node-exporter,", "name: node-exporter-2,", 1)},
		{title: "The background scan has judged what already runs: a PolicyReport per namespace and policy",
			args: []string{"get", "polr", "-A"},
			before: [][]string{
				{"--for=create", "polr/podsieve-pod-security-standards", "-n", "staging"},
				{"--for=jsonpath={.summary.skip}=1", "polr/podsieve-pod-security-standards", "-n", "staging"},
				{"--for=create", "polr/podsieve-restricted-workloads", "-n", "staging"},
				{"--for=jsonpath={.summary.fail}=2", "polr/podsieve-restricted-workloads", "-n", "staging"},
			}},
		{title: "A cluster admin moves restricted-workloads from Audit to Enforce",
			args: []string{"patch", "secpol", "restricted-workloads", "--type=merge", "-p", `{"spec":{"action":"Enforce"}}`}},
		{title: "Its report names the running pods it would now refuse, and why",
			args: []string{"get", "polr", "podsieve-restricted-workloads", "-n", "staging", "-o",
				`jsonpath={range .results[*]}{.resources[0].kind}/{.resources[0].name}: {.result} ({.properties.action}): {.message}{"\n\n"}{end}`},
			before: [][]string{{"--for=jsonpath={.results[0].properties.action}=Enforce", "polr/podsieve-restricted-workloads", "-n", "staging"}}},
		{title: "What everyone reads: the policies and exceptions with their status, violations and use",
			args: []string{"get", "secpol,polex", "-A", "-o", "wide"},
			before: [][]string{
				{"--for=jsonpath={.status.violations}=0", "secpol/pod-security-standards"},
				{"--for=jsonpath={.status.matchedObjects}=1", "polex/exporter-port", "-n", "staging"},
			}},
	}
}

func exporterPod(ns string) string {
	return `apiVersion: v1
kind: Pod
metadata: {name: node-exporter, namespace: ` + ns + `}
spec:
  containers:
  - name: exporter
    image: quay.io/prometheus/node-exporter:v1.8.0
    ports: [{containerPort: 9100, hostPort: 9100}]
`
}

// adminKubeconfig writes a cluster-admin kubeconfig and returns its path and
// the kubectl that setup-envtest built.
func adminKubeconfig(env *envtest.Environment, dir string) (string, string, error) {
	user, err := env.ControlPlane.AddUser(envtest.User{Name: "demo-admin", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return "", "", err
	}
	b, err := user.KubeConfig()
	if err != nil {
		return "", "", err
	}
	path := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		return "", "", err
	}
	return path, filepath.Join(env.BinaryAssetsDirectory, "kubectl"), nil
}

func freeAddress() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer func() { _ = l.Close() }()
	return l.Addr().String(), nil
}

func waitReady(ctx context.Context, url string) error {
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		if resp, err := http.Get(url); err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	return fmt.Errorf("%s did not answer 200 within a minute", url)
}
