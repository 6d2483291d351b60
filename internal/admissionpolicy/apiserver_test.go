package admissionpolicy

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/podsieve/podsieve/internal/engine"
	"github.com/podsieve/podsieve/internal/enginetest"
	"github.com/podsieve/podsieve/internal/testenv"
)

// The differential tests through a real kube-apiserver (envtest): the
// compiled ValidatingAdmissionPolicies are created on the server, which
// must accept them (its own CEL compilation and cost estimates, stricter
// than the in-process library's), and the pods are submitted as
// server-side dry-run creates, so the server's defaulting, validation and
// admission chain decide, as in a cluster. The engine decides the object
// the server decided: the dry run's answer, defaulted and mutated.

// groupLabel selects the namespace of one level:version: the bindings of
// its policy match only that namespace, so that all the policies are in
// force at once and each pod meets exactly one.
const groupLabel = "test.podsieve.dev/group"

// apiServerWorkers bound the requests in flight: the machine the suite runs
// on has two cores, shared with the API server and etcd.
const apiServerWorkers = 8

// apiServer is a started envtest control plane and a client for it.
type apiServer struct {
	c        client.Client
	warnings *warnings
}

// warnings counts the server's warnings (deprecated fields and
// annotations of the fixtures), which the tests report once.
type warnings struct {
	mu    sync.Mutex
	count map[string]int
}

func (w *warnings) HandleWarningHeaderWithContext(_ context.Context, _ int, _, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.count[text]++
}

func (w *warnings) report(t *testing.T) {
	w.mu.Lock()
	defer w.mu.Unlock()
	texts := make([]string, 0, len(w.count))
	for text := range w.count {
		texts = append(texts, text)
	}
	sort.Strings(texts)
	for _, text := range texts {
		t.Logf("the server warned %d times: %s", w.count[text], text)
	}
}

// startAPIServer starts envtest with the PodSecurityParams CRD established.
// As the envtest suites of other packages, it fails (does not skip) when
// KUBEBUILDER_ASSETS is unset: `make test` sets it.
func startAPIServer(ctx context.Context, t *testing.T) *apiServer {
	t.Helper()
	env, cfg, err := testenv.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := env.Stop(); err != nil {
			t.Logf("stop envtest: %v", err)
		}
	})
	cfg = rest.CopyConfig(cfg)
	// No client-side throttling: the workers bound the load.
	cfg.QPS, cfg.Burst = -1, 0
	w := &warnings{count: map[string]int{}}
	cfg.WarningHandlerWithContext = w
	scheme := testenv.Scheme()
	if err := apiextensionsv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	crd, err := ParamsCRD()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Create(ctx, crd); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("create the PodSecurityParams CRD: %v", err)
	}
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		if err := c.Get(ctx, client.ObjectKeyFromObject(crd), crd); err != nil {
			return false, err
		}
		for _, cond := range crd.Status.Conditions {
			if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("the PodSecurityParams CRD was not established within 30s: %v (conditions %+v)", err, crd.Status.Conditions)
	}
	return &apiServer{c: c, warnings: w}
}

// namespace creates a namespace with the labels and its default service
// account: envtest runs no controller-manager to create it, and the
// ServiceAccount admission plugin refuses a pod whose account is missing.
// The account mounts no token, so that the plugin adds no volume to the
// pods the policies decide.
func (s *apiServer) namespace(ctx context.Context, name string, labels map[string]string) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
	if err := s.c.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create namespace %s: %w", name, err)
	}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default", Namespace: name}, AutomountServiceAccountToken: ptr.To(false)}
	if err := s.c.Create(ctx, sa); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create service account %s/default: %w", name, err)
	}
	return nil
}

// apply creates a compiled policy and its bindings. A server that refuses
// the compiled objects is the finding: the error is the server's own.
func (s *apiServer) apply(ctx context.Context, c *Compiled) error {
	if err := s.c.Create(ctx, c.Policy); err != nil {
		return fmt.Errorf("the API server refuses the ValidatingAdmissionPolicy %s: %w", c.Policy.Name, err)
	}
	for _, b := range c.Bindings {
		if err := s.c.Create(ctx, b); err != nil {
			return fmt.Errorf("the API server refuses the ValidatingAdmissionPolicyBinding %s: %w", b.Name, err)
		}
	}
	return nil
}

