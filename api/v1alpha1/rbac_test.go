package v1alpha1_test

import (
	"fmt"
	"path/filepath"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyv1alpha1 "github.com/podsieve/podsieve/api/v1alpha1"
	reportv1alpha2 "github.com/podsieve/podsieve/api/wgpolicyk8s/v1alpha2"
	"github.com/podsieve/podsieve/internal/testenv"
)

// as returns a client that impersonates a user.
func as(user string) client.Client {
	cl, err := testenv.As(cfg, user)
	Expect(err).NotTo(HaveOccurred())
	return cl
}

func exception(ns, name string) *policyv1alpha1.PolicyException {
	return &policyv1alpha1.PolicyException{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: policyv1alpha1.PolicyExceptionSpec{
		Exceptions: []policyv1alpha1.ExceptionTarget{{PolicyName: "p", RuleNames: []string{"*"}}},
	}}
}

var _ = Describe("Self-service RBAC", Ordered, func() {
	var mine, theirs string
	BeforeAll(func() {
		out := kubectl("apply", "-f", filepath.Join(testenv.RepoRoot(), "config", "rbac", "user_roles.yaml"))
		Expect(out).To(ContainSubstring("podsieve-exception-editor"))
		Expect(testenv.AggregateClusterRoles(ctx, k8s)).To(Succeed())
		mine, theirs = fmt.Sprintf("team-a-%d", GinkgoRandomSeed()%100000), fmt.Sprintf("team-b-%d", GinkgoRandomSeed()%100000)
		for _, ns := range []string{mine, theirs} {
			Expect(k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
		}
		bind := func(ns, user, role string) {
			Expect(testenv.BindUser(ctx, k8s, ns, user, "ClusterRole", role)).To(Succeed())
		}
		bind(mine, "developer", "edit")
		bind(mine, "owner", "admin")
		bind(mine, "auditor", "view")
		Expect(k8s.Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "platform-podsieve-policy-admin"},
			RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "podsieve-policy-admin"},
			Subjects: []rbacv1.Subject{{Kind: "User", APIGroup: "rbac.authorization.k8s.io", Name: "platform"}}})).To(Succeed())
	})

	It("lets a namespace editor or admin write PolicyExceptions in their namespace only", func() {
		for _, user := range []string{"developer", "owner"} {
			c := as(user)
			pe := exception(mine, "by-"+user)
			Expect(c.Create(ctx, pe)).To(Succeed(), user)
			pe.Spec.Justification = "updated"
			Expect(c.Update(ctx, pe)).To(Succeed(), user)
			Expect(c.Delete(ctx, pe)).To(Succeed(), user)
			Expect(apierrors.IsForbidden(c.Create(ctx, exception(theirs, "by-"+user)))).To(BeTrue(), "%s wrote an exception in another namespace", user)
		}
	})

	It("never lets a namespace editor or admin write a SecurityPolicy", func() {
		for _, user := range []string{"developer", "owner", "auditor"} {
			sp := &policyv1alpha1.SecurityPolicy{ObjectMeta: metav1.ObjectMeta{Name: "by-" + user}, Spec: policyv1alpha1.SecurityPolicySpec{
				Rules: []policyv1alpha1.PolicyRule{{Name: "r", PodSecurity: policyv1alpha1.PodSecurity{Level: policyv1alpha1.LevelPrivileged}}}}}
			Expect(apierrors.IsForbidden(as(user).Create(ctx, sp))).To(BeTrue(), "%s created a SecurityPolicy", user)
		}
	})

	It("lets a viewer read exceptions and policies but write nothing", func() {
		Expect(k8s.Create(ctx, exception(mine, "to-read"))).To(Succeed())
		c := as("auditor")
		var list policyv1alpha1.PolicyExceptionList
		Expect(c.List(ctx, &list, client.InNamespace(mine))).To(Succeed())
		Expect(list.Items).NotTo(BeEmpty())
		Expect(apierrors.IsForbidden(c.Create(ctx, exception(mine, "by-auditor")))).To(BeTrue())
		var other policyv1alpha1.PolicyExceptionList
		Expect(apierrors.IsForbidden(c.List(ctx, &other, client.InNamespace(theirs)))).To(BeTrue())
	})

	It("lets view, edit and admin read the PolicyReports of their namespace only", func() {
		Expect(k8s.Create(ctx, &reportv1alpha2.PolicyReport{ObjectMeta: metav1.ObjectMeta{Namespace: mine, Name: "to-read"}})).To(Succeed())
		// view aggregates into edit, edit into admin: kube-controller-manager
		// follows the chain until nothing changes, each pass here one link.
		for range 2 {
			Expect(testenv.AggregateClusterRoles(ctx, k8s)).To(Succeed())
		}
		for _, user := range []string{"auditor", "developer", "owner"} {
			c := as(user)
			var list reportv1alpha2.PolicyReportList
			Expect(c.List(ctx, &list, client.InNamespace(mine))).To(Succeed(), user)
			Expect(list.Items).To(ContainElement(HaveField("Name", "to-read")), user)
			var other reportv1alpha2.PolicyReportList
			Expect(apierrors.IsForbidden(c.List(ctx, &other, client.InNamespace(theirs)))).To(BeTrue(), "%s listed the reports of another namespace", user)
			Expect(apierrors.IsForbidden(c.Delete(ctx, &reportv1alpha2.PolicyReport{ObjectMeta: metav1.ObjectMeta{Namespace: mine, Name: "to-read"}}))).
				To(BeTrue(), "%s deleted a report: they are the scan's to write", user)
		}
	})

	// docs/background.md: an event that reads like podsieve's
	// (reportingController podsieve) is podsieve's only where nobody else
	// may create events; with the built-in roles and podsieve's, a
	// namespace editor or admin may not, in either API group.
	It("never lets a namespace editor or admin write an event, nor an exception's status", func() {
		for range 2 {
			Expect(testenv.AggregateClusterRoles(ctx, k8s)).To(Succeed())
		}
		regarding := corev1.ObjectReference{APIVersion: "v1", Kind: "Pod", Namespace: mine, Name: "web"}
		for _, user := range []string{"developer", "owner"} {
			c := as(user)
			forged := &eventsv1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: mine, Name: "forged-" + user},
				EventTime: metav1.NowMicro(), Type: corev1.EventTypeWarning, Reason: "PolicyViolation", Action: "Scan", Note: "forged",
				ReportingController: "podsieve", ReportingInstance: "podsieve-podsieve-manager-0", Regarding: regarding}
			Expect(apierrors.IsForbidden(c.Create(ctx, forged))).To(BeTrue(), "%s created an events.k8s.io event", user)
			core := &corev1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: mine, Name: "forged-core-" + user},
				InvolvedObject: regarding, Type: corev1.EventTypeWarning, Reason: "PolicyViolation", Message: "forged",
				Source: corev1.EventSource{Component: "podsieve"}}
			Expect(apierrors.IsForbidden(c.Create(ctx, core))).To(BeTrue(), "%s created a core event", user)

			pe := exception(mine, "status-by-"+user)
			Expect(c.Create(ctx, pe)).To(Succeed(), user)
			pe.Status.Policies = "forged"
			Expect(apierrors.IsForbidden(c.Status().Update(ctx, pe))).To(BeTrue(), "%s wrote an exception's status", user)
			Expect(c.Delete(ctx, pe)).To(Succeed(), user)
		}
	})

	It("lets the holder of podsieve-policy-admin write SecurityPolicies", func() {
		sp := &policyv1alpha1.SecurityPolicy{ObjectMeta: metav1.ObjectMeta{Name: "by-platform"}, Spec: policyv1alpha1.SecurityPolicySpec{
			Rules: []policyv1alpha1.PolicyRule{{Name: "r", PodSecurity: policyv1alpha1.PodSecurity{Level: policyv1alpha1.LevelBaseline}}}}}
		Expect(as("platform").Create(ctx, sp)).To(Succeed())
		Expect(k8s.Delete(ctx, sp)).To(Succeed())
	})
})
