package background

import (
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	openreportsv1alpha1 "github.com/openreports/reports-api/apis/openreports.io/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/discovery"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	reportv1alpha2 "github.com/podsieve/podsieve/api/wgpolicyk8s/v1alpha2"
	"github.com/podsieve/podsieve/internal/report"
	"github.com/podsieve/podsieve/internal/testenv"
)

// The same scan written to OpenReports, against the API server with the
// OpenReports CRDs of the module whose types podsieve imports.
var _ = Describe("Background scan to OpenReports", Ordered, func() {
	// Installed for these specs only: with them served, a scan started with
	// --report-api=auto (the other specs') would write OpenReports.
	BeforeAll(func() {
		dir, err := testenv.OpenReportsCRDs()
		Expect(err).NotTo(HaveOccurred())
		opts := envtest.CRDInstallOptions{Paths: []string{dir}, ErrorIfPathMissing: true}
		_, err = envtest.InstallCRDs(cfg, opts)
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func() {
			// The API server's CRD finalizer deletes what is left of a
			// CRD's objects and then re-lists them every 5 s, for up to a
			// minute, until its cache shows none; on a loaded machine that
			// outlasts the suite's 15 s. Deleting the Reports here first,
			// and waiting for them to be gone, leaves it nothing to wait for.
			var reports openreportsv1alpha1.ReportList
			Expect(k8s.List(ctx, &reports)).To(Succeed())
			for i := range reports.Items {
				Expect(client.IgnoreNotFound(k8s.Delete(ctx, &reports.Items[i]))).To(Succeed())
			}
			Eventually(func(g Gomega) {
				g.Expect(k8s.List(ctx, &reports)).To(Succeed())
				g.Expect(reports.Items).To(BeEmpty())
			}).Should(Succeed())
			Expect(envtest.UninstallCRDs(cfg, opts)).To(Succeed())
			dc := discovery.NewDiscoveryClientForConfigOrDie(cfg)
			Eventually(func() error {
				_, err := dc.ServerResourcesForGroupVersion(openreportsv1alpha1.SchemeGroupVersion.String())
				return err
			}).WithTimeout(90 * time.Second).Should(HaveOccurred())
		})
	})

	openReports := func(ns string) []openreportsv1alpha1.Report {
		GinkgoHelper()
		var list openreportsv1alpha1.ReportList
		Expect(k8s.List(ctx, &list, client.InNamespace(ns))).To(Succeed())
		return list.Items
	}

	It("writes the results a PolicyReport would hold as openreports.io Reports, and nothing more when nothing changed", func() {
		f := newFixture()
		f.s.opts.ReportAPI = ReportAPIOpenReports
		f.s.store = newStore(ReportAPIOpenReports, k8s, k8s)
		ns := f.namespace("or")
		policy := uniqueName("or")
		createPod(ns, "mesh", "NET_ADMIN")
		createPod(ns, "plain")
		f.policy(policy, fmt.Sprintf("rules: [{name: baseline, match: {namespaces: [%q]}, podSecurity: {level: baseline}}]", ns))
		f.scan(ns)

		reports := openReports(ns)
		Expect(reports).To(HaveLen(2), "a Report per pod")
		byName := map[string]openreportsv1alpha1.ReportResult{}
		var r openreportsv1alpha1.Report
		for _, rep := range reports {
			Expect(rep.Scope).NotTo(BeNil())
			Expect(rep.Name).To(Equal(report.Name(*rep.Scope, 0)))
			Expect(rep.Source).To(Equal("podsieve"))
			Expect(rep.Labels).To(HaveKeyWithValue(report.LabelManagedBy, report.ManagedBy))
			Expect(rep.OwnerReferences).To(ConsistOf(And(HaveField("Kind", "Pod"), HaveField("Name", rep.Scope.Name))))
			Expect(rep.Results).To(HaveLen(1))
			byName[rep.Scope.Name] = rep.Results[0]
			if rep.Scope.Name == "mesh" {
				r = rep
				Expect(r.Summary).To(Equal(openreportsv1alpha1.ReportSummary{Fail: 1}))
			}
		}
		Expect(byName["mesh"]).To(And(HaveField("Result", openreportsv1alpha1.Result("fail")), HaveField("Policy", policy),
			HaveField("Rule", "baseline"), HaveField("Description", ContainSubstring("NET_ADMIN")),
			HaveField("Properties", HaveKeyWithValue(report.PropertyResultID, report.ResultID(byName["mesh"].Subjects[0], policy, "baseline", reportv1alpha2.ResultFail)))))
		Expect(byName["plain"].Result).To(Equal(openreportsv1alpha1.Result("pass")))
		var wg reportv1alpha2.PolicyReportList
		Expect(k8s.List(ctx, &wg, client.InNamespace(ns))).To(Succeed())
		Expect(wg.Items).To(BeEmpty(), "nothing is written to the other API")

		// A rescan with nothing changed writes nothing.
		f.scan(ns)
		Expect(openReports(ns)).To(ContainElement(HaveField("ResourceVersion", r.ResourceVersion)))

		// A change is written over the same Report.
		var mesh corev1.Pod
		Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "mesh"}, &mesh)).To(Succeed())
		edit(&mesh, func() { mesh.Spec.Containers[0].Image = "registry.example/mesh:2" })
		f.scan(ns)
		again := openReports(ns)
		Expect(again).To(HaveLen(2))
		Expect(again).To(ContainElement(And(HaveField("Name", r.Name), HaveField("Results", ConsistOf(
			HaveField("Description", ContainSubstring("registry.example/mesh:2")))))))

		// Named explicitly, OpenReports replace the PolicyReports an earlier
		// scan wrote; under auto nothing is removed.
		f.s.discovery = discovery.NewDiscoveryClientForConfigOrDie(cfg)
		earlier := newFixture()
		earlier.s.store = newStore(ReportAPIWGPolicy, k8s, k8s)
		earlier.ix.SetNamespace(ns, map[string]string{"kubernetes.io/metadata.name": ns})
		earlier.policy(uniqueName("or-earlier"), fmt.Sprintf("rules: [{name: baseline, match: {namespaces: [%q]}, podSecurity: {level: baseline}}]", ns))
		earlier.scan(ns)
		policyReports := func() []reportv1alpha2.PolicyReport {
			var l reportv1alpha2.PolicyReportList
			Expect(k8s.List(ctx, &l, client.InNamespace(ns))).To(Succeed())
			return l.Items
		}
		Expect(policyReports()).NotTo(BeEmpty())
		f.s.opts.ReportAPI = ReportAPIAuto
		f.s.replaceOtherAPI(ctx)
		Expect(policyReports()).NotTo(BeEmpty(), "auto removed the other API's reports")
		f.s.opts.ReportAPI = ReportAPIOpenReports
		f.s.replaceOtherAPI(ctx)
		Expect(policyReports()).To(BeEmpty())
		Expect(openReports(ns)).To(HaveLen(2), "the API written keeps its reports")

		// The scan turned off removes them, as it does PolicyReports.
		Expect(f.s.clear(ctx, true)).To(Succeed())
		Expect(openReports(ns)).To(BeEmpty())
	})
})
