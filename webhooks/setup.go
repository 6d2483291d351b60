package webhooks

import (
	"fmt"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	policyv1alpha1 "github.com/podsieve/podsieve/api/v1alpha1"
	"github.com/podsieve/podsieve/internal/engine"
	"github.com/podsieve/podsieve/internal/index"
)

// Options configure the webhooks.
type Options struct {
	ExceptionsNamespace string
	// Clock tells the time for expiry and guardrails; the real clock when nil.
	Clock clock.PassiveClock
	// ExceptionsApplied is told which exceptions each request used; see
	// PodAdmission.ExceptionsApplied.
	ExceptionsApplied func(sources []engine.Source, at time.Time)
	// MaxExceptionsPerNamespace refuses the creation of a PolicyException in
	// a namespace that holds that many already; 0 sets no limit.
	MaxExceptionsPerNamespace int
	// MaxConcurrentReviews, ReviewQueueTimeout and MaxReviewTime bound the
	// pod reviews; see PodAdmission. Zero means the default.
	MaxConcurrentReviews int
	ReviewQueueTimeout   time.Duration
	MaxReviewTime        time.Duration
	// ExceptionMetricLabel gives podsieve_exceptions_applied_total a series
	// per exception (--metrics-exception-label).
	ExceptionMetricLabel bool
}

// Setup registers every admission handler with the manager's webhook
// server. Every replica serves them from its own index.
func Setup(mgr ctrl.Manager, ix *index.Index, opts Options) error {
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	exceptionLabel.Store(opts.ExceptionMetricLabel)
	mgr.GetWebhookServer().Register(PodsPath, NewPodWebhook(&PodAdmission{
		Index: ix, Clock: opts.Clock, Namespaces: mgr.GetAPIReader(), ExceptionsApplied: opts.ExceptionsApplied,
		MaxConcurrentReviews: opts.MaxConcurrentReviews, ReviewQueueTimeout: opts.ReviewQueueTimeout, MaxReviewTime: opts.MaxReviewTime,
	}))
	if err := ctrl.NewWebhookManagedBy(mgr, &policyv1alpha1.SecurityPolicy{}).
		WithValidator(SecurityPolicyValidator{}).Complete(); err != nil {
		return fmt.Errorf("register the SecurityPolicy webhook: %w", err)
	}
	if err := ctrl.NewWebhookManagedBy(mgr, &policyv1alpha1.PolicyException{}).
		WithValidator(&PolicyExceptionValidator{Index: ix, Clock: opts.Clock, ExceptionsNamespace: opts.ExceptionsNamespace,
			MaxPerNamespace: opts.MaxExceptionsPerNamespace}).Complete(); err != nil {
		return fmt.Errorf("register the PolicyException webhook: %w", err)
	}
	return nil
}

// NewPodWebhook serves h over HTTP: it passes the API server's ?timeout= to
// h (withRequestTimeout), and logs with the object and resource but leaves
// the request ID and user to h's own lines, which always name them.
func NewPodWebhook(h *PodAdmission) *admission.Webhook {
	return &admission.Webhook{
		Handler:         h,
		WithContextFunc: withRequestTimeout,
		LogConstructor: func(base logr.Logger, req *admission.Request) logr.Logger {
			if req == nil {
				return base
			}
			return base.WithValues("object", klog.KRef(req.Namespace, req.Name), "resource", req.Resource)
		},
	}
}
