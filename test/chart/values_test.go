package chart

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/podsieve/podsieve/internal/testenv"
)

func dashboardFile() string {
	return filepath.Join(testenv.RepoRoot(), "config", "grafana", "podsieve-dashboard.json")
}

// The values platform teams expect of an admission controller's chart
// (issue 28): each value rendered into the object it belongs to.

// TestPlatformDefaults: the manager runs on Linux nodes, at a priority that
// keeps it from being preempted, with GOMEMLIMIT below its memory limit and
// the image's fixed UID.
func TestPlatformDefaults(t *testing.T) {
	d := deployment(t, render(t, "podsieve-system"))
	spec := d.Spec.Template.Spec
	if want := map[string]string{"kubernetes.io/os": "linux"}; !reflect.DeepEqual(spec.NodeSelector, want) {
		t.Errorf("nodeSelector %v, want %v", spec.NodeSelector, want)
	}
	if spec.PriorityClassName != "system-cluster-critical" {
		t.Errorf("priorityClassName %q, want system-cluster-critical", spec.PriorityClassName)
	}
	c := managerContainer(t, d)
	if got := envValue(c, "GOMEMLIMIT"); got != "921MiB" {
		t.Errorf("GOMEMLIMIT %q, want 921MiB (90%% of the 1Gi limit)", got)
	}
	if sc := c.SecurityContext; sc == nil || sc.RunAsUser == nil || *sc.RunAsUser != 65532 {
		t.Errorf("container securityContext %+v, want runAsUser 65532", sc)
	}
	if sc := spec.SecurityContext; sc == nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot ||
		sc.SeccompProfile == nil || sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("pod securityContext %+v, want runAsNonRoot and RuntimeDefault seccomp", sc)
	}
}

func envValue(c corev1.Container, name string) string {
	for _, e := range c.Env {
		if e.Name == name {
			return e.Value
		}
	}
	return ""
}

// TestGoMemLimit: GOMEMLIMIT is 90% of the memory limit in MiB, rounded
// down, whatever suffix the limit is written with; absent without a limit;
// the user's own entry wins; a limit the chart cannot read fails.
func TestGoMemLimit(t *testing.T) {
	cases := []struct {
		name, values, want string
	}{
		{"Gi", "resources: {limits: {memory: 2Gi}}", "1843MiB"},
		{"Mi", "resources: {limits: {memory: 512Mi}}", "460MiB"},
		{"fractional Gi", "resources: {limits: {memory: 1.5Gi}}", "1382MiB"},
		{"decimal G", "resources: {limits: {memory: 1G}}", "858MiB"},
		{"decimal M", "resources: {limits: {memory: 2000M}}", "1716MiB"},
		{"bytes as a string", "resources: {limits: {memory: \"1073741824\"}}", "921MiB"},
		{"bytes as a number", "resources: {limits: {memory: 1073741824}}", "921MiB"},
		{"a YAML number with an exponent", "resources: {limits: {memory: 1e9}}", "858MiB"},
		{"Ki", "resources: {limits: {memory: 1048576Ki}}", "921MiB"},
		{"no memory limit", "resources: {limits: {memory: null, cpu: \"1\"}}", ""},
		{"no limits", "resources: {limits: null}", ""},
		{"the user's GOMEMLIMIT", "extraEnv: [{name: GOMEMLIMIT, value: 700MiB}]", "700MiB"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := managerContainer(t, deployment(t, render(t, "podsieve-system", writeValues(t, tc.values))))
			var got []string
			for _, e := range c.Env {
				if e.Name == "GOMEMLIMIT" {
					got = append(got, e.Value)
				}
			}
			switch {
			case tc.want == "" && len(got) != 0:
				t.Errorf("GOMEMLIMIT %q, want none", got)
			case tc.want != "" && !slices.Equal(got, []string{tc.want}):
				t.Errorf("GOMEMLIMIT %q, want exactly one, %s", got, tc.want)
			}
		})
	}
	_, err := renderText(t, "podsieve-system", writeValues(t, `resources: {limits: {memory: "1e9"}}`))
	if want := `resources.limits.memory "1e9": the chart derives GOMEMLIMIT from it`; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("a limit written 1e9: %v, want an error containing %q", err, want)
	}
}

