package chart

import (
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"

	"github.com/podsieve/podsieve/internal/testenv"
)

// valueSet is a named set of values (charts/podsieve/ci/<name>-values.yaml;
// "defaults" is values.yaml alone) and the namespace it is installed into.
type valueSet struct{ name, namespace string }

var valueSets = []valueSet{
	{"defaults", "podsieve-system"},
	{"cert-manager", "podsieve-system"},
	{"cert-manager-self-signed", "security-tools"},
	{"host-network", "podsieve-system"},
	{"fail-open", "podsieve-system"},
	{"everything", "security-tools"},
	{"minimal", "kube-policy"},
	{"openshift", "podsieve-system"},
}

func (v valueSet) files() []string {
	if v.name == "defaults" {
		return nil
	}
	return []string{valuesFile(v.name)}
}

// The cluster-scoped kinds the chart renders; every other object must be in
// the release namespace.
var clusterScoped = []string{"CustomResourceDefinition", "ClusterRole", "ClusterRoleBinding", "ValidatingWebhookConfiguration"}

func TestLint(t *testing.T) {
	for _, set := range valueSets {
		t.Run(set.name, func(t *testing.T) {
			args := []string{"lint", "--strict", chartDir(), "--namespace", set.namespace}
			for _, f := range set.files() {
				args = append(args, "--values", f)
			}
			out, err := helm(t, args...)
			if err != nil {
				t.Fatalf("helm lint --strict: %v", err)
			}
			if !strings.Contains(out, "0 chart(s) failed") {
				t.Fatalf("helm lint --strict:\n%s", out)
			}
		})
	}
}

