package main

// The monitoring that config/prometheus and config/grafana install, checked
// against this binary: promtool check rules and the rule unit tests of
// config/prometheus/tests, prometheusrule.yaml generated from rules.yaml,
// and every podsieve_* metric that the alerts and the dashboard read
// registered by the packages the manager links (their init functions
// register them with controller-runtime's registry), so that renaming a
// metric fails here. promtool comes from hack/setup-promtool.sh, in
// PROMTOOL (make test sets it).

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/yaml"

	"github.com/podsieve/podsieve/internal/testenv"
)

var (
	promDir       = filepath.Join(testenv.RepoRoot(), "config", "prometheus")
	rulesFile     = filepath.Join(promDir, "rules.yaml")
	ruleCRFile    = filepath.Join(promDir, "prometheusrule.yaml")
	dashboardFile = filepath.Join(testenv.RepoRoot(), "config", "grafana", "podsieve-dashboard.json")
	operationsDoc = filepath.Join(testenv.RepoRoot(), "docs", "operations.md")
)

// ruleFile is a Prometheus rules file, and the spec of a PrometheusRule: the
// fields of monitoring.coreos.com/v1 RuleGroup and Rule (prometheus-operator
// v0.95). Decoded strictly, so that a field the CRD does not know fails here
// rather than at kubectl apply.
type ruleFile struct {
	Groups []ruleGroup `json:"groups"`
}

type ruleGroup struct {
	Name                    string            `json:"name"`
	Labels                  map[string]string `json:"labels,omitempty"`
	Interval                string            `json:"interval,omitempty"`
	QueryOffset             string            `json:"query_offset,omitempty"`
	Limit                   *int              `json:"limit,omitempty"`
	PartialResponseStrategy string            `json:"partial_response_strategy,omitempty"`
	Rules                   []rule            `json:"rules"`
}

type rule struct {
	Record        string            `json:"record,omitempty"`
	Alert         string            `json:"alert,omitempty"`
	Expr          string            `json:"expr"`
	For           string            `json:"for,omitempty"`
	KeepFiringFor string            `json:"keep_firing_for,omitempty"`
	Labels        map[string]string `json:"labels,omitempty"`
	Annotations   map[string]string `json:"annotations,omitempty"`
}

type prometheusRule struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name      string            `json:"name"`
		Namespace string            `json:"namespace"`
		Labels    map[string]string `json:"labels,omitempty"`
	} `json:"metadata"`
	Spec ruleFile `json:"spec"`
}

// durationRE is the CRD's pattern for `for` (monitoring.coreos.com/v1 Duration).
var durationRE = regexp.MustCompile(`^(0|(([0-9]+)y)?(([0-9]+)w)?(([0-9]+)d)?(([0-9]+)h)?(([0-9]+)m)?(([0-9]+)s)?(([0-9]+)ms)?)$`)

const ruleCRHeader = `# Generated from rules.yaml by ` + "`make prometheus-rule`" + ` (cmd/podsieve's TestPrometheusRule with
# -update): edit rules.yaml, not this file. make test fails while they differ.
apiVersion: monitoring.coreos.com/v1
kind: PrometheusRule
metadata:
  name: podsieve
  namespace: podsieve-system
  labels:
    app.kubernetes.io/name: podsieve
spec:
`

// prometheusRuleFor wraps a rules file into the PrometheusRule: its groups,
// comments included, become the spec. The rules file's leading comment,
// which speaks of the file itself, is left out.
func prometheusRuleFor(rules []byte) []byte {
	lines := strings.Split(strings.TrimRight(string(rules), "\n"), "\n")
	for len(lines) > 0 && strings.HasPrefix(lines[0], "#") {
		lines = lines[1:]
	}
	var b strings.Builder
	b.WriteString(ruleCRHeader)
	for _, l := range lines {
		if l != "" {
			b.WriteString("  " + l)
		}
		b.WriteString("\n")
	}
	return []byte(b.String())
}

func readRules(t *testing.T) ([]byte, ruleFile) {
	t.Helper()
	raw, err := os.ReadFile(rulesFile)
	if err != nil {
		t.Fatal(err)
	}
	var rf ruleFile
	if err := yaml.UnmarshalStrict(raw, &rf); err != nil {
		t.Fatalf("%s: %v", rulesFile, err)
	}
	return raw, rf
}

func alerts(rf ruleFile) []rule {
	var out []rule
	for _, g := range rf.Groups {
		for _, r := range g.Rules {
			if r.Alert != "" {
				out = append(out, r)
			}
		}
	}
	return out
}

