package generate

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/podsieve/podsieve/internal/engine"
	"github.com/podsieve/podsieve/internal/enginetest"
)

// TestMatch: a Pod's exception matches the Pod by name; a controller gets
// two, one for the controller by its exact name and kind, one for the
// objects it creates (name-*), so that neither reaches a sibling controller
// named name-x.
func TestMatch(t *testing.T) {
	tmpl := corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "x"}}}
	tests := []struct {
		name string
		obj  runtime.Object
		// want is, per exception, "names|kinds|suffix".
		want     []string
		selector bool
	}{
		{"pod", &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "x", Labels: map[string]string{"app": "x"}}}, []string{"x|Pod|"}, false},
		{"deployment", &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "x"}, Spec: appsv1.DeploymentSpec{Template: tmpl}}, []string{"x|Deployment|", "x-*|ReplicaSet,Pod|-pods"}, true},
		{"cronjob", &batchv1.CronJob{ObjectMeta: metav1.ObjectMeta{Name: "x"}, Spec: batchv1.CronJobSpec{JobTemplate: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{Template: tmpl}}}}, []string{"x|CronJob|", "x-*|Job,Pod|-pods"}, true},
		{"daemonset", &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: "x"}, Spec: appsv1.DaemonSetSpec{Template: tmpl}}, []string{"x|DaemonSet|", "x-*|Pod|-pods"}, true},
		{"statefulset without labels", &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "x"}}, []string{"x|StatefulSet|", "x-*|Pod|-pods"}, false},
		{"deployment with more labels than a selector may hold", &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "x"}, Spec: appsv1.DeploymentSpec{
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: manyLabels(20)}}}}, []string{"x|Deployment|", "x-*|ReplicaSet,Pod|-pods"}, true},
		// Named by the API server (podsieve eval reads generateName as
		// <prefix><generated>): every name it may generate, never the
		// placeholder literally.
		{"pod the API server names", &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-" + engine.GeneratedName}}, []string{"web-*|Pod|"}, false},
		{"job the API server names", &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "migrate-" + engine.GeneratedName}, Spec: batchv1.JobSpec{Template: tmpl}}, []string{"migrate-*|Job|", "migrate-*-*|Pod|-pods"}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			for _, m := range matchesFor(object(t, tt.obj)) {
				kinds := make([]string, len(m.match.Kinds))
				for i, k := range m.match.Kinds {
					kinds[i] = string(k)
				}
				got = append(got, strings.Join(m.match.Names, ",")+"|"+strings.Join(kinds, ",")+"|"+m.suffix)
				if (m.match.Selector != nil) != tt.selector {
					t.Errorf("selector %v", m.match.Selector)
				}
				if m.match.Selector != nil && len(m.match.Selector.MatchLabels) > engine.MaxSelectorRequirements {
					t.Errorf("selector of %d labels, more than an exception may hold", len(m.match.Selector.MatchLabels))
				}
			}
			if strings.Join(got, " ") != strings.Join(tt.want, " ") {
				t.Errorf("matches %q, want %q", got, tt.want)
			}
		})
	}
}

func TestExceptionNames(t *testing.T) {
	long := strings.Repeat("a", 250)
	tests := []struct {
		name, workload, flag string
		policies             []string
		want                 string
	}{
		{"default", "web", "", []string{"pss"}, "web-pss"},
		{"given", "web", "mine", []string{"pss"}, "mine"},
		{"given, two policies", "web", "mine", []string{"pss", "restricted"}, "mine-pss,mine-restricted"},
		{"too long", long, "", []string{"pss"}, long + "-ps"},
		{"too long, cut at the dash", long + "aa", "", []string{"pss"}, long + "aa"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := strings.Join(exceptionNames(tt.workload, tt.flag, tt.policies, func(s string) string { return s }), ",")
			if got != tt.want {
				t.Errorf("names %q, want %q", got, tt.want)
			}
		})
	}
}

// TestNameGlob: an exception is named after the object and matches it by
// name; an object the API server names is matched by its prefix, and the
// exception's name is a valid object name.
func TestNameGlob(t *testing.T) {
	tests := []struct{ name, wantBase, wantGlob string }{
		{"web", "web", "web"},
		{"we*b", "we*b", "we?b"},
		{"web-" + engine.GeneratedName, "web", "web-*"},
		{"web." + engine.GeneratedName, "web", "web.*"},
		{"-" + engine.GeneratedName, "generated", "-*"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			base, glob := nameGlob(&engine.Object{Name: tt.name})
			if base != tt.wantBase || glob != tt.wantGlob {
				t.Errorf("nameGlob(%q) = %q, %q; want %q, %q", tt.name, base, glob, tt.wantBase, tt.wantGlob)
			}
		})
	}
}

// manyLabels is n labels l00=v, l01=v, ...
func manyLabels(n int) map[string]string {
	out := map[string]string{}
	for i := range n {
		out[fmt.Sprintf("l%02d", i)] = "v"
	}
	return out
}

