package webhooks

import (
	"fmt"
	"time"

	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	policyv1alpha1 "github.com/podsieve/podsieve/api/v1alpha1"
	"github.com/podsieve/podsieve/internal/index"
)

// Options configure the webhooks.
type Options struct {
	ExceptionsNamespace string
	// Clock tells the time for expiry and guardrails; the real clock when nil.
	Clock clock.PassiveClock
	// ExceptionsApplied is told which exceptions each request used; see
	// PodAdmission.ExceptionsApplied.
	ExceptionsApplied func(sources []string, at time.Time)
}

// Setup registers every admission handler with the manager's webhook
// server. Every replica serves them from its own index.
func Setup(mgr ctrl.Manager, ix *index.Index, opts Options) error {
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	mgr.GetWebhookServer().Register(PodsPath, &admission.Webhook{Handler: &PodAdmission{Index: ix, Clock: opts.Clock, Namespaces: mgr.GetAPIReader(), ExceptionsApplied: opts.ExceptionsApplied}})
	if err := ctrl.NewWebhookManagedBy(mgr, &policyv1alpha1.SecurityPolicy{}).
		WithValidator(SecurityPolicyValidator{}).Complete(); err != nil {
		return fmt.Errorf("register the SecurityPolicy webhook: %w", err)
	}
	if err := ctrl.NewWebhookManagedBy(mgr, &policyv1alpha1.PolicyException{}).
		WithValidator(&PolicyExceptionValidator{Index: ix, Clock: opts.Clock, ExceptionsNamespace: opts.ExceptionsNamespace}).Complete(); err != nil {
		return fmt.Errorf("register the PolicyException webhook: %w", err)
	}
	return nil
}