// TestRenderedObjects checks, for every value set, what must hold whatever
// the values.
func TestRenderedObjects(t *testing.T) {
	for _, set := range valueSets {
		t.Run(set.name, func(t *testing.T) {
			ns := set.namespace
			r := render(t, ns, set.files()...)
			for _, o := range r {
				if slices.Contains(clusterScoped, o.GetKind()) {
					if o.GetNamespace() != "" {
						t.Errorf("%s %s is cluster-scoped but has namespace %q", o.GetKind(), o.GetName(), o.GetNamespace())
					}
				} else if o.GetNamespace() != ns {
					t.Errorf("%s %s is in namespace %q, want the release namespace %q", o.GetKind(), o.GetName(), o.GetNamespace(), ns)
				}
				if o.GetKind() == "Namespace" {
					t.Errorf("the chart renders Namespace %s; the release namespace is Helm's (--create-namespace)", o.GetName())
				}
			}

			// The webhooks reach the manager through the Service, whose target
			// port the container declares.
			d := deployment(t, r)
			c := managerContainer(t, d)
			svc := service(t, r, "podsieve-webhook")
			if len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Port != 443 || svc.Spec.Ports[0].TargetPort != intstr.FromString("webhook") {
				t.Errorf("Service podsieve-webhook ports = %+v, want 443 to the container port named webhook", svc.Spec.Ports)
			}
			if containerPort(c, "webhook") == 0 {
				t.Errorf("the manager container declares no port named webhook: %+v", c.Ports)
			}
			if !reflect.DeepEqual(svc.Spec.Selector, d.Spec.Selector.MatchLabels) {
				t.Errorf("Service selector %v, Deployment selector %v", svc.Spec.Selector, d.Spec.Selector.MatchLabels)
			}
			w := webhookConfiguration(t, r)
			for _, wh := range w.Webhooks {
				s := wh.ClientConfig.Service
				if s == nil || s.Name != svc.Name || s.Namespace != ns {
					t.Errorf("webhook %s calls %+v, want Service %s/%s", wh.Name, s, ns, svc.Name)
				}
				if wh.ClientConfig.CABundle != nil {
					t.Errorf("webhook %s has a caBundle; the manager or cert-manager fills it in", wh.Name)
				}
			}

			// Namespace exclusions: the release namespace and kube-system, always.
			for _, name := range []string{"pods.podsieve.dev", "pods-opt-out.podsieve.dev"} {
				excluded := excludedNamespaces(t, w, name)
				for _, want := range []string{ns, "kube-system"} {
					if !slices.Contains(excluded, want) {
						t.Errorf("webhook %s excludes %v, not %s", name, excluded, want)
					}
				}
			}

			// The manager learns its namespace from the pod, and its roles are bound
			// to its ServiceAccount there.
			if !slices.ContainsFunc(c.Env, func(e corev1.EnvVar) bool {
				return e.Name == "POD_NAMESPACE" && e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.namespace"
			}) {
				t.Errorf("the manager has no POD_NAMESPACE from metadata.namespace: %+v", c.Env)
			}
			for _, kind := range []string{"ClusterRoleBinding", "RoleBinding"} {
				var b rbacv1.RoleBinding // a ClusterRoleBinding has the same fields
				typed(t, r, kind, "podsieve-manager", &b)
				want := []rbacv1.Subject{{Kind: "ServiceAccount", Name: "podsieve-manager", Namespace: ns}}
				if !reflect.DeepEqual(b.Subjects, want) || b.RoleRef.Name != "podsieve-manager" {
					t.Errorf("%s podsieve-manager binds %+v to %+v, want %+v", kind, b.RoleRef, b.Subjects, want)
				}
			}
			if r.find("ServiceAccount", "podsieve-manager") == nil || d.Spec.Template.Spec.ServiceAccountName != "podsieve-manager" {
				t.Error("the manager does not run as the ServiceAccount podsieve-manager")
			}

			// The manager's generated roles are config/rbac/role.yaml's.
			generated := readObjects(t, filepath.Join(testenv.RepoRoot(), "config", "rbac", "role.yaml"))
			for _, kind := range []string{"ClusterRole", "Role"} {
				want := generated.find(kind, "podsieve-manager")
				got := r.find(kind, "podsieve-manager")
				if want == nil || got == nil {
					t.Fatalf("%s podsieve-manager: config/rbac/role.yaml has %v, the chart %v", kind, want != nil, got != nil)
				}
				if !reflect.DeepEqual(got.Object["rules"], want.Object["rules"]) {
					t.Errorf("%s podsieve-manager's rules differ from config/rbac/role.yaml: run `make manifests`", kind)
				}
			}

			// The serving certificate: in the Secret the Deployment mounts, made
			// either by the manager or by cert-manager, never both.
			if !slices.ContainsFunc(d.Spec.Template.Spec.Volumes, func(v corev1.Volume) bool {
				return v.Secret != nil && v.Secret.SecretName == "podsieve-webhook-cert"
			}) {
				t.Error("the Deployment does not mount the Secret podsieve-webhook-cert")
			}
			certManager := r.find("Certificate", "podsieve-webhook-cert") != nil
			if secret := r.find("Secret", "podsieve-webhook-cert") != nil; secret == certManager {
				t.Errorf("Secret rendered: %v, cert-manager Certificate rendered: %v; want exactly one", secret, certManager)
			}
			if rotationOff := slices.Contains(c.Args, "--cert-rotation=false"); rotationOff != certManager {
				t.Errorf("--cert-rotation=false in the args: %v, with cert-manager: %v", rotationOff, certManager)
			}
		})
	}
}

