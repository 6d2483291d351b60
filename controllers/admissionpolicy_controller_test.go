package controllers

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyv1alpha1 "github.com/podsieve/podsieve/api/v1alpha1"
	"github.com/podsieve/podsieve/internal/admissionpolicy"
	"github.com/podsieve/podsieve/internal/engine"
	"github.com/podsieve/podsieve/internal/index"
	"github.com/podsieve/podsieve/internal/testenv"
)

// TestAdmissionPoliciesEnforceWithoutPodsieve: the reconcilers write a
// policy's ValidatingAdmissionPolicy, its bindings and the namespace's
// parameters from the index into a real API server, which then refuses a
// violating pod and admits one an exception in force waives, with nothing of
// podsieve answering; the exception's leaving the index withdraws the
// waiver; switching the feature off removes everything and says so.
func TestAdmissionPoliciesEnforceWithoutPodsieve(t *testing.T) {
	env, cfg, err := testenv.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c, err := client.New(cfg, client.Options{Scheme: testenv.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	for _, ns := range []string{"apps", "podsieve-system"} {
		if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			t.Fatal(err)
		}
		// No controller-manager in envtest creates it; pods need it.
		if err := c.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "default"},
			AutomountServiceAccountToken: ptr.To(false)}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	sp := &policyv1alpha1.SecurityPolicy{ObjectMeta: metav1.ObjectMeta{Name: "pss"}, Spec: policyv1alpha1.SecurityPolicySpec{
		Action:     policyv1alpha1.ActionEnforce,
		Rules:      []policyv1alpha1.PolicyRule{{Name: "baseline", PodSecurity: policyv1alpha1.PodSecurity{Level: policyv1alpha1.LevelBaseline, Version: "latest"}}},
		Exceptions: &policyv1alpha1.ExceptionGuardrails{AllowedControls: []policyv1alpha1.ControlName{policyv1alpha1.ControlCapabilities}},
	}}
	if err := c.Create(ctx, sp); err != nil {
		t.Fatal(err)
	}
	p, err := engine.CompilePolicy(sp)
	if err != nil {
		t.Fatal(err)
	}
	ix := index.New("podsieve-system")
	ix.SetPolicy(p)
	clock := clocktesting.NewFakePassiveClock(time.Date(2026, 11, 28, 0, 0, 0, 0, time.UTC))
	opts := admissionpolicy.Options{SystemNamespaces: []string{"kube-system", "podsieve-system"}}
	// podsieve's webhook configuration excludes a namespace besides the
	// system ones (the chart's webhooks.excludeNamespaces); it calls
	// nothing here (configmaps only, failing open).
	vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "podsieve"},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{
			Name: podWebhook, AdmissionReviewVersions: []string{"v1"},
			ClientConfig:  admissionregistrationv1.WebhookClientConfig{URL: ptr.To("https://127.0.0.1:1/validate-pods")},
			FailurePolicy: ptr.To(admissionregistrationv1.Ignore),
			SideEffects:   ptr.To(admissionregistrationv1.SideEffectClassNone),
			NamespaceSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
				{Key: engine.NamespaceNameLabel, Operator: metav1.LabelSelectorOpNotIn, Values: []string{"kube-system", "podsieve-system", "legacy"}}}},
			Rules: []admissionregistrationv1.RuleWithOperations{{Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
				Rule: admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"}}}},
		}}}
	if err := c.Create(ctx, vwc); err != nil {
		t.Fatal(err)
	}
	policies := &AdmissionPolicyReconciler{Client: c, Index: ix, Clock: clock, Options: opts, Enabled: true, WebhookConfiguration: "podsieve"}
	params := &AdmissionParamsReconciler{Client: c, Index: ix, Clock: clock, Options: opts, ExceptionsNamespace: "podsieve-system", Enabled: true}
	reconcile := func(r interface {
		Reconcile(context.Context, ctrl.Request) (ctrl.Result, error)
	}, name string) {
		t.Helper()
		if _, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKey{Name: name}}); err != nil {
			t.Fatalf("reconcile %s: %v", name, err)
		}
	}
	condition := func() *metav1.Condition {
		t.Helper()
		var got policyv1alpha1.SecurityPolicy
		if err := c.Get(ctx, client.ObjectKey{Name: "pss"}, &got); err != nil {
			t.Fatal(err)
		}
		return meta.FindStatusCondition(got.Status.Conditions, policyv1alpha1.ConditionEnforcedByAPIServer)
	}

	reconcile(policies, "pss")
	var vap admissionregistrationv1.ValidatingAdmissionPolicy
	if err := c.Get(ctx, client.ObjectKey{Name: admissionpolicy.PolicyName("pss")}, &vap); err != nil {
		t.Fatalf("the ValidatingAdmissionPolicy: %v", err)
	}
	if sel := vap.Spec.MatchConstraints.NamespaceSelector; sel == nil || len(sel.MatchExpressions) != 1 ||
		!slices.Equal(sel.MatchExpressions[0].Values, []string{"kube-system", "podsieve-system", "legacy"}) {
		t.Errorf("the ValidatingAdmissionPolicy does not leave alone the namespaces the webhook excludes: %+v", sel)
	}
	if len(vap.OwnerReferences) != 1 || vap.OwnerReferences[0].UID != sp.UID {
		t.Errorf("the ValidatingAdmissionPolicy is not owned by the SecurityPolicy: %+v", vap.OwnerReferences)
	}
	var bindings admissionregistrationv1.ValidatingAdmissionPolicyBindingList
	if err := c.List(ctx, &bindings, client.MatchingLabels{admissionpolicy.PolicyLabel: "pss"}); err != nil || len(bindings.Items) != 2 {
		t.Fatalf("bindings: %d, %v", len(bindings.Items), err)
	}
	if got := condition(); got == nil || got.Status != metav1.ConditionTrue || got.Reason != policyv1alpha1.ReasonAdmissionPolicyApplied || got.ObservedGeneration != sp.Generation {
		t.Fatalf("EnforcedByAPIServer: %+v", got)
	}

	// The exception, in force in the index as the PolicyException
	// controller would place it.
	pe := &policyv1alpha1.PolicyException{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "mesh"}, Spec: policyv1alpha1.PolicyExceptionSpec{
		Exceptions: []policyv1alpha1.ExceptionTarget{{PolicyName: "pss", RuleNames: []string{"*"}}},
		PodSecurity: []policyv1alpha1.PodSecurityExclusion{{ControlName: policyv1alpha1.ControlCapabilities, ContainerNames: []string{"istio-init"},
			RestrictedField: "spec.initContainers[*].securityContext.capabilities.add", Values: []string{"NET_ADMIN", "NET_RAW"}}},
	}}
	if err := c.Create(ctx, pe); err != nil {
		t.Fatal(err)
	}
	e, err := engine.CompileException(pe, "podsieve-system")
	if err != nil {
		t.Fatal(err)
	}
	if st := e.State(ix.Snapshot().Policy, clock.Now()); !st.Ready {
		t.Fatalf("the exception is not in force: %+v", st)
	}
	ix.SetException(e)
	reconcile(params, "apps")
	var held policyv1alpha1.PodSecurityParams
	if err := c.Get(ctx, client.ObjectKey{Namespace: "apps", Name: admissionpolicy.ParamsName}, &held); err != nil {
		t.Fatal(err)
	}
	if len(held.Spec.Exceptions) != 1 || held.Spec.Exceptions[0].Source != "exception/apps/mesh" {
		t.Fatalf("the parameters hold %+v", held.Spec.Exceptions)
	}
	// Someone else's edit of the parameters (a waiver of everything) is
	// written back.
	held.Spec.Exceptions = append(held.Spec.Exceptions, policyv1alpha1.CompiledException{Source: "exception/apps/forged", WholeRule: ptr.To(true),
		Targets: []policyv1alpha1.CompiledTarget{{Policy: "pss", Rule: "baseline"}}})
	if err := c.Update(ctx, &held); err != nil {
		t.Fatal(err)
	}
	reconcile(params, "apps")
	if err := c.Get(ctx, client.ObjectKey{Namespace: "apps", Name: admissionpolicy.ParamsName}, &held); err != nil || len(held.Spec.Exceptions) != 1 {
		t.Fatalf("the forged waiver stays in the parameters: %+v, %v", held.Spec, err)
	}
	reconcile(params, "podsieve-system")
	if err := c.Get(ctx, client.ObjectKey{Namespace: "podsieve-system", Name: admissionpolicy.ParamsName}, &held); !apierrors.IsNotFound(err) {
		t.Errorf("podsieve's own namespace, never enforced, has parameters: %v", err)
	}

	pod := func(name string, init bool) *corev1.Pod {
		ctr := corev1.Container{Name: "istio-init", Image: "docker.io/istio/proxyv2:1.24.0",
			SecurityContext: &corev1.SecurityContext{Capabilities: &corev1.Capabilities{Add: []corev1.Capability{"NET_ADMIN", "NET_RAW"}}}}
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: name}}
		p.Spec.Containers = []corev1.Container{{Name: "app", Image: "nginx:1.25"}}
		if init {
			p.Spec.InitContainers = []corev1.Container{ctr}
		} else {
			p.Spec.Containers = append(p.Spec.Containers, ctr)
		}
		return p
	}
	privileged := pod("privileged", true)
	privileged.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{Privileged: ptr.To(true)}
	// The API server itself decides: nothing of podsieve answers here.
	refused := func(p *corev1.Pod) error { return c.Create(ctx, p.DeepCopy(), client.DryRunAll) }
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		return refused(privileged) != nil, nil
	})
	if err != nil {
		t.Fatal("the API server never started enforcing the ValidatingAdmissionPolicy")
	}
	if err := refused(privileged); err == nil || !strings.Contains(err.Error(), `Pod apps/privileged is refused by SecurityPolicy "pss" rule "baseline" (baseline:latest)`) ||
		!strings.Contains(err.Error(), "Privileged Containers") {
		t.Errorf("the refusal does not name the object, policy, rule and control: %v", err)
	}
	if err := refused(pod("mesh", true)); err != nil {
		t.Errorf("the init container the exception waives is refused: %v", err)
	}
	if err := refused(pod("app-net-admin", false)); err == nil {
		t.Error("an app container with NET_ADMIN, which the exception does not waive, is admitted")
	}

	// The exception leaves the index (it expired, was deleted or is no
	// longer permitted): the waiver goes from the parameters.
	ix.DeleteException("apps", "mesh")
	reconcile(params, "apps")
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		return refused(pod("mesh", true)) != nil, nil
	})
	if err != nil {
		t.Error("the init container is still admitted after its exception left the index")
	}

	// Off: everything compiled goes, and the condition says why.
	policies.Enabled, params.Enabled = false, false
	reconcile(policies, "pss")
	reconcile(params, "apps")
	if err := c.Get(ctx, client.ObjectKey{Name: admissionpolicy.PolicyName("pss")}, &vap); !apierrors.IsNotFound(err) {
		t.Errorf("the ValidatingAdmissionPolicy is still there with the feature off: %v", err)
	}
	if err := c.Get(ctx, client.ObjectKey{Namespace: "apps", Name: admissionpolicy.ParamsName}, &held); !apierrors.IsNotFound(err) {
		t.Errorf("the parameters are still there with the feature off: %v", err)
	}
	if got := condition(); got == nil || got.Status != metav1.ConditionFalse || got.Reason != policyv1alpha1.ReasonAdmissionPolicyDisabled {
		t.Errorf("EnforcedByAPIServer with the feature off: %+v", got)
	}
}

