package engine

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	policyv1alpha1 "github.com/podsieve/podsieve/api/v1alpha1"
	"github.com/podsieve/podsieve/internal/samples"
)

// TestAPIObject: compiling what APIObject returns gives back the exception
// (an index that holds the API object compiles it again for decisions),
// and an exception that cannot say what it was compiled from says so.
func TestAPIObject(t *testing.T) {
	created := metav1.NewTime(time.Date(2026, 3, 1, 12, 0, 0, 5, time.UTC))
	expires := metav1.NewTime(time.Date(2027, 3, 1, 0, 0, 0, 0, time.UTC))
	no := false
	full := &policyv1alpha1.PolicyException{ObjectMeta: metav1.ObjectMeta{Namespace: "podsieve-system", Name: "mesh", UID: "u-1", Generation: 4, CreationTimestamp: created},
		Spec: policyv1alpha1.PolicyExceptionSpec{
			Exceptions: []policyv1alpha1.ExceptionTarget{{PolicyName: "p", RuleNames: []string{"base*", "r"}}, {PolicyName: "q", RuleNames: []string{"*"}}},
			Match: &policyv1alpha1.ExceptionMatch{Names: []string{"web-*", "db"}, Kinds: []policyv1alpha1.PodBearingKind{"Deployment", "Pod"},
				Namespaces: []string{"team-*"}},
			PodSecurity: []policyv1alpha1.PodSecurityExclusion{
				{ControlName: policyv1alpha1.ControlCapabilities, Images: []string{"docker.io/istio/proxyv2:*"}, ContainerNames: []string{"istio-init"},
					ContainerKinds:  []policyv1alpha1.ContainerKind{"Init", "Sidecar", "Init"},
					RestrictedField: "spec.initContainers[*].securityContext.capabilities.add", Values: []string{"NET_ADMIN", "NET_RAW"}},
				{ControlName: policyv1alpha1.ControlHostPathVolumes, RestrictedField: "spec.volumes[*].hostPath", Values: []string{"/var/log/**"}},
			},
			Justification: "istio-init needs NET_ADMIN",
			ExpiresAt:     &expires,
			Background:    &no,
		}}
	wholeRule := full.DeepCopy()
	wholeRule.Spec.PodSecurity, wholeRule.Spec.Match = nil, nil
	selector := full.DeepCopy()
	selector.Spec.Match.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}
	nsSelector := full.DeepCopy()
	nsSelector.Spec.Match.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"env": "prod"}}
	tests := []struct {
		name   string
		pe     *policyv1alpha1.PolicyException
		ok     bool
		reduce bool // WithoutEntries
	}{
		{"every field", full, true, false},
		{"a whole-rule waiver without match", wholeRule, true, false},
		{"a label selector", selector, false, false},
		{"a namespace selector", nsSelector, false, false},
		{"a copy without entries", full, false, true},
		{"a whole-rule waiver's copy without entries", wholeRule, false, true},
	}
	for i, pe := range samples.Exceptions(t) {
		tests = append(tests, struct {
			name   string
			pe     *policyv1alpha1.PolicyException
			ok     bool
			reduce bool
		}{fmt.Sprintf("sample %d %s", i, pe.Name), pe, pe.Spec.Match == nil || pe.Spec.Match.Selector == nil && pe.Spec.Match.NamespaceSelector == nil, false})
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, err := CompileException(tt.pe, "podsieve-system")
			if err != nil {
				t.Fatal(err)
			}
			if tt.reduce {
				e = e.WithoutEntries(func(string) *Policy { return nil })
			}
			pe, ns, ok := e.APIObject()
			if ok != tt.ok {
				t.Fatalf("ok %v, want %v", ok, tt.ok)
			}
			if !ok {
				return
			}
			again, err := CompileException(pe, ns)
			if err != nil {
				t.Fatal(err)
			}
			if !again.created.Equal(e.created) {
				t.Fatalf("created %v, want %v", again.created, e.created)
			}
			again.created = e.created
			if !reflect.DeepEqual(again, e) {
				t.Fatalf("compiled again\n%+v\nwant\n%+v", again, e)
			}
		})
	}
}