// TestRenderedValues checks that each value set's values reach the objects.
func TestRenderedValues(t *testing.T) {
	chartMeta := readYAML(t, filepath.Join(chartDir(), "Chart.yaml"))
	cases := []struct {
		set   valueSet
		check func(t *testing.T, r rendered, ns string)
	}{{
		set: valueSets[0], // defaults
		check: func(t *testing.T, r rendered, ns string) {
			d := deployment(t, r)
			c := managerContainer(t, d)
			if want := "ghcr.io/podsieve/podsieve:" + chartMeta["appVersion"].(string); c.Image != want {
				t.Errorf("image %s, want %s (the chart's appVersion)", c.Image, want)
			}
			if want := []string{"manager", "--leader-elect", "--zap-encoder=json"}; !slices.Equal(c.Args, want) {
				t.Errorf("args %q, want %q", c.Args, want)
			}
			if *d.Spec.Replicas != 3 {
				t.Errorf("replicas %d, want 3", *d.Spec.Replicas)
			}
			if p := pdb(t, r); p.Spec.MaxUnavailable == nil || *p.Spec.MaxUnavailable != intstr.FromInt32(1) || p.Spec.MinAvailable != nil {
				t.Errorf("PodDisruptionBudget %+v, want maxUnavailable: 1", p.Spec)
			}
			webhooksAre(t, r, map[string]want{
				"pods.podsieve.dev":                    {"Fail", 5},
				"pods-opt-out.podsieve.dev":            {"Fail", 5},
				"securitypolicies.policy.podsieve.dev": {"Fail", 5},
				"policyexceptions.policy.podsieve.dev": {"Fail", 5},
			})
			if w := webhookConfiguration(t, r); len(w.Annotations) != 0 {
				t.Errorf("webhook configuration annotations %v, want none", w.Annotations)
			}
			for _, kind := range []string{"NetworkPolicy", "ServiceMonitor", "PrometheusRule", "Certificate", "Issuer"} {
				if len(r.ofKind(kind)) != 0 {
					t.Errorf("a %s is rendered by default", kind)
				}
			}
			crdsAre(t, r, "securitypolicies.policy.podsieve.dev", "policyexceptions.policy.podsieve.dev", "podsecurityparams.policy.podsieve.dev")
			if r.find("Service", "podsieve-metrics") == nil {
				t.Error("no Service podsieve-metrics")
			}
		},
	}, {
		set: valueSets[1], // cert-manager
		check: func(t *testing.T, r rendered, ns string) {
			cert := certificate(t, r, ns)
			issuer, _, _ := unstructured.NestedStringMap(cert.Object, "spec", "issuerRef")
			if want := map[string]string{"name": "corp-ca", "kind": "ClusterIssuer", "group": "cert-manager.io"}; !reflect.DeepEqual(issuer, want) {
				t.Errorf("issuerRef %v, want %v", issuer, want)
			}
			if d, _, _ := unstructured.NestedString(cert.Object, "spec", "duration"); d != "2160h" {
				t.Errorf("duration %q, want 2160h", d)
			}
			if len(r.ofKind("Issuer")) != 0 {
				t.Error("an Issuer is rendered although issuerRef names one")
			}
			if len(r.ofKind("Secret")) != 0 {
				t.Error("a Secret is rendered: cert-manager creates and owns it")
			}
		},
	}, {
		set: valueSets[2], // cert-manager-self-signed, in security-tools
		check: func(t *testing.T, r rendered, ns string) {
			cert := certificate(t, r, ns)
			issuer := r.find("Issuer", "podsieve-selfsigned")
			if issuer == nil {
				t.Fatal("no Issuer podsieve-selfsigned")
			}
			if _, ok, _ := unstructured.NestedMap(issuer.Object, "spec", "selfSigned"); !ok {
				t.Errorf("Issuer podsieve-selfsigned is not selfSigned: %v", issuer.Object["spec"])
			}
			ref, _, _ := unstructured.NestedStringMap(cert.Object, "spec", "issuerRef")
			if ref["name"] != "podsieve-selfsigned" || ref["kind"] != "Issuer" {
				t.Errorf("issuerRef %v, want the Issuer podsieve-selfsigned", ref)
			}
		},
	}, {
		set: valueSets[3], // host-network
		check: func(t *testing.T, r rendered, ns string) {
			d := deployment(t, r)
			spec := d.Spec.Template.Spec
			if !spec.HostNetwork || spec.DNSPolicy != corev1.DNSClusterFirstWithHostNet {
				t.Errorf("hostNetwork %v, dnsPolicy %q; want true, ClusterFirstWithHostNet", spec.HostNetwork, spec.DNSPolicy)
			}
			c := managerContainer(t, d)
			for name, port := range map[string]int32{"webhook": 10443, "metrics": 10444, "health": 10445} {
				if got := containerPort(c, name); got != port {
					t.Errorf("container port %s = %d, want %d", name, got, port)
				}
			}
			for _, flag := range []string{"--webhook-port=10443", "--metrics-bind-address=:10444", "--health-probe-bind-address=:10445"} {
				if !slices.Contains(c.Args, flag) {
					t.Errorf("args %q lack %s", c.Args, flag)
				}
			}
			if c.ReadinessProbe.HTTPGet.Port != intstr.FromString("health") || c.LivenessProbe.HTTPGet.Port != intstr.FromString("health") {
				t.Error("the probes do not use the port named health")
			}
			np := networkPolicy(t, r)
			var ports []int32
			for _, rule := range np.Spec.Ingress {
				for _, p := range rule.Ports {
					ports = append(ports, p.Port.IntVal)
				}
			}
			if !slices.Equal(ports, []int32{10443, 10444}) {
				t.Errorf("NetworkPolicy admits ports %v, want 10443 and 10444", ports)
			}
		},
	}, {
		set: valueSets[4], // fail-open
		check: func(t *testing.T, r rendered, ns string) {
			webhooksAre(t, r, map[string]want{
				"pods.podsieve.dev":                    {"Ignore", 3},
				"pods-opt-out.podsieve.dev":            {"Ignore", 3},
				"securitypolicies.policy.podsieve.dev": {"Fail", 10},
				"policyexceptions.policy.podsieve.dev": {"Ignore", 7},
			})
		},
	}, {
		set: valueSets[5], // everything, in security-tools
		check: func(t *testing.T, r rendered, ns string) {
			d := deployment(t, r)
			spec := d.Spec.Template.Spec
			c := managerContainer(t, d)
			if c.Image != "registry.example.com/mirror/podsieve:v0.1.1" || c.ImagePullPolicy != corev1.PullAlways {
				t.Errorf("image %s (%s)", c.Image, c.ImagePullPolicy)
			}
			if len(spec.ImagePullSecrets) != 1 || spec.ImagePullSecrets[0].Name != "regcred" {
				t.Errorf("imagePullSecrets %v", spec.ImagePullSecrets)
			}
			if spec.PriorityClassName != "system-cluster-critical" || spec.NodeSelector["kubernetes.io/os"] != "linux" || len(spec.Tolerations) != 1 {
				t.Errorf("priorityClassName %q, nodeSelector %v, tolerations %v", spec.PriorityClassName, spec.NodeSelector, spec.Tolerations)
			}
			if d.Spec.Template.Labels["example.com/team"] != "security" || d.Spec.Template.Annotations["example.com/team"] != "security" {
				t.Errorf("pod labels %v, annotations %v", d.Spec.Template.Labels, d.Spec.Template.Annotations)
			}
			for _, flag := range []string{"--background-resync-period=30m", "--report-api=openreports", "--background-events=false", "--background-report-controlled-pods", "--background-writes-per-second=100", "--max-exceptions-per-namespace=50"} {
				if !slices.Contains(c.Args, flag) {
					t.Errorf("args %q lack %s", c.Args, flag)
				}
			}
			w := webhookConfiguration(t, r)
			if w.Annotations["admissions.enforcer/disabled"] != "true" || w.Labels["example.com/team"] != "security" {
				t.Errorf("webhook configuration annotations %v, labels %v", w.Annotations, w.Labels)
			}
			for _, name := range []string{"pods.podsieve.dev", "pods-opt-out.podsieve.dev"} {
				excluded := excludedNamespaces(t, w, name)
				slices.Sort(excluded)
				if want := []string{"gatekeeper-system", "istio-system", "kube-system", ns}; !slices.Equal(excluded, want) {
					t.Errorf("webhook %s excludes %v, want %v", name, excluded, want)
				}
			}
			crdsAre(t, r, "securitypolicies.policy.podsieve.dev", "policyexceptions.policy.podsieve.dev", "podsecurityparams.policy.podsieve.dev",
				"policyreports.wgpolicyk8s.io", "clusterpolicyreports.wgpolicyk8s.io", "reports.openreports.io", "clusterreports.openreports.io")

			var binding rbacv1.ClusterRoleBinding
			typed(t, r, "ClusterRoleBinding", "podsieve-metrics-reader", &binding)
			if want := []rbacv1.Subject{{Kind: "ServiceAccount", Name: "prometheus-k8s", Namespace: "monitoring"}}; !reflect.DeepEqual(binding.Subjects, want) || binding.RoleRef.Name != "podsieve-metrics-reader" {
				t.Errorf("ClusterRoleBinding podsieve-metrics-reader: %+v to %+v", binding.RoleRef, binding.Subjects)
			}

			sm := r.find("ServiceMonitor", "podsieve")
			if sm == nil || sm.GetLabels()["release"] != "kube-prometheus-stack" {
				t.Fatalf("ServiceMonitor podsieve: %v", sm)
			}
			sel, _, _ := unstructured.NestedStringMap(sm.Object, "spec", "selector", "matchLabels")
			if metrics := service(t, r, "podsieve-metrics"); !labelsMatch(sel, metrics.Labels) {
				t.Errorf("ServiceMonitor selects %v; Service podsieve-metrics has labels %v", sel, metrics.Labels)
			}
			var tls map[string]any
			if eps, _, _ := unstructured.NestedSlice(sm.Object, "spec", "endpoints"); len(eps) == 1 {
				tls, _, _ = unstructured.NestedMap(eps[0].(map[string]any), "tlsConfig")
			}
			ca, _, _ := unstructured.NestedStringMap(tls, "ca", "secret")
			if tls["insecureSkipVerify"] != false || tls["serverName"] != "podsieve-metrics."+ns+".svc" ||
				!reflect.DeepEqual(ca, map[string]string{"name": "podsieve-metrics-cert", "key": "ca.crt"}) {
				t.Errorf("ServiceMonitor tlsConfig %v, want it verified with podsieve-metrics-cert's ca.crt", tls)
			}
			if !slices.Contains(c.Args, "--metrics-cert-dir=/tmp/k8s-metrics-server/metrics-certs") {
				t.Errorf("args %q lack --metrics-cert-dir", c.Args)
			}
			mounted := false
			for _, m := range c.VolumeMounts {
				for _, v := range spec.Volumes {
					if v.Name == m.Name && v.Secret != nil && v.Secret.SecretName == "podsieve-metrics-cert" &&
						m.MountPath == "/tmp/k8s-metrics-server/metrics-certs" && m.ReadOnly {
						mounted = true
					}
				}
			}
			if !mounted {
				t.Errorf("the Secret podsieve-metrics-cert is not mounted read-only at the metrics cert dir: %+v", spec.Volumes)
			}
			// resyncPeriod: 30m.
			prometheusRuleIsConfigs(t, r, ns, map[string]string{
				"> 2 * 3600 + 3600": "> 2 * 1800 + 3600",
				"has not completed a full scan for over 3 hours.": "has not completed a full scan for over 2 hours.",
			})

			np := networkPolicy(t, r)
			if len(np.Spec.Ingress) < 2 || len(np.Spec.Ingress[0].From) != 1 || np.Spec.Ingress[0].From[0].IPBlock == nil ||
				np.Spec.Ingress[0].From[0].IPBlock.CIDR != "10.0.0.0/24" {
				t.Errorf("NetworkPolicy webhook ingress %+v, want from 10.0.0.0/24", np.Spec.Ingress)
			} else if from := np.Spec.Ingress[1].From; len(from) != 1 || from[0].NamespaceSelector == nil ||
				from[0].NamespaceSelector.MatchLabels["kubernetes.io/metadata.name"] != "monitoring" {
				t.Errorf("NetworkPolicy metrics ingress from %+v, want the monitoring namespace", from)
			}
		},
	}, {
		set: valueSets[6], // minimal
		check: func(t *testing.T, r rendered, ns string) {
			d := deployment(t, r)
			c := managerContainer(t, d)
			if *d.Spec.Replicas != 1 {
				t.Errorf("replicas %d, want 1", *d.Spec.Replicas)
			}
			for _, flag := range []string{"--metrics-bind-address=0", "--background-scan=false", "--admission-policies=false"} {
				if !slices.Contains(c.Args, flag) {
					t.Errorf("args %q lack %s", c.Args, flag)
				}
			}
			if containerPort(c, "metrics") != 0 {
				t.Error("a metrics port is declared with metrics off")
			}
			for _, o := range []struct{ kind, name string }{{"Service", "podsieve-metrics"}, {"PodDisruptionBudget", "podsieve-manager"}} {
				if r.find(o.kind, o.name) != nil {
					t.Errorf("%s %s is rendered", o.kind, o.name)
				}
			}
			crdsAre(t, r)
		},
	}}
	for _, tc := range cases {
		t.Run(tc.set.name, func(t *testing.T) {
			tc.check(t, render(t, tc.set.namespace, tc.set.files()...), tc.set.namespace)
		})
	}
}