// TestPrometheusRule: the PrometheusRule that config/prometheus installs is
// rules.yaml wrapped, and a valid monitoring.coreos.com/v1 PrometheusRule.
func TestPrometheusRule(t *testing.T) {
	raw, rf := readRules(t)
	want := prometheusRuleFor(raw)
	if *update {
		if err := os.WriteFile(ruleCRFile, want, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(ruleCRFile)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s is not generated from %s: run `make prometheus-rule`", ruleCRFile, rulesFile)
	}
	var pr prometheusRule
	if err := yaml.UnmarshalStrict(got, &pr); err != nil {
		t.Fatalf("%s is not a PrometheusRule: %v", ruleCRFile, err)
	}
	if pr.APIVersion != "monitoring.coreos.com/v1" || pr.Kind != "PrometheusRule" || pr.Metadata.Name != "podsieve" || pr.Metadata.Namespace != "podsieve-system" {
		t.Errorf("%s: %s %s %s/%s, want monitoring.coreos.com/v1 PrometheusRule podsieve-system/podsieve",
			ruleCRFile, pr.APIVersion, pr.Kind, pr.Metadata.Namespace, pr.Metadata.Name)
	}
	specJSON, _ := json.Marshal(pr.Spec)
	rulesJSON, _ := json.Marshal(rf)
	if !bytes.Equal(specJSON, rulesJSON) {
		t.Errorf("the PrometheusRule's spec does not decode to rules.yaml's groups")
	}
	for _, g := range pr.Spec.Groups {
		for _, r := range g.Rules {
			for field, d := range map[string]string{"for": r.For, "keep_firing_for": r.KeepFiringFor} {
				if d != "" && !durationRE.MatchString(d) {
					t.Errorf("%s: %s: %s %q does not match the CRD's duration pattern", g.Name, r.Alert, field, d)
				}
			}
		}
	}
}

// promtool is the promtool that hack/setup-promtool.sh built.
func promtool(t *testing.T) string {
	t.Helper()
	p := os.Getenv("PROMTOOL")
	if p == "" {
		t.Fatal("PROMTOOL is not set: run the tests with `make test`, or export PROMTOOL=$(hack/setup-promtool.sh)")
	}
	return p
}

func runPromtool(t *testing.T, dir string, name string, args ...string) {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Errorf("%s %s: %v\n%s", filepath.Base(name), strings.Join(args, " "), err, out)
	}
}

// TestRulesWithPromtool: promtool accepts the rules, both rules.yaml and the
// spec of the PrometheusRule as installed, and the rule unit tests in
// config/prometheus/tests pass.
func TestRulesWithPromtool(t *testing.T) {
	pt := promtool(t)
	runPromtool(t, promDir, pt, "check", "rules", "rules.yaml")

	raw, err := os.ReadFile(ruleCRFile)
	if err != nil {
		t.Fatal(err)
	}
	var pr map[string]any
	if err := yaml.Unmarshal(raw, &pr); err != nil {
		t.Fatal(err)
	}
	spec, err := yaml.Marshal(pr["spec"])
	if err != nil {
		t.Fatal(err)
	}
	extracted := filepath.Join(t.TempDir(), "prometheusrule-spec.yaml")
	if err := os.WriteFile(extracted, spec, 0o644); err != nil {
		t.Fatal(err)
	}
	runPromtool(t, promDir, pt, "check", "rules", extracted)

	tests, err := filepath.Glob(filepath.Join(promDir, "tests", "*.yaml"))
	if err != nil || len(tests) == 0 {
		t.Fatalf("no rule unit tests in %s/tests (%v)", promDir, err)
	}
	runPromtool(t, promDir, pt, append([]string{"test", "rules"}, tests...)...)
}

// ruleTests is the part of a promtool rule test file read here.
type ruleTests struct {
	Tests []struct {
		Name          string `json:"name"`
		AlertRuleTest []struct {
			Alertname string `json:"alertname"`
			ExpAlerts []any  `json:"exp_alerts"`
		} `json:"alert_rule_test"`
	} `json:"tests"`
}

