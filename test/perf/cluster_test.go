package perf

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
	"sigs.k8s.io/yaml"

	policyv1alpha1 "github.com/podsieve/podsieve/api/v1alpha1"
	"github.com/podsieve/podsieve/internal/admissionpolicy"
	"github.com/podsieve/podsieve/internal/engine"
	"github.com/podsieve/podsieve/internal/index"
	"github.com/podsieve/podsieve/internal/testenv"
	"github.com/podsieve/podsieve/webhooks"
)

// cluster is the control plane the modes share, set up once per process
// (a benchmark function runs several times: once with b.N = 1, then with
// -benchtime's count, and again for each -count).
type cluster struct {
	env    *envtest.Environment
	c      client.Client
	cs     kubernetes.Interface
	stop   context.CancelFunc
	round  atomic.Int64
	counts map[string]*atomic.Int64 // webhook reviews by namespace; read-only map
}

var (
	sharedOnce sync.Once
	shared     *cluster
	sharedErr  error
)

func TestMain(m *testing.M) {
	// The handler logs its refusals (the probes') through controller-runtime,
	// which complains when no logger is set.
	ctrl.SetLogger(logr.Discard())
	code := m.Run()
	if shared != nil {
		shared.stop()
		if err := shared.env.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "stop envtest:", err)
		}
	}
	os.Exit(code)
}

// setup returns the shared cluster, starting it on first use. As the
// envtest suites of the other packages, it fails (does not skip) when
// KUBEBUILDER_ASSETS is unset: `make test` sets it.
func setup(tb testing.TB) *cluster {
	tb.Helper()
	sharedOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		shared, sharedErr = start(ctx)
	})
	if sharedErr != nil {
		tb.Fatal(sharedErr)
	}
	return shared
}

func start(ctx context.Context) (cl *cluster, err error) {
	// Start, not StartWithWebhooks: podsieve's own webhook configurations
	// would send every write to a manager this process does not run.
	// envtest still prepares a CA and a serving certificate for loopback.
	env, cfg, err := testenv.Start()
	if err != nil {
		return nil, err
	}
	serverCtx, stop := context.WithCancel(context.Background())
	cl = &cluster{env: env, stop: stop, counts: map[string]*atomic.Int64{}}
	defer func() {
		if err != nil {
			stop()
			_ = env.Stop()
			cl = nil
		}
	}()
	cfg = rest.CopyConfig(cfg)
	// No client-side throttling (client-go's default is 5 requests a
	// second): the benchmark sends one request at a time.
	cfg.QPS, cfg.Burst = -1, 0
	cfg.Timeout = 30 * time.Second
	if cl.c, err = client.New(cfg, client.Options{Scheme: testenv.Scheme()}); err != nil {
		return nil, err
	}
	if cl.cs, err = kubernetes.NewForConfig(cfg); err != nil {
		return nil, err
	}

	sp, p, compiled, err := compileSample()
	if err != nil {
		return nil, err
	}
	ix := index.New("podsieve-system")
	ix.SetPolicy(p)
	for _, m := range modes {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: m.namespace(), Labels: m.labels}}
		if err := cl.c.Create(ctx, ns); err != nil {
			return nil, fmt.Errorf("create namespace %s: %w", ns.Name, err)
		}
		// The manager keeps every namespace's labels in the index and
		// writes its parameters; here they are written once.
		ix.SetNamespace(ns.Name, ns.Labels)
		if err := cl.c.Create(ctx, admissionpolicy.ParamsObject(ns.Name, nil)); err != nil {
			return nil, fmt.Errorf("create the PodSecurityParams of %s: %w", ns.Name, err)
		}
		cl.counts[ns.Name] = &atomic.Int64{}
	}
	ix.MarkReady()

	if err := cl.c.Create(ctx, compiled.Policy); err != nil {
		return nil, fmt.Errorf("create ValidatingAdmissionPolicy %s: %w", compiled.Policy.Name, err)
	}
	for _, b := range compiled.Bindings {
		sel := b.Spec.MatchResources.NamespaceSelector
		sel.MatchExpressions = append(sel.MatchExpressions,
			metav1.LabelSelectorRequirement{Key: vapLabel, Operator: metav1.LabelSelectorOpIn, Values: []string{"true"}})
		if err := cl.c.Create(ctx, b); err != nil {
			return nil, fmt.Errorf("create ValidatingAdmissionPolicyBinding %s: %w", b.Name, err)
		}
	}

	floor, floorBinding := floorPolicyObjects()
	if err := cl.c.Create(ctx, floor); err != nil {
		return nil, fmt.Errorf("create ValidatingAdmissionPolicy %s: %w", floor.Name, err)
	}
	if err := cl.c.Create(ctx, floorBinding); err != nil {
		return nil, fmt.Errorf("create ValidatingAdmissionPolicyBinding %s: %w", floorBinding.Name, err)
	}

	url, err := cl.serveWebhook(serverCtx, env, ix)
	if err != nil {
		return nil, err
	}
	vwc, err := webhookConfiguration(sp.Name, url, env.WebhookInstallOptions.LocalServingCAData)
	if err != nil {
		return nil, err
	}
	if err := cl.c.Create(ctx, vwc); err != nil {
		return nil, fmt.Errorf("create ValidatingWebhookConfiguration %s: %w", vwc.Name, err)
	}
	return cl, nil
}

