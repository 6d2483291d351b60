package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"slices"
	"sync/atomic"
	"time"

	"github.com/open-policy-agent/cert-controller/pkg/rotator"
	openreportsv1alpha1 "github.com/openreports/reports-api/apis/openreports.io/v1alpha1"
	"github.com/spf13/cobra"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	ctrlconfig "sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	policyv1alpha1 "github.com/podsieve/podsieve/api/v1alpha1"
	reportv1alpha2 "github.com/podsieve/podsieve/api/wgpolicyk8s/v1alpha2"
	"github.com/podsieve/podsieve/controllers"
	"github.com/podsieve/podsieve/controllers/background"
	"github.com/podsieve/podsieve/internal/buildinfo"
	"github.com/podsieve/podsieve/internal/index"
	"github.com/podsieve/podsieve/webhooks"
)

type managerOptions struct {
	metricsAddr, probeAddr string
	metricsSecure          bool
	metricsCertDir         string
	metricsExceptionLabel  bool
	enableHTTP2            bool
	maxConcurrentReviews   int
	reviewQueueTimeout     time.Duration
	maxReviewTime          time.Duration
	leaderElect            bool
	leaderElectionNS       string
	exceptionsNamespace    string
	enableWebhooks         bool
	webhookPort            int
	webhookBindAddress     string
	webhookDrain           time.Duration
	webhookCertDir         string
	certRotation           bool
	webhookNamespace       string
	webhookService         string
	webhookSecret          string
	webhookConfiguration   string
	webhookDNSNames        []string
	backgroundScan         bool
	backgroundResync       time.Duration
	backgroundEvents       bool
	backgroundAllPods      bool
	backgroundWrites       float64
	reportAPI              string
	maxExceptionsPerNS     int
	admissionPolicies      bool
	zap                    zap.Options
}