// TestEveryAlertIsTestedAndDocumented: every alert has a severity, a
// summary, a description and a runbook in docs/operations.md, and at
// least one rule unit test where it fires and one where it does not.
func TestEveryAlertIsTestedAndDocumented(t *testing.T) {
	_, rf := readRules(t)
	doc, err := os.ReadFile(operationsDoc)
	if err != nil {
		t.Fatal(err)
	}
	fires, quiet := map[string]bool{}, map[string]bool{}
	files, _ := filepath.Glob(filepath.Join(promDir, "tests", "*.yaml"))
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var rt ruleTests
		if err := yaml.Unmarshal(raw, &rt); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for _, tc := range rt.Tests {
			for _, a := range tc.AlertRuleTest {
				if len(a.ExpAlerts) > 0 {
					fires[a.Alertname] = true
				} else {
					quiet[a.Alertname] = true
				}
			}
		}
	}
	for _, a := range alerts(rf) {
		if s := a.Labels["severity"]; !slices.Contains([]string{"critical", "warning", "info"}, s) {
			t.Errorf("%s: severity %q, want critical, warning or info", a.Alert, s)
		}
		for _, k := range []string{"summary", "description", "runbook_url"} {
			if a.Annotations[k] == "" {
				t.Errorf("%s has no %s", a.Alert, k)
			}
		}
		anchor := strings.ToLower(a.Alert)
		if want := "https://github.com/podsieve/podsieve/blob/main/docs/operations.md#" + anchor; a.Annotations["runbook_url"] != want {
			t.Errorf("%s: runbook_url %q, want %q", a.Alert, a.Annotations["runbook_url"], want)
		}
		if !regexp.MustCompile(`(?m)^#+ ` + regexp.QuoteMeta(a.Alert) + `$`).Match(doc) {
			t.Errorf("%s: docs/operations.md has no heading %q for its runbook", a.Alert, a.Alert)
		}
		if !fires[a.Alert] || !quiet[a.Alert] {
			t.Errorf("%s: config/prometheus/tests needs a case where it fires (%v) and one where it does not (%v)", a.Alert, fires[a.Alert], quiet[a.Alert])
		}
	}
}

// TestLatencyAlertBelowWebhookTimeout: PodsieveAdmissionSlow fires below
// the shortest timeoutSeconds of config/webhook, the API server's deadline.
func TestLatencyAlertBelowWebhookTimeout(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "config", "webhook", "manifests.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var vwc struct {
		Webhooks []struct {
			Name           string `json:"name"`
			TimeoutSeconds *int   `json:"timeoutSeconds"`
		} `json:"webhooks"`
	}
	if err := yaml.Unmarshal(raw, &vwc); err != nil {
		t.Fatal(err)
	}
	timeout := 10 // the API server's default
	for _, w := range vwc.Webhooks {
		if w.TimeoutSeconds != nil {
			timeout = min(timeout, *w.TimeoutSeconds)
		}
	}
	_, rf := readRules(t)
	for _, a := range alerts(rf) {
		if a.Alert != "PodsieveAdmissionSlow" {
			continue
		}
		m := regexp.MustCompile(`>\s*([0-9.]+)\s*$`).FindStringSubmatch(strings.TrimSpace(a.Expr))
		if m == nil {
			t.Fatalf("PodsieveAdmissionSlow: no threshold at the end of %q", a.Expr)
		}
		threshold, _ := strconv.ParseFloat(m[1], 64)
		if threshold >= float64(timeout) {
			t.Errorf("PodsieveAdmissionSlow fires at %vs, not below the webhooks' timeoutSeconds %d", threshold, timeout)
		}
		return
	}
	t.Fatal("no alert PodsieveAdmissionSlow")
}

var metricNameRE = regexp.MustCompile(`\bpodsieve_[a-zA-Z0-9_]+`)

// registered reports whether the manager registers a metric of this name.
// It asks the registry itself, which refuses a second collector of a name
// it holds with other help or labels: a CounterVec without series yet does
// not show in Gather, but is found this way.
func registered(name string) bool {
	probe := prometheus.NewGauge(prometheus.GaugeOpts{Name: name, Help: "cmd/podsieve's monitoring test probe"})
	if err := metrics.Registry.Register(probe); err != nil {
		return true
	}
	metrics.Registry.Unregister(probe)
	return false
}

// seriesRegistered reports whether a series name belongs to a registered
// metric: itself, or a histogram's _bucket, _sum or _count.
func seriesRegistered(name string) bool {
	if registered(name) {
		return true
	}
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		if base, ok := strings.CutSuffix(name, suffix); ok && registered(base) {
			return true
		}
	}
	return false
}

// TestMetricsExist: every podsieve_* metric that an alert or a dashboard
// panel reads is one the manager registers, so that renaming one fails here
// and not on a quiet dashboard.
func TestMetricsExist(t *testing.T) {
	if registered("podsieve_no_such_metric") {
		t.Fatal("the probe finds a metric that does not exist")
	}
	used := map[string][]string{}
	_, rf := readRules(t)
	for _, a := range alerts(rf) {
		for _, m := range metricNameRE.FindAllString(a.Expr, -1) {
			used[m] = append(used[m], "alert "+a.Alert)
		}
	}
	for _, p := range dashboardExprs(t) {
		for _, m := range metricNameRE.FindAllString(p.expr, -1) {
			used[m] = append(used[m], fmt.Sprintf("panel %q", p.panel))
		}
	}
	if len(used) == 0 {
		t.Fatal("no podsieve_* metric found in the rules and the dashboard")
	}
	for m, users := range used {
		if !seriesRegistered(m) {
			t.Errorf("%s is not a metric podsieve registers; used by %s", m, strings.Join(slices.Compact(users), ", "))
		}
	}
}

