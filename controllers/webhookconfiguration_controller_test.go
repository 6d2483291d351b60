package controllers

import (
	"context"
	"testing"

	dto "github.com/prometheus/client_model/go"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

// TestWebhookConfigurationExcludesOwnNamespace: the check of podsieve's
// webhook configuration passes only when every webhook that sees pods keeps
// the manager's namespace out by name.
func TestWebhookConfigurationExcludesOwnNamespace(t *testing.T) {
	nameNotIn := func(values ...string) *metav1.LabelSelector {
		return &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
			{Key: "kubernetes.io/metadata.name", Operator: metav1.LabelSelectorOpNotIn, Values: values},
			{Key: "podsieve.dev/allow-ignore", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"true"}},
		}}
	}
	webhook := func(name string, sel *metav1.LabelSelector, resources ...string) admissionregistrationv1.ValidatingWebhook {
		return admissionregistrationv1.ValidatingWebhook{
			Name: name, NamespaceSelector: sel,
			Rules: []admissionregistrationv1.RuleWithOperations{{Rule: admissionregistrationv1.Rule{Resources: resources}}},
		}
	}
	shipped := func(ns string) []admissionregistrationv1.ValidatingWebhook {
		return []admissionregistrationv1.ValidatingWebhook{
			webhook("pods.podsieve.dev", nameNotIn("kube-system", ns), "pods", "pods/ephemeralcontainers"),
			webhook("pods-opt-out.podsieve.dev", nameNotIn("kube-system", ns), "pods", "deployments"),
			webhook("policyexceptions.policy.podsieve.dev", nil, "policyexceptions"),
		}
	}
	cases := []struct {
		name     string
		webhooks []admissionregistrationv1.ValidatingWebhook // nil: no configuration
		want     float64                                     // podsieve_own_namespace_excluded
	}{
		{name: "as shipped", webhooks: shipped("security-tools"), want: 1},
		{name: "still excluding the base's namespace after a namespace overlay", webhooks: shipped("podsieve-system"), want: 0},
		{name: "one pod webhook without a namespace selector", webhooks: append(shipped("security-tools")[:1],
			webhook("pods-opt-out.podsieve.dev", nil, "pods")), want: 0},
		{name: "the name selected with In, not excluded", webhooks: []admissionregistrationv1.ValidatingWebhook{
			webhook("pods.podsieve.dev", &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
				{Key: "kubernetes.io/metadata.name", Operator: metav1.LabelSelectorOpIn, Values: []string{"security-tools"}}}}, "*")}, want: 0},
		{name: "webhooks that see no pods need no exclusion", webhooks: shipped("security-tools")[2:], want: 1},
		{name: "no configuration", want: 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var objs []client.Object
			if tc.webhooks != nil {
				objs = append(objs, &admissionregistrationv1.ValidatingWebhookConfiguration{
					ObjectMeta: metav1.ObjectMeta{Name: "podsieve"}, Webhooks: tc.webhooks})
			}
			scheme := runtime.NewScheme()
			if err := admissionregistrationv1.AddToScheme(scheme); err != nil {
				t.Fatal(err)
			}
			r := &WebhookConfigurationReconciler{
				Client: fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).Build(),
				Name:   "podsieve", Namespace: "security-tools",
			}
			ownNamespaceExcluded.Set(-1)
			webhookConfigurationPresent.Set(-1)
			if _, err := r.Reconcile(context.Background(), ctrl.Request{}); err != nil {
				t.Fatal(err)
			}
			var m dto.Metric
			if err := ownNamespaceExcluded.Write(&m); err != nil {
				t.Fatal(err)
			}
			if got := m.GetGauge().GetValue(); got != tc.want {
				t.Errorf("podsieve_own_namespace_excluded = %v, want %v", got, tc.want)
			}
			if err := webhookConfigurationPresent.Write(&m); err != nil {
				t.Fatal(err)
			}
			if got, want := m.GetGauge().GetValue(), map[bool]float64{true: 1, false: 0}[tc.webhooks != nil]; got != want {
				t.Errorf("podsieve_webhook_configuration_present = %v, want %v", got, want)
			}
		})
	}
}
