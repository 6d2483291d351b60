// Package perf holds the benchmarks that need a real API server: what a pod
// create costs through kube-apiserver with each way of enforcing Pod
// Security, measured in one run against one control plane so that the
// modes are compared as ratios (docs/performance.md).
package perf

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/podsieve/podsieve/internal/admissionpolicy"
)

// The modes share one API server. Each has a namespace of its own, and
// these labels on it decide which enforcement selects it: the compiled
// policy's bindings and the webhook configuration are narrowed to the
// namespaces that carry theirs, as a cluster admin could narrow them.
const (
	vapLabel     = "bench.podsieve.dev/vap"
	webhookLabel = "bench.podsieve.dev/webhook"
	floorLabel   = "bench.podsieve.dev/floor"
	psaLabel     = "pod-security.kubernetes.io/enforce"
)

// samplePolicy is the seed case of config/samples: baseline everywhere but
// the control plane's namespaces, with the meshes' init containers
// excluded, Enforce, honouring exceptions (so the API server reads each
// namespace's PodSecurityParams).
const samplePolicy = "config/samples/policy_v1alpha1_securitypolicy_baseline_mesh.yaml"

// systemNamespaces are never enforced, as the manager's defaults say.
var systemNamespaces = []string{"kube-system", "podsieve-system"}

// mode is one way of enforcing, and how its refusal of a privileged pod
// reads.
type mode struct {
	name    string
	labels  map[string]string
	webhook bool   // the webhook reviews the mode's pods
	refusal string // in the API server's refusal; "" when the mode admits
}

func (m mode) namespace() string { return "podcreate-" + m.name }

// vapRefusal is the policy's own refusal, not a binding's configuration
// error (such as its parameters not loaded yet), which also names it.
var vapRefusal = fmt.Sprintf("ValidatingAdmissionPolicy '%[1]s' with binding '%[1]s' denied request: Pod ",
	admissionpolicy.PolicyName("pod-security-standards"))

var modes = []mode{
	{name: "none"},
	{name: "vap", labels: map[string]string{vapLabel: "true"}, refusal: vapRefusal},
	{name: "webhook", labels: map[string]string{webhookLabel: "true"}, webhook: true,
		refusal: `admission webhook "pods.podsieve.dev" denied the request`},
	// The API server runs its own policies before any webhook: a pod both
	// refuse is refused by the policy, and the webhook never sees it. That
	// the webhook is on the path too is checked on the admitted probe.
	{name: "both", labels: map[string]string{vapLabel: "true", webhookLabel: "true"}, webhook: true, refusal: vapRefusal},
	{name: "psa", labels: map[string]string{psaLabel: "baseline"},
		refusal: `violates PodSecurity "baseline:latest"`},
	// The floor of any in-process policy: the smallest ValidatingAdmissionPolicy
	// that checks one control (Privileged Containers, containers only), with
	// one binding, no parameters and no match conditions. What it costs is
	// the API server's own price for running a policy on a pod create, the
	// part of vap's ratio no compiler can remove.
	{name: "vap-floor", labels: map[string]string{floorLabel: "true"},
		refusal: fmt.Sprintf("ValidatingAdmissionPolicy '%[1]s' with binding '%[1]s' denied request", floorPolicy)},
}

// floorPolicy names the floor mode's policy and binding.
const floorPolicy = "podsieve-bench-floor"

// floorPolicyObjects are the floor mode's policy and its one binding,
// narrowed to the namespaces labelled floorLabel.
func floorPolicyObjects() (*admissionregistrationv1.ValidatingAdmissionPolicy, *admissionregistrationv1.ValidatingAdmissionPolicyBinding) {
	vap := &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: floorPolicy},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptr.To(admissionregistrationv1.Fail),
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionregistrationv1.RuleWithOperations{
					Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
					Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"}},
				},
			}}},
			Validations: []admissionregistrationv1.Validation{{
				Expression: "!object.spec.containers.exists(c, has(c.securityContext) && has(c.securityContext.privileged) && c.securityContext.privileged)",
				Message:    "privileged containers are not allowed",
			}},
		},
	}
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: floorPolicy},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        floorPolicy,
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
			MatchResources: &admissionregistrationv1.MatchResources{NamespaceSelector: &metav1.LabelSelector{
				MatchLabels: map[string]string{floorLabel: "true"},
			}},
		},
	}
	return vap, binding
}

// compliantPod passes every Pod Security level.
func compliantPod(name string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": "web"}}, Spec: corev1.PodSpec{
		SecurityContext: &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true), SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
		Containers: []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10", SecurityContext: &corev1.SecurityContext{
			AllowPrivilegeEscalation: ptr.To(false), Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}}}},
	}}
}

func privilegedPod(name string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.PodSpec{
		Containers: []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10",
			SecurityContext: &corev1.SecurityContext{Privileged: ptr.To(true)}}},
	}}
}