func newManagerCommand() *cobra.Command {
	o := &managerOptions{zap: zap.Options{Development: false}}
	cmd := &cobra.Command{
		Use:   "manager",
		Short: "Run the in-cluster manager: the admission webhooks and the controllers that keep their index",
		Long: `manager runs the controllers that compile SecurityPolicies and judge
PolicyExceptions into an in-memory index, with status conditions and events,
and serves the admission webhooks from that index. Every replica builds its
own index and serves the webhooks; with --leader-elect only the leader writes
status and events. /readyz turns ready once the caches have synced, every
object they held has been reconciled into the index, and the webhook server
is listening.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return o.run(cmd.Context()) },
	}
	f := cmd.Flags()
	f.StringVar(&o.metricsAddr, "metrics-bind-address", ":8443", `address of the Prometheus metrics endpoint (HTTPS with --metrics-secure); "0" disables it`)
	f.BoolVar(&o.metricsSecure, "metrics-secure", true, "serve metrics over HTTPS to callers the API server authenticates (TokenReview) and authorizes (SubjectAccessReview: get on the non-resource URL /metrics); false serves plain HTTP to anyone")
	f.StringVar(&o.metricsCertDir, "metrics-cert-dir", "", "directory holding the metrics serving certificate, tls.crt and tls.key (default: a self-signed certificate made at start)")
	f.BoolVar(&o.metricsExceptionLabel, "metrics-exception-label", false, "label podsieve_exceptions_applied_total by exception as well as namespace (a series per PolicyException: namespace editors can create them without bound)")
	f.BoolVar(&o.enableHTTP2, "enable-http2", false, "serve HTTP/2 on the webhook and metrics servers; off by default against HTTP/2 rapid reset (CVE-2023-44487, CVE-2023-39325)")
	f.IntVar(&o.maxConcurrentReviews, "max-concurrent-reviews", webhooks.DefaultMaxConcurrentReviews(),
		"pod reviews evaluated at once (default 4 × GOMAXPROCS), at most half of them from one namespace; others wait up to --review-queue-timeout, then are refused as overloaded")
	f.DurationVar(&o.reviewQueueTimeout, "review-queue-timeout", webhooks.DefaultReviewQueueTimeout, "how long a pod review waits for an evaluation slot before it is refused as overloaded (never allowed)")
	f.DurationVar(&o.maxReviewTime, "max-review-time", webhooks.DefaultMaxReviewTime,
		"the longest a pod review is evaluated: the API server's own timeout (?timeout=, from timeoutSeconds) less a margin when shorter; a review not decided by then is refused")
	f.StringVar(&o.probeAddr, "health-probe-bind-address", ":8081", "address of /healthz and /readyz")
	f.BoolVar(&o.leaderElect, "leader-elect", false, "elect a leader to write status and events (enable with more than one replica)")
	f.StringVar(&o.leaderElectionNS, "leader-election-namespace", "", "namespace of the leader election lease (default: the pod's namespace)")
	f.StringVar(&o.exceptionsNamespace, "exceptions-namespace", defaultExceptionsNamespace(),
		"the cluster exceptions namespace, whose exceptions may reach other namespaces ($POD_NAMESPACE when set)")
	f.BoolVar(&o.admissionPolicies, "admission-policies", true,
		"keep, on the leader, a ValidatingAdmissionPolicy compiled from each SecurityPolicy in force, its bindings and each namespace's PodSecurityParams, "+
			"so that the API server enforces the policies itself while no replica answers (where the API server serves ValidatingAdmissionPolicy v1; off, "+
			"what an earlier run compiled is removed)")
	f.BoolVar(&o.enableWebhooks, "enable-webhooks", true, "serve the admission webhooks (needs a serving certificate in --webhook-cert-dir)")
	f.IntVar(&o.webhookPort, "webhook-port", 9443, "port of the admission webhooks' HTTPS server")
	f.StringVar(&o.webhookBindAddress, "webhook-bind-address", "", "address the admission webhooks' HTTPS server listens on (default: every address)")
	f.DurationVar(&o.webhookDrain, "webhook-shutdown-drain", webhooks.DefaultShutdownDrain,
		"on stop, how long the webhook server keeps answering, not ready and closing each connection after its answer, before it closes; keep it below the pod's terminationGracePeriodSeconds less its preStop sleep")
	f.StringVar(&o.webhookCertDir, "webhook-cert-dir", "/tmp/k8s-webhook-server/serving-certs", "directory holding the webhook serving certificate, tls.crt and tls.key")
	f.BoolVar(&o.certRotation, "cert-rotation", true, "generate and rotate the serving certificate in --webhook-secret and keep the webhook configuration's caBundle current; "+
		"disable when cert-manager provides the certificate")
	f.StringVar(&o.webhookNamespace, "webhook-namespace", defaultExceptionsNamespace(), "namespace of the webhook Service and certificate Secret ($POD_NAMESPACE when set)")
	f.StringVar(&o.webhookService, "webhook-service", "podsieve-webhook", "the Service in front of the webhooks; the certificate is issued for it")
	f.StringVar(&o.webhookSecret, "webhook-secret", "podsieve-webhook-cert", "the Secret that holds the CA and serving certificate, mounted at --webhook-cert-dir")
	f.StringVar(&o.webhookConfiguration, "webhook-configuration", "podsieve", "the ValidatingWebhookConfiguration whose caBundle is kept current")
	f.StringSliceVar(&o.webhookDNSNames, "webhook-dns-names", nil, "more DNS names for the serving certificate, for a manager run outside the cluster")
	f.BoolVar(&o.backgroundScan, "background-scan", true, "scan existing pods and workloads on the leader and write PolicyReports (needs the wgpolicyk8s.io PolicyReport CRD; off with a log line without it)")
	f.DurationVar(&o.backgroundResync, "background-resync-period", time.Hour, "how often the background scan re-scans every namespace, to catch what an event missed")
	f.StringVar(&o.reportAPI, "report-api", string(background.ReportAPIAuto), "where the background scan writes its results: auto (openreports.io Reports when their CRD is served, else wgpolicyk8s.io PolicyReports, else nothing until one is), openreports or wgpolicyk8s")
	f.BoolVar(&o.backgroundAllPods, "background-report-controlled-pods", false,
		"report every result of a pod that a scanned controller (Deployment, StatefulSet, DaemonSet, CronJob, ...) controls; by default such a pod is reported only where its result differs from its controller's, as when a mutating webhook injected a container")
	f.Float64Var(&o.backgroundWrites, "background-writes-per-second", 20, "the most report writes (creations, updates, deletions) the background scan sends per second")
	f.BoolVar(&o.backgroundEvents, "background-events", true, "send a Warning event (reason PolicyViolation) on each violating object that no controller owns, as the webhook would word its refusal; rate-limited, and repeated at most once per resync period")
	// Real namespaces hold a handful of exceptions; every replica holds each
	// one compiled (a maximal one about 50 KiB, BenchmarkHeapPerException),
	// so 100 maximal exceptions cost about 5 MiB per replica and per
	// namespace. See docs/operations.md.
	f.IntVar(&o.maxExceptionsPerNS, "max-exceptions-per-namespace", 100,
		"PolicyExceptions one namespace may hold: the webhook refuses creations beyond it, and the newest beyond it are not in force (Ready=False, LimitExceeded); 0 sets no limit")
	goflags := flag.NewFlagSet("manager", flag.ContinueOnError)
	addKubeconfigFlag(goflags)
	o.zap.BindFlags(goflags)
	f.AddGoFlagSet(goflags)
	return cmd
}

func defaultExceptionsNamespace() string {
	if ns := os.Getenv("POD_NAMESPACE"); ns != "" {
		return ns
	}
	return "podsieve-system"
}

func (o *managerOptions) run(ctx context.Context) error {
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&o.zap)))
	log := ctrl.Log.WithName("manager")
	log.Info("starting", "version", buildinfo.String(), "exceptionsNamespace", o.exceptionsNamespace)

	scheme, err := newScheme()
	if err != nil {
		return err
	}
	if err := o.validate(); err != nil {
		return err
	}
	cfg, err := ctrl.GetConfig()
	if err != nil {
		return fmt.Errorf("kubeconfig: %w", err)
	}
	mgr, webhookServer, err := o.newManager(cfg, scheme)
	if err != nil {
		return err
	}
	usage := controllers.NewExceptionUsage()
	ix, err := o.setupControllers(ctx, mgr, cfg, usage)
	if err != nil {
		return err
	}
	if err := o.setupWebhooks(ctx, mgr, ix, usage); err != nil {
		return err
	}
	if err := addHealthChecks(mgr, webhookServer, ix); err != nil {
		return err
	}
	return mgr.Start(ctx)
}

// newScheme holds the Kubernetes types, podsieve's and both PolicyReport
// APIs'.
func newScheme() (*runtime.Scheme, error) {
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{
		clientgoscheme.AddToScheme, policyv1alpha1.AddToScheme, openreportsv1alpha1.Install, reportv1alpha2.AddToScheme,
	} {
		if err := add(scheme); err != nil {
			return nil, err
		}
	}
	return scheme, nil
}

// validate refuses flag values the manager cannot run with, before it
// connects to anything.
func (o *managerOptions) validate() error {
	if !slices.Contains(background.ReportAPIs, background.ReportAPI(o.reportAPI)) {
		return fmt.Errorf("--report-api %q: use auto, openreports or wgpolicyk8s", o.reportAPI)
	}
	if !(o.backgroundWrites > 0 && o.backgroundWrites <= 1000) { // NaN too
		return fmt.Errorf("--background-writes-per-second %g: use a rate above 0 and at most 1000", o.backgroundWrites)
	}
	if o.backgroundResync <= 0 {
		return fmt.Errorf("--background-resync-period %s: use a positive duration such as 1h", o.backgroundResync)
	}
	if o.maxExceptionsPerNS < 0 {
		return fmt.Errorf("--max-exceptions-per-namespace %d: use 0 (no limit) or a positive number", o.maxExceptionsPerNS)
	}
	if o.maxConcurrentReviews <= 0 || o.reviewQueueTimeout <= 0 || o.maxReviewTime <= 0 {
		return fmt.Errorf("--max-concurrent-reviews %d, --review-queue-timeout %s, --max-review-time %s: each must be positive",
			o.maxConcurrentReviews, o.reviewQueueTimeout, o.maxReviewTime)
	}
	return nil
}

// newManager creates the manager with its metrics and webhook servers; the
// webhook server drains before the manager stops.
func (o *managerOptions) newManager(cfg *rest.Config, scheme *runtime.Scheme) (ctrl.Manager, *webhooks.DrainingServer, error) {
	var tlsOpts []func(*tls.Config)
	if !o.enableHTTP2 {
		// HTTP/2 rapid reset (CVE-2023-44487, CVE-2023-39325): a client can
		// make the server start and cancel streams faster than it can
		// refuse them. The API server calls webhooks over HTTP/1.1 anyway.
		tlsOpts = append(tlsOpts, func(c *tls.Config) { c.NextProtos = []string{"http/1.1"} })
	}
	metricsOpts := metricsserver.Options{BindAddress: o.metricsAddr, SecureServing: o.metricsSecure, TLSOpts: tlsOpts}
	if o.metricsSecure {
		// As kubebuilder v4 scaffolds it: only callers with get on /metrics.
		metricsOpts.FilterProvider = filters.WithAuthenticationAndAuthorization
		metricsOpts.CertDir = o.metricsCertDir
	}
	webhookServer := &webhooks.DrainingServer{
		Server: webhook.NewServer(webhook.Options{Host: o.webhookBindAddress, Port: o.webhookPort, CertDir: o.webhookCertDir, TLSOpts: tlsOpts}),
		Drain:  o.webhookDrain,
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                        scheme,
		Metrics:                       metricsOpts,
		HealthProbeBindAddress:        o.probeAddr,
		LeaderElection:                o.leaderElect,
		LeaderElectionID:              "podsieve.policy.podsieve.dev",
		LeaderElectionNamespace:       o.leaderElectionNS,
		LeaderElectionReleaseOnCancel: true,
		WebhookServer:                 webhookServer,
		// The controllers are a fixed set with distinct names. The name check
		// is process-wide and would refuse a second manager in one process
		// (the tests start several).
		Controller: ctrlconfig.Controller{SkipNameValidation: ptr.To(true)},
		Cache:      controllers.CacheOptions(),
	})
	if err != nil {
		return nil, nil, fmt.Errorf("create manager: %w", err)
	}
	return mgr, webhookServer, nil
}

// setupControllers sets up the controllers and the background scan, and
// returns the index they feed. --admission-policies is turned off, with a
// log line, when the API server cannot serve them.
func (o *managerOptions) setupControllers(ctx context.Context, mgr ctrl.Manager, cfg *rest.Config, usage *controllers.ExceptionUsage) (*index.Index, error) {
	scan := background.Options{Disabled: !o.backgroundScan, ResyncPeriod: o.backgroundResync, ReportAPI: background.ReportAPI(o.reportAPI),
		ReportControlledPods: o.backgroundAllPods, WritesPerSecond: o.backgroundWrites}
	if o.backgroundEvents {
		scan.Events = mgr.GetEventRecorder(controllers.ReportingController)
	}
	// Only a manager that serves the webhooks checks their configuration.
	webhookConfiguration := ""
	if o.enableWebhooks {
		webhookConfiguration = o.webhookConfiguration
	}
	admissionPolicies := o.admissionPolicies
	if admissionPolicies {
		if served, err := servesAdmissionPolicies(cfg); !served {
			ctrl.Log.WithName("manager").Info("the API server does not serve ValidatingAdmissionPolicy v1, or the PodSecurityParams CRD is missing; only the webhook enforces (--admission-policies is off)", "error", err)
			admissionPolicies = false
		}
	}
	return controllers.Setup(ctx, mgr, controllers.Options{
		AdmissionPolicies:    admissionPolicies,
		ExceptionsNamespace:  o.exceptionsNamespace,
		Usage:                usage,
		Background:           scan,
		WebhookConfiguration: webhookConfiguration,
		OwnNamespace:         o.webhookNamespace,

		MaxExceptionsPerNamespace: o.maxExceptionsPerNS,
	})
}

// addHealthChecks: /healthz answers while the process runs; /readyz fails
// while the webhook server drains and until the index is built.
func addHealthChecks(mgr ctrl.Manager, webhookServer *webhooks.DrainingServer, ix *index.Index) error {
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("webhook-draining", webhookServer.ReadyCheck); err != nil {
		return err
	}
	return mgr.AddReadyzCheck("index", func(*http.Request) error {
		if !ix.Ready() {
			return errors.New("the index is not built yet")
		}
		return nil
	})
}

// The certificate rotation keeps the Secret and the webhook configuration's
// caBundle current. cert-controller reads both through an informer (list
// and watch, which resourceNames cannot narrow) and writes them with
// Update only, so writes are limited to the two objects by name. Renaming
// them (--webhook-secret, --webhook-configuration) needs these names changed
// too.
// +kubebuilder:rbac:groups="",namespace=podsieve-system,resources=secrets,verbs=get;list;watch
// +kubebuilder:rbac:groups="",namespace=podsieve-system,resources=secrets,verbs=update,resourceNames=podsieve-webhook-cert
// +kubebuilder:rbac:groups=admissionregistration.k8s.io,resources=validatingwebhookconfigurations,verbs=get;list;watch
// +kubebuilder:rbac:groups=admissionregistration.k8s.io,resources=validatingwebhookconfigurations,verbs=update,resourceNames=podsieve

// The metrics endpoint asks the API server who calls it and whether they
// may (filters.WithAuthenticationAndAuthorization).
// +kubebuilder:rbac:groups=authentication.k8s.io,resources=tokenreviews,verbs=create
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create

// setupWebhooks serves the admission webhooks once a serving certificate is
// in place: generated and rotated by the manager itself (cert-controller),
// or provided in --webhook-cert-dir (cert-manager, or a test). /readyz fails
// until they serve.
func (o *managerOptions) setupWebhooks(ctx context.Context, mgr ctrl.Manager, ix *index.Index, usage *controllers.ExceptionUsage) error {
	if !o.enableWebhooks {
		return nil
	}
	certsReady := make(chan struct{})
	if o.certRotation {
		svc := o.webhookService + "." + o.webhookNamespace + ".svc"
		if err := rotator.AddRotator(mgr, &rotator.CertRotator{
			SecretKey:      types.NamespacedName{Namespace: o.webhookNamespace, Name: o.webhookSecret},
			CertDir:        o.webhookCertDir,
			CAName:         "podsieve-ca",
			CAOrganization: "podsieve",
			DNSName:        svc,
			ExtraDNSNames:  append([]string{svc + ".cluster.local"}, o.webhookDNSNames...),
			IsReady:        certsReady,
			Webhooks:       []rotator.WebhookInfo{{Name: o.webhookConfiguration, Type: rotator.Validating}},
			// Every replica serves the webhooks, so every replica keeps its
			// certificate files current.
			RequireLeaderElection: false,
		}); err != nil {
			return fmt.Errorf("set up certificate rotation: %w", err)
		}
	} else {
		close(certsReady)
	}
	var serving atomic.Bool
	go func() {
		select {
		case <-certsReady:
		case <-ctx.Done():
			return
		}
		if err := webhooks.Setup(mgr, ix, webhooks.Options{
			ExceptionsNamespace: o.exceptionsNamespace, ExceptionsApplied: usage.Applied,
			MaxConcurrentReviews: o.maxConcurrentReviews, ReviewQueueTimeout: o.reviewQueueTimeout, MaxReviewTime: o.maxReviewTime,
			ExceptionMetricLabel: o.metricsExceptionLabel,

			MaxExceptionsPerNamespace: o.maxExceptionsPerNS,
		}); err != nil {
			ctrl.Log.Error(err, "cannot serve the admission webhooks")
			return
		}
		serving.Store(true)
	}()
	return mgr.AddReadyzCheck("webhook", func(req *http.Request) error {
		if !serving.Load() {
			return errors.New("the webhook serving certificate is not ready yet")
		}
		return mgr.GetWebhookServer().StartedChecker()(req)
	})
}

// servesAdmissionPolicies reports whether the API server serves
// ValidatingAdmissionPolicy and its bindings in admissionregistration.k8s.io/v1
// (Kubernetes 1.30 and later).
func servesAdmissionPolicies(cfg *rest.Config) (bool, error) {
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return false, err
	}
	list, err := dc.ServerResourcesForGroupVersion(admissionregistrationv1.SchemeGroupVersion.String())
	if err != nil {
		return false, err
	}
	found := 0
	for _, r := range list.APIResources {
		if r.Name == "validatingadmissionpolicies" || r.Name == "validatingadmissionpolicybindings" {
			found++
		}
	}
	if found != 2 {
		return false, nil
	}
	// The policies' parameters: without their CRD, every policy that
	// honours exceptions would refuse every write it matches.
	params, err := dc.ServerResourcesForGroupVersion(policyv1alpha1.GroupVersion.String())
	if err != nil {
		return false, err
	}
	for _, r := range params.APIResources {
		if r.Name == "podsecurityparams" {
			return true, nil
		}
	}
	return false, fmt.Errorf("the PodSecurityParams CRD (podsecurityparams.policy.podsieve.dev) is not installed: apply config/crd or the chart's CRDs")
}