// TestSelectorSurvivesUpgrades: the exceptions generated for a chart's
// Deployment leave out the labels a release or rollout changes, so that
// after a chart upgrade (new version labels, new image tag, with --any-tag)
// they still waive the Deployment and the pods its new ReplicaSet creates,
// and still nothing of another workload.
func TestSelectorSurvivesUpgrades(t *testing.T) {
	p := policy(t, `exceptions:
  controls:
  - {controlName: Capabilities, allowedValues: [NET_ADMIN]}
rules: [{name: baseline, podSecurity: {level: baseline}}]`)
	release := func(version, tag string) *appsv1.Deployment {
		return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "team-a"},
			Spec: appsv1.DeploymentSpec{Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{
					"app.kubernetes.io/name": "web", "app.kubernetes.io/instance": "web",
					"app.kubernetes.io/version": version, "helm.sh/chart": "web-" + version,
				}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.example/web:" + tag, SecurityContext: caps("NET_ADMIN")}}},
			}}}
	}
	podOf := func(d *appsv1.Deployment, hash string) *corev1.Pod {
		labels := map[string]string{"pod-template-hash": hash}
		for k, v := range d.Spec.Template.Labels {
			labels[k] = v
		}
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-" + hash + "-x7k2p", Namespace: "team-a", Labels: labels}, Spec: d.Spec.Template.Spec}
	}
	d := engine.Decide([]*engine.Policy{p}, engine.AllExceptions(nil), object(t, release("1.2.0", "1.2.0")), nil, now, engine.Admission)
	plan, err := For(d, Options{Now: now, AnyTag: true, ExceptionsNamespace: "podsieve-system"})
	if err != nil {
		t.Fatal(err)
	}
	var excs []*engine.Exception
	for _, ex := range plan.Exceptions {
		if sel := ex.Object.Spec.Match.Selector; sel == nil || len(sel.MatchLabels) != 2 {
			t.Errorf("exception %s: selector %v, want the two stable labels", ex.Object.Name, sel)
		}
		e, err := engine.CompileException(ex.Object, "podsieve-system")
		if err != nil {
			t.Fatal(err)
		}
		excs = append(excs, e)
	}
	upgraded := release("1.3.0", "1.3.0")
	other := release("1.3.0", "1.3.0")
	other.Spec.Template.Labels["app.kubernetes.io/name"] = "admin"
	tests := []struct {
		name    string
		obj     runtime.Object
		allowed bool
	}{
		{"the Deployment, upgraded", upgraded, true},
		{"a pod of its new ReplicaSet", podOf(upgraded, "5d8f7c9b6"), true},
		{"a pod of the release generated for", podOf(release("1.2.0", "1.2.0"), "7b9c5f4d8"), true},
		{"another workload of the same name pattern", podOf(other, "5d8f7c9b6"), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := engine.Decide([]*engine.Policy{p}, engine.AllExceptions(excs), object(t, tt.obj), nil, now, engine.Admission)
			if d.Allowed != tt.allowed {
				t.Errorf("allowed = %v, want %v: %+v", d.Allowed, tt.allowed, d.Results)
			}
		})
	}
}

// TestNoteWhenNoStableLabel: a controller whose pod template carries only
// release labels gets exceptions by name and kind alone, and a note says
// so; a Pod, matched by its name alone anyway, gets no such note.
func TestNoteWhenNoStableLabel(t *testing.T) {
	p := policy(t, "exceptions: {}\n"+enginetest.BaselineRule)
	labels := map[string]string{"helm.sh/chart": "web-1.2.0", "app.kubernetes.io/version": "1.2.0"}
	spec := corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.example/web:1", SecurityContext: caps("NET_ADMIN")}}}
	tests := []struct {
		name string
		obj  runtime.Object
		note bool
	}{
		{"deployment", &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "team-a"},
			Spec: appsv1.DeploymentSpec{Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: spec}}}, true},
		{"pod", &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "team-a", Labels: labels}, Spec: spec}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := engine.Decide([]*engine.Policy{p}, engine.AllExceptions(nil), object(t, tt.obj), nil, now, engine.Admission)
			plan, err := For(d, Options{Now: now, ExceptionsNamespace: "podsieve-system"})
			if err != nil || len(plan.Exceptions) == 0 {
				t.Fatalf("plan %+v, %v", plan, err)
			}
			for _, ex := range plan.Exceptions {
				if ex.Object.Spec.Match.Selector != nil {
					t.Errorf("%s: selector %v, want none (only release labels)", ex.Object.Name, ex.Object.Spec.Match.Selector)
				}
				noted := slices.ContainsFunc(ex.Notes, func(n string) bool { return strings.Contains(n, "another workload named web-* is covered too") })
				if noted != tt.note {
					t.Errorf("%s: notes %q, want the no-stable-label note: %v", ex.Object.Name, ex.Notes, tt.note)
				}
			}
		})
	}
}