// TestParamsGuardRefusesOtherWriters: with the guard in place, the manager
// (here, the test's admin user) writes PodSecurityParams; anyone else, even
// with a role that grants them, is refused by the API server.
func TestParamsGuardRefusesOtherWriters(t *testing.T) {
	env, cfg, err := testenv.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := client.New(cfg, client.Options{Scheme: testenv.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	if err := (&paramsGuard{client: c, enabled: true}).apply(ctx); err != nil {
		t.Fatal(err)
	}
	// mallory's role grants PodSecurityParams, as a custom role granting
	// every resource would.
	if err := c.Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "params-writer"}, Rules: []rbacv1.PolicyRule{{
		APIGroups: []string{"policy.podsieve.dev"}, Resources: []string{"podsecurityparams"}, Verbs: []string{"*"}}}}); err != nil {
		t.Fatal(err)
	}
	if err := c.Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "params-writer"},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "params-writer"},
		Subjects: []rbacv1.Subject{{APIGroup: "rbac.authorization.k8s.io", Kind: "User", Name: "mallory"}}}); err != nil {
		t.Fatal(err)
	}
	mallory := rest.CopyConfig(cfg)
	mallory.Impersonate = rest.ImpersonationConfig{UserName: "mallory"}
	m, err := client.New(mallory, client.Options{Scheme: testenv.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "apps"}}); err != nil {
		t.Fatal(err)
	}
	forged := admissionpolicy.ParamsObject("apps", []*admissionpolicy.ParamException{{Source: "exception/apps/forged", WholeRule: ptr.To(true),
		Targets: []policyv1alpha1.CompiledTarget{{Policy: "pss", Rule: "baseline"}}}})
	// The API server's admission hears of the new policy within a moment.
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		err := m.Create(ctx, forged.DeepCopy(), client.DryRunAll)
		return err != nil && strings.Contains(err.Error(), "PodSecurityParams are written by podsieve only"), nil
	})
	if err != nil {
		t.Fatal("mallory's PodSecurityParams is never refused")
	}
	if err := c.Create(ctx, forged.DeepCopy()); err != nil {
		t.Errorf("the manager's own write is refused: %v", err)
	}
}