type want struct {
	failurePolicy string
	timeout       int32
}

func webhooksAre(t *testing.T, r rendered, wants map[string]want) {
	t.Helper()
	w := webhookConfiguration(t, r)
	if len(w.Webhooks) != len(wants) {
		t.Errorf("%d webhooks, want %d", len(w.Webhooks), len(wants))
	}
	for _, wh := range w.Webhooks {
		want, ok := wants[wh.Name]
		if !ok {
			t.Errorf("unexpected webhook %s", wh.Name)
			continue
		}
		if string(*wh.FailurePolicy) != want.failurePolicy || *wh.TimeoutSeconds != want.timeout {
			t.Errorf("webhook %s: failurePolicy %s, timeoutSeconds %d; want %s, %d", wh.Name, *wh.FailurePolicy, *wh.TimeoutSeconds, want.failurePolicy, want.timeout)
		}
	}
}

func excludedNamespaces(t *testing.T, w *admissionregistrationv1.ValidatingWebhookConfiguration, name string) []string {
	t.Helper()
	for _, wh := range w.Webhooks {
		if wh.Name != name || wh.NamespaceSelector == nil {
			continue
		}
		for _, e := range wh.NamespaceSelector.MatchExpressions {
			if e.Key == "kubernetes.io/metadata.name" && e.Operator == "NotIn" {
				return slices.Clone(e.Values)
			}
		}
	}
	t.Errorf("webhook %s has no namespace exclusion", name)
	return nil
}

