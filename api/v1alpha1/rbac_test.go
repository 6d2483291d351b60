package v1alpha1_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

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

	// docs/background.md: whoever may create events can write one that
	// names podsieve, and the built-in edit and admin roles may; podsieve's
	// record (an exception's status, the PolicyReports) they cannot write.
	// The ValidatingAdmissionPolicy that docs/background.md shows refuses an
	// event naming podsieve from anyone but podsieve's ServiceAccount.
	It("lets a namespace editor forge podsieve's events until the documented admission policy refuses them, never its status or reports", func() {
		for range 2 {
			Expect(testenv.AggregateClusterRoles(ctx, k8s)).To(Succeed())
		}
		regarding := corev1.ObjectReference{APIVersion: "v1", Kind: "Pod", Namespace: mine, Name: "web"}
		forged := func(name string) *eventsv1.Event {
			return &eventsv1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: mine, Name: name},
				EventTime: metav1.NowMicro(), Type: corev1.EventTypeWarning, Reason: "PolicyViolation", Action: "Scan", Note: "forged",
				ReportingController: "podsieve", ReportingInstance: "podsieve-podsieve-manager-0", Regarding: regarding}
		}
		forgedCore := func(name string) *corev1.Event {
			return &corev1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: mine, Name: name},
				InvolvedObject: regarding, Type: corev1.EventTypeWarning, Reason: "PolicyViolation", Message: "forged",
				Source: corev1.EventSource{Component: "podsieve"}}
		}
		for _, user := range []string{"developer", "owner"} {
			c := as(user)
			Expect(c.Create(ctx, forged("forged-"+user))).To(Succeed(), "the built-in %s role no longer creates events: update docs/background.md", user)
			Expect(c.Create(ctx, forgedCore("forged-core-"+user))).To(Succeed(), user)

			pe := exception(mine, "status-by-"+user)
			Expect(c.Create(ctx, pe)).To(Succeed(), user)
			pe.Status.Policies = "forged"
			Expect(apierrors.IsForbidden(c.Status().Update(ctx, pe))).To(BeTrue(), "%s wrote an exception's status", user)
			Expect(c.Delete(ctx, pe)).To(Succeed(), user)
			report := &reportv1alpha2.PolicyReport{ObjectMeta: metav1.ObjectMeta{Namespace: mine, Name: "by-" + user}}
			Expect(apierrors.IsForbidden(c.Create(ctx, report))).To(BeTrue(), "%s created a PolicyReport", user)
			// The parameters of the API server's form of the policies
			// waive what they hold: only podsieve writes them.
			params := &policyv1alpha1.PodSecurityParams{ObjectMeta: metav1.ObjectMeta{Namespace: mine, Name: "podsieve"}}
			Expect(apierrors.IsForbidden(c.Create(ctx, params))).To(BeTrue(), "%s created PodSecurityParams", user)
			Expect(apierrors.IsForbidden(c.Delete(ctx, params))).To(BeTrue(), "%s deleted PodSecurityParams", user)
		}

		doc, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "docs", "background.md"))
		Expect(err).NotTo(HaveOccurred())
		var policy string
		for _, block := range strings.Split(string(doc), "```yaml\n")[1:] {
			if y, _, _ := strings.Cut(block, "```"); strings.Contains(y, "kind: ValidatingAdmissionPolicy\n") {
				policy = y
			}
		}
		Expect(policy).NotTo(BeEmpty(), "docs/background.md shows no ValidatingAdmissionPolicy")
		file := filepath.Join(GinkgoT().TempDir(), "podsieve-events.yaml")
		Expect(os.WriteFile(file, []byte(policy), 0o600)).To(Succeed())
		kubectl("apply", "-f", file)
		DeferCleanup(func() { kubectl("delete", "--ignore-not-found", "-f", file) })

		manager := "system:serviceaccount:podsieve-system:podsieve-manager"
		Expect(testenv.BindUser(ctx, k8s, mine, manager, "ClusterRole", "edit")).To(Succeed())
		for _, user := range []string{"developer", "owner"} {
			c := as(user)
			// The API server's policy informer takes a moment.
			Eventually(func() error { return c.Create(ctx, forged("refused-"+user)) }).
				Should(MatchError(ContainSubstring("only podsieve's manager may write events")), user)
			Expect(c.Create(ctx, forgedCore("refused-core-"+user))).
				To(MatchError(ContainSubstring("only podsieve's manager may write events")), user)
			other := forged("other-" + user)
			other.ReportingController, other.ReportingInstance = "team-a/deployer", "deployer-0"
			Expect(c.Create(ctx, other)).To(Succeed(), "%s may still write events of their own", user)
		}
		Expect(as(manager).Create(ctx, forged("by-podsieve"))).To(Succeed())
	})

	It("lets the holder of podsieve-policy-admin write SecurityPolicies", func() {
		sp := &policyv1alpha1.SecurityPolicy{ObjectMeta: metav1.ObjectMeta{Name: "by-platform"}, Spec: policyv1alpha1.SecurityPolicySpec{
			Rules: []policyv1alpha1.PolicyRule{{Name: "r", PodSecurity: policyv1alpha1.PodSecurity{Level: policyv1alpha1.LevelBaseline}}}}}
		Expect(as("platform").Create(ctx, sp)).To(Succeed())
		Expect(k8s.Delete(ctx, sp)).To(Succeed())
	})
})
