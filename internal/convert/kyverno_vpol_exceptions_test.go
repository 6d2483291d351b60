package convert

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/admission"

	policyv1alpha1 "github.com/podsieve/podsieve/api/v1alpha1"
	"github.com/podsieve/podsieve/internal/engine"
	"github.com/podsieve/podsieve/internal/enginetest"
	"github.com/podsieve/podsieve/internal/vaptest"
)

// TestKyvernoCELException: a policies.kyverno.io PolicyException waiving
// two library policies for names in one namespace converts into a podsieve
// exception that decides as Kyverno does, with the exception emulated as the
// negation of its matchConditions on the policies it names.
func TestKyvernoCELException(t *testing.T) {
	dir := kyvernoLibraryDir(t)
	docs := libraryDocs(t, dir, "baseline")
	excDocs, err := Read([]string{"testdata/kyverno-vpol/exception.yaml"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := Kyverno(append(docs, excDocs...), KyvernoOptions{ExceptionsNamespace: "podsieve-system"})
	if err != nil {
		t.Fatal(err)
	}
	if res.Untranslated() {
		t.Fatalf("untranslated: %v", res.Notes)
	}
	sp, pes := policyAndExceptions(res)
	if sp == nil || len(pes) != 1 || pes[0].Namespace != "team-a" {
		t.Fatalf("want a SecurityPolicy and one exception in team-a, got %+v", res.Objects)
	}
	exc := &kyvernoCELException{}
	if err := decodeStrict(&excDocs[0], exc); err != nil {
		t.Fatal(err)
	}
	counts := sideBySide(t, docs, exc, sp, pes, []string{"team-a", "team-b"}, []string{"fixture", "build-1"},
		[]policyv1alpha1.ControlName{policyv1alpha1.ControlHostProcess})
	t.Logf("with the exception: %v", counts)
}

// sideBySide decides every upstream fixture, in each namespace under each
// name, with the ValidatingPolicies in docs (as ValidatingAdmissionPolicies
// bound with Deny, evaluated by the API server's libraries; exc, when given,
// emulated as a matchCondition negating its own on the policies it names)
// and with the converted policy and exceptions (enforced) in the engine.
// It fails on a fixture Kyverno's CEL refuses and podsieve admits unless
// every policy refusing it is a library check whose looser note says so
// (the converter reports those as untranslated); on a fixture podsieve
// alone refuses unless every violation it finds is of a noted control (one
// whose check the converter notes as stricter); and counts the others.
func sideBySide(t *testing.T, docs []Document, exc *kyvernoCELException, sp *policyv1alpha1.SecurityPolicy, pes []*policyv1alpha1.PolicyException, namespaces, names []string, noted []policyv1alpha1.ControlName) sideBySideCounts {
	t.Helper()
	var objs []*unstructured.Unstructured
	checks := map[string]libraryCheck{}
	for i := range docs {
		vp := &kyvernoVPol{}
		if err := decodeStrict(&docs[i], vp); err != nil {
			t.Fatal(err)
		}
		fp, err := vpolFingerprint(&vp.Spec)
		if err != nil {
			t.Fatal(err)
		}
		checks[vp.Metadata.Name] = kyvernoLibrary[fp]
		vapObj := &admissionregistrationv1.ValidatingAdmissionPolicy{
			TypeMeta:   metav1.TypeMeta{APIVersion: "admissionregistration.k8s.io/v1", Kind: "ValidatingAdmissionPolicy"},
			ObjectMeta: metav1.ObjectMeta{Name: vp.Metadata.Name},
			Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
				MatchConstraints: vp.Spec.MatchConstraints, Validations: vp.Spec.Validations,
				Variables: vp.Spec.Variables, MatchConditions: vp.Spec.MatchConditions,
			},
		}
		if docs[i].Kind == "NamespacedValidatingPolicy" {
			vapObj.Spec.MatchConditions = append(vapObj.Spec.MatchConditions, admissionregistrationv1.MatchCondition{
				Name: "own-namespace", Expression: fmt.Sprintf("request.namespace == %q", vp.Metadata.Namespace),
			})
		}
		if exc != nil && slices.ContainsFunc(exc.Spec.PolicyRefs, func(r kyvernoPolicyRef) bool { return r.Name == vp.Metadata.Name && r.Kind == docs[i].Kind }) {
			var all []string
			for _, mc := range exc.Spec.MatchConditions {
				all = append(all, "("+mc.Expression+")")
			}
			vapObj.Spec.MatchConditions = append(vapObj.Spec.MatchConditions, admissionregistrationv1.MatchCondition{
				Name: "kyverno-exception", Expression: "!(" + strings.Join(all, " && ") + ")",
			})
		}
		binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
			TypeMeta:   metav1.TypeMeta{APIVersion: "admissionregistration.k8s.io/v1", Kind: "ValidatingAdmissionPolicyBinding"},
			ObjectMeta: metav1.ObjectMeta{Name: vp.Metadata.Name},
			Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
				PolicyName: vp.Metadata.Name, ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
			},
		}
		objs = append(objs, mustUnstructured(t, vapObj), mustUnstructured(t, binding))
	}
	for _, ns := range namespaces {
		objs = append(objs, mustUnstructured(t, &corev1.Namespace{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Namespace"}, ObjectMeta: metav1.ObjectMeta{Name: ns}}))
	}
	cluster, err := vaptest.New(objs)
	if err != nil {
		t.Fatalf("Kyverno's CEL does not compile with the API server's libraries: %v", err)
	}
	sp = sp.DeepCopy()
	sp.Spec.Action = policyv1alpha1.ActionEnforce
	sp.Generation = 1
	policy, err := engine.CompilePolicy(sp)
	if err != nil {
		t.Fatal(err)
	}
	var excs []*engine.Exception
	for _, pe := range pes {
		e, err := engine.CompileException(pe, "podsieve-system")
		if err != nil {
			t.Fatal(err)
		}
		excs = append(excs, e)
	}
	fixtures, err := enginetest.UpstreamFixtures()
	if err != nil {
		t.Fatal(err)
	}
	pods := schema.GroupVersionResource{Version: "v1", Resource: "pods"}
	shown := 0
	var n sideBySideCounts
	for _, f := range fixtures {
		for _, ns := range namespaces {
			for _, name := range names {
				pod := f.Pod.DeepCopy()
				pod.APIVersion, pod.Kind, pod.Namespace, pod.Name = "v1", "Pod", ns, name
				o, err := engine.NewAdmissionObject(pod)
				if err != nil {
					t.Fatal(err)
				}
				d := engine.Decide([]*engine.Policy{policy}, engine.AllExceptions(excs), o, map[string]string{engine.NamespaceNameLabel: ns}, time.Now(), engine.Admission)
				k := cluster.Admit(context.Background(), vaptest.Request{Operation: admission.Create, Object: mustUnstructured(t, pod), Namespace: ns, Resource: pods})
				if len(k.Errors) > 0 {
					// Not Kyverno's decision: the API server's CEL
					// libraries failed where the check says they do.
					for _, err := range k.Errors {
						ee, ok := errors.AsType[*vaptest.EvalError](err)
						if !ok || checks[ee.Policy].celError == "" {
							t.Errorf("%s as %s/%s: the CEL fails to evaluate, and no check says so: %v", f.Rel, ns, name, err)
						}
					}
					n.undecided++
					continue
				}
				switch {
				case d.Allowed == k.Allowed:
					n.agree++
				case !d.Allowed:
					n.stricter++
					if shown < 10 {
						shown++
						t.Logf("refused only by podsieve: %s as %s/%s: %s", f.Rel, ns, name, findings(d))
					}
					for _, r := range d.Results {
						for _, f2 := range r.Findings {
							if !f2.Covered() && !slices.Contains(noted, f2.Control) {
								t.Errorf("refused only by podsieve, and no note says so: %s as %s/%s: %s", f.Rel, ns, name, findings(d))
							}
						}
					}
				default:
					n.looser++
					noted := len(k.Denials) > 0
					for _, msg := range k.Denials {
						_, rest, _ := strings.Cut(msg, "ValidatingAdmissionPolicy '")
						vp, _, _ := strings.Cut(rest, "'")
						noted = noted && checks[vp].looser != ""
					}
					if !noted {
						t.Errorf("refused only by Kyverno's CEL, and no note says so: %s as %s/%s: %v %v", f.Rel, ns, name, k.Denials, k.Errors)
					}
				}
			}
		}
	}
	return n
}

// sideBySideCounts are the fixtures decided alike, refused only by
// podsieve, refused only by Kyverno's CEL, and not decidable with the API
// server's CEL libraries.
type sideBySideCounts struct{ agree, stricter, looser, undecided int }

func (n sideBySideCounts) String() string {
	return fmt.Sprintf("%d decided alike, %d refused only by podsieve, %d refused only by Kyverno's CEL (each where a note says so), %d not decidable with the API server's CEL libraries (where the check says so)",
		n.agree, n.stricter, n.looser, n.undecided)
}

func findings(d engine.Decision) string {
	var s []string
	for _, r := range d.Results {
		for _, f := range r.Findings {
			if !f.Covered() {
				s = append(s, fmt.Sprintf("%s %s", f.Control, f.Field))
			}
		}
	}
	return strings.Join(s, "; ")
}

func mustUnstructured(t *testing.T, obj runtime.Object) *unstructured.Unstructured {
	t.Helper()
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		t.Fatal(err)
	}
	return &unstructured.Unstructured{Object: m}
}

// TestKyvernoMatchConditionsSideBySide: the library's baseline policies
// with a matchCondition leaving out two namespaces, and an exception whose
// only condition is a name (so it applies in every namespace), decide the
// fixtures as Kyverno's CEL does in those namespaces and another.
func TestKyvernoMatchConditionsSideBySide(t *testing.T) {
	dir := kyvernoLibraryDir(t)
	docs := libraryDocs(t, dir, "baseline")
	for i := range docs {
		var m map[string]any
		if err := json.Unmarshal(docs[i].JSON, &m); err != nil {
			t.Fatal(err)
		}
		m["spec"].(map[string]any)["matchConditions"] = []any{
			map[string]any{"name": "not-system", "expression": "!(request.namespace in ['kube-system', 'istio-system'])"},
		}
		data, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		docs[i].JSON = data
	}
	exc := []byte(`apiVersion: policies.kyverno.io/v1
kind: PolicyException
metadata: {name: debug, namespace: kyverno}
spec:
  policyRefs:
  - {name: disallow-host-namespaces, kind: ValidatingPolicy}
  - {name: disallow-privileged-containers, kind: ValidatingPolicy}
  matchConditions:
  - {name: debug, expression: "object.metadata.name == 'node-debugger'"}
`)
	excDocs, err := Read([]string{"-"}, bytes.NewReader(exc))
	if err != nil {
		t.Fatal(err)
	}
	res, err := Kyverno(append(docs, excDocs...), KyvernoOptions{ExceptionsNamespace: "podsieve-system"})
	if err != nil {
		t.Fatal(err)
	}
	sp, pes := policyAndExceptions(res)
	if res.Untranslated() || sp == nil || len(pes) != 1 || pes[0].Namespace != "podsieve-system" {
		t.Fatalf("want a SecurityPolicy and an exception in podsieve-system, nothing untranslated: %+v %v", res.Objects, res.Notes)
	}
	if r := sp.Spec.Rules[0]; r.Exclude == nil || !slices.Equal(r.Exclude.Namespaces, []string{"kube-system", "istio-system"}) {
		t.Errorf("the rule does not exclude the two namespaces: %+v", r.Exclude)
	}
	k := &kyvernoCELException{}
	if err := decodeStrict(&excDocs[0], k); err != nil {
		t.Fatal(err)
	}
	counts := sideBySide(t, docs, k, sp, pes, []string{"apps", "kube-system", "istio-system"}, []string{"fixture", "node-debugger"},
		[]policyv1alpha1.ControlName{policyv1alpha1.ControlHostProcess})
	t.Logf("with matchConditions and a cluster-wide exception: %v", counts)
}

// TestMatchConditionAtoms: which matchConditions convert reads, and how.
func TestMatchConditionAtoms(t *testing.T) {
	for _, tc := range []struct {
		name string
		expr []string
		want []celAtom // nil: not read
	}{
		{"namespace equality", []string{"object.metadata.namespace == 'a'"}, []celAtom{{field: "namespace", values: []string{"a"}}}},
		{"literal first", []string{"'a' == request.namespace"}, []celAtom{{field: "namespace", values: []string{"a"}}}},
		{"not equal", []string{"object.metadata.namespace != 'kube-system'"}, []celAtom{{field: "namespace", negated: true, values: []string{"kube-system"}}}},
		{"in a list", []string{"object.metadata.name in ['a', 'b']"}, []celAtom{{field: "name", values: []string{"a", "b"}}}},
		{"negated in", []string{"!(request.namespace in ['a'])"}, []celAtom{{field: "namespace", negated: true, values: []string{"a"}}}},
		{"conjunction over conditions", []string{"request.namespace == 'a' && request.name == 'x'", "object.metadata.name in ['x']"},
			[]celAtom{{field: "namespace", values: []string{"a"}}, {field: "name", values: []string{"x"}}, {field: "name", values: []string{"x"}}}},
		{"disjunction", []string{"request.namespace == 'a' || request.namespace == 'b'"}, nil},
		{"prefix", []string{"object.metadata.name.startsWith('build-')"}, nil},
		{"labels", []string{"object.metadata.labels['app'] == 'x'"}, nil},
		{"variable list", []string{"request.namespace in variables.ns"}, nil},
		{"does not parse", []string{"request.namespace =="}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var conds []admissionregistrationv1.MatchCondition
			for i, e := range tc.expr {
				conds = append(conds, admissionregistrationv1.MatchCondition{Name: fmt.Sprint(i), Expression: e})
			}
			got, why, ok := matchConditionAtoms(conds)
			if ok != (tc.want != nil) || (ok && fmt.Sprint(got) != fmt.Sprint(tc.want)) {
				t.Errorf("got %v, %v (%s), want %v", got, ok, why, tc.want)
			}
			if !ok && why == "" {
				t.Error("no reason given")
			}
		})
	}
}