// awaitEnforcing waits (the API server loads new policies, bindings and
// webhook configurations a moment after they are written) until m's
// namespace treats pods as m should: a privileged pod refused with m's
// refusal (admitted under none), and a compliant pod admitted, reviewed by
// the webhook exactly when m includes it. The probes are real creates;
// what is admitted is deleted. It returns the refusal.
func (cl *cluster) awaitEnforcing(ctx context.Context, m mode, timeout time.Duration) (string, error) {
	ns := m.namespace()
	pods := cl.cs.CoreV1().Pods(ns)
	del := func(name string) error {
		return client.IgnoreNotFound(pods.Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}))
	}
	var last, refusal string
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		_, err := pods.Create(ctx, privilegedPod("probe-privileged"), metav1.CreateOptions{})
		switch {
		case err == nil:
			if err := del("probe-privileged"); err != nil {
				return false, err
			}
			if m.refusal != "" {
				last = "a privileged pod was admitted"
				return false, nil
			}
		case m.refusal == "":
			return false, fmt.Errorf("namespace %s (no admission) refused a privileged pod: %w", ns, err)
		case !strings.Contains(err.Error(), m.refusal):
			// Not enforcing yet, or enforcing by the wrong means: the
			// configuration of another mode reached this namespace.
			last = "a privileged pod was refused with: " + err.Error()
			return false, nil
		default:
			refusal = err.Error()
		}
		before := cl.counts[ns].Load()
		if _, err := pods.Create(ctx, compliantPod("probe-compliant"), metav1.CreateOptions{}); err != nil {
			last = "a compliant pod was refused with: " + err.Error()
			return false, nil
		}
		reviewed := cl.counts[ns].Load() > before
		if err := del("probe-compliant"); err != nil {
			return false, err
		}
		if reviewed != m.webhook {
			last = fmt.Sprintf("the webhook reviewed a compliant pod: %v, want %v", reviewed, m.webhook)
			return false, nil
		}
		return true, nil
	})
	if err != nil {
		return "", fmt.Errorf("mode %s (namespace %s) is not enforcing as it should within %s: %s: %w", m.name, ns, timeout, last, err)
	}
	return refusal, nil
}

