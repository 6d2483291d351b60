package engine

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestNamespaceLabelsDecide: a rule or exception depends on the labels of
// the object's namespace exactly when a namespaceSelector asking for a label
// other than the name label is what decides; when the rest of the filter, or
// a requirement on the name, decides, it does not.
func TestNamespaceLabelsDecide(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-1", Labels: map[string]string{"app": "web"}}}
	o := podObject("staging", pod)
	rules := []struct {
		name, spec, want string
	}{
		{"no selector", "rules: [{name: r, podSecurity: {level: baseline}}]", ""},
		{"match by label", "rules: [{name: r, match: {namespaceSelector: {matchLabels: {profile: restricted}}}, podSecurity: {level: baseline}}]", "match.namespaceSelector"},
		{"match by a label's absence", "rules: [{name: r, match: {namespaceSelector: {matchExpressions: [{key: exempt, operator: DoesNotExist}]}}, podSecurity: {level: baseline}}]", "match.namespaceSelector"},
		{"exclude by label", "rules: [{name: r, exclude: {namespaceSelector: {matchLabels: {exempt: \"true\"}}}, podSecurity: {level: baseline}}]", "exclude.namespaceSelector"},
		{"match by name label", "rules: [{name: r, match: {namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: staging}}}, podSecurity: {level: baseline}}]", ""},
		{"match by another name label and a label", "rules: [{name: r, match: {namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: prod, profile: restricted}}}, podSecurity: {level: baseline}}]", ""},
		{"match by its name label and a label", "rules: [{name: r, match: {namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: staging, profile: restricted}}}, podSecurity: {level: baseline}}]", "match.namespaceSelector"},
		{"other namespaces decide", "rules: [{name: r, match: {namespaces: [prod], namespaceSelector: {matchLabels: {profile: restricted}}}, podSecurity: {level: baseline}}]", ""},
		{"pod labels decide", "rules: [{name: r, match: {selector: {matchLabels: {app: db}}, namespaceSelector: {matchLabels: {profile: restricted}}}, podSecurity: {level: baseline}}]", ""},
		{"excluded by name", "rules: [{name: r, match: {namespaceSelector: {matchLabels: {profile: restricted}}}, exclude: {namespaces: [staging]}, podSecurity: {level: baseline}}]", ""},
		{"exclude by label of another namespace", "rules: [{name: r, exclude: {namespaces: [prod], namespaceSelector: {matchLabels: {exempt: \"true\"}}}, podSecurity: {level: baseline}}]", ""},
	}
	for _, tt := range rules {
		t.Run("rule/"+tt.name, func(t *testing.T) {
			r := mustPolicy(t, "p", tt.spec).Rules[0]
			if got := r.NamespaceLabelsDecide(o); got != tt.want {
				t.Errorf("NamespaceLabelsDecide = %q, want %q", got, tt.want)
			}
		})
	}
	exceptions := []struct {
		name, namespace, spec string
		want                  bool
	}{
		{"own namespace", "staging", "exceptions: [{policyName: p, ruleNames: ['*']}]", false},
		{"cluster-wide by label", "podsieve-system", "exceptions: [{policyName: p, ruleNames: ['*']}]\nmatch: {namespaceSelector: {matchLabels: {cni: acme}}}", true},
		{"cluster-wide by name", "podsieve-system", "exceptions: [{policyName: p, ruleNames: ['*']}]\nmatch: {namespaces: [staging]}", false},
		{"cluster-wide by label, another name", "podsieve-system", "exceptions: [{policyName: p, ruleNames: ['*']}]\nmatch: {names: [db-*], namespaceSelector: {matchLabels: {cni: acme}}}", false},
	}
	for _, tt := range exceptions {
		t.Run("exception/"+tt.name, func(t *testing.T) {
			e := mustException(t, tt.namespace, "e", tt.spec)
			if got := e.NamespaceLabelsDecide(o); got != tt.want {
				t.Errorf("NamespaceLabelsDecide = %v, want %v", got, tt.want)
			}
		})
	}
}
