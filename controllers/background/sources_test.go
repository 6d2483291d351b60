package background

import (
	"slices"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/yaml"

	policyv1alpha1 "github.com/podsieve/podsieve/api/v1alpha1"
	"github.com/podsieve/podsieve/internal/engine"
	"github.com/podsieve/podsieve/internal/index"
)

// recordingQueue records what is queued and with what delay. Only Add and
// AddAfter are called: the embedded queue is nil.
type recordingQueue struct {
	queue
	added map[string]time.Duration
}

func (q *recordingQueue) Add(req reconcile.Request) { q.added[req.Name] = 0 }
func (q *recordingQueue) AddAfter(req reconcile.Request, d time.Duration) {
	q.added[req.Name] = d
}

func (q *recordingQueue) take() []string {
	var out []string
	for ns, d := range q.added {
		if d != time.Second {
			out = append(out, ns+" (not after the batch)")
			continue
		}
		out = append(out, ns)
	}
	q.added = map[string]time.Duration{}
	slices.Sort(out)
	return out
}

// TestIndexChangesQueueNamespaces: each change to the index queues, after
// the batch, the namespaces whose results it can affect, and only those.
func TestIndexChangesQueueNamespaces(t *testing.T) {
	ix := index.New("podsieve-system")
	for ns, labels := range map[string]map[string]string{
		"team-a": {"tier": "apps"}, "team-b": {"tier": "apps"}, "infra": {"tier": "infra"}, "podsieve-system": nil,
	} {
		ix.SetNamespace(ns, labels)
	}
	q := &recordingQueue{added: map[string]time.Duration{}}
	s := newScanner(nil, nil, nil, ix, Options{ExceptionsNamespace: "podsieve-system"})
	if err := s.watchIndex(t.Context(), q); err != nil {
		t.Fatal(err)
	}
	policy := func(spec string) *engine.Policy {
		t.Helper()
		sp := &policyv1alpha1.SecurityPolicy{ObjectMeta: metav1.ObjectMeta{Name: "p", UID: "uid-p", Generation: 1}}
		if err := yaml.UnmarshalStrict([]byte(spec), &sp.Spec); err != nil {
			t.Fatal(err)
		}
		p, err := engine.CompilePolicy(sp)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	exception := func(ns string) *engine.Exception {
		t.Helper()
		pe := &policyv1alpha1.PolicyException{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "e", UID: "uid-e", Generation: 1}}
		if err := yaml.UnmarshalStrict([]byte(`exceptions: [{policyName: p, ruleNames: ["*"]}]`), &pe.Spec); err != nil {
			t.Fatal(err)
		}
		e, err := engine.CompileException(pe, "podsieve-system")
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	steps := []struct {
		name   string
		change func()
		want   []string
	}{
		{"a namespace's labels", func() { ix.SetNamespace("team-a", map[string]string{"tier": "apps", "x": "y"}) }, []string{"team-a"}},
		{"a policy by namespace glob", func() {
			ix.SetPolicy(policy(`rules: [{name: r, match: {namespaces: ["team-*"]}, podSecurity: {level: baseline}}]`))
		}, []string{"team-a", "team-b"}},
		{"a policy moved by selector: the namespaces it left and those it reached", func() {
			ix.SetPolicy(policy(`rules: [{name: r, match: {namespaceSelector: {matchLabels: {tier: infra}}}, podSecurity: {level: baseline}}]`))
		}, []string{"infra", "team-a", "team-b"}},
		{"a policy deleted", func() { ix.DeletePolicy("p") }, []string{"infra"}},
		{"an exception in its namespace", func() { ix.SetException(exception("team-b")) }, []string{"team-b"}},
		{"an exception of the cluster exceptions namespace", func() { ix.SetException(exception("podsieve-system")) },
			[]string{"infra", "podsieve-system", "team-a", "team-b"}},
		{"a namespace forgotten", func() { ix.DeleteNamespace("infra") }, []string{"infra"}},
	}
	for _, step := range steps {
		step.change()
		if got := q.take(); !slices.Equal(got, step.want) {
			t.Errorf("%s: queued %v, want %v", step.name, got, step.want)
		}
	}
}

// TestScannedChange: an update queues its namespace when it can change the
// object's results.
func TestScannedChange(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "p", Labels: map[string]string{"app": "x"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "i:1"}}}}
	deploy := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "d", Generation: 1}}
	owner := metav1.NewControllerRef(deploy, appsv1.SchemeGroupVersion.WithKind("Deployment"))
	tests := []struct {
		name   string
		old    client.Object
		change func(client.Object)
		want   bool
	}{
		{"a pod's status", pod, func(o client.Object) { o.(*corev1.Pod).Status.Phase = corev1.PodRunning }, false},
		{"a pod's annotations", pod, func(o client.Object) { o.SetAnnotations(map[string]string{"a": "b"}) }, false},
		{"a pod's spec", pod, func(o client.Object) { o.(*corev1.Pod).Spec.HostPID = true }, true},
		{"a pod's labels", pod, func(o client.Object) { o.SetLabels(map[string]string{"app": "y"}) }, true},
		{"a pod's controller", pod, func(o client.Object) { o.SetOwnerReferences([]metav1.OwnerReference{*owner}) }, true},
		{"a workload's status", deploy, func(o client.Object) { o.(*appsv1.Deployment).Status.Replicas = 3 }, false},
		{"a workload's generation", deploy, func(o client.Object) { o.SetGeneration(2) }, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := tt.old.DeepCopyObject().(client.Object)
			tt.change(n)
			if got := scannedChange(tt.old, n); got != tt.want {
				t.Errorf("scannedChange = %v, want %v", got, tt.want)
			}
		})
	}
}