// TestAPIObjectRandom: compiling what APIObject returns gives back the
// exception, over random exceptions of every control and field
// (TestAPIObject checks a handful): what an index that holds exceptions in
// a form of its own compiles for a decision is the exception it was given.
func TestAPIObjectRandom(t *testing.T) {
	const draws = 20_000
	rng := rand.New(rand.NewPCG(11, 12))
	pick := func(pool ...string) []string {
		if rng.IntN(3) == 0 {
			return nil
		}
		out := make([]string, 1+rng.IntN(4))
		for j := range out {
			out[j] = pool[rng.IntN(len(pool))]
		}
		return out
	}
	ok, compiled := 0, 0
	for i := range draws {
		ns := []string{"team-a", "podsieve-system"}[rng.IntN(2)]
		pe := &policyv1alpha1.PolicyException{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("e-%d", i), UID: "u", Generation: int64(rng.IntN(3)),
			CreationTimestamp: metav1.NewTime(time.Unix(rng.Int64N(1<<33), rng.Int64N(1e9)))}}
		s := &pe.Spec
		for range 1 + rng.IntN(3) {
			rn := pick("*", "a", "b*", "?", "r\\*", "**")
			if rn == nil {
				rn = []string{"*"}
			}
			s.Exceptions = append(s.Exceptions, policyv1alpha1.ExceptionTarget{PolicyName: []string{"p", "q"}[rng.IntN(2)], RuleNames: rn})
		}
		if rng.IntN(3) != 0 {
			m := &policyv1alpha1.ExceptionMatch{Names: pick("a", "a*", "*", "x-??", "")}
			for _, k := range pick("Pod", "Deployment", "Job", "Pod", "CronJob") {
				m.Kinds = append(m.Kinds, policyv1alpha1.PodBearingKind(k))
			}
			if ns == "podsieve-system" {
				m.Namespaces = pick("team-*", "prod", "*")
			}
			s.Match = m
		}
		if rng.IntN(4) != 0 {
			for range 1 + rng.IntN(4) {
				c := policyv1alpha1.Controls[rng.IntN(len(policyv1alpha1.Controls))]
				x := policyv1alpha1.PodSecurityExclusion{ControlName: c}
				if fs := FieldsOf(c); len(fs) > 0 && rng.IntN(3) != 0 {
					x.RestrictedField = fs[rng.IntN(len(fs))]
					x.Values = pick("NET_ADMIN", "1", "0", "*", "/var/**", "Unconfined", "true", "runtime/default", "kernel.shm_rmid_forced")
				}
				if !PodLevelOnly(c) {
					x.Images = pick("docker.io/x:*", "**", "r/a")
					x.ContainerNames = pick("a", "b*", "*")
					for _, k := range pick("Init", "Sidecar", "App", "Ephemeral", "Init") {
						x.ContainerKinds = append(x.ContainerKinds, policyv1alpha1.ContainerKind(k))
					}
				}
				s.PodSecurity = append(s.PodSecurity, x)
			}
		}
		s.Justification = []string{"", "j", " "}[rng.IntN(3)]
		if rng.IntN(2) == 0 {
			exp := metav1.NewTime(time.Unix(rng.Int64N(1<<33), rng.Int64N(1e9)))
			s.ExpiresAt = &exp
		}
		if rng.IntN(3) == 0 {
			b := rng.IntN(2) == 0
			s.Background = &b
		}
		e, err := CompileException(pe, "podsieve-system")
		if err != nil {
			continue
		}
		compiled++
		back, cns, can := e.APIObject()
		if !can {
			continue
		}
		ok++
		again, err := CompileException(back, cns)
		if err != nil {
			t.Fatalf("%d: %v\n%+v", i, err, back.Spec)
		}
		if !reflect.DeepEqual(again, e) {
			t.Fatalf("%d: compiled again\n%+v\nwant\n%+v", i, again, e)
		}
	}
	t.Logf("%d of %d compiled, %d of them round-tripped", compiled, draws, ok)
	// Most draws compile and can say what they were compiled from: a
	// generator that made none would test nothing.
	if ok < draws/10 {
		t.Fatalf("only %d of %d draws round-tripped, want at least %d", ok, draws, draws/10)
	}
}

// mustBaselinePolicy enforces baseline in rule "baseline" and honours
// exceptions for Capabilities.
func mustBaselinePolicy(t testing.TB, name string) *Policy {
	t.Helper()
	p, err := CompilePolicy(&policyv1alpha1.SecurityPolicy{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: policyv1alpha1.SecurityPolicySpec{
		Action:     policyv1alpha1.ActionEnforce,
		Exceptions: &policyv1alpha1.ExceptionGuardrails{AllowedControls: []policyv1alpha1.ControlName{policyv1alpha1.ControlCapabilities}},
		Rules: []policyv1alpha1.PolicyRule{{Name: "baseline",
			PodSecurity: policyv1alpha1.PodSecurity{Level: policyv1alpha1.LevelBaseline, Version: "latest"}}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	return p
}
