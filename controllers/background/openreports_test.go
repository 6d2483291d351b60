package background

import (
	"fmt"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	openreportsv1alpha1 "github.com/openreports/reports-api/apis/openreports.io/v1alpha1"
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
			Expect(envtest.UninstallCRDs(cfg, opts)).To(Succeed())
			dc := discovery.NewDiscoveryClientForConfigOrDie(cfg)
			Eventually(func() error {
				_, err := dc.ServerResourcesForGroupVersion(openreportsv1alpha1.SchemeGroupVersion.String())
				return err
			}).Should(HaveOccurred())
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
		Expect(reports).To(HaveLen(1))
		r := reports[0]
		Expect(r.Name).To(Equal(report.Name(policy, 0)))
		Expect(r.Source).To(Equal("podsieve"))
		Expect(r.Labels).To(HaveKeyWithValue(report.LabelManagedBy, report.ManagedBy))
		Expect(r.OwnerReferences).To(ConsistOf(HaveField("Name", policy)))
		Expect(r.Summary).To(Equal(openreportsv1alpha1.ReportSummary{Pass: 1, Fail: 1}))
		byName := map[string]openreportsv1alpha1.ReportResult{}
		for _, res := range r.Results {
			byName[res.Subjects[0].Name] = res
		}
		Expect(byName["mesh"]).To(And(HaveField("Result", openreportsv1alpha1.Result("fail")), HaveField("Policy", policy),
			HaveField("Rule", "baseline"), HaveField("Description", ContainSubstring("NET_ADMIN")),
			HaveField("Properties", HaveKeyWithValue(report.PropertyResultID, report.ResultID(byName["mesh"].Subjects[0], policy, "baseline")))))
		Expect(byName["plain"].Result).To(Equal(openreportsv1alpha1.Result("pass")))
		var wg reportv1alpha2.PolicyReportList
		Expect(k8s.List(ctx, &wg, client.InNamespace(ns))).To(Succeed())
		Expect(wg.Items).To(BeEmpty(), "nothing is written to the other API")

		// A rescan with nothing changed writes nothing.
		f.scan(ns)
		Expect(openReports(ns)[0].ResourceVersion).To(Equal(r.ResourceVersion))

		// A change is written over the same Report.
		createPod(ns, "root", "SYS_ADMIN")
		f.scan(ns)
		again := openReports(ns)
		Expect(again).To(HaveLen(1))
		Expect(again[0].Summary).To(Equal(openreportsv1alpha1.ReportSummary{Pass: 1, Fail: 2}))

		// The scan turned off removes them, as it does PolicyReports.
		f.s.discovery = discovery.NewDiscoveryClientForConfigOrDie(cfg)
		Expect(f.s.clear(ctx, true)).To(Succeed())
		Expect(openReports(ns)).To(BeEmpty())
	})
})
