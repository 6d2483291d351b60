package index

import (
	"fmt"
	"runtime"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	policyv1alpha1 "github.com/podsieve/podsieve/api/v1alpha1"
	"github.com/podsieve/podsieve/internal/engine"
)

// cluster is a synthetic cluster of the scale targets: policies
// SecurityPolicies (one baseline rule each, selecting namespaces by a team
// label), exceptions PolicyExceptions spread evenly over namespaces.
type cluster struct {
	policies   []*policyv1alpha1.SecurityPolicy
	exceptions []*policyv1alpha1.PolicyException
	namespaces map[string]map[string]string
}

func newCluster(policies, exceptions, namespaces int) *cluster {
	c := &cluster{namespaces: make(map[string]map[string]string, namespaces)}
	for i := range policies {
		c.policies = append(c.policies, &policyv1alpha1.SecurityPolicy{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("policy-%d", i)},
			Spec: policyv1alpha1.SecurityPolicySpec{
				Action: policyv1alpha1.ActionEnforce,
				Rules: []policyv1alpha1.PolicyRule{{
					Name:        "baseline",
					Match:       &policyv1alpha1.ResourceFilter{NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"team": fmt.Sprintf("team-%d", i)}}},
					PodSecurity: policyv1alpha1.PodSecurity{Level: policyv1alpha1.LevelBaseline, Version: "latest"},
				}},
			},
		})
	}
	for i := range namespaces {
		ns := fmt.Sprintf("ns-%d", i)
		c.namespaces[ns] = map[string]string{"kubernetes.io/metadata.name": ns, "team": fmt.Sprintf("team-%d", i%max(policies, 1))}
	}
	for i := range exceptions {
		ns := fmt.Sprintf("ns-%d", i%namespaces)
		c.exceptions = append(c.exceptions, &policyv1alpha1.PolicyException{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("exc-%d", i)},
			Spec: policyv1alpha1.PolicyExceptionSpec{
				Exceptions: []policyv1alpha1.ExceptionTarget{{PolicyName: fmt.Sprintf("policy-%d", (i%namespaces)%max(policies, 1)), RuleNames: []string{"baseline"}}},
				Match:      &policyv1alpha1.ExceptionMatch{Names: []string{fmt.Sprintf("app-%d-*", i)}},
				PodSecurity: []policyv1alpha1.PodSecurityExclusion{{
					ControlName:     policyv1alpha1.ControlCapabilities,
					ContainerNames:  []string{"istio-init"},
					RestrictedField: "spec.initContainers[*].securityContext.capabilities.add",
					Values:          []string{"NET_ADMIN", "NET_RAW"},
				}},
			},
		})
	}
	return c
}

// build compiles every object and loads the index, as the manager does at
// start and podsieve eval does from its files.
func (c *cluster) build(tb testing.TB) *Index {
	var policies []*engine.Policy
	for _, sp := range c.policies {
		p, err := engine.CompilePolicy(sp)
		if err != nil {
			tb.Fatal(err)
		}
		policies = append(policies, p)
	}
	excs := make([]*engine.Exception, 0, len(c.exceptions))
	for _, pe := range c.exceptions {
		e, err := engine.CompileException(pe, clusterNS)
		if err != nil {
			tb.Fatal(err)
		}
		excs = append(excs, e)
	}
	ix := New(clusterNS)
	ix.Load(policies, excs, c.namespaces)
	return ix
}

// BenchmarkBuild: 1,000 policies and 100,000 exceptions over 10,000
// namespaces, compiled and indexed. heap-MB is the live heap the index holds.
func BenchmarkBuild(b *testing.B) {
	c := newCluster(1000, 100000, 10000)
	var ix *Index
	for b.Loop() {
		ix = c.build(b)
	}
	b.StopTimer()
	c = nil
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	runtime.KeepAlive(ix)
	ix = nil
	runtime.GC()
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	b.ReportMetric(float64(before.HeapAlloc-after.HeapAlloc)/(1<<20), "heap-MB")
}

// BenchmarkUpdate: one exception changed in the full-size index, until the
// next snapshot shows it.
func BenchmarkUpdate(b *testing.B) {
	c := newCluster(1000, 100000, 10000)
	ix := c.build(b)
	changed := make([]*engine.Exception, 2)
	for i := range changed {
		pe := c.exceptions[4242].DeepCopy()
		pe.Spec.PodSecurity[0].Values = pe.Spec.PodSecurity[0].Values[:1+i]
		e, err := engine.CompileException(pe, clusterNS)
		if err != nil {
			b.Fatal(err)
		}
		changed[i] = e
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		e := changed[i%2]
		ix.SetException(e)
		if ix.Snapshot().Candidates(e.Namespace)(e.Policies()[0]) == nil {
			b.Fatal("the change is not visible")
		}
		i++
	}
}

// BenchmarkLookup: choosing the exceptions that apply to a pod, with 100 or
// 100,000 exceptions in the cluster. Both clusters put 10 exceptions in the
// pod's namespace; what differs is how many the rest of the cluster holds.
func BenchmarkLookup(b *testing.B) {
	for _, n := range []int{100, 100000} {
		c := newCluster(1000, n, n/10)
		ix := c.build(b)
		o := netAdminPod("ns-7", "app")
		o.Name = "app-7-abc"
		s := ix.Snapshot()
		labels := s.NamespaceLabels(o.Namespace)
		p := s.Policy("policy-7")
		r := p.Rules[0]
		if !r.Matches(o, labels) {
			b.Fatal("the rule does not match the pod")
		}
		if sel, _ := engine.SelectExceptions(r, s.Candidates(o.Namespace)(p.Name), o, labels, now, engine.Admission); len(sel) != 1 {
			b.Fatalf("selected %d exceptions, want 1", len(sel))
		}
		b.Run(fmt.Sprintf("exceptions=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				s := ix.Snapshot()
				engine.SelectExceptions(r, s.Candidates(o.Namespace)(p.Name), o, s.NamespaceLabels(o.Namespace), now, engine.Admission)
			}
		})
	}
}
