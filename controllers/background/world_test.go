package background

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/yaml"

	policyv1alpha1 "github.com/podsieve/podsieve/api/v1alpha1"
	"github.com/podsieve/podsieve/internal/engine"
	"github.com/podsieve/podsieve/internal/index"
	"github.com/podsieve/podsieve/internal/testenv"
)

// scanWorld is namespace team-a with pods, policy p and exceptions, in a
// fake API and the index, and a scanner of it (cross-check on).
type scanWorld struct {
	s   *Scanner
	c   client.Client
	ix  *index.Index
	clk *clocktesting.FakeClock
}

func newScanWorld(t *testing.T, policySpec string, exceptions []string, pods ...*corev1.Pod) *scanWorld {
	t.Helper()
	clk := clocktesting.NewFakeClock(time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC))
	objs := []client.Object{&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-a", Labels: map[string]string{"kubernetes.io/metadata.name": "team-a"}}}}
	ix := index.New("podsieve-system")
	ix.SetNamespace("team-a", map[string]string{"kubernetes.io/metadata.name": "team-a"})
	sp := &policyv1alpha1.SecurityPolicy{ObjectMeta: metav1.ObjectMeta{Name: "p", UID: "uid-p", Generation: 1}}
	if err := yaml.UnmarshalStrict([]byte(policySpec), &sp.Spec); err != nil {
		t.Fatal(err)
	}
	p, err := engine.CompilePolicy(sp)
	if err != nil {
		t.Fatal(err)
	}
	ix.SetPolicy(p)
	objs = append(objs, sp)
	w := &scanWorld{ix: ix, clk: clk}
	for i, spec := range exceptions {
		e, pe := w.compileException(t, fmt.Sprintf("e%d", i), spec)
		ix.Place(pe.Namespace, pe.Name, e, e.State(ix.Snapshot().Policy, clk.Now()))
		objs = append(objs, pe)
	}
	for _, pod := range pods {
		objs = append(objs, pod)
	}
	w.c = fake.NewClientBuilder().WithScheme(testenv.Scheme()).WithObjects(objs...).Build()
	w.s = newScanner(w.c, w.c, nil, ix, Options{Clock: clk, ExceptionsNamespace: "podsieve-system", CrossCheck: true})
	return w
}

// scanner is another scanner of the world, with no memo: what a fresh
// scan decides.
func (w *scanWorld) scanner() *Scanner {
	return newScanner(w.c, w.c, nil, w.ix, Options{Clock: w.clk, ExceptionsNamespace: "podsieve-system"})
}

// compileException compiles a PolicyException of team-a created now.
func (w *scanWorld) compileException(t *testing.T, name, spec string) (*engine.Exception, *policyv1alpha1.PolicyException) {
	t.Helper()
	pe := &policyv1alpha1.PolicyException{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: name,
		UID: types.UID("uid-" + name), Generation: 1, CreationTimestamp: metav1.NewTime(w.clk.Now())}}
	if err := yaml.UnmarshalStrict([]byte(spec), &pe.Spec); err != nil {
		t.Fatal(err)
	}
	e, err := engine.CompileException(pe, "podsieve-system")
	if err != nil {
		t.Fatal(err)
	}
	return e, pe
}

// injectBug stands in for a bug in one of the two forms: the scanner's
// compiled form of p becomes that of crossCheckPolicy without its second
// rule's match, which runs restricted on every pod, while the engine keeps
// the policy as written.
func (w *scanWorld) injectBug(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	other := &policyv1alpha1.SecurityPolicy{ObjectMeta: metav1.ObjectMeta{Name: "p", UID: "uid-p", Generation: 1}}
	withoutMatch := strings.Replace(crossCheckPolicy, "  match: {selector: {matchLabels: {app: web}}}\n", "", 1)
	if err := yaml.UnmarshalStrict([]byte(withoutMatch), &other.Spec); err != nil {
		t.Fatal(err)
	}
	op, err := engine.CompilePolicy(other)
	if err != nil {
		t.Fatal(err)
	}
	var stored policyv1alpha1.SecurityPolicy
	if err := w.c.Get(ctx, client.ObjectKey{Name: "p"}, &stored); err != nil {
		t.Fatal(err)
	}
	stored.Spec = other.Spec
	if err := w.c.Update(ctx, &stored); err != nil {
		t.Fatal(err)
	}
	w.s.compiledPolicies["p"] = nil
	if _, err := w.s.compiled(ctx, op); err != nil {
		t.Fatal(err)
	}
}
