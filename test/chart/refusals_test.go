package chart

import (
	"strings"
	"testing"
)

// TestSchemaRefuses checks that bad values fail with a message that names
// the value and what is wrong.
func TestSchemaRefuses(t *testing.T) {
	cases := []struct {
		name, values, message string
	}{
		{"failurePolicy not an enum value", "webhooks: {pods: {failurePolicy: Maybe}}",
			"at '/webhooks/pods/failurePolicy': value must be one of 'Fail', 'Ignore'"},
		{"zero replicas", "replicas: 0", "at '/replicas': minimum: got 0, want 1"},
		{"misspelled top-level key", "replica: 2", "additional properties 'replica' not allowed"},
		{"misspelled nested key", "webhooks: {pods: {timeout: 3}}", "at '/webhooks/pods': additional properties 'timeout' not allowed"},
		{"timeout above 30", "webhooks: {policyExceptions: {timeoutSeconds: 31}}",
			"at '/webhooks/policyExceptions/timeoutSeconds': maximum: got 31, want 30"},
		{"timeout zero", "webhooks: {securityPolicies: {timeoutSeconds: 0}}",
			"at '/webhooks/securityPolicies/timeoutSeconds': minimum: got 0, want 1"},
		{"unknown certificate provider", "certificates: {provider: vault}",
			"at '/certificates/provider': value must be one of 'manager', 'cert-manager'"},
		{"zero resync period", "backgroundScan: {resyncPeriod: 0s}", "at '/backgroundScan/resyncPeriod': '0s' does not match pattern"},
		{"port out of range", "ports: {webhook: 70000}", "at '/ports/webhook': maximum: got 70,000, want 65,535"},
		{"extra arg without dashes", "extraArgs: [zap-log-level=debug]", "at '/extraArgs/0': 'zap-log-level=debug' does not match pattern"},
		{"two ports the same", "ports: {metrics: 9443}", "ports: webhook (9443), metrics (9443) and health (8081) must be three different ports"},
		{"ServiceMonitor without metrics", "metrics: {enabled: false, serviceMonitor: {enabled: true}}",
			"metrics.serviceMonitor.enabled: there is nothing to scrape with metrics.enabled=false"},
		{"issuer without cert-manager", "certificates: {certManager: {issuerRef: {name: corp-ca}}}",
			"certificates.certManager.issuerRef.name (corp-ca) is set but certificates.provider is manager"},
		{"duration with trailing YAML", "certificates: {provider: cert-manager, certManager: {duration: \"1h\\nextra: x\"}}",
			"at '/certificates/certManager/duration'"},
		{"duration not a duration", "certificates: {provider: cert-manager, certManager: {renewBefore: soon1h}}",
			"at '/certificates/certManager/renewBefore': 'soon1h' does not match pattern"},
		{"priority class with YAML", "priorityClassName: \"high\\nhostPID: true\"", "at '/priorityClassName'"},
		{"issuer kind not a kind", "certificates: {provider: cert-manager, certManager: {issuerRef: {name: ca, kind: \"Issuer, evil\"}}}",
			"at '/certificates/certManager/issuerRef/kind'"},
		{"image with a tag in the repository", "image: {repository: \"ghcr.io/podsieve/podsieve:v1 #\"}", "at '/image/repository'"},
		{"image tag with a space", "image: {tag: \"v1 latest\"}", "at '/image/tag'"},
		{"image digest without its algorithm", "image: {digest: 2cff7c937054ebe28b62c940fbf7608d5e249d98ed6821b60ba5cec338f6839c}", "at '/image/digest'"},
		{"image digest with a tag", "image: {digest: \"v1@sha256:2cff7c937054ebe28b62c940fbf7608d5e249d98ed6821b60ba5cec338f6839c\"}", "at '/image/digest'"},
		{"metrics verified without a certificate", "metrics: {serviceMonitor: {enabled: true, insecureSkipVerify: false}}",
			"metrics.serviceMonitor.insecureSkipVerify=false: the manager serves a self-signed metrics certificate unless metrics.certSecret"},
		{"alerts without metrics", "metrics: {enabled: false, prometheusRule: {enabled: true}}",
			"metrics.prometheusRule.enabled: the alerts read podsieve's metrics"},
		{"extra arg the chart sets", "extraArgs: [--webhook-port=9444]", "extraArgs: remove --webhook-port, which the chart manages (set ports.webhook instead)"},
		{"extra arg turning certificates off", "extraArgs: [--cert-rotation=false]", "extraArgs: remove --cert-rotation, which the chart manages"},
		{"extra arg moving the exceptions namespace", "extraArgs: [--exceptions-namespace]", "extraArgs: remove --exceptions-namespace"},
		{"alert job that would end the expression", "metrics: {prometheusRule: {job: \"a #b\"}}", "at '/metrics/prometheusRule/job'"},
		{"extra arg binding the webhook to loopback", "extraArgs: [--webhook-bind-address=127.0.0.1]", "extraArgs: remove --webhook-bind-address"},
		{"unknown report API", "backgroundScan: {reportAPI: policyreports}", "at '/backgroundScan/reportAPI': value must be one of 'auto', 'openreports', 'wgpolicyk8s'"},
		{"no report writes", "backgroundScan: {writesPerSecond: 0}", "at '/backgroundScan/writesPerSecond'"},
		{"more report writes than the manager takes", "backgroundScan: {writesPerSecond: 5000}", "at '/backgroundScan/writesPerSecond'"},
		{"a flag the chart manages", "extraArgs: [--background-writes-per-second=900]", "set backgroundScan.writesPerSecond instead"},
		{"the admission policies' flag", "extraArgs: [--admission-policies=false]", "set admissionPolicies.enabled instead"},
		{"env without a name", "extraEnv: [{value: x}]", "at '/extraEnv/0': missing property 'name'"},
		{"env with value and valueFrom", "extraEnv: [{name: A, value: x, valueFrom: {fieldRef: {fieldPath: spec.nodeName}}}]", "at '/extraEnv/0'"},
		{"env name with a space", "extraEnv: [{name: \"A B\", value: x}]", "at '/extraEnv/0/name'"},
		{"env moving the manager's namespace", "extraEnv: [{name: POD_NAMESPACE, value: default}]", "extraEnv: remove POD_NAMESPACE, which the chart sets"},
		{"env set twice", "extraEnv: [{name: A, value: one}, {name: A, value: two}]", "extraEnv: A is set twice"},
		{"privileged manager", "securityContext: {privileged: true}", "at '/securityContext/privileged'"},
		{"privilege escalation", "securityContext: {allowPrivilegeEscalation: true}", "at '/securityContext/allowPrivilegeEscalation'"},
		{"negative UID", "podSecurityContext: {runAsUser: -1}", "at '/podSecurityContext/runAsUser'"},
		{"ServiceAccount annotation not a string", "serviceAccount: {annotations: {a: 1}}", "at '/serviceAccount/annotations/a'"},
		{"namespace term with an unknown operator", "webhooks: {pods: {namespaceSelector: {matchExpressions: [{key: a, operator: Gt, values: [\"1\"]}]}}}",
			"at '/webhooks/pods/namespaceSelector/matchExpressions/0/operator'"},
		{"namespace term by name", "webhooks: {pods: {namespaceSelector: {matchExpressions: [{key: kubernetes.io/metadata.name, operator: NotIn, values: [a]}]}}}",
			"leave namespaces out by name with webhooks.excludeNamespaces"},
		{"namespace term on the opt-out label", "webhooks: {pods: {namespaceSelector: {matchExpressions: [{key: podsieve.dev/allow-ignore, operator: DoesNotExist}]}}}",
			"podsieve.dev/allow-ignore splits the pod webhooks in two"},
		{"namespace label on the opt-out label", "webhooks: {pods: {namespaceSelector: {matchLabels: {podsieve.dev/allow-ignore: \"false\"}}}}",
			"webhooks.pods.namespaceSelector.matchLabels: kubernetes.io/metadata.name"},
		{"NotIn without values", "webhooks: {pods: {namespaceSelector: {matchExpressions: [{key: a, operator: NotIn}]}}}", "a NotIn needs values"},
		{"Exists with values", "webhooks: {pods: {namespaceSelector: {matchExpressions: [{key: a, operator: Exists, values: [b]}]}}}", "a Exists takes no values"},
		{"scrape authorization other than Bearer", "metrics: {serviceMonitor: {authorization: {type: Basic, credentials: {name: a, key: b}}}}",
			"at '/metrics/serviceMonitor/authorization"},
		{"scrape authorization without a key", "metrics: {serviceMonitor: {authorization: {credentials: {name: a}}}}",
			"at '/metrics/serviceMonitor/authorization"},
		{"relabeling with an unknown field", "metrics: {serviceMonitor: {relabelings: [{source_labels: [a]}]}}",
			"at '/metrics/serviceMonitor/relabelings/0'"},
		{"dashboard namespace not a name", "grafana: {dashboards: {namespace: Monitoring}}", "at '/grafana/dashboards/namespace'"},
		{"matchCondition without an expression", "webhooks: {pods: {matchConditions: [{name: a}]}}", "at '/webhooks/pods/matchConditions/0': missing property 'expression'"},
		{"matchCondition name not a name", "webhooks: {securityPolicies: {matchConditions: [{name: \"a b\", expression: \"true\"}]}}",
			"at '/webhooks/securityPolicies/matchConditions/0/name'"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := renderText(t, "podsieve-system", writeValues(t, tc.values))
			if err == nil {
				t.Fatalf("helm template accepted %s", tc.values)
			}
			if !strings.Contains(err.Error(), tc.message) {
				t.Fatalf("helm template refused %s with\n%v\nwant a message containing %q", tc.values, err, tc.message)
			}
		})
	}
}

// TestSharedNamespaceRefused: podsieve's namespace is never judged and its
// PolicyExceptions reach every namespace, so it must not be one that others
// write to.
func TestSharedNamespaceRefused(t *testing.T) {
	for _, ns := range []string{"default", "kube-system", "kube-public", "kube-node-lease"} {
		t.Run(ns, func(t *testing.T) {
			_, err := renderText(t, ns)
			want := "the release namespace " + ns + " is shared: install podsieve into a namespace of its own"
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Fatalf("helm template -n %s: %v, want an error containing %q", ns, err, want)
			}
		})
	}
}