// TestCELExceptionPlacement: where a policies.kyverno.io PolicyException
// goes and what it waives, for a rule converted from three library checks
// (two of which check Capabilities).
func TestCELExceptionPlacement(t *testing.T) {
	byName := map[string]libraryCheck{}
	for _, c := range kyvernoLibrary {
		byName[c.name] = c
	}
	g := &vpolGroup{}
	refs := map[vpolID]vpolRef{}
	for _, name := range []string{"disallow-host-path", "disallow-capabilities", "disallow-capabilities-strict"} {
		m := &vpolMember{vp: &kyvernoVPol{}, check: byName[name], key: vpolIDOf("ValidatingPolicy", "", name), name: name}
		g.members = append(g.members, m)
		refs[m.key] = vpolRef{policy: "pss", rule: "restricted", group: g, member: m}
	}
	type placed struct {
		ns, names, namespaces string
		controls              string
	}
	for _, tc := range []struct {
		name         string
		refs         []string
		conds        []string
		want         []placed
		untranslated bool
	}{
		{"one namespace, two names", []string{"disallow-host-path"}, []string{"request.namespace == 'a'", "object.metadata.name in ['x', 'y']"},
			[]placed{{"a", "[x y]", "[]", "[HostPath Volumes]"}}, false},
		{"two namespaces", []string{"disallow-host-path"}, []string{"request.namespace in ['a', 'b']"},
			[]placed{{"a", "[]", "[]", "[HostPath Volumes]"}, {"b", "[]", "[]", "[HostPath Volumes]"}}, false},
		{"every namespace", []string{"disallow-host-path"}, []string{"object.metadata.name == 'x'"},
			[]placed{{"podsieve-system", "[x]", "[*]", "[HostPath Volumes]"}}, false},
		{"no conditions", []string{"disallow-host-path"}, nil,
			[]placed{{"podsieve-system", "[]", "[*]", "[HostPath Volumes]"}}, false},
		{"both capability checks", []string{"disallow-capabilities", "disallow-capabilities-strict"}, []string{"request.namespace == 'a'"},
			[]placed{{"a", "[]", "[]", "[Capabilities]"}}, false},
		{"one of two capability checks", []string{"disallow-capabilities", "disallow-host-path"}, []string{"request.namespace == 'a'"},
			[]placed{{"a", "[]", "[]", "[HostPath Volumes]"}}, true},
		{"negated", []string{"disallow-host-path"}, []string{"request.namespace != 'prod'"}, nil, true},
		{"disjunction", []string{"disallow-host-path"}, []string{"request.namespace == 'a' || request.name == 'x'"}, nil, true},
		{"not converted", []string{"disallow-selinux"}, []string{"request.namespace == 'a'"}, nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &kyvernoConverter{opts: KyvernoOptions{ExceptionsNamespace: "podsieve-system"}, res: &Result{}, exceptionNames: map[string]map[string]bool{}, vpolRefs: refs}
			ke := &kyvernoCELException{}
			ke.Metadata.Name = "e"
			for _, r := range tc.refs {
				ke.Spec.PolicyRefs = append(ke.Spec.PolicyRefs, kyvernoPolicyRef{Name: r, Kind: "ValidatingPolicy"})
			}
			for i, e := range tc.conds {
				ke.Spec.MatchConditions = append(ke.Spec.MatchConditions, admissionregistrationv1.MatchCondition{Name: fmt.Sprint(i), Expression: e})
			}
			c.celException(&Document{}, ke)
			var got []placed
			for _, o := range c.res.Objects {
				pe := o.Object.(*policyv1alpha1.PolicyException)
				var controls []policyv1alpha1.ControlName
				for _, x := range pe.Spec.PodSecurity {
					controls = append(controls, x.ControlName)
				}
				p := placed{ns: pe.Namespace, names: "[]", namespaces: "[]", controls: fmt.Sprint(controls)}
				if m := pe.Spec.Match; m != nil {
					p.names, p.namespaces = fmt.Sprint(m.Names), fmt.Sprint(m.Namespaces)
				}
				if pe.Spec.Exceptions[0].PolicyName != "pss" || !slices.Equal(pe.Spec.Exceptions[0].RuleNames, []string{"restricted"}) {
					t.Errorf("targets %+v", pe.Spec.Exceptions)
				}
				if _, err := engine.CompileException(pe, "podsieve-system"); err != nil {
					t.Errorf("does not compile: %v", err)
				}
				got = append(got, p)
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.want) || c.res.Untranslated() != tc.untranslated {
				t.Errorf("got %v (untranslated %v), want %v (untranslated %v); notes %v", got, c.res.Untranslated(), tc.want, tc.untranslated, c.res.Notes)
			}
		})
	}
}
