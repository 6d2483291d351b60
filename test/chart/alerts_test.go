package chart

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// promtoolBin is the promtool that hack/setup-promtool.sh built.
func promtoolBin(t *testing.T) string {
	t.Helper()
	p := os.Getenv("PROMTOOL")
	if p == "" {
		t.Fatal("PROMTOOL is not set: run the tests with `make test`, or export PROMTOOL=$(hack/setup-promtool.sh)")
	}
	return p
}

// ruleGroups are the groups of the PrometheusRule the chart renders with
// values.
func ruleGroups(t *testing.T, values string) []any {
	t.Helper()
	r := render(t, "podsieve-system", writeValues(t, "metrics: {prometheusRule: {enabled: true}}"), writeValues(t, values))
	pr := r.find("PrometheusRule", "podsieve")
	if pr == nil {
		t.Fatal("no PrometheusRule podsieve")
	}
	groups, _, _ := unstructured.NestedSlice(pr.Object, "spec", "groups")
	return groups
}

// TestAlertsFollowValues: the thresholds of the chart's alerts that depend
// on values follow them. The chart is rendered with the values, its
// PrometheusRule's groups written as rules.yaml next to a copy of a rule
// unit test file from testdata/prometheus, and promtool checks the rules
// and runs the tests. default-rules-at-other-values.yaml feeds the default
// rules the inputs of the other files, on which they answer the other way,
// so that no quiet or firing case there holds whatever the threshold.
func TestAlertsFollowValues(t *testing.T) {
	cases := []struct {
		name, values, tests string
	}{
		{"resync every 6 hours", "backgroundScan: {resyncPeriod: 6h}", "resync-6h.yaml"},
		{"timeout 2 seconds", "webhooks: {pods: {timeoutSeconds: 2}}", "timeout-2s.yaml"},
		{"timeout 30 seconds", "webhooks: {pods: {timeoutSeconds: 30}}", "timeout-30s.yaml"},
		{"default values", "{}", "default-rules-at-other-values.yaml"},
	}
	pt := promtoolBin(t)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			groups := ruleGroups(t, tc.values)
			rules, err := yaml.Marshal(map[string]any{"groups": groups})
			if err != nil {
				t.Fatal(err)
			}
			tests, err := os.ReadFile(filepath.Join("testdata", "prometheus", tc.tests))
			if err != nil {
				t.Fatal(err)
			}
			dir := t.TempDir()
			for name, data := range map[string][]byte{"rules.yaml": rules, tc.tests: tests} {
				if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
					t.Fatal(err)
				}
			}
			for _, args := range [][]string{{"check", "rules", "rules.yaml"}, {"test", "rules", tc.tests}} {
				cmd := exec.Command(pt, args...)
				cmd.Dir = dir
				if out, err := cmd.CombinedOutput(); err != nil {
					t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
				}
			}
		})
	}
}

// TestAlertThresholds: the thresholds the chart writes for values, and the
// texts that name them.
func TestAlertThresholds(t *testing.T) {
	cases := []struct {
		name, values string
		want         []string
	}{
		{"defaults", "{}", []string{
			"> 2 * 3600 + 3600", "for over 3 hours.", "[5m]))) > 2.5\n", "nears the 5 s it has to answer in."}},
		{"resync 30m", "backgroundScan: {resyncPeriod: 30m}", []string{"> 2 * 1800 + 3600", "for over 2 hours."}},
		{"resync 45m", "backgroundScan: {resyncPeriod: 45m}", []string{"> 2 * 2700 + 3600", "for over 150 minutes."}},
		{"resync 1h30m", "backgroundScan: {resyncPeriod: 1h30m}", []string{"> 2 * 5400 + 3600", "for over 4 hours."}},
		{"resync 90m", "backgroundScan: {resyncPeriod: 90m}", []string{"> 2 * 5400 + 3600"}},
		{"resync 1.5h", "backgroundScan: {resyncPeriod: 1.5h}", []string{"> 2 * 5400 + 3600"}},
		{"resync 10m30s", "backgroundScan: {resyncPeriod: 10m30s}", []string{"> 2 * 630 + 3600", "for over 81 minutes."}},
		{"resync 24h", "backgroundScan: {resyncPeriod: 24h}", []string{"> 2 * 86400 + 3600", "for over 49 hours."}},
		{"timeout 1", "webhooks: {pods: {timeoutSeconds: 1}}", []string{"[5m]))) > 0.5\n", "nears the 1 s it has to answer in."}},
		{"timeout 3", "webhooks: {pods: {timeoutSeconds: 3}}", []string{"[5m]))) > 1.5\n"}},
		{"timeout 10", "webhooks: {pods: {timeoutSeconds: 10}}", []string{"[5m]))) > 5\n", "nears the 10 s it has to answer in."}},
		{"timeout 30", "webhooks: {pods: {timeoutSeconds: 30}}", []string{"[5m]))) > 5\n", "nears the 10 s it has to answer in."}},
		{"other webhooks' timeouts", "webhooks: {securityPolicies: {timeoutSeconds: 1}, policyExceptions: {timeoutSeconds: 1}}", []string{"[5m]))) > 2.5\n"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			groups := ruleGroups(t, tc.values)
			text := ""
			for _, g := range groups {
				rules, _, _ := unstructured.NestedSlice(g.(map[string]any), "rules")
				for _, rule := range rules {
					m := rule.(map[string]any)
					text += m["expr"].(string) + "\n"
					if a, ok := m["annotations"].(map[string]any); ok {
						text += a["summary"].(string) + "\n" + a["description"].(string) + "\n"
					}
				}
			}
			for _, w := range tc.want {
				if !strings.Contains(text, w) {
					t.Errorf("the rules lack %q", w)
				}
			}
		})
	}
}
