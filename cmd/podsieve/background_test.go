package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"

	policyv1alpha1 "github.com/podsieve/podsieve/api/v1alpha1"
	reportv1alpha2 "github.com/podsieve/podsieve/api/wgpolicyk8s/v1alpha2"
	"github.com/podsieve/podsieve/internal/manifest"
	"github.com/podsieve/podsieve/internal/render"
	"github.com/podsieve/podsieve/internal/report"
	"github.com/podsieve/podsieve/internal/testenv"
)

// TestEvalAgreesWithBackgroundScan creates the objects of two files (the
// cluster's namespaces, policies and exceptions, and the workloads) in a
// real API server, lets `podsieve manager` scan them, and checks that every
// PolicyReport result is what `podsieve eval --background` decides on the
// workloads with the first file as the cluster's state: the same rules, the
// same outcome, the same exceptions. The cluster file
// holds an exception of each kind that must not count (expired, refused by
// the guardrails, admission-only, from another namespace) and a cluster
// exception that reaches a namespace by its labels, so that both choose
// exceptions the same way, through the same function.
func TestEvalAgreesWithBackgroundScan(t *testing.T) {
	const state, workloads = "testdata/background/cluster.yaml", "testdata/background/workloads.yaml"
	c := newTestCluster(t, testenv.Start)
	set, err := manifest.Load([]string{state, workloads}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, docs := range [][]manifest.Document{set.Namespaces, set.Policies, set.Exceptions, set.Workloads} {
		for _, d := range docs {
			if err := c.k8s.Create(ctx, d.Object.(client.Object)); err != nil {
				t.Fatalf("%s: %v", d.Where(), err)
			}
		}
	}
	stop := c.startManager(t, "--enable-webhooks=false")
	defer stop()
	// The counters are written once every namespace has been scanned.
	waitFor(t, "the scan's violation counters", func() bool {
		for _, name := range []string{"baseline", "restricted", "warn-only"} {
			var sp policyv1alpha1.SecurityPolicy
			if err := c.k8s.Get(ctx, client.ObjectKey{Name: name}, &sp); err != nil || sp.Status.Violations == nil {
				return false
			}
		}
		return true
	})

	var stdout bytes.Buffer
	if code := run([]string{"eval", "--cluster-state", state, "-f", workloads, "--background", "-o", "json"}, nil, &stdout, io.Discard); code != exitDenied {
		t.Fatalf("eval exited %d, want %d", code, exitDenied)
	}
	var decided render.JSONReport
	if err := json.Unmarshal(stdout.Bytes(), &decided); err != nil {
		t.Fatal(err)
	}

	var reports reportv1alpha2.PolicyReportList
	if err := c.k8s.List(ctx, &reports); err != nil {
		t.Fatal(err)
	}
	scanned := map[string]string{}
	for _, r := range reports.Items {
		for _, res := range r.Results {
			ref := res.Resources[0]
			scanned[fmt.Sprintf("%s %s/%s %s/%s", ref.Kind, ref.Namespace, ref.Name, res.Policy, res.Rule)] =
				fmt.Sprintf("%s exceptions=%s violations=%s", res.Result, res.Properties[report.PropertyExceptions], res.Properties[report.PropertyViolations])
		}
	}
	want := map[string]string{}
	outcomes := map[string]bool{}
	for _, o := range decided.Results {
		for _, p := range o.Policies {
			key := fmt.Sprintf("%s %s/%s %s/%s", o.Kind, o.Namespace, o.Name, p.Policy, p.Rule)
			want[key] = expectedResult(p)
			outcomes[strings.Fields(want[key])[0]] = true
		}
	}
	for key, w := range want {
		if got, ok := scanned[key]; !ok {
			t.Errorf("%s: eval decides %q, the scan reports nothing", key, w)
		} else if got != w {
			t.Errorf("%s: eval decides %q, the scan reports %q", key, w, got)
		}
	}
	for key, got := range scanned {
		if _, ok := want[key]; !ok {
			t.Errorf("%s: the scan reports %q, eval decides nothing", key, got)
		}
	}
	for _, o := range []string{"pass", "fail", "warn", "skip"} {
		if !outcomes[o] {
			t.Errorf("the file yields no %q result; the comparison would not cover it", o)
		}
	}
}

// expectedResult is the PolicyReport result that eval's decision of one rule
// calls for, derived from eval's own output.
func expectedResult(p render.PolicyResult) string {
	var exceptions []string
	uncovered := 0
	for _, v := range p.Violations {
		if len(v.ExemptedBy) == 0 {
			uncovered++
		}
		for _, by := range v.ExemptedBy {
			if name := by.NamespacedName(); by.IsException() && !slices.Contains(exceptions, name) {
				exceptions = append(exceptions, name)
			}
		}
	}
	result, violations := "pass", ""
	switch {
	case p.Result == "fail" && p.Action == string(policyv1alpha1.ActionWarn):
		result, violations = "warn", fmt.Sprint(uncovered)
	case p.Result == "fail":
		result, violations = "fail", fmt.Sprint(uncovered)
	case len(exceptions) > 0:
		result = "skip"
	}
	return fmt.Sprintf("%s exceptions=%s violations=%s", result, strings.Join(exceptions, ","), violations)
}
