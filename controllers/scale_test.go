package controllers_test

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlconfig "sigs.k8s.io/controller-runtime/pkg/config"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/yaml"

	policyv1alpha1 "github.com/podsieve/podsieve/api/v1alpha1"
	reportv1alpha2 "github.com/podsieve/podsieve/api/wgpolicyk8s/v1alpha2"
	"github.com/podsieve/podsieve/controllers"
	"github.com/podsieve/podsieve/controllers/background"
	"github.com/podsieve/podsieve/internal/report"
	"github.com/podsieve/podsieve/internal/testenv"
)

// TestBackgroundScale creates pods in many namespaces in a real API server,
// then starts a manager and times its first full background scan: until the
// policy's violations counter is written, which happens once every
// namespace has been scanned and its reports written. It checks every
// report and logs the time and the manager's heap for docs/performance.md.
//
// `make test` runs it at 500 pods in 10 namespaces; `make test-scale` at
// the 5,000 pods in 100 namespaces of the target (SCALE_PODS,
// SCALE_NAMESPACES), bare and as the pods of Deployments (SCALE_REPLICAS
// pods each, which repeat their Deployment and are not reported apart).
func TestBackgroundScale(t *testing.T) {
	pods, namespaces, replicas := envInt(t, "SCALE_PODS", 500), envInt(t, "SCALE_NAMESPACES", 10), envInt(t, "SCALE_REPLICAS", 1)
	perNS := pods / namespaces
	// The judged objects of a namespace: bare pods, or with SCALE_REPLICAS
	// above 1, Deployments whose pods repeat their template (and are not
	// reported apart from them).
	workloads := perNS / replicas
	env, cfg, err := testenv.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	cfg.QPS, cfg.Burst = 2000, 4000
	c, err := client.New(cfg, client.Options{Scheme: testenv.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	policy := &policyv1alpha1.SecurityPolicy{ObjectMeta: metav1.ObjectMeta{Name: "scale"}}
	must(t, yaml.UnmarshalStrict([]byte(`{exceptions: {}, rules: [{name: baseline, match: {namespaces: ["scale-*"]}, podSecurity: {level: baseline}}]}`), &policy.Spec))
	must(t, c.Create(ctx, policy))
	// In every other namespace an exception waives NET_ADMIN for mesh-*.
	// Per namespace, a fifth of the pods are mesh-* with NET_ADMIN, a fifth
	// app-* with NET_ADMIN, the rest clean.
	start := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, namespaces)
	sem := make(chan struct{}, 16)
	for n := range namespaces {
		ns := fmt.Sprintf("scale-%03d", n)
		must(t, c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))
		if n%2 == 0 {
			pe := &policyv1alpha1.PolicyException{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "mesh"}}
			must(t, yaml.UnmarshalStrict([]byte(fmt.Sprintf(netAdminException, "scale")), &pe.Spec))
			pe.Spec.Match.Names = []string{"mesh-*"}
			must(t, c.Create(ctx, pe))
		}
		for w := range workloads {
			wg.Add(1)
			sem <- struct{}{}
			go func() {
				defer func() { <-sem; wg.Done() }()
				name, caps := fmt.Sprintf("ok-%d", w), []corev1.Capability(nil)
				switch w % 5 {
				case 0:
					name, caps = fmt.Sprintf("mesh-%d", w), []corev1.Capability{"NET_ADMIN"}
				case 1:
					name, caps = fmt.Sprintf("app-%d", w), []corev1.Capability{"NET_ADMIN"}
				}
				if err := createWorkload(ctx, c, ns, name, caps, replicas); err != nil {
					select {
					case errs <- err:
					default:
					}
				}
			}()
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	t.Logf("created %d pods in %d namespaces in %s", perNS*namespaces, namespaces, time.Since(start).Round(time.Millisecond))

	var before runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 testenv.Scheme(),
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Cache:                  controllers.CacheOptions(),
		// Other tests of this package start managers too.
		Controller: ctrlconfig.Controller{SkipNameValidation: ptr.To(true)},
	})
	must(t, err)
	// With the API server's form of the policies on (SCALE_CROSSCHECK=0
	// turns it off), the scan decides every object both ways.
	crossCheck := os.Getenv("SCALE_CROSSCHECK") != "0"
	_, err = controllers.Setup(ctx, mgr, controllers.Options{
		ExceptionsNamespace: "podsieve-system",
		// The cross-check's budget per namespace is a bound against a
		// tenant's costly exceptions; here every object must be compared,
		// on a machine however loaded, so it is out of the way.
		Background: background.Options{StatusInterval: 100 * time.Millisecond, WritesPerSecond: scaleWrites(t),
			CrossCheckBudget: 10 * time.Minute},
		AdmissionPolicies: crossCheck,
	})
	must(t, err)
	crossBefore := crossChecks(t, "scale")
	start = time.Now()
	go func() { _ = mgr.Start(ctx) }()
	// What is timed is the scan: the API server is asked every 50ms.
	if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 5*time.Minute, true, func(ctx context.Context) (bool, error) {
		if err := c.Get(ctx, client.ObjectKeyFromObject(policy), policy); err != nil {
			return false, err
		}
		return policy.Status.Violations != nil, nil
	}); err != nil {
		t.Fatalf("the first full scan did not finish in 5 minutes: %v", err)
	}
	elapsed := time.Since(start)
	var after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&after)

	fails, skips := workloads/5+boolInt(workloads%5 > 1), workloads/5+boolInt(workloads%5 > 0)
	if got, want := int(*policy.Status.Violations), fails*namespaces+skips*(namespaces/2); got != want {
		t.Errorf("status.violations = %d, want %d", got, want)
	}
	var reports reportv1alpha2.PolicyReportList
	must(t, c.List(ctx, &reports, client.MatchingLabels{report.LabelManagedBy: report.ManagedBy}))
	byNS := map[string]reportv1alpha2.PolicyReportSummary{}
	for _, r := range reports.Items {
		s := byNS[r.Namespace]
		s.Pass, s.Fail, s.Skip = s.Pass+r.Summary.Pass, s.Fail+r.Summary.Fail, s.Skip+r.Summary.Skip
		byNS[r.Namespace] = s
	}
	for n := range namespaces {
		ns := fmt.Sprintf("scale-%03d", n)
		want := reportv1alpha2.PolicyReportSummary{Pass: workloads - fails - skips, Fail: fails + skips, Skip: 0}
		if n%2 == 0 {
			want.Fail, want.Skip = fails, skips
		}
		if byNS[ns] != want {
			t.Errorf("%s: summary %+v, want %+v", ns, byNS[ns], want)
		}
	}
	cross := crossChecks(t, "scale")
	for r := range cross {
		cross[r] -= crossBefore[r]
	}
	if crossCheck {
		// Every judged object: the bare pods, or the Deployments and
		// their pods (not the ReplicaSets, which repeat the Deployments).
		judged := perNS * namespaces
		if replicas > 1 {
			judged += workloads * namespaces
		}
		if cross["disagree"] != 0 || cross["agree"] != float64(judged) {
			t.Errorf("cross-check: %v, want %d objects agreeing and none disagreeing", cross, judged)
		}
	}
	shape := "bare pods"
	if replicas > 1 {
		shape = fmt.Sprintf("pods of %d Deployments", workloads*namespaces)
	}
	t.Logf("first full scan of %d %s in %d namespaces (%d reports, writes limited to %g/s, cross-check %v: %v): %s; manager heap after GC: %.1f MiB (%.1f MiB before it started)",
		perNS*namespaces, shape, namespaces, len(reports.Items), scaleWrites(t), crossCheck, cross, elapsed.Round(time.Millisecond),
		float64(after.HeapInuse)/(1<<20), float64(before.HeapInuse)/(1<<20))
}