// TestExtraEnvAndServiceAccount: extraEnv follows the chart's own
// variables; ServiceAccount annotations reach the ServiceAccount.
func TestExtraEnvAndServiceAccount(t *testing.T) {
	r := render(t, "podsieve-system", writeValues(t, `
extraEnv:
- {name: HTTPS_PROXY, value: "http://proxy.example.com:3128"}
- {name: NO_PROXY, value: ".svc,.cluster.local"}
- name: NODE
  valueFrom: {fieldRef: {fieldPath: spec.nodeName}}
serviceAccount:
  annotations: {eks.amazonaws.com/role-arn: "arn:aws:iam::111122223333:role/podsieve"}
`))
	c := managerContainer(t, deployment(t, r))
	var names []string
	for _, e := range c.Env {
		names = append(names, e.Name)
	}
	if want := []string{"POD_NAMESPACE", "GOMEMLIMIT", "HTTPS_PROXY", "NO_PROXY", "NODE"}; !slices.Equal(names, want) {
		t.Errorf("env %q, want %q", names, want)
	}
	if got := envValue(c, "HTTPS_PROXY"); got != "http://proxy.example.com:3128" {
		t.Errorf("HTTPS_PROXY %q", got)
	}
	var sa corev1.ServiceAccount
	typed(t, r, "ServiceAccount", "podsieve-manager", &sa)
	if got := sa.Annotations["eks.amazonaws.com/role-arn"]; got != "arn:aws:iam::111122223333:role/podsieve" {
		t.Errorf("ServiceAccount annotations %v", sa.Annotations)
	}
}

// TestOpenShiftRestrictedV2: ci/openshift-values.yaml gives a pod that
// OpenShift's restricted-v2 SecurityContextConstraints admit: no fixed UID,
// GID or fsGroup (the SCC assigns them from the namespace's range), no
// SELinux options, privilege escalation off, every capability dropped,
// seccomp RuntimeDefault or unset, nothing of the host, and only the
// volume types it allows. The default values fail only the first rule.
func TestOpenShiftRestrictedV2(t *testing.T) {
	for _, tc := range []struct {
		values []string
		want   []string
	}{
		{values: []string{valuesFile("openshift")}},
		{values: nil, want: []string{"container manager: runAsUser 65532 is fixed"}},
	} {
		name := "defaults"
		if tc.values != nil {
			name = "openshift"
		}
		t.Run(name, func(t *testing.T) {
			d := deployment(t, render(t, "podsieve-system", tc.values...))
			if got := restrictedV2Violations(d.Spec.Template.Spec); !slices.Equal(got, tc.want) {
				t.Errorf("restricted-v2 violations %q, want %q", got, tc.want)
			}
		})
	}
}