// params creates a PodSecurityParams object, retrying while the client's
// REST mapper has not yet seen the new CRD.
func (s *apiServer) params(ctx context.Context, obj *unstructured.Unstructured) error {
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		err := s.c.Create(ctx, obj.DeepCopy())
		switch {
		case err == nil:
			return true, nil
		case meta.IsNoMatchError(err):
			return false, nil
		}
		return false, err
	})
	if err != nil {
		return fmt.Errorf("create PodSecurityParams %s/%s: %w", obj.GetNamespace(), obj.GetName(), err)
	}
	return nil
}

// dryRun submits a pod as a server-side dry-run create. It returns the
// object the server would have stored (defaulted and mutated by admission)
// or the server's error.
func (s *apiServer) dryRun(ctx context.Context, pod *corev1.Pod, namespace string) (*corev1.Pod, error) {
	p := pod.DeepCopy()
	p.Namespace = namespace
	p.ResourceVersion, p.UID = "", ""
	if err := s.c.Create(ctx, p, client.DryRunAll); err != nil {
		return nil, err
	}
	p.APIVersion, p.Kind = "v1", "Pod"
	return p, nil
}

// vapDenial is whether err is the compiled policy's refusal (as opposed
// to validation, another admission plugin, or a timeout), and its message.
func vapDenial(err error, policy string) (bool, string) {
	if err == nil {
		return false, ""
	}
	msg := err.Error()
	return apierrors.IsForbidden(err) && strings.Contains(msg, "ValidatingAdmissionPolicy '"+policy+"'"), msg
}

// awaitEnforced polls with a server-side dry-run create of a pod the
// policy refuses until the server refuses it with the policy's message:
// a policy is enforced a moment after it is created, when the server's
// informers have seen it and compiled it.
func (s *apiServer) awaitEnforced(ctx context.Context, t *testing.T, pod *corev1.Pod, namespace, policy, securityPolicy string, timeout time.Duration) {
	t.Helper()
	want := fmt.Sprintf("is refused by SecurityPolicy %q rule", securityPolicy)
	var last error
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		_, last = s.dryRun(ctx, pod, namespace)
		denied, msg := vapDenial(last, PolicyName(policy))
		return denied && strings.Contains(msg, want), nil
	})
	if err != nil {
		t.Fatalf("the API server did not enforce ValidatingAdmissionPolicy %s in namespace %s within %s: the probe pod %s got %v",
			PolicyName(policy), namespace, timeout, pod.Name, last)
	}
}

func privilegedPod(name string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "registry.k8s.io/pause",
			SecurityContext: &corev1.SecurityContext{Privileged: ptr.To(true)}}}},
	}
}

// decide is the engine's decision of a pod in a namespace with the labels,
// as the webhook makes it.
func decide(tb testing.TB, policies []*engine.Policy, pod *corev1.Pod, nsLabels map[string]string) engine.Decision {
	tb.Helper()
	pod = pod.DeepCopy()
	pod.APIVersion, pod.Kind = "v1", "Pod"
	o, err := engine.NewAdmissionObject(pod)
	if err != nil {
		// Errorf, not Fatalf: the workers call it.
		tb.Errorf("pod %s/%s: %v", pod.Namespace, pod.Name, err)
		return engine.Decision{}
	}
	return engine.DecideWithin(engine.Limits{}, policies, engine.AllExceptions(nil), o, nsLabels, time.Now(), engine.Admission)
}

func failing(d engine.Decision) []string {
	var out []string
	for _, r := range d.Results {
		if r.Outcome == engine.Fail {
			for _, f := range r.Findings {
				out = append(out, f.CheckID)
			}
		}
	}
	sort.Strings(out)
	return out
}

// fixtureGroup is one level:version: its policy, namespace and fixtures.
type fixtureGroup struct {
	key, ns, securityPolicy string
	policy                  *engine.Policy
	nsLabels                map[string]string
	fixtures                []enginetest.Fixture
}