// certificate returns the cert-manager Certificate after checking it against
// the objects that must agree with it: its DNS names are the webhook
// Service's, the Secret is the one the Deployment mounts, and the webhook
// configuration asks cert-manager to inject its CA.
func certificate(t *testing.T, r rendered, ns string) *unstructured.Unstructured {
	t.Helper()
	cert := r.find("Certificate", "podsieve-webhook-cert")
	if cert == nil {
		t.Fatal("no Certificate podsieve-webhook-cert")
	}
	svc := service(t, r, "podsieve-webhook")
	dns, _, _ := unstructured.NestedStringSlice(cert.Object, "spec", "dnsNames")
	if want := []string{svc.Name + "." + svc.Namespace + ".svc", svc.Name + "." + svc.Namespace + ".svc.cluster.local"}; !slices.Equal(dns, want) || svc.Namespace != ns {
		t.Errorf("Certificate dnsNames %v, want %v", dns, want)
	}
	if s, _, _ := unstructured.NestedString(cert.Object, "spec", "secretName"); s != "podsieve-webhook-cert" {
		t.Errorf("Certificate secretName %q, want the Secret the Deployment mounts, podsieve-webhook-cert", s)
	}
	w := webhookConfiguration(t, r)
	if got, want := w.Annotations["cert-manager.io/inject-ca-from"], cert.GetNamespace()+"/"+cert.GetName(); got != want {
		t.Errorf("cert-manager.io/inject-ca-from %q, want %q", got, want)
	}
	return cert
}