// restrictedV2Violations checks a pod spec against the rules of OpenShift's
// restricted-v2 SCC (OpenShift 4.11 and later): runAsUser MustRunAsRange,
// fsGroup and seLinuxContext MustRunAs, allowPrivilegeEscalation false,
// requiredDropCapabilities ALL (only NET_BIND_SERVICE may be added),
// seccompProfiles runtime/default, no host namespaces, ports or paths.
func restrictedV2Violations(spec corev1.PodSpec) []string {
	var out []string
	add := func(format string, args ...any) { out = append(out, fmt.Sprintf(format, args...)) }
	if spec.HostNetwork || spec.HostPID || spec.HostIPC {
		add("pod: host namespaces")
	}
	if sc := spec.SecurityContext; sc != nil {
		if sc.RunAsUser != nil {
			add("pod: runAsUser %d is fixed", *sc.RunAsUser)
		}
		if sc.RunAsGroup != nil {
			add("pod: runAsGroup %d is fixed", *sc.RunAsGroup)
		}
		if sc.FSGroup != nil {
			add("pod: fsGroup %d is fixed", *sc.FSGroup)
		}
		if sc.SELinuxOptions != nil {
			add("pod: seLinuxOptions")
		}
		if p := sc.SeccompProfile; p != nil && p.Type != corev1.SeccompProfileTypeRuntimeDefault {
			add("pod: seccomp %s", p.Type)
		}
	}
	for _, v := range spec.Volumes {
		if v.HostPath != nil {
			add("volume %s: hostPath", v.Name)
		}
	}
	for _, c := range append(slices.Clone(spec.InitContainers), spec.Containers...) {
		for _, p := range c.Ports {
			if p.HostPort != 0 {
				add("container %s: hostPort %d", c.Name, p.HostPort)
			}
		}
		sc := c.SecurityContext
		if sc == nil {
			add("container %s: no securityContext", c.Name)
			continue
		}
		if sc.RunAsUser != nil {
			add("container %s: runAsUser %d is fixed", c.Name, *sc.RunAsUser)
		}
		if sc.RunAsGroup != nil {
			add("container %s: runAsGroup %d is fixed", c.Name, *sc.RunAsGroup)
		}
		if sc.SELinuxOptions != nil {
			add("container %s: seLinuxOptions", c.Name)
		}
		if sc.Privileged != nil && *sc.Privileged {
			add("container %s: privileged", c.Name)
		}
		if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
			add("container %s: allowPrivilegeEscalation not false", c.Name)
		}
		if sc.Capabilities == nil || !slices.Contains(sc.Capabilities.Drop, "ALL") {
			add("container %s: capabilities not dropped", c.Name)
		} else if added := slices.DeleteFunc(slices.Clone(sc.Capabilities.Add), func(c corev1.Capability) bool { return c == "NET_BIND_SERVICE" }); len(added) > 0 {
			add("container %s: adds %v", c.Name, added)
		}
		if p := sc.SeccompProfile; p != nil && p.Type != corev1.SeccompProfileTypeRuntimeDefault {
			add("container %s: seccomp %s", c.Name, p.Type)
		}
	}
	return out
}

// TestWebhookSelection: namespaceSelector terms are added to both pod
// webhooks after the chart's own, and matchConditions go to the webhook
// they are given for and no other.
func TestWebhookSelection(t *testing.T) {
	r := render(t, "podsieve-system", writeValues(t, `
webhooks:
  pods:
    namespaceSelector:
      matchExpressions: [{key: example.com/podsieve, operator: NotIn, values: [skip]}]
      matchLabels: {example.com/env: prod}
    matchConditions: [{name: not-kubelets, expression: "!('system:nodes' in request.userInfo.groups)"}]
  policyExceptions:
    matchConditions: [{name: not-ci, expression: "request.userInfo.username != 'system:serviceaccount:ci:deployer'"}]
`))
	w := webhookConfiguration(t, r)
	extra := metav1.LabelSelectorRequirement{Key: "example.com/podsieve", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"skip"}}
	kubelets := []admissionregistrationv1.MatchCondition{{Name: "not-kubelets", Expression: "!('system:nodes' in request.userInfo.groups)"}}
	ci := []admissionregistrationv1.MatchCondition{{Name: "not-ci", Expression: "request.userInfo.username != 'system:serviceaccount:ci:deployer'"}}
	wants := map[string][]admissionregistrationv1.MatchCondition{
		"pods.podsieve.dev":                    kubelets,
		"pods-opt-out.podsieve.dev":            kubelets,
		"securitypolicies.policy.podsieve.dev": nil,
		"policyexceptions.policy.podsieve.dev": ci,
	}
	for _, wh := range w.Webhooks {
		if !reflect.DeepEqual(wh.MatchConditions, wants[wh.Name]) {
			t.Errorf("webhook %s: matchConditions %+v, want %+v", wh.Name, wh.MatchConditions, wants[wh.Name])
		}
		if !strings.HasPrefix(wh.Name, "pods") {
			continue
		}
		sel := wh.NamespaceSelector
		if n := len(sel.MatchExpressions); n != 3 || !reflect.DeepEqual(sel.MatchExpressions[2], extra) {
			t.Errorf("webhook %s: namespaceSelector %+v, want the chart's two terms then %+v", wh.Name, sel.MatchExpressions, extra)
		}
		if !reflect.DeepEqual(sel.MatchLabels, map[string]string{"example.com/env": "prod"}) {
			t.Errorf("webhook %s: matchLabels %v", wh.Name, sel.MatchLabels)
		}
		if ex := excludedNamespaces(t, w, wh.Name); !slices.Equal(ex, []string{"kube-system", "podsieve-system"}) {
			t.Errorf("webhook %s excludes %v", wh.Name, ex)
		}
	}
	// By default: no matchConditions and only the chart's terms.
	for _, wh := range webhookConfiguration(t, render(t, "podsieve-system")).Webhooks {
		if wh.MatchConditions != nil {
			t.Errorf("webhook %s has matchConditions by default: %+v", wh.Name, wh.MatchConditions)
		}
		if wh.NamespaceSelector != nil && (len(wh.NamespaceSelector.MatchExpressions) != 2 || wh.NamespaceSelector.MatchLabels != nil) {
			t.Errorf("webhook %s: namespaceSelector %+v by default", wh.Name, wh.NamespaceSelector)
		}
	}
}