// TestAPIServerDecidesAsTheEngine: every upstream fixture, at its own level
// and version, is decided by the compiled policy in a real API server as
// by the engine. All the levels and versions are in force at once, each
// bound to its own namespace by a label: creating and deleting one policy
// at a time would wait for the server to pick up each of the 76.
func TestAPIServerDecidesAsTheEngine(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	fixtures, err := enginetest.UpstreamFixtures()
	if err != nil {
		t.Fatal(err)
	}
	if len(fixtures) != 4537 {
		t.Fatalf("loaded %d fixtures, want the 4,537 upstream ships", len(fixtures))
	}
	start := time.Now()
	s := startAPIServer(ctx, t)
	t.Logf("envtest started in %s", time.Since(start).Round(time.Millisecond))

	// The namespace whose pods no policy decides: the server's defaults of
	// a pod a policy refuses, and its validation, are read there.
	const plain = "plain"
	if err := s.namespace(ctx, plain, nil); err != nil {
		t.Fatal(err)
	}

	groups := map[string]*fixtureGroup{}
	var keys []string
	compiled := map[string]*Compiled{}
	for _, f := range fixtures {
		key := string(f.Level) + "-" + f.Version.String() // baseline-v1.23, a label value
		g := groups[key]
		if g == nil {
			g = &fixtureGroup{key: key, ns: "pss-" + strings.ReplaceAll(key, ".", "-"), securityPolicy: "pss-" + key}
			sp := mustSecurityPolicy(t, g.securityPolicy, "rules:\n- name: pss\n  podSecurity: {level: "+string(f.Level)+", version: "+f.Version.String()+"}")
			g.policy, err = engine.CompilePolicy(sp)
			if err != nil {
				t.Fatalf("SecurityPolicy %s: %v", sp.Name, err)
			}
			c, err := CompilePolicy(sp, g.policy, testOptions)
			if err != nil {
				t.Fatalf("compile %s: %v", sp.Name, err)
			}
			for _, b := range c.Bindings {
				sel := b.Spec.MatchResources.NamespaceSelector
				sel.MatchExpressions = append(sel.MatchExpressions, metav1.LabelSelectorRequirement{
					Key: groupLabel, Operator: metav1.LabelSelectorOpIn, Values: []string{key}})
			}
			g.nsLabels = map[string]string{engine.NamespaceNameLabel: g.ns, groupLabel: key}
			groups[key], compiled[key] = g, c
			keys = append(keys, key)
		}
		g.fixtures = append(g.fixtures, f)
	}
	sort.Strings(keys)
	// In parallel: the server compiles every expression of a policy when
	// it is created, which takes half a second for each of the 76 here.
	setup := make(chan string)
	errs := make(chan error, len(keys))
	var setupWG sync.WaitGroup
	for range apiServerWorkers {
		setupWG.Add(1)
		go func() {
			defer setupWG.Done()
			for key := range setup {
				g, c := groups[key], compiled[key]
				err := s.namespace(ctx, g.ns, g.nsLabels)
				if err == nil {
					err = s.apply(ctx, c)
				}
				if err == nil && c.Params {
					var params *unstructured.Unstructured
					if params, err = paramsUnstructured(g.ns, nil); err == nil {
						err = s.params(ctx, params)
					}
				}
				errs <- err
			}
		}()
	}
	for _, key := range keys {
		setup <- key
	}
	close(setup)
	setupWG.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("%d levels and versions applied at %s", len(keys), time.Since(start).Round(time.Millisecond))

	// Every level refuses a privileged container at every version.
	deadline := time.Now().Add(60 * time.Second)
	for _, key := range keys {
		g := groups[key]
		s.awaitEnforced(ctx, t, privilegedPod("probe"), g.ns, g.securityPolicy, g.securityPolicy, time.Until(deadline))
	}
	t.Logf("all %d policies enforced at %s", len(keys), time.Since(start).Round(time.Millisecond))

	type job struct {
		g *fixtureGroup
		f enginetest.Fixture
	}
	type result struct {
		job
		refused    bool   // by the compiled policy
		msg        string // the server's error, if any
		invalid    bool   // refused by the server whatever the policy
		engine     engine.Decision
		fileEngine engine.Decision // on the fixture as read from its file
	}
	jobs := make(chan job)
	results := make(chan result)
	var requests atomic.Int64
	var wg sync.WaitGroup
	for range apiServerWorkers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range jobs {
				r := result{job: j}
				pod := j.f.Pod.DeepCopy()
				// Upstream's fixture names have underscores, which the
				// server refuses in a name.
				pod.Name = strings.ReplaceAll(strings.ToLower(pod.Name), "_", "-")
				if pod.Name == "" {
					pod.Name = "fixture"
				}
				pod.Namespace = j.g.ns
				r.fileEngine = decide(t, []*engine.Policy{j.g.policy}, pod, j.g.nsLabels)
				got, err := s.dryRun(ctx, pod, j.g.ns)
				requests.Add(1)
				r.refused, r.msg = vapDenial(err, PolicyName(j.g.securityPolicy))
				if err != nil {
					// The object the server decided, defaulted: read where no
					// policy applies. If it fails there too, the server
					// refuses the pod whatever the policy.
					var perr error
					got, perr = s.dryRun(ctx, pod, plain)
					requests.Add(1)
					if perr != nil {
						r.invalid, r.msg = true, perr.Error()
						results <- r
						continue
					}
					if !r.refused {
						r.msg = err.Error()
					}
					got.Namespace = j.g.ns
				}
				r.engine = decide(t, []*engine.Policy{j.g.policy}, got, j.g.nsLabels)
				results <- r
			}
		}()
	}
	go func() {
		defer close(jobs)
		for _, key := range keys {
			for _, f := range groups[key].fixtures {
				select {
				case jobs <- job{groups[key], f}:
				case <-ctx.Done():
					return
				}
			}
		}
	}()
	go func() { wg.Wait(); close(results) }()

	phase := time.Now()
	var (
		allowed, refused, disagreements, badMessages, others int
		defaultingChanged, upstreamDiffers                   int
		invalid                                              []string
	)
	for r := range results {
		want := fmt.Sprintf("is refused by SecurityPolicy %q rule", r.g.securityPolicy)
		switch {
		case r.invalid:
			invalid = append(invalid, fmt.Sprintf("%s (engine on the file: allowed=%v %v): %s", r.f.Rel, r.fileEngine.Allowed, failing(r.fileEngine), r.msg))
			continue
		case r.msg != "" && !r.refused:
			// Refused by something else than the policy, though the pod
			// is admitted where no policy applies.
			others++
			t.Errorf("%s: the server refuses it under %s, not by the policy: %s", r.f.Rel, r.g.key, r.msg)
			continue
		case r.refused:
			refused++
			if !strings.Contains(r.msg, want) {
				badMessages++
				if badMessages <= 20 {
					t.Errorf("%s: the denial does not say %s: %s", r.f.Rel, want, r.msg)
				}
			}
		default:
			allowed++
		}
		if r.engine.Allowed == r.refused {
			disagreements++
			if disagreements <= 20 {
				t.Errorf("%s at %s: engine allowed=%v %v, API server refused=%v: %s", r.f.Rel, r.g.key, r.engine.Allowed, failing(r.engine), r.refused, r.msg)
			}
		}
		if r.engine.Allowed != r.fileEngine.Allowed {
			defaultingChanged++
			if defaultingChanged <= 5 {
				t.Logf("%s at %s: the server's defaults change the engine's decision: file allowed=%v %v, defaulted allowed=%v %v",
					r.f.Rel, r.g.key, r.fileEngine.Allowed, failing(r.fileEngine), r.engine.Allowed, failing(r.engine))
			}
		}
		if r.refused != r.f.Fail {
			upstreamDiffers++
			if upstreamDiffers <= 5 {
				t.Logf("%s: the server refused=%v, upstream expects fail=%v: %s", r.f.Rel, r.refused, r.f.Fail, r.msg)
			}
		}
	}
	if err := ctx.Err(); err != nil {
		t.Fatalf("the fixtures were not all decided in time: %v", err)
	}
	elapsed := time.Since(phase)
	n := requests.Load()
	t.Logf("%d fixtures: %d dry-run requests in %s with %d workers, %.0f requests/s",
		len(fixtures), n, elapsed.Round(time.Millisecond), apiServerWorkers, float64(n)/elapsed.Seconds())
	t.Logf("API server: %d allowed, %d refused by the policy, %d refused whatever the policy (validation); %d disagreements with the engine, %d denials without the policy's message, %d refused by something else",
		allowed, refused, len(invalid), disagreements, badMessages, others)
	t.Logf("the server's defaults change the engine's decision of %d fixtures; the server's decision differs from upstream's expectation for %d", defaultingChanged, upstreamDiffers)
	sort.Strings(invalid)
	for i, v := range invalid {
		if i == 20 {
			t.Logf("... and %d more", len(invalid)-20)
			break
		}
		t.Logf("refused whatever the policy: %s", v)
	}
	if disagreements > 0 {
		t.Errorf("%d disagreements between the API server and the engine", disagreements)
	}
	if allowed == 0 || refused == 0 {
		t.Errorf("the fixtures must give both outcomes: %d allowed, %d refused", allowed, refused)
	}
	if allowed+refused+len(invalid)+others != len(fixtures) {
		t.Errorf("decided %d of %d fixtures", allowed+refused+len(invalid)+others, len(fixtures))
	}
	s.warnings.report(t)
}