// compileSample compiles the sample policy as the manager does: the
// engine's form for the webhook's index, the API server's form from it.
func compileSample() (*policyv1alpha1.SecurityPolicy, *engine.Policy, *admissionpolicy.Compiled, error) {
	raw, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), samplePolicy))
	if err != nil {
		return nil, nil, nil, err
	}
	sp := &policyv1alpha1.SecurityPolicy{}
	if err := yaml.UnmarshalStrict(raw, sp); err != nil {
		return nil, nil, nil, fmt.Errorf("%s: %w", samplePolicy, err)
	}
	p, err := engine.CompilePolicy(sp)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("%s: %w", samplePolicy, err)
	}
	compiled, err := admissionpolicy.CompilePolicy(sp, p, admissionpolicy.Options{SystemNamespaces: systemNamespaces})
	if err != nil {
		return nil, nil, nil, fmt.Errorf("%s: %w", samplePolicy, err)
	}
	if !compiled.Params {
		return nil, nil, nil, fmt.Errorf("%s: compiled without parameters; the benchmark means to measure the params lookup too", samplePolicy)
	}
	return sp, p, compiled, nil
}

// serveWebhook serves podsieve's pod handler in controller-runtime's
// webhook server on loopback with envtest's serving certificate, as
// webhooks' overload specs do, counting the reviews of each namespace. It
// returns the URL the API server must call.
func (cl *cluster) serveWebhook(ctx context.Context, env *envtest.Environment, ix *index.Index) (string, error) {
	wo := env.WebhookInstallOptions
	l, err := net.Listen("tcp", net.JoinHostPort(wo.LocalServingHost, "0"))
	if err != nil {
		return "", err
	}
	port := l.Addr().(*net.TCPAddr).Port
	if err := l.Close(); err != nil {
		return "", err
	}
	server := webhook.NewServer(webhook.Options{Host: wo.LocalServingHost, Port: port, CertDir: wo.LocalServingCertDir})
	// Namespaces stays nil: every namespace is in the index already.
	wh := webhooks.NewPodWebhook(&webhooks.PodAdmission{Index: ix, Clock: clock.RealClock{}})
	wh.Handler = counted{Handler: wh.Handler, counts: cl.counts}
	server.Register(webhooks.PodsPath, wh)
	go func() {
		if err := server.Start(ctx); err != nil {
			fmt.Fprintln(os.Stderr, "webhook server:", err)
		}
	}()
	err = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		return server.StartedChecker()(nil) == nil, nil
	})
	if err != nil {
		return "", fmt.Errorf("the webhook server did not start on %s:%d: %w", wo.LocalServingHost, port, err)
	}
	return fmt.Sprintf("https://%s%s", net.JoinHostPort(wo.LocalServingHost, fmt.Sprint(port)), webhooks.PodsPath), nil
}

// counted counts the reviews of each namespace before handing them on.
type counted struct {
	admission.Handler
	counts map[string]*atomic.Int64
}

func (c counted) Handle(ctx context.Context, req admission.Request) admission.Response {
	if n := c.counts[req.Namespace]; n != nil {
		n.Add(1)
	}
	return c.Handler.Handle(ctx, req)
}

// webhookConfiguration is podsieve's pod webhooks as config/webhook
// declares them (rules, failurePolicy Fail, timeout, selectors), pointed at
// url and narrowed to the namespaces labelled webhookLabel.
func webhookConfiguration(policy, url string, ca []byte) (*admissionregistrationv1.ValidatingWebhookConfiguration, error) {
	path := filepath.Join(testenv.RepoRoot(), "config", "webhook", "manifests.yaml")
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var installed admissionregistrationv1.ValidatingWebhookConfiguration
	if err := yaml.Unmarshal(raw, &installed); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "podsieve-podcreate-" + policy}}
	for _, w := range installed.Webhooks {
		if w.ClientConfig.Service == nil || ptr.Deref(w.ClientConfig.Service.Path, "") != webhooks.PodsPath {
			continue
		}
		w.ClientConfig = admissionregistrationv1.WebhookClientConfig{URL: ptr.To(url), CABundle: ca}
		w.NamespaceSelector.MatchExpressions = append(w.NamespaceSelector.MatchExpressions,
			metav1.LabelSelectorRequirement{Key: webhookLabel, Operator: metav1.LabelSelectorOpIn, Values: []string{"true"}})
		if ptr.Deref(w.FailurePolicy, "") != admissionregistrationv1.Fail {
			return nil, fmt.Errorf("%s: webhook %s is not failurePolicy Fail", path, w.Name)
		}
		vwc.Webhooks = append(vwc.Webhooks, w)
	}
	if len(vwc.Webhooks) == 0 {
		return nil, fmt.Errorf("%s: no webhook calls %s", path, webhooks.PodsPath)
	}
	return vwc, nil
}