// TestServiceMonitorEndpoint: by default Prometheus scrapes with its own
// token file, as config/prometheus; with authorization, with the Secret's
// token and no token file; relabelings go to the endpoint as given.
func TestServiceMonitorEndpoint(t *testing.T) {
	endpoint := func(t *testing.T, values ...string) map[string]any {
		t.Helper()
		sm := render(t, "podsieve-system", values...).find("ServiceMonitor", "podsieve")
		if sm == nil {
			t.Fatal("no ServiceMonitor podsieve")
		}
		eps, _, _ := unstructured.NestedSlice(sm.Object, "spec", "endpoints")
		if len(eps) != 1 {
			t.Fatalf("endpoints %v, want one", eps)
		}
		return eps[0].(map[string]any)
	}
	ep := endpoint(t, writeValues(t, "metrics: {serviceMonitor: {enabled: true}}"))
	if ep["bearerTokenFile"] != "/var/run/secrets/kubernetes.io/serviceaccount/token" || ep["authorization"] != nil {
		t.Errorf("default endpoint %v, want bearerTokenFile and no authorization", ep)
	}
	for _, k := range []string{"relabelings", "metricRelabelings"} {
		if ep[k] != nil {
			t.Errorf("default endpoint has %s", k)
		}
	}

	ep = endpoint(t, valuesFile("everything"))
	if _, ok := ep["bearerTokenFile"]; ok {
		t.Errorf("endpoint %v has bearerTokenFile with authorization set", ep)
	}
	auth, _, _ := unstructured.NestedMap(ep, "authorization")
	want := map[string]any{"type": "Bearer", "credentials": map[string]any{"name": "podsieve-metrics-token", "key": "token"}}
	if !reflect.DeepEqual(auth, want) {
		t.Errorf("authorization %v, want %v", auth, want)
	}
	relabel, _, _ := unstructured.NestedSlice(ep, "relabelings")
	metricRelabel, _, _ := unstructured.NestedSlice(ep, "metricRelabelings")
	if len(relabel) != 1 || len(metricRelabel) != 1 || metricRelabel[0].(map[string]any)["action"] != "drop" {
		t.Errorf("relabelings %v, metricRelabelings %v", relabel, metricRelabel)
	}
}

// TestGrafanaDashboard: off by default; on, a ConfigMap with the sidecar's
// label holding config/grafana/podsieve-dashboard.json as it is, in the
// namespace asked for.
func TestGrafanaDashboard(t *testing.T) {
	if cms := render(t, "podsieve-system").ofKind("ConfigMap"); len(cms) != 0 {
		t.Errorf("ConfigMaps rendered by default: %d", len(cms))
	}
	want, err := os.ReadFile(dashboardFile())
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, values, namespace string }{
		{"release namespace", "grafana: {dashboards: {enabled: true}}", "podsieve-system"},
		{"Grafana's namespace", "grafana: {dashboards: {enabled: true, namespace: monitoring, labels: {grafana_dashboard: \"1\", team: security}}}", "monitoring"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var cm corev1.ConfigMap
			typed(t, render(t, "podsieve-system", writeValues(t, tc.values)), "ConfigMap", "podsieve-dashboard", &cm)
			if cm.Namespace != tc.namespace || cm.Labels["grafana_dashboard"] != "1" {
				t.Errorf("ConfigMap %s/%s with labels %v, want namespace %s and grafana_dashboard: \"1\"", cm.Namespace, cm.Name, cm.Labels, tc.namespace)
			}
			if got := cm.Data["podsieve-dashboard.json"]; got != strings.TrimSpace(string(want)) {
				t.Errorf("the ConfigMap's dashboard is not config/grafana/podsieve-dashboard.json: run `make manifests`")
			}
		})
	}
}

