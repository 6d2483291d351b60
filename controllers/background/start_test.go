package background

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/go-logr/logr/funcr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	fakediscovery "k8s.io/client-go/discovery/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/log"

	policyv1alpha1 "github.com/podsieve/podsieve/api/v1alpha1"
	reportv1alpha2 "github.com/podsieve/podsieve/api/wgpolicyk8s/v1alpha2"
	"github.com/podsieve/podsieve/internal/index"
	"github.com/podsieve/podsieve/internal/report"
	"github.com/podsieve/podsieve/internal/testenv"
)

// TestScanWaitsForPolicyReportCRD: while the API server serves no report
// API the scan may write, the scan stays off, says once, in the log, what to
// install, and removes the counters an earlier scan wrote; once a CRD is
// installed it turns on, writing the API --report-api picks. Start polls
// this check every minute; the test calls it.
func TestScanWaitsForPolicyReportCRD(t *testing.T) {
	sp := &policyv1alpha1.SecurityPolicy{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Status: policyv1alpha1.SecurityPolicyStatus{Violations: ptr.To(int32(3))}}
	c := fake.NewClientBuilder().WithScheme(testenv.Scheme()).WithObjects(sp).WithStatusSubresource(sp).Build()
	dc := &fakediscovery.FakeDiscovery{Fake: &clienttesting.Fake{}}
	s := newScanner(c, c, dc, index.New(""), Options{})

	var lines []string
	ctx := log.IntoContext(context.Background(), funcr.New(func(prefix, args string) { lines = append(lines, prefix+" "+args) }, funcr.Options{}))
	for range 3 {
		if on, err := s.reportAPIServed(ctx); on || err != nil {
			t.Fatalf("the scan turned on without a report CRD (err %v)", err)
		}
	}
	got := strings.Join(lines, "\n")
	if len(lines) != 1 || !strings.Contains(got, "background scan is off: no report API it may write is served (--report-api=auto)") ||
		!strings.Contains(got, "kubectl apply -k config/policyreport") || !strings.Contains(got, "OpenReports") {
		t.Errorf("want one log line saying what is missing and how to install it, got:\n%s", got)
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(sp), sp); err != nil {
		t.Fatal(err)
	}
	if sp.Status.Violations != nil {
		t.Errorf("status.violations = %d, want it removed: without reports the counters are not current", *sp.Status.Violations)
	}

	dc.Resources = []*metav1.APIResourceList{policyReports}
	if on, err := s.reportAPIServed(ctx); !on || err != nil || s.store.api() != ReportAPIWGPolicy {
		t.Fatalf("the scan did not turn on once the CRD was installed (err %v)", err)
	}
}

var (
	policyReports = &metav1.APIResourceList{GroupVersion: reportv1alpha2.GroupVersion.String(),
		APIResources: []metav1.APIResource{{Name: "policyreports", Namespaced: true, Kind: "PolicyReport"}}}
	openReports = &metav1.APIResourceList{GroupVersion: "openreports.io/v1alpha1",
		APIResources: []metav1.APIResource{{Name: "reports", Namespaced: true, Kind: "Report"}}}
)

// TestReportAPIChoice: --report-api=auto writes OpenReports where served,
// else PolicyReports, and stays with the API that already holds podsieve's
// reports; a named API is written only where it is served; a discovery
// error chooses nothing (it would move every report).
func TestReportAPIChoice(t *testing.T) {
	ours := &reportv1alpha2.PolicyReport{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "podsieve-x",
		Labels: map[string]string{report.LabelManagedBy: report.ManagedBy}}}
	theirs := &reportv1alpha2.PolicyReport{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "kyverno-x",
		Labels: map[string]string{report.LabelManagedBy: "kyverno"}}}
	cases := []struct {
		name     string
		option   ReportAPI
		served   []*metav1.APIResourceList
		existing []client.Object
		failing  bool      // discovery answers with an error
		want     ReportAPI // "": the scan stays off
	}{
		{"auto, nothing served", ReportAPIAuto, nil, nil, false, ""},
		{"auto, PolicyReports only", ReportAPIAuto, []*metav1.APIResourceList{policyReports}, nil, false, ReportAPIWGPolicy},
		{"auto, OpenReports only", ReportAPIAuto, []*metav1.APIResourceList{openReports}, nil, false, ReportAPIOpenReports},
		{"auto prefers OpenReports", ReportAPIAuto, []*metav1.APIResourceList{policyReports, openReports}, nil, false, ReportAPIOpenReports},
		{"openreports, only PolicyReports served", ReportAPIOpenReports, []*metav1.APIResourceList{policyReports}, nil, false, ""},
		{"wgpolicyk8s where both are served", ReportAPIWGPolicy, []*metav1.APIResourceList{policyReports, openReports}, nil, false, ReportAPIWGPolicy},
		{"auto stays with podsieve's PolicyReports when OpenReports appear", ReportAPIAuto,
			[]*metav1.APIResourceList{policyReports, openReports}, []client.Object{ours}, false, ReportAPIWGPolicy},
		{"another tool's PolicyReports do not hold auto back", ReportAPIAuto,
			[]*metav1.APIResourceList{policyReports, openReports}, []client.Object{theirs}, false, ReportAPIOpenReports},
		{"a discovery error chooses nothing", ReportAPIAuto, []*metav1.APIResourceList{policyReports, openReports}, nil, true, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := fake.NewClientBuilder().WithScheme(testenv.Scheme()).WithObjects(tc.existing...).Build()
			dc := &fakediscovery.FakeDiscovery{Fake: &clienttesting.Fake{Resources: tc.served}}
			if tc.failing {
				dc.PrependReactor("get", "resource", func(clienttesting.Action) (bool, k8sruntime.Object, error) {
					return true, nil, errors.New("the connection was reset")
				})
			}
			s := newScanner(c, c, dc, index.New(""), Options{ReportAPI: tc.option})
			on, err := s.reportAPIServed(log.IntoContext(context.Background(), funcr.New(func(string, string) {}, funcr.Options{})))
			if err != nil {
				t.Fatal(err)
			}
			if on != (tc.want != "") || (on && s.store.api() != tc.want) {
				t.Errorf("on %v, API %s; want %q", on, s.store.api(), tc.want)
			}
		})
	}
}