// prometheusRuleIsConfigs checks that the PrometheusRule's groups are
// config/prometheus/rules.yaml's, with the namespace changed and the
// thresholds that follow values changed as derived says (each text
// replaced once; TestAlertThresholds and TestAlertsFollowValues check the
// derivation itself).
func prometheusRuleIsConfigs(t *testing.T, r rendered, ns string, derived map[string]string) {
	t.Helper()
	pr := r.find("PrometheusRule", "podsieve")
	if pr == nil {
		t.Fatal("no PrometheusRule podsieve")
	}
	raw, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "config", "prometheus", "rules.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	text := strings.ReplaceAll(string(raw), `namespace="podsieve-system"`, `namespace="`+ns+`"`)
	for from, to := range derived {
		if n := strings.Count(text, from); n != 1 {
			t.Fatalf("config/prometheus/rules.yaml has %q %d times, want once", from, n)
		}
		text = strings.Replace(text, from, to, 1)
	}
	var rules map[string]any
	if err := yaml.Unmarshal([]byte(text), &rules); err != nil {
		t.Fatal(err)
	}
	groups, _, _ := unstructured.NestedSlice(pr.Object, "spec", "groups")
	if !reflect.DeepEqual(groups, rules["groups"]) {
		t.Errorf("PrometheusRule groups differ from config/prometheus/rules.yaml's: run `make manifests`")
	}
	if ns != "podsieve-system" && strings.Contains(yamlText(t, groups), "podsieve-system") {
		t.Errorf("PrometheusRule still names podsieve-system in namespace %s", ns)
	}
}

func labelsMatch(selector, labels map[string]string) bool {
	for k, v := range selector {
		if labels[k] != v {
			return false
		}
	}
	return len(selector) > 0
}

func readObjects(t *testing.T, path string) rendered {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return decode(t, string(b))
}

func readYAML(t *testing.T, path string) map[string]any {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := yaml.Unmarshal(b, &m); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return m
}

func yamlText(t *testing.T, v any) string {
	t.Helper()
	b, err := yaml.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
