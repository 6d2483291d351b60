package convert

import (
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	policyv1alpha1 "github.com/podsieve/podsieve/api/v1alpha1"
	"github.com/podsieve/podsieve/internal/engine"
)

// now is when the converted objects are decided.
var now = time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC)

func readTestdata(t *testing.T, paths ...string) []Document {
	t.Helper()
	docs, err := Read(paths, nil)
	if err != nil {
		t.Fatal(err)
	}
	return docs
}

// compiled is a conversion's output, compiled as the cluster would.
type compiled struct {
	policies   []*engine.Policy
	exceptions []*engine.Exception
}

func compileResult(t *testing.T, res *Result) compiled {
	t.Helper()
	var c compiled
	for _, o := range res.Objects {
		switch obj := o.Object.(type) {
		case *policyv1alpha1.SecurityPolicy:
			p, err := engine.CompilePolicy(obj)
			if err != nil {
				t.Fatalf("SecurityPolicy %s from %s: %v", obj.Name, o.From, err)
			}
			c.policies = append(c.policies, p)
		case *policyv1alpha1.PolicyException:
			e, err := engine.CompileException(obj, "podsieve-system")
			if err != nil {
				t.Fatalf("PolicyException %s/%s from %s: %v", obj.Namespace, obj.Name, o.From, err)
			}
			c.exceptions = append(c.exceptions, e)
		default:
			t.Fatalf("unexpected %T from %s", o.Object, o.From)
		}
	}
	return c
}

func (c compiled) decide(t *testing.T, pod *corev1.Pod, nsLabels map[string]string) engine.Decision {
	t.Helper()
	return c.decideAs(t, pod, nsLabels, "")
}

// decideAs decides a request by user (admission's requester).
func (c compiled) decideAs(t *testing.T, pod *corev1.Pod, nsLabels map[string]string, user string) engine.Decision {
	t.Helper()
	o, err := engine.NewObject(pod.DeepCopy())
	if err != nil {
		t.Fatal(err)
	}
	o.RequestUser = user
	labels := map[string]string{"kubernetes.io/metadata.name": pod.Namespace}
	for k, v := range nsLabels {
		labels[k] = v
	}
	return engine.Decide(c.policies, engine.AllExceptions(c.exceptions), o, labels, now, engine.Admission)
}

// failing lists "action:rule" for each failing rule of a decision.
func failing(d engine.Decision) []string {
	var out []string
	for _, r := range d.Results {
		if r.Outcome == engine.Fail {
			out = append(out, string(r.Rule.Policy.Action)+":"+r.Rule.Policy.Name+"/"+r.Rule.Name)
		}
	}
	return out
}

// Pod builders for the semantic tables.

type podOpt func(*corev1.Pod)

func pod(ns, name string, opts ...podOpt) *corev1.Pod {
	p := &corev1.Pod{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "nginx:1.25"}}},
	}
	for _, o := range opts {
		o(p)
	}
	return p
}

func ptr[T any](v T) *T { return &v }

// restrictedPod makes every container and the pod meet restricted.
func restrictedPod(p *corev1.Pod) {
	p.Spec.SecurityContext = &corev1.PodSecurityContext{RunAsNonRoot: ptr(true), SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}}
	for i := range p.Spec.Containers {
		p.Spec.Containers[i].SecurityContext = restrictedContainer()
	}
	for i := range p.Spec.InitContainers {
		p.Spec.InitContainers[i].SecurityContext = restrictedContainer()
	}
}

func restrictedContainer() *corev1.SecurityContext {
	return &corev1.SecurityContext{AllowPrivilegeEscalation: ptr(false), Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}}
}

func withInit(name, image string, add ...corev1.Capability) podOpt {
	return func(p *corev1.Pod) {
		c := corev1.Container{Name: name, Image: image}
		if len(add) > 0 {
			c.SecurityContext = &corev1.SecurityContext{Capabilities: &corev1.Capabilities{Add: add}}
		}
		p.Spec.InitContainers = append(p.Spec.InitContainers, c)
	}
}

