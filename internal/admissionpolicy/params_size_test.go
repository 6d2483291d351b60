package admissionpolicy

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	policyv1alpha1 "github.com/podsieve/podsieve/api/v1alpha1"
	"github.com/podsieve/podsieve/internal/engine"
	"github.com/podsieve/podsieve/internal/samples"
)

// newCostWorldParamsSize is the params bytes of one costException.
func newCostWorldParamsSize(tb testing.TB) int {
	sp := costPolicy(1)
	p, err := engine.CompilePolicy(sp)
	if err != nil {
		tb.Fatal(err)
	}
	return perException(tb, "apps", p, func(i int) *policyv1alpha1.PolicyException { return costException(costNS, i) })
}

// paramsBytes is the size of the namespace's params object as the API
// server stores it: JSON.
func paramsBytes(tb testing.TB, ns string, excs []*ParamException) int {
	tb.Helper()
	raw, err := json.Marshal(ParamsObject(ns, excs))
	if err != nil {
		tb.Fatal(err)
	}
	return len(raw)
}

// perException is what each exception made by pe adds to a params object,
// measured over 8 of them.
func perException(tb testing.TB, ns string, p *engine.Policy, pe func(i int) *policyv1alpha1.PolicyException) int {
	tb.Helper()
	const n = 8
	var excs []*ParamException
	policy := func(name string) *engine.Policy {
		if name == p.Name {
			return p
		}
		return nil
	}
	for i := range n {
		x := pe(i)
		e, err := engine.CompileException(x, clusterNS)
		if err != nil {
			tb.Fatal(err)
		}
		if st := e.State(policy, time.Now()); !st.Ready {
			tb.Fatalf("PolicyException %s/%s is not in force: %s", x.Namespace, x.Name, st.Message)
		}
		px, err := CompileException(x, e, policy)
		if err != nil {
			tb.Fatal(err)
		}
		excs = append(excs, px)
	}
	return (paramsBytes(tb, ns, excs) - paramsBytes(tb, ns, nil)) / n
}

// costSamples are samples.Read's objects by name; each exception created
// now.
func costSamples(tb testing.TB) (map[string]*policyv1alpha1.SecurityPolicy, map[string]*policyv1alpha1.PolicyException) {
	tb.Helper()
	list, excs := samples.Read(tb)
	sps := map[string]*policyv1alpha1.SecurityPolicy{}
	for _, sp := range list {
		sps[sp.Name] = sp
	}
	pes := map[string]*policyv1alpha1.PolicyException{}
	for _, pe := range excs {
		pe.CreationTimestamp = metav1.Now()
		pes[pe.Name] = pe
	}
	return sps, pes
}

// maximalException is a PolicyException with every field at the schema's
// limit: 8 targets of 8 rule names (their globs resolve to every rule of
// the policies they name), 16 names of 253 bytes, 9 kinds, a selector of 16
// requirements of 64 values of 63 bytes, 16 entries holding 16 image globs,
// 32 container names and 64 values of their maximum lengths, a 256-byte
// restrictedField... as long as a field name is.
func maximalException(ns string, i int, policies []string) *policyv1alpha1.PolicyException {
	pe := &policyv1alpha1.PolicyException{ObjectMeta: metav1.ObjectMeta{Namespace: ns,
		Name: fmt.Sprintf("%03d-%s", i, strings.Repeat("e", 249)), CreationTimestamp: metav1.Now()}}
	for t := range 8 {
		target := policyv1alpha1.ExceptionTarget{PolicyName: policies[t%len(policies)]}
		for r := range 8 {
			target.RuleNames = append(target.RuleNames, costPad(fmt.Sprintf("*%d", r), "r?", "*", 63))
		}
		target.RuleNames[7] = "*"
		pe.Spec.Exceptions = append(pe.Spec.Exceptions, target)
	}
	m := &policyv1alpha1.ExceptionMatch{Selector: &metav1.LabelSelector{}}
	for n := range 16 {
		m.Names = append(m.Names, costPad(fmt.Sprintf("w%02d", n), "w?", "*", 253))
	}
	m.Kinds = []policyv1alpha1.PodBearingKind{"Pod", "Deployment", "ReplicaSet", "StatefulSet", "DaemonSet", "Job", "CronJob", "ReplicationController", "PodTemplate"}
	for q := range engine.MaxSelectorRequirements {
		req := metav1.LabelSelectorRequirement{Key: fmt.Sprintf("%s/%s%02d", strings.Repeat("k", 253), strings.Repeat("l", 61), q), Operator: metav1.LabelSelectorOpIn}
		for v := range engine.MaxSelectorValues {
			req.Values = append(req.Values, fmt.Sprintf("%02d%s", v, strings.Repeat("v", 61)))
		}
		m.Selector.MatchExpressions = append(m.Selector.MatchExpressions, req)
	}
	pe.Spec.Match = m
	for e := range engine.MaxExceptionEntries {
		x := policyv1alpha1.PodSecurityExclusion{ControlName: "Capabilities",
			RestrictedField: "spec.containers[*].securityContext.capabilities.add",
			ContainerKinds:  []policyv1alpha1.ContainerKind{"Init", "Sidecar", "App", "Ephemeral"},
			Images:          []string{costPad(fmt.Sprintf("registry-%02d.example/**", e), "/a?", "*", 256)}}
		for k := range 2 {
			x.ContainerNames = append(x.ContainerNames, costPad(fmt.Sprintf("c%d%02d", k, e), "c?", "*", 63))
		}
		for k := range 4 {
			x.Values = append(x.Values, costPad(fmt.Sprintf("V%d%02d", k, e), "N?", "*", 256))
		}
		pe.Spec.PodSecurity = append(pe.Spec.PodSecurity, x)
	}
	pe.Spec.Justification = strings.Repeat("j", 1024) // not compiled into the params
	return pe
}