// crossChecks reads podsieve_background_crosscheck_total of a policy, by
// result, from the manager's metrics registry.
func crossChecks(t *testing.T, policy string) map[string]float64 {
	t.Helper()
	families, err := ctrlmetrics.Registry.Gather()
	must(t, err)
	out := map[string]float64{}
	for _, f := range families {
		if f.GetName() != "podsieve_background_crosscheck_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["policy"] == policy {
				out[labels["result"]] += m.GetCounter().GetValue()
			}
		}
	}
	return out
}

func envInt(t *testing.T, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		t.Fatalf("%s=%q: use a positive integer", name, v)
	}
	return n
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// scaleWrites is the scan's report write limit for the run: SCALE_WRITES,
// else 1000 per second, the most the manager takes. The test measures the
// scan and what the API server takes, not the default limit (20/s), under
// which a first scan writing 5,000 reports takes over four minutes by
// design.
func scaleWrites(t *testing.T) float64 {
	t.Helper()
	v := os.Getenv("SCALE_WRITES")
	if v == "" {
		return 1000
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || f <= 0 {
		t.Fatalf("SCALE_WRITES=%q: want a positive number of writes per second", v)
	}
	return f
}

// createWorkload creates a bare pod (replicas 1), or a Deployment with the
// ReplicaSet and pods it controls (no controller-manager runs here), whose
// container adds caps.
func createWorkload(ctx context.Context, c client.Client, ns, name string, caps []corev1.Capability, replicas int) error {
	spec := corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.example/app:1",
		SecurityContext: &corev1.SecurityContext{Capabilities: &corev1.Capabilities{Add: caps}}}}}
	if replicas == 1 {
		return c.Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: spec})
	}
	labels := map[string]string{"app": name}
	dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: appsv1.DeploymentSpec{
		Selector: &metav1.LabelSelector{MatchLabels: labels},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: spec}}}
	if err := c.Create(ctx, dep); err != nil {
		return err
	}
	rs := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name + "-5d9f", Labels: labels,
		OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(dep, appsv1.SchemeGroupVersion.WithKind("Deployment"))}},
		Spec: appsv1.ReplicaSetSpec{Selector: dep.Spec.Selector, Template: dep.Spec.Template}}
	if err := c.Create(ctx, rs); err != nil {
		return err
	}
	for k := range replicas {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("%s-5d9f-%d", name, k), Labels: labels,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(rs, appsv1.SchemeGroupVersion.WithKind("ReplicaSet"))}}, Spec: spec}
		if err := c.Create(ctx, pod); err != nil {
			return err
		}
	}
	return nil
}