// meshInitAsRoot makes the init containers run as root with their
// capabilities, after restrictedPod, as istio-init does.
func meshInitAsRoot(add ...corev1.Capability) podOpt {
	return func(p *corev1.Pod) {
		for i := range p.Spec.InitContainers {
			sc := p.Spec.InitContainers[i].SecurityContext
			sc.RunAsNonRoot, sc.RunAsUser = ptr(false), ptr(int64(0))
			sc.Capabilities.Add = add
		}
	}
}

func withApp(image string, add ...corev1.Capability) podOpt {
	return func(p *corev1.Pod) {
		p.Spec.Containers[0].Image = image
		if len(add) > 0 {
			p.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{Capabilities: &corev1.Capabilities{Add: add}}
		}
	}
}

func hostNetwork(p *corev1.Pod) { p.Spec.HostNetwork = true }

func TestPortGlobs(t *testing.T) {
	tests := []struct {
		name     string
		lo, hi   int64
		wantLen  int // 0: do not check
		wantOnly []string
	}{
		{name: "one port", lo: 8080, hi: 8080, wantOnly: []string{"8080"}},
		{name: "an aligned block", lo: 9100, hi: 9109, wantOnly: []string{"910?"}},
		{name: "a block and a tail", lo: 9100, hi: 9110, wantOnly: []string{"910?", "9110"}},
		{name: "across digit counts", lo: 95, hi: 1005, wantOnly: []string{"95", "96", "97", "98", "99", "???", "1000", "1001", "1002", "1003", "1004", "1005"}},
		{name: "every port", lo: 1, hi: 65535, wantOnly: []string{"*"}},
		{name: "high ports", lo: 30000, hi: 32767},
		{name: "unaligned", lo: 1234, hi: 5678},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := portGlobs(tt.lo, tt.hi)
			if tt.wantOnly != nil && strings.Join(got, " ") != strings.Join(tt.wantOnly, " ") {
				t.Errorf("portGlobs(%d, %d) = %v, want %v", tt.lo, tt.hi, got, tt.wantOnly)
			}
			globs, err := engine.CompileGlobs(got)
			if err != nil {
				t.Fatal(err)
			}
			// Exactly the range: every port in it matches, none outside.
			for p := int64(1); p <= 65535; p++ {
				in := p >= tt.lo && p <= tt.hi
				if globs.Match(strconv.FormatInt(p, 10)) != in {
					t.Fatalf("port %d: match %v, want %v (globs %v)", p, !in, in, got)
				}
			}
		})
	}
}

func TestReadAndDecode(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		wantErr []string
		want    int // documents
	}{
		{name: "list items and documents", in: "apiVersion: v1\nkind: List\nitems:\n- {apiVersion: v1, kind: Namespace, metadata: {name: a}}\n- {apiVersion: v1, kind: Namespace, metadata: {name: b}}\n---\n# comment\n---\napiVersion: v1\nkind: Namespace\nmetadata: {name: c}\n", want: 3},
		{name: "no kind", in: "metadata: {name: a}\n", wantErr: []string{"<stdin>, document 1: apiVersion and kind are required"}},
		{name: "not YAML", in: "a: [b\n", wantErr: []string{"<stdin>, document 1: not valid YAML"}},
		// As podsieve eval reads them (internal/manifest, the one reader):
		{name: "a typed List's items take its kind", in: "apiVersion: v1\nkind: NamespaceList\nitems:\n- metadata: {name: a}\n", want: 1},
		{name: "a null List item is skipped", in: "apiVersion: v1\nkind: List\nitems:\n- null\n- {apiVersion: v1, kind: Namespace, metadata: {name: a}}\n", want: 1},
		{name: "a bad List item is named", in: "apiVersion: v1\nkind: List\nitems:\n- {kind: Namespace}\n", wantErr: []string{"<stdin>, document 1, item 1: apiVersion and kind are required"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			docs, err := Read([]string{"-"}, strings.NewReader(tt.in))
			for _, w := range tt.wantErr {
				if err == nil || !strings.Contains(err.Error(), w) {
					t.Errorf("error %v, want it to contain %q", err, w)
				}
			}
			if tt.wantErr == nil && err != nil {
				t.Fatal(err)
			}
			if tt.wantErr == nil && len(docs) != tt.want {
				t.Errorf("%d documents, want %d", len(docs), tt.want)
			}
		})
	}
}

