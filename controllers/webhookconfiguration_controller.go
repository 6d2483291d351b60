package controllers

import (
	"context"
	"fmt"
	"slices"

	"github.com/prometheus/client_golang/prometheus"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
)

// ownNamespaceExcluded says whether the webhook configuration keeps
// podsieve's own namespace away from its pod webhooks. When it does not (a
// kustomize overlay that dropped the Namespace object, a hand edit), a
// podsieve outage also stops podsieve's own pods from being recreated: the
// cluster cannot repair itself.
var ownNamespaceExcluded = prometheus.NewGauge(prometheus.GaugeOpts{
	Name: "podsieve_own_namespace_excluded",
	Help: "1 when every pod webhook of podsieve's ValidatingWebhookConfiguration excludes the manager's namespace (namespaceSelector kubernetes.io/metadata.name NotIn), or there is no configuration; 0 when one does not.",
})

// webhookConfigurationPresent says whether podsieve's
// ValidatingWebhookConfiguration exists. Deleting it is the emergency way
// out of a lock-out (docs/operations.md); while it is gone nothing is
// judged, and nothing else would say so.
var webhookConfigurationPresent = prometheus.NewGauge(prometheus.GaugeOpts{
	Name: "podsieve_webhook_configuration_present",
	Help: "1 when podsieve's ValidatingWebhookConfiguration (--webhook-configuration) exists, 0 when it does not: then the API server sends podsieve nothing to judge.",
})

// Both start at 1 and change only on a successful read: a replica that
// has not checked yet, or serves no webhooks, or cannot read the
// configuration (which it logs, and retries) raises no alert.
func init() {
	ownNamespaceExcluded.Set(1)
	webhookConfigurationPresent.Set(1)
	metrics.Registry.MustRegister(ownNamespaceExcluded, webhookConfigurationPresent)
}

// WebhookConfigurationReconciler checks podsieve's own
// ValidatingWebhookConfiguration: every webhook that sees pods must exclude
// the namespace the manager runs in. It changes nothing (the installer owns
// the configuration); it logs what to fix and sets
// podsieve_own_namespace_excluded and podsieve_webhook_configuration_present,
// which alerts read.
type WebhookConfigurationReconciler struct {
	client.Client
	// Name is the ValidatingWebhookConfiguration (--webhook-configuration).
	Name string
	// Namespace is the manager's own namespace (--webhook-namespace).
	Namespace string
}

// The same read access the certificate rotation needs (cmd/podsieve).
// +kubebuilder:rbac:groups=admissionregistration.k8s.io,resources=validatingwebhookconfigurations,verbs=get;list;watch

// Reconcile checks that podsieve's ValidatingWebhookConfiguration exists and
// that each of its webhooks that sees pods excludes the manager's own
// namespace, and says what it finds in metrics and the log.
func (r *WebhookConfigurationReconciler) Reconcile(ctx context.Context, _ ctrl.Request) (ctrl.Result, error) {
	var vwc admissionregistrationv1.ValidatingWebhookConfiguration
	if err := r.Get(ctx, types.NamespacedName{Name: r.Name}, &vwc); err != nil {
		if !apierrors.IsNotFound(err) {
			return ctrl.Result{}, err
		}
		webhookConfigurationPresent.Set(0)
		ownNamespaceExcluded.Set(1) // nothing is sent to podsieve at all
		log.FromContext(ctx).Error(nil, "the ValidatingWebhookConfiguration does not exist: the API server sends podsieve no write to judge",
			"name", r.Name, "fix", "apply the chart or config/default of this install again")
		return ctrl.Result{}, nil
	}
	webhookConfigurationPresent.Set(1)
	problems := notExcluding(&vwc, r.Namespace)
	if len(problems) == 0 {
		ownNamespaceExcluded.Set(1)
		return ctrl.Result{}, nil
	}
	ownNamespaceExcluded.Set(0)
	for _, p := range problems {
		log.FromContext(ctx).Error(nil, p, "namespace", r.Namespace,
			"fix", "restore the webhook configuration from the chart or config/default of this install")
	}
	return ctrl.Result{}, nil
}

// notExcluding names each webhook of vwc that sees pods and does not
// exclude namespace by name.
func notExcluding(vwc *admissionregistrationv1.ValidatingWebhookConfiguration, namespace string) []string {
	var out []string
	for _, w := range vwc.Webhooks {
		if !seesPods(w.Rules) || excludes(w.NamespaceSelector, namespace) {
			continue
		}
		out = append(out, fmt.Sprintf(
			"webhook %s of ValidatingWebhookConfiguration %s does not exclude podsieve's own namespace %s: add it to the namespaceSelector's %s NotIn values, or podsieve's own pods cannot be recreated while podsieve is down",
			w.Name, vwc.Name, namespace, corev1.LabelMetadataName))
	}
	return out
}

func seesPods(rules []admissionregistrationv1.RuleWithOperations) bool {
	for _, r := range rules {
		if slices.Contains(r.Resources, "pods") || slices.Contains(r.Resources, "*") || slices.Contains(r.Resources, "*/*") {
			return true
		}
	}
	return false
}

// excludes tells whether sel refuses namespace by its name label. Any
// NotIn on the name that lists it does, since matchExpressions are ANDed.
func excludes(sel *metav1.LabelSelector, namespace string) bool {
	if sel == nil {
		return false
	}
	for _, e := range sel.MatchExpressions {
		if e.Key == corev1.LabelMetadataName && e.Operator == metav1.LabelSelectorOpNotIn && slices.Contains(e.Values, namespace) {
			return true
		}
	}
	return false
}

func (r *WebhookConfigurationReconciler) setup(mgr ctrl.Manager) error {
	// A configuration missing from the start sends no event: check once
	// when the caches have synced, then on every change of it.
	if err := mgr.Add(everyReplica(func(ctx context.Context) error {
		if !mgr.GetCache().WaitForCacheSync(ctx) {
			return fmt.Errorf("caches did not sync")
		}
		if _, err := r.Reconcile(ctx, ctrl.Request{}); err != nil && ctx.Err() == nil {
			log.FromContext(ctx).Error(err, "cannot read the webhook configuration", "name", r.Name)
		}
		return nil
	})); err != nil {
		return err
	}
	return ctrl.NewControllerManagedBy(mgr).
		For(&admissionregistrationv1.ValidatingWebhookConfiguration{}, builder.WithPredicates(
			predicate.NewPredicateFuncs(func(o client.Object) bool { return o.GetName() == r.Name }))).
		Named("webhookconfiguration").
		// Every replica exports the metric; the check only reads.
		WithOptions(controller.Options{NeedLeaderElection: ptr.To(false)}).
		Complete(r)
}