// TestParamsSizePerException: what one PolicyException adds to its
// namespace's PodSecurityParams object, as JSON, typical and maximal, and
// how many fit in one object (etcd's 1.5 MiB).
func TestParamsSizePerException(t *testing.T) {
	sps, pes := costSamples(t)
	restricted, err := engine.CompilePolicy(sps["restricted-workloads"])
	if err != nil {
		t.Fatal(err)
	}
	mesh := pes["mesh-init"]
	if mesh == nil {
		t.Fatal("config/samples has no mesh-init PolicyException")
	}
	typical := perException(t, "staging", restricted, func(i int) *policyv1alpha1.PolicyException {
		pe := mesh.DeepCopy()
		pe.Name = fmt.Sprintf("mesh-init-%d", i)
		return pe
	})

	// The targets of a maximal exception are the rules its globs resolve
	// to: with "*", every rule of each policy it names. One policy of two
	// rules; and the most the schema allows, 8 policies of 64 rules of
	// 63-byte names (the cluster admin's, not the exception author's).
	maximal := func(rules int, policies []string) int {
		var compiled []*engine.Policy
		for _, name := range policies {
			sp := &policyv1alpha1.SecurityPolicy{ObjectMeta: metav1.ObjectMeta{Name: name, Generation: 1}}
			sp.Spec.Action = policyv1alpha1.ActionEnforce
			sp.Spec.Exceptions = &policyv1alpha1.ExceptionGuardrails{}
			for r := range rules {
				sp.Spec.Rules = append(sp.Spec.Rules, policyv1alpha1.PolicyRule{Name: fmt.Sprintf("%02d%s", r, strings.Repeat("r", 61)),
					PodSecurity: policyv1alpha1.PodSecurity{Level: "restricted"}})
			}
			p, err := engine.CompilePolicy(sp)
			if err != nil {
				t.Fatal(err)
			}
			compiled = append(compiled, p)
		}
		const n = 4
		var excs []*ParamException
		policy := func(name string) *engine.Policy {
			for _, p := range compiled {
				if p.Name == name {
					return p
				}
			}
			return nil
		}
		for i := range n {
			pe := maximalException("staging", i, policies)
			e, err := engine.CompileException(pe, clusterNS)
			if err != nil {
				t.Fatal(err)
			}
			if st := e.State(policy, time.Now()); !st.Ready {
				t.Fatalf("the maximal exception is not in force: %s", st.Message)
			}
			px, err := CompileException(pe, e, policy)
			if err != nil {
				t.Fatal(err)
			}
			excs = append(excs, px)
		}
		return (paramsBytes(t, "staging", excs) - paramsBytes(t, "staging", nil)) / n
	}
	longName := func(i int) string { return fmt.Sprintf("%d%s", i, strings.Repeat("p", 243)) } // PolicyName's limit: 253 - len("podsieve.")
	var eight []string
	for i := range 8 {
		eight = append(eight, longName(i))
	}
	maxOne := maximal(2, []string{"p"})
	maxAll := maximal(64, eight)
	largest := newCostWorldParamsSize(t)
	empty := paramsBytes(t, "staging", nil)

	t.Logf("an empty params object: %d bytes", empty)
	// Where a maximal exception's bytes go: its selector is copied as is,
	// its globs become regular expressions (longer than the globs).
	pe := maximalException("staging", 0, []string{"p"})
	src, _ := json.Marshal(pe)
	sel, _ := json.Marshal(pe.Spec.Match.Selector)
	pe.Spec.Match.Selector = nil
	noSel := perException(t, "staging", costPolicyFor(t, "p"), func(i int) *policyv1alpha1.PolicyException {
		x := maximalException("staging", i, []string{"p"})
		x.Spec.Match.Selector = nil
		return x
	})
	t.Logf("a maximal PolicyException is %d bytes of JSON itself; its selector %d; compiled without its selector it adds %d bytes", len(src), len(sel), noSel)
	for _, c := range []struct {
		name  string
		bytes int
	}{
		{"typical (config/samples mesh-init: 3 entries)", typical},
		{"TestWorstPods' largest (16 entries, 256-byte globs)", largest},
		{"maximal, targeting one policy of 2 rules", maxOne},
		{"maximal, targeting 8 policies of 64 rules", maxAll},
	} {
		t.Logf("PARAMS %-55s %7d bytes per exception; %6d fit in one params object (MaxParamsBytes, %d bytes)", c.name+":", c.bytes, MaxParamsBytes/c.bytes, MaxParamsBytes)
	}
	// Bounds at about 1.25× what was measured, to catch a regression in
	// what CompileException writes.
	for _, c := range []struct {
		name       string
		bytes, max int
	}{
		{"typical", typical, 1_250},
		{"largest of TestWorstPods", largest, 40_000},
		{"maximal, one policy", maxOne, 180_000},
		{"maximal, 8 policies of 64 rules", maxAll, 390_000},
	} {
		if c.bytes > c.max {
			t.Errorf("%s exception: %d params bytes, more than %d", c.name, c.bytes, c.max)
		}
	}
	if maxAll > costMaxObjectBytes-empty {
		t.Errorf("one maximal exception (%d bytes) does not fit in an object etcd stores", maxAll)
	}
	if maxAll > MaxParamsBytes {
		t.Logf("one maximal exception targeting 8 policies of 64 rules (%d bytes) is more than MaxParamsBytes: FitParams leaves it out, and it waives nothing in the API server", maxAll)
	}
}