// TestDecodeStrictNamesEveryUnknownField: a misspelt Kyverno field is bad
// input with every unknown path, never silently ignored.
func TestDecodeStrictNamesEveryUnknownField(t *testing.T) {
	docs, err := Read([]string{"-"}, strings.NewReader(`apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata: {name: typo}
spec:
  validationFailureActoin: Enforce
  rules:
  - name: r
    match: {any: [{resources: {kinds: [Pod], namespace: [a]}}]}
    validate: {podSecurity: {level: baseline, exclude: [{controlName: Capabilities, image: [x]}]}}
`))
	if err != nil {
		t.Fatal(err)
	}
	_, err = Kyverno(docs, KyvernoOptions{ExceptionsNamespace: "podsieve-system"})
	if err == nil {
		t.Fatal("no error for unknown fields")
	}
	for _, want := range []string{`"spec.validationFailureActoin"`, `"spec.rules[0].match.any[0].resources.namespace"`, `"spec.rules[0].validate.podSecurity.exclude[0].image"`, "<stdin>, document 1: ClusterPolicy typo"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %s", err, want)
		}
	}
}

// TestDecodeTypeErrors: a value of the wrong type is named by the path the
// user wrote, with what was expected, and a string written as a YAML
// boolean or number gets the hint to quote it.
func TestDecodeTypeErrors(t *testing.T) {
	const head = "apiVersion: kyverno.io/v1\nkind: ClusterPolicy\nmetadata: {name: p}\nspec:\n  rules:\n  - name: r\n    match: {any: [{resources: {kinds: [Pod]}}]}\n"
	tests := []struct {
		name, in string
		want     []string
	}{
		{
			name: "unquoted y in matchLabels",
			in:   head + "    exclude: {any: [{resources: {selector: {matchLabels: {x: y}}}}]}\n    validate: {podSecurity: {level: baseline}}\n",
			want: []string{"<stdin>, document 1: ClusterPolicy p: spec.rules[0].exclude.any[0].resources.selector.matchLabels.x: a boolean, where a string is expected; quote the value"},
		},
		{
			name: "a number as a version",
			in:   head + "    validate: {podSecurity: {level: baseline, version: 1.30}}\n",
			want: []string{"spec.rules[0].validate.podSecurity.version: a number, where a string is expected; quote the value"},
		},
		{
			name: "a string where a list is expected",
			in:   head + "    validate: {podSecurity: {level: baseline, exclude: [{controlName: Capabilities, images: nginx}]}}\n",
			want: []string{"spec.rules[0].validate.podSecurity.exclude[0].images: a string, where a list is expected"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			docs, err := Read([]string{"-"}, strings.NewReader(tt.in))
			if err != nil {
				t.Fatal(err)
			}
			_, err = Kyverno(docs, KyvernoOptions{ExceptionsNamespace: "podsieve-system"})
			for _, w := range tt.want {
				if err == nil || !strings.Contains(err.Error(), w) {
					t.Errorf("error %v, want it to contain %q", err, w)
				}
			}
			if err != nil && strings.Contains(err.Error(), "kyvernoFilter") {
				t.Errorf("error %v names a Go type", err)
			}
		})
	}
}

func TestRuleName(t *testing.T) {
	tests := map[string]string{
		"baseline":              "baseline",
		"Baseline_Everywhere":   "baseline-everywhere",
		"v1.30":                 "v1-30",
		"--x--y--":              "x-y",
		"":                      "rule",
		strings.Repeat("a", 70): strings.Repeat("a", 63),
	}
	for in, want := range tests {
		if got := ruleName(in); got != want {
			t.Errorf("ruleName(%q) = %q, want %q", in, got, want)
		}
	}
}