type panelExpr struct{ panel, expr string }

// dashboardExprs are the queries of every panel of the dashboard.
func dashboardExprs(t *testing.T) []panelExpr {
	t.Helper()
	d := readDashboard(t)
	var out []panelExpr
	var walk func(title string, v any)
	walk = func(title string, v any) {
		switch v := v.(type) {
		case map[string]any:
			if s, ok := v["title"].(string); ok {
				title = s
			}
			if e, ok := v["expr"].(string); ok {
				out = append(out, panelExpr{title, e})
			}
			for _, c := range v {
				walk(title, c)
			}
		case []any:
			for _, c := range v {
				walk(title, c)
			}
		}
	}
	walk("", d["panels"])
	if len(out) == 0 {
		t.Fatal("the dashboard has no queries")
	}
	return out
}

func readDashboard(t *testing.T) map[string]any {
	t.Helper()
	raw, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var d map[string]any
	if err := json.Unmarshal(raw, &d); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	return d
}

// TestDashboardDatasource: the dashboard picks its Prometheus with a
// datasource variable and names no datasource UID of its own, so that it
// imports into any Grafana.
func TestDashboardDatasource(t *testing.T) {
	d := readDashboard(t)
	var hasVar bool
	templating, _ := d["templating"].(map[string]any)
	list, _ := templating["list"].([]any)
	for _, v := range list {
		if v, ok := v.(map[string]any); ok && v["type"] == "datasource" && v["name"] == "datasource" && v["query"] == "prometheus" {
			hasVar = true
		}
	}
	if !hasVar {
		t.Error("the dashboard has no datasource variable `datasource` of type prometheus")
	}
	var walk func(path string, v any)
	walk = func(path string, v any) {
		switch v := v.(type) {
		case map[string]any:
			if ds, ok := v["datasource"]; ok {
				m, _ := ds.(map[string]any)
				if m == nil || m["uid"] != "${datasource}" {
					t.Errorf("%s: datasource %v, want {\"type\": \"prometheus\", \"uid\": \"${datasource}\"}", path, ds)
				}
			}
			for k, c := range v {
				if k != "datasource" {
					walk(path+"."+k, c)
				}
			}
		case []any:
			for i, c := range v {
				walk(fmt.Sprintf("%s[%d]", path, i), c)
			}
		}
	}
	walk("", d["panels"])
}

// TestServiceMonitorSelectsTheMetricsService: the ServiceMonitor selects
// the podsieve-metrics Service of config/manager by its labels and port
// name (the rules' job "podsieve-metrics" is the Service's name).
func TestServiceMonitorSelectsTheMetricsService(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(promDir, "servicemonitor.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var sm struct {
		Spec struct {
			Selector struct {
				MatchLabels map[string]string `json:"matchLabels"`
			} `json:"selector"`
			Endpoints []struct {
				Port   string `json:"port"`
				Scheme string `json:"scheme"`
			} `json:"endpoints"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal(raw, &sm); err != nil {
		t.Fatal(err)
	}
	manifests, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "config", "manager", "manager.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, doc := range strings.Split(string(manifests), "\n---\n") {
		var svc struct {
			Kind     string `json:"kind"`
			Metadata struct {
				Name   string            `json:"name"`
				Labels map[string]string `json:"labels"`
			} `json:"metadata"`
			Spec struct {
				Ports []struct {
					Name string `json:"name"`
				} `json:"ports"`
			} `json:"spec"`
		}
		if err := yaml.Unmarshal([]byte(doc), &svc); err != nil {
			t.Fatal(err)
		}
		if svc.Kind != "Service" || svc.Metadata.Name != "podsieve-metrics" {
			continue
		}
		for k, v := range sm.Spec.Selector.MatchLabels {
			if svc.Metadata.Labels[k] != v {
				t.Errorf("the ServiceMonitor selects %s=%s; the Service podsieve-metrics has %v", k, v, svc.Metadata.Labels)
			}
		}
		for _, ep := range sm.Spec.Endpoints {
			if !slices.ContainsFunc(svc.Spec.Ports, func(p struct {
				Name string `json:"name"`
			}) bool {
				return p.Name == ep.Port
			}) || ep.Scheme != "https" {
				t.Errorf("the ServiceMonitor scrapes port %q over %q; the Service serves HTTPS on %v", ep.Port, ep.Scheme, svc.Spec.Ports)
			}
		}
		return
	}
	t.Fatal("config/manager/manager.yaml has no Service podsieve-metrics")
}