// TestNotesWarnOneReplica: NOTES.txt warns when a single replica serves
// webhooks that fail closed, and only then.
func TestNotesWarnOneReplica(t *testing.T) {
	const warning = "WARNING: one replica (replicas: 1) with webhooks.pods.failurePolicy: Fail."
	for _, tc := range []struct {
		name, values string
		warn         bool
	}{
		{"one replica failing closed", "replicas: 1", true},
		{"one replica failing open", "{replicas: 1, webhooks: {pods: {failurePolicy: Ignore}}}", false},
		{"two replicas", "replicas: 2", false},
		{"defaults", "{}", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := helm(t, "install", "podsieve", chartDir(), "--namespace", "podsieve-system", "--dry-run=client",
				"--kubeconfig", filepath.Join(t.TempDir(), "no-cluster"), "--values", writeValues(t, tc.values))
			if err != nil {
				t.Fatalf("helm install --dry-run=client: %v", err)
			}
			notes := out[strings.Index(out, "NOTES:"):]
			if got := strings.Contains(notes, warning); got != tc.warn {
				t.Errorf("NOTES warn: %v, want %v\n%s", got, tc.warn, notes)
			}
		})
	}
}

// TestCriticalPodsQuota: with a critical PriorityClass, a ResourceQuota in
// the release namespace admits the manager's pods of that class (2 per
// replica plus 2) where the cluster admits the class only under a quota;
// with another class, none, or the quota off, there is none.
func TestCriticalPodsQuota(t *testing.T) {
	cases := []struct {
		name, values, class, pods string
	}{
		{"defaults", "{}", "system-cluster-critical", "8"},
		{"one replica", "replicas: 1", "system-cluster-critical", "4"},
		{"node critical", "priorityClassName: system-node-critical", "system-node-critical", "8"},
		{"another class", "priorityClassName: platform-high", "", ""},
		{"no class", `priorityClassName: ""`, "", ""},
		{"quota off", "criticalPodsQuota: {enabled: false}", "", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := render(t, "podsieve-system", writeValues(t, tc.values))
			if tc.class == "" {
				if q := r.ofKind("ResourceQuota"); len(q) != 0 {
					t.Errorf("a ResourceQuota is rendered: %v", q[0].Object)
				}
				return
			}
			var q corev1.ResourceQuota
			typed(t, r, "ResourceQuota", "podsieve-critical-pods", &q)
			if got := q.Spec.Hard[corev1.ResourcePods]; got.String() != tc.pods {
				t.Errorf("hard pods %s, want %s", got.String(), tc.pods)
			}
			want := &corev1.ScopeSelector{MatchExpressions: []corev1.ScopedResourceSelectorRequirement{{
				ScopeName: corev1.ResourceQuotaScopePriorityClass, Operator: corev1.ScopeSelectorOpIn, Values: []string{tc.class}}}}
			if !reflect.DeepEqual(q.Spec.ScopeSelector, want) || q.Namespace != "podsieve-system" {
				t.Errorf("ResourceQuota %s/%s scopeSelector %+v, want %+v", q.Namespace, q.Name, q.Spec.ScopeSelector, want)
			}
			if class := deployment(t, r).Spec.Template.Spec.PriorityClassName; class != tc.class {
				t.Errorf("the pods' priorityClassName %q, the quota's %q", class, tc.class)
			}
		})
	}
}