// TestPodCreateModesEnforce is BenchmarkPodCreate's setup alone, so that
// `make test` exercises it: each mode refuses (or, under none, admits) a
// privileged pod by the means it names, and admits a compliant one.
func TestPodCreateModesEnforce(t *testing.T) {
	cl := setup(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, m := range modes {
		refusal, err := cl.awaitEnforcing(ctx, m, 30*time.Second)
		if err != nil {
			t.Error(err)
			continue
		}
		t.Logf("%s: a privileged pod: %s", m.name, cmp.Or(refusal, "admitted"))
	}
}

// BenchmarkPodCreate times server-side creates of a compliant pod, one at a
// time, in each mode's namespace of one API server: no admission; the
// compiled ValidatingAdmissionPolicy alone; podsieve's webhook alone; both;
// Pod Security Admission's namespace label; the smallest policy of one control
// (vap-floor, the API server's own price for any in-process policy).
//
// Every mode but none pairs each of its creates with one in none's
// namespace, alternating which goes first, and reports its p50 and p99 as
// ratios to those of its own none creates: `go test -count` repeats each
// sub-benchmark in a row, and on a shared machine the load moves between
// one mode's run and the next, so a ratio to a none measured earlier says
// as much about the machine as about the mode. The paired none creates are
// outside the framework's timer (ns/op is the mode's own). admit-ms is the
// API server's own time in the three enforcing admission plugins
// (ValidatingAdmissionPolicy, ValidatingAdmissionWebhook, PodSecurity),
// from its metrics, per timed create; in the paired modes it includes the
// paired none creates' share, which is what none's admit-ms says.
//
//	KUBEBUILDER_ASSETS=$PWD/bin/k8s/1.36.3 go test ./test/perf/ -run XXX -bench BenchmarkPodCreate -benchtime=300x -count=3
func BenchmarkPodCreate(b *testing.B) {
	cl := setup(b)
	for _, m := range modes {
		b.Run(m.name, func(b *testing.B) { cl.benchCreates(b, m) })
	}
}

// warmup creates are sent untimed before each measurement, so that each
// mode starts with warm connections and caches.
const warmup = 10

func (cl *cluster) benchCreates(b *testing.B, m mode) {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	if _, err := cl.awaitEnforcing(ctx, m, 30*time.Second); err != nil {
		b.Fatal(err)
	}
	ns, baseNS := m.namespace(), modes[0].namespace()
	paired := ns != baseNS
	namespaces := []string{ns}
	if paired {
		namespaces = append(namespaces, baseNS)
	}
	round := cl.round.Add(1)
	defer func() {
		// Outside the timer: the next run starts with an equally empty
		// store. Unscheduled pods go at once (no grace period).
		for _, n := range namespaces {
			if err := cl.c.DeleteAllOf(ctx, &corev1.Pod{}, client.InNamespace(n)); err != nil {
				b.Errorf("delete the pods of %s: %v", n, err)
			}
		}
	}()
	create := func(namespace, name string) (time.Duration, error) {
		pod := compliantPod(name)
		start := time.Now()
		_, err := cl.cs.CoreV1().Pods(namespace).Create(ctx, pod, metav1.CreateOptions{})
		return time.Since(start), err
	}
	for i := range warmup {
		for _, n := range namespaces {
			if _, err := create(n, fmt.Sprintf("warm-%d-%d", round, i)); err != nil {
				b.Fatalf("warm-up create in %s: %v", n, err)
			}
		}
	}
	reviewed := cl.counts[ns].Load()
	admitBefore, err := cl.admissionSeconds(ctx)
	if err != nil {
		b.Fatal(err)
	}
	lat, base := make([]time.Duration, b.N), make([]time.Duration, 0, b.N)
	baseline := func(i int) {
		b.StopTimer()
		d, err := create(baseNS, fmt.Sprintf("base-%d-%d", round, i))
		if err != nil {
			b.Fatalf("create pod %s/base-%d-%d: %v", baseNS, round, i, err)
		}
		base = append(base, d)
		b.StartTimer()
	}
	b.ResetTimer()
	for i := range b.N {
		if err := ctx.Err(); err != nil {
			b.Fatalf("%d of %d creates in %s: %v", i, b.N, ns, err)
		}
		if paired && i%2 == 0 {
			baseline(i)
		}
		d, err := create(ns, fmt.Sprintf("pod-%d-%d", round, i))
		if err != nil {
			b.Fatalf("create pod %s/pod-%d-%d: %v", ns, round, i, err)
		}
		lat[i] = d
		if paired && i%2 == 1 {
			baseline(i)
		}
	}
	b.StopTimer()
	if got := cl.counts[ns].Load() - reviewed; m.webhook && got != int64(b.N) || !m.webhook && got != 0 {
		b.Fatalf("the webhook reviewed %d of the %d creates in %s", got, b.N, ns)
	}
	admitAfter, err := cl.admissionSeconds(ctx)
	if err != nil {
		b.Fatal(err)
	}

	p50, p99 := percentile(lat, 0.50), percentile(lat, 0.99)
	b.ReportMetric(ms(p50), "p50-ms")
	b.ReportMetric(ms(p99), "p99-ms")
	b.ReportMetric((admitAfter-admitBefore)*1000/float64(b.N), "admit-ms")
	if paired {
		b.ReportMetric(float64(p50)/float64(percentile(base, 0.50)), "p50-x-none")
		b.ReportMetric(float64(p99)/float64(percentile(base, 0.99)), "p99-x-none")
	}
}

// enforcingPlugins are the admission plugins whose time admit-ms adds up.
var enforcingPlugins = []string{"ValidatingAdmissionPolicy", "ValidatingAdmissionWebhook", "PodSecurity"}

// admissionSeconds is the API server's total time, so far, in
// enforcingPlugins validating admitted pod creates, from its
// apiserver_admission_controller_admission_duration_seconds histogram.
// (Read as text: the Prometheus parser is not a dependency of this module.)
func (cl *cluster) admissionSeconds(ctx context.Context) (float64, error) {
	raw, err := cl.cs.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return 0, fmt.Errorf("read the API server's metrics: %w", err)
	}
	const metric = "apiserver_admission_controller_admission_duration_seconds_sum{"
	var total float64
	found := 0
	for line := range strings.Lines(string(raw)) {
		rest, ok := strings.CutPrefix(line, metric)
		if !ok || !strings.Contains(rest, `operation="CREATE"`) || !strings.Contains(rest, `rejected="false"`) ||
			!strings.Contains(rest, `type="validate"`) {
			continue
		}
		for _, plugin := range enforcingPlugins {
			if strings.Contains(rest, `name="`+plugin+`"`) {
				_, value, _ := strings.Cut(strings.TrimSpace(rest), "} ")
				v, err := strconv.ParseFloat(value, 64)
				if err != nil {
					return 0, fmt.Errorf("the API server's metric %s%s: %w", metric, strings.TrimSpace(rest), err)
				}
				total += v
				found++
			}
		}
	}
	if found != len(enforcingPlugins) {
		return 0, fmt.Errorf("the API server's metrics have %d of the series of %s for %v", found, metric, enforcingPlugins)
	}
	return total, nil
}

// percentile is the nearest-rank q-quantile of d, which it sorts.
func percentile(d []time.Duration, q float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	slices.Sort(d)
	i := int(math.Ceil(q*float64(len(d)))) - 1
	return d[max(i, 0)]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
