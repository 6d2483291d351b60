package background

import (
	"context"
	"strings"
	"testing"

	"github.com/go-logr/logr/funcr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	fakediscovery "k8s.io/client-go/discovery/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/log"

	policyv1alpha1 "github.com/podsieve/podsieve/api/v1alpha1"
	reportv1alpha2 "github.com/podsieve/podsieve/api/wgpolicyk8s/v1alpha2"
	"github.com/podsieve/podsieve/internal/index"
	"github.com/podsieve/podsieve/internal/testenv"
)

// TestScanWaitsForPolicyReportCRD: while the API server does not serve the
// PolicyReport kind, the scan stays off, says once, in the log, what to
// install, and removes the counters an earlier scan wrote; once the CRD is
// installed it turns on. Start polls this check every minute; the test
// calls it.
func TestScanWaitsForPolicyReportCRD(t *testing.T) {
	sp := &policyv1alpha1.SecurityPolicy{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Status: policyv1alpha1.SecurityPolicyStatus{Violations: ptr.To(int32(3))}}
	c := fake.NewClientBuilder().WithScheme(testenv.Scheme()).WithObjects(sp).WithStatusSubresource(sp).Build()
	dc := &fakediscovery.FakeDiscovery{Fake: &clienttesting.Fake{}}
	s := newScanner(c, c, dc, index.New(""), Options{})

	var lines []string
	ctx := log.IntoContext(context.Background(), funcr.New(func(prefix, args string) { lines = append(lines, prefix+" "+args) }, funcr.Options{}))
	for range 3 {
		if on, err := s.reportCRDInstalled(ctx); on || err != nil {
			t.Fatalf("the scan turned on without the PolicyReport CRD (err %v)", err)
		}
	}
	got := strings.Join(lines, "\n")
	if len(lines) != 1 || !strings.Contains(got, "background scan is off: the PolicyReport CRD (wgpolicyk8s.io/v1alpha2) is not installed") ||
		!strings.Contains(got, "kubectl apply -k config/policyreport") {
		t.Errorf("want one log line naming the CRD and how to install it, got:\n%s", got)
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(sp), sp); err != nil {
		t.Fatal(err)
	}
	if sp.Status.Violations != nil {
		t.Errorf("status.violations = %d, want it removed: without reports the counters are not current", *sp.Status.Violations)
	}

	dc.Resources = []*metav1.APIResourceList{{GroupVersion: reportv1alpha2.GroupVersion.String(),
		APIResources: []metav1.APIResource{{Name: "policyreports", Namespaced: true, Kind: "PolicyReport"}}}}
	if on, err := s.reportCRDInstalled(ctx); !on || err != nil {
		t.Fatalf("the scan did not turn on once the CRD was installed (err %v)", err)
	}
}
