package convert

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
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
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	sigsyaml "sigs.k8s.io/yaml"

	policyv1alpha1 "github.com/podsieve/podsieve/api/v1alpha1"
	"github.com/podsieve/podsieve/internal/engine"
	"github.com/podsieve/podsieve/internal/enginetest"
	"github.com/podsieve/podsieve/internal/manifest"
	"github.com/podsieve/podsieve/internal/vaptest"
)

// kyvernoLibraryDir is a copy of kyverno/policies' pod-security-vpol
// directory: $PODSIEVE_KYVERNO_VPOL, or shared/kyverno-policies/pod-security-vpol
// beside the repository (testdata/kyverno-vpol/README.md says why the files
// are not in this repository and where they come from).
func kyvernoLibraryDir(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("PODSIEVE_KYVERNO_VPOL")
	if dir == "" {
		dir = filepath.Join("..", "..", "..", "shared", "kyverno-policies", "pod-security-vpol")
	}
	if _, err := os.Stat(filepath.Join(dir, "baseline")); err != nil {
		t.Skipf("Kyverno's pod-security-vpol library is not at %s (set PODSIEVE_KYVERNO_VPOL): %v", dir, err)
	}
	return dir
}

// libraryDocs reads the library's policies of the levels given.
func libraryDocs(t *testing.T, dir string, levels ...string) []Document {
	t.Helper()
	var paths []string
	for _, l := range levels {
		files, err := filepath.Glob(filepath.Join(dir, l, "*", "*.yaml"))
		if err != nil || len(files) == 0 {
			t.Fatalf("no policies under %s/%s: %v", dir, l, err)
		}
		paths = append(paths, files...)
	}
	docs, err := Read(paths, nil)
	if err != nil {
		t.Fatal(err)
	}
	return docs
}

// TestKyvernoLibrary: every ValidatingPolicy of Kyverno's CEL Pod Security
// library is recognised as the check its directory names, and each level's
// set becomes one rule at that level; then converted and original decide the
// upstream fixtures side by side.
func TestKyvernoLibrary(t *testing.T) {
	dir := kyvernoLibraryDir(t)
	for _, tc := range []struct {
		name    string
		levels  []string
		level   policyv1alpha1.PodSecurityLevel
		exclude []policyv1alpha1.ControlName
		// noted are the controls podsieve may refuse more on: the
		// converter's stricter notes (HostProcess, Capabilities, Running as
		// Non-root) and a control implemented in part (Seccomp at
		// restricted).
		noted []policyv1alpha1.ControlName
	}{
		{"baseline", []string{"baseline"}, policyv1alpha1.LevelBaseline,
			[]policyv1alpha1.ControlName{policyv1alpha1.ControlHostProbesLifecycle, policyv1alpha1.ControlAppArmor},
			[]policyv1alpha1.ControlName{policyv1alpha1.ControlHostProcess, policyv1alpha1.ControlCapabilities}},
		{"baseline and restricted", []string{"baseline", "restricted"}, policyv1alpha1.LevelRestricted,
			[]policyv1alpha1.ControlName{policyv1alpha1.ControlHostProbesLifecycle, policyv1alpha1.ControlAppArmor},
			[]policyv1alpha1.ControlName{policyv1alpha1.ControlHostProcess, policyv1alpha1.ControlCapabilities, policyv1alpha1.ControlRunningAsNonRoot, policyv1alpha1.ControlSeccomp}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			docs := libraryDocs(t, dir, tc.levels...)
			res, err := Kyverno(docs, KyvernoOptions{ExceptionsNamespace: "podsieve-system"})
			if err != nil {
				t.Fatal(err)
			}
			for _, d := range docs {
				want := filepath.Base(filepath.Dir(d.Loc.Source))
				if !slices.ContainsFunc(res.Notes, func(n Note) bool {
					return n.Object == "ValidatingPolicy "+d.Name && strings.Contains(n.Message, "recognised as Kyverno's "+want+" (")
				}) {
					t.Errorf("%s is not recognised as %s: %v", d.Where(), want, res.Notes)
				}
			}
			for _, n := range res.Notes {
				if n.Severity == Untranslated && !strings.HasPrefix(n.Message, "Kyverno's CEL also refuses") {
					t.Errorf("untranslated: %s", n)
				}
			}
			if len(res.Objects) != 1 {
				t.Fatalf("want one SecurityPolicy, got %d objects, notes %v", len(res.Objects), res.Notes)
			}
			sp := res.Objects[0].Object.(*policyv1alpha1.SecurityPolicy)
			ps := sp.Spec.Rules[0].PodSecurity
			var excluded []policyv1alpha1.ControlName
			for _, x := range ps.Exclude {
				excluded = append(excluded, x.ControlName)
			}
			if len(sp.Spec.Rules) != 1 || ps.Level != tc.level || !slices.Equal(excluded, tc.exclude) {
				t.Fatalf("got rules %+v, want one at %s excluding %v", sp.Spec.Rules, tc.level, tc.exclude)
			}
			counts := sideBySide(t, docs, nil, sp, nil, []string{"apps"}, []string{"fixture"}, tc.noted)
			t.Logf("%s: %v", tc.name, counts)
		})
	}
}

// TestKyvernoLibraryEach: each library policy alone converts into a rule
// at its level that excludes every other control, pinned as its check says,
// and decides the upstream fixtures as its CEL does, but where the
// converter notes it (its stricter and looser notes, a control it
// implements in part).
func TestKyvernoLibraryEach(t *testing.T) {
	dir := kyvernoLibraryDir(t)
	for _, doc := range libraryDocs(t, dir, "baseline", "restricted") {
		t.Run(doc.Name, func(t *testing.T) {
			res, err := Kyverno([]Document{doc}, KyvernoOptions{ExceptionsNamespace: "podsieve-system"})
			if err != nil {
				t.Fatal(err)
			}
			vp := &kyvernoVPol{}
			if err := decodeStrict(&doc, vp); err != nil {
				t.Fatal(err)
			}
			fp, _ := vpolFingerprint(&vp.Spec)
			check, ok := kyvernoLibrary[fp]
			if !ok || len(res.Objects) != 1 {
				t.Fatalf("not converted into one SecurityPolicy: %v", res.Notes)
			}
			sp := res.Objects[0].Object.(*policyv1alpha1.SecurityPolicy)
			ps := sp.Spec.Rules[0].PodSecurity
			level := policyv1alpha1.LevelBaseline
			for _, p := range check.parts {
				if p.restricted {
					level = policyv1alpha1.LevelRestricted
				}
			}
			wantVersion := check.version
			if wantVersion == "" {
				wantVersion = policyv1alpha1.VersionLatest
			}
			if ps.Level != level || ps.Version != wantVersion || sp.Name != vp.Metadata.Name {
				t.Errorf("got %s %+v, want %s at %s %s", sp.Name, ps, vp.Metadata.Name, level, wantVersion)
			}
			var noted []policyv1alpha1.ControlName
			for _, p := range check.parts {
				covered := 0
				for _, q := range controlParts(p.control, level) {
					if slices.Contains(check.parts, q) {
						covered++
					}
				}
				if check.stricter != "" || covered < len(controlParts(p.control, level)) {
					noted = append(noted, p.control)
				}
			}
			counts := sideBySide(t, []Document{doc}, nil, sp, nil, []string{"apps"}, []string{"fixture"}, noted)
			t.Logf("%s: %v", doc.Name, counts)
		})
	}
}

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

// TestKyvernoNamespacedValidatingPolicy: library policies as
// NamespacedValidatingPolicies convert into a rule of their own namespace,
// and an exception naming one of them waives it there; both decide the
// fixtures as Kyverno's CEL does, in that namespace and another.
func TestKyvernoNamespacedValidatingPolicy(t *testing.T) {
	dir := kyvernoLibraryDir(t)
	docs := libraryDocs(t, dir, "baseline")
	for i := range docs {
		var m map[string]any
		if err := json.Unmarshal(docs[i].JSON, &m); err != nil {
			t.Fatal(err)
		}
		m["kind"] = "NamespacedValidatingPolicy"
		m["metadata"].(map[string]any)["namespace"] = "team-a"
		data, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		docs[i].JSON, docs[i].Kind = data, "NamespacedValidatingPolicy"
	}
	excDocs, err := Read([]string{"testdata/kyverno-vpol/exception.yaml"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(excDocs[0].JSON, &m); err != nil {
		t.Fatal(err)
	}
	for _, r := range m["spec"].(map[string]any)["policyRefs"].([]any) {
		r.(map[string]any)["kind"] = "NamespacedValidatingPolicy"
	}
	if excDocs[0].JSON, err = json.Marshal(m); err != nil {
		t.Fatal(err)
	}
	res, err := Kyverno(append(docs, excDocs...), KyvernoOptions{ExceptionsNamespace: "podsieve-system"})
	if err != nil {
		t.Fatal(err)
	}
	sp, pes := policyAndExceptions(res)
	if res.Untranslated() || sp == nil || len(pes) != 1 {
		t.Fatalf("want a SecurityPolicy and an exception, nothing untranslated: %+v %v", res.Objects, res.Notes)
	}
	if r := sp.Spec.Rules[0]; r.Match == nil || !slices.Equal(r.Match.Namespaces, []string{"team-a"}) {
		t.Errorf("the rule does not match team-a only: %+v", r.Match)
	}
	exc := &kyvernoCELException{}
	if err := decodeStrict(&excDocs[0], exc); err != nil {
		t.Fatal(err)
	}
	counts := sideBySide(t, docs, exc, sp, pes, []string{"team-a", "team-b"}, []string{"fixture", "build-1"},
		[]policyv1alpha1.ControlName{policyv1alpha1.ControlHostProcess})
	t.Logf("namespaced, with the exception: %v", counts)
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

// TestKyvernoCELNotes: what convert cannot read in policies.kyverno.io
// objects is noted, naming the object and the field, and nothing is
// converted from it.
func TestKyvernoCELNotes(t *testing.T) {
	docs, err := Read([]string{"testdata/kyverno-vpol/custom.yaml"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := Kyverno(docs, KyvernoOptions{ExceptionsNamespace: "podsieve-system"})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Objects) != 0 {
		t.Errorf("converted %d objects from a policy that is not a Pod Security check", len(res.Objects))
	}
	for _, want := range []string{
		"ValidatingPolicy require-team-label: spec.validations: not translated: its CEL is not one of Kyverno's Pod Security library policies",
		`PolicyException team-a/unlabelled: spec.policyRefs[0].name: not translated: ValidatingPolicy "require-team-label" was not converted in this run`,
		"PolicyException team-a/unlabelled: spec.policyRefs: not translated: waives no converted control",
	} {
		if !slices.ContainsFunc(res.Notes, func(n Note) bool { return strings.Contains(n.String(), want) }) {
			t.Errorf("no note %q in %v", want, res.Notes)
		}
	}
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

// TestVPolFingerprintIgnoresLayout: the fingerprint is of what the CEL
// tests, not of how it is written, and changes with what it tests.
func TestVPolFingerprintIgnoresLayout(t *testing.T) {
	spec := func(variable, validation string) *kyvernoVPolSpec {
		return &kyvernoVPolSpec{
			Variables:   []admissionregistrationv1.Variable{{Name: "c", Expression: variable}},
			Validations: []admissionregistrationv1.Validation{{Expression: validation, Message: "m"}},
		}
	}
	a, err := vpolFingerprint(spec("object.spec.containers", "variables.c.all(x, x.?securityContext.?privileged.orValue(false) == false)"))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := vpolFingerprint(spec("object.spec.containers  ", "variables.c.all(x,\n  x.?securityContext.?privileged.orValue(false)\n == false )"))
	c, _ := vpolFingerprint(spec("object.spec.containers", "variables.c.all(x, x.?securityContext.?privileged.orValue(true) == false)"))
	renamed, _ := vpolFingerprint(&kyvernoVPolSpec{
		Variables:   []admissionregistrationv1.Variable{{Name: "ctrs", Expression: "object.spec.containers"}},
		Validations: []admissionregistrationv1.Validation{{Expression: "variables.ctrs.all(x, x.?securityContext.?privileged.orValue(false) == false)"}},
	})
	inline, _ := vpolFingerprint(&kyvernoVPolSpec{
		Validations: []admissionregistrationv1.Validation{{Expression: "object.spec.containers.all(x, x.?securityContext.?privileged.orValue(false) == false)"}},
	})
	prefix, _ := vpolFingerprint(&kyvernoVPolSpec{
		Variables:   []admissionregistrationv1.Variable{{Name: "c", Expression: "object.spec.containers"}, {Name: "cc", Expression: "object.spec.initContainers"}},
		Validations: []admissionregistrationv1.Validation{{Expression: "variables.cc.all(x, x.?securityContext.?privileged.orValue(false) == false)"}},
	})
	if a != b || a != renamed || a != inline {
		t.Errorf("layout or variables change the fingerprint: %s, %s, %s, %s", a, b, renamed, inline)
	}
	if a == c || a == prefix {
		t.Errorf("a different test has the same fingerprint %s", a)
	}
}

// TestVPolConditions: a ValidatingPolicy's matchConditions on the namespace
// become the rule's match or exclude namespaces; anything else is noted and
// the rule applies more widely.
func TestVPolConditions(t *testing.T) {
	many := make([]string, maxFilterNamespaces+1)
	for i := range many {
		many[i] = fmt.Sprintf("'ns-%d'", i)
	}
	for _, tc := range []struct {
		name           string
		expr           []string
		match, exclude []string
		applies        bool
		untranslated   bool
	}{
		{name: "none", applies: true},
		{name: "leave out two", expr: []string{"request.namespace != 'a' && request.namespace != 'b'"}, exclude: []string{"a", "b"}, applies: true},
		{name: "only some", expr: []string{"object.metadata.namespace in ['a', 'b', 'c']", "!(request.namespace in ['c'])"}, match: []string{"a", "b"}, applies: true},
		{name: "intersection", expr: []string{"request.namespace in ['a', 'b']", "request.namespace in ['b', 'c']"}, match: []string{"b"}, applies: true},
		{name: "nowhere", expr: []string{"request.namespace == 'a'", "request.namespace == 'b'"}},
		{name: "a glob is a literal in CEL", expr: []string{"request.namespace == 'team-*'"}},
		{name: "a name", expr: []string{"object.metadata.name != 'x'"}, applies: true, untranslated: true},
		{name: "a label", expr: []string{"object.metadata.?labels[?'a'].orValue('') != 'b'"}, applies: true, untranslated: true},
		{name: "too many", expr: []string{"!(request.namespace in [" + strings.Join(many, ",") + "])"}, applies: true, untranslated: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var conds []admissionregistrationv1.MatchCondition
			for i, e := range tc.expr {
				conds = append(conds, admissionregistrationv1.MatchCondition{Name: fmt.Sprint(i), Expression: e})
			}
			c := &kyvernoConverter{res: &Result{}}
			g := &vpolGroup{}
			applies := c.vpolConditions(newNoter(c.res, &Document{}), conds, g)
			var match, exclude []string
			if g.match != nil {
				match = g.match.Namespaces
			}
			if g.exclude != nil {
				exclude = g.exclude.Namespaces
			}
			if applies != tc.applies || c.res.Untranslated() != tc.untranslated || (applies && (!slices.Equal(match, tc.match) || !slices.Equal(exclude, tc.exclude))) {
				t.Errorf("got applies %v match %v exclude %v notes %v", applies, match, exclude, c.res.Notes)
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
	refs := map[string]vpolRef{}
	for _, name := range []string{"disallow-host-path", "disallow-capabilities", "disallow-capabilities-strict"} {
		m := &vpolMember{vp: &kyvernoVPol{}, check: byName[name], key: vpolKey("ValidatingPolicy", "", name), name: name}
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

// TestVPolGroupLevel: the level, version and exclusions of the rule a set
// of library checks becomes, from the checks alone.
func TestVPolGroupLevel(t *testing.T) {
	var baseline, restricted []string
	for _, c := range kyvernoLibrary {
		if slices.ContainsFunc(c.parts, func(p controlPart) bool { return p.restricted }) {
			restricted = append(restricted, c.name)
		} else {
			baseline = append(baseline, c.name)
		}
	}
	byName := map[string]libraryCheck{}
	for _, c := range kyvernoLibrary {
		byName[c.name] = c
	}
	for _, tc := range []struct {
		name     string
		checks   []string
		level    policyv1alpha1.PodSecurityLevel
		version  string
		excluded string
		partial  bool
	}{
		{"the baseline library", baseline, policyv1alpha1.LevelBaseline, "v1.26", "[Host Probes / Lifecycle Hooks AppArmor]", false},
		{"the whole library", append(slices.Clone(baseline), restricted...), policyv1alpha1.LevelRestricted, "v1.26", "[Host Probes / Lifecycle Hooks AppArmor]", true},
		{"one baseline check", []string{"disallow-host-ports"}, policyv1alpha1.LevelBaseline, "latest",
			"[HostProcess Host Namespaces Privileged Containers Capabilities HostPath Volumes Host Probes / Lifecycle Hooks AppArmor SELinux /proc Mount Type Seccomp Sysctls]", false},
		{"restrict-seccomp-strict alone is baseline", []string{"restrict-seccomp-strict"}, policyv1alpha1.LevelBaseline, "latest",
			"[HostProcess Host Namespaces Privileged Containers Capabilities HostPath Volumes Host Ports Host Probes / Lifecycle Hooks AppArmor SELinux /proc Mount Type Sysctls]", false},
		{"volume types covers host paths", []string{"restrict-volume-types", "disallow-selinux"}, policyv1alpha1.LevelRestricted, "v1.30",
			"[HostProcess Host Namespaces Privileged Containers Capabilities Host Ports Host Probes / Lifecycle Hooks AppArmor /proc Mount Type Seccomp Sysctls Privilege Escalation Running as Non-root Running as Non-root user]", false},
		{"baseline capabilities at restricted", []string{"disallow-capabilities", "disallow-privilege-escalation"}, policyv1alpha1.LevelRestricted, "latest",
			"[HostProcess Host Namespaces Privileged Containers HostPath Volumes Host Ports Host Probes / Lifecycle Hooks AppArmor SELinux /proc Mount Type Seccomp Sysctls Volume Types Running as Non-root Running as Non-root user]", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &kyvernoConverter{res: &Result{}, vpolRefs: map[string]vpolRef{}}
			g := &vpolGroup{action: policyv1alpha1.ActionEnforce}
			for _, name := range tc.checks {
				d := &Document{}
				vp := &kyvernoVPol{}
				vp.Metadata.Name = name
				g.members = append(g.members, &vpolMember{d: d, vp: vp, n: newNoter(c.res, d), check: byName[name], key: name, name: name})
			}
			if err := c.vpolGroupOutput(g); err != nil {
				t.Fatal(err)
			}
			sp := c.res.Objects[0].Object.(*policyv1alpha1.SecurityPolicy)
			ps := sp.Spec.Rules[0].PodSecurity
			var excluded []policyv1alpha1.ControlName
			for _, x := range ps.Exclude {
				excluded = append(excluded, x.ControlName)
			}
			partial := slices.ContainsFunc(c.res.Notes, func(n Note) bool { return strings.Contains(n.Message, "implement only part of") })
			if ps.Level != tc.level || ps.Version != tc.version || fmt.Sprint(excluded) != tc.excluded || partial != tc.partial {
				t.Errorf("got %s %s excluding %v (partial %v), want %s %s excluding %s (partial %v)", ps.Level, ps.Version, excluded, partial, tc.level, tc.version, tc.excluded, tc.partial)
			}
		})
	}
}

// TestKyvernoLibraryOwnTests: each library policy, converted alone, decides
// the resources of its own Kyverno CLI test (.kyverno-test: Pods and pod
// controllers, with the result Kyverno's CLI expects for each) as that test
// expects.
func TestKyvernoLibraryOwnTests(t *testing.T) {
	dir := kyvernoLibraryDir(t)
	tests, err := filepath.Glob(filepath.Join(dir, "*", "*", ".kyverno-test", "kyverno-test.yaml"))
	if err != nil || len(tests) == 0 {
		t.Skipf("no .kyverno-test under %s: %v", dir, err)
	}
	total := 0
	for _, file := range tests {
		policyDir := filepath.Dir(filepath.Dir(file))
		name := filepath.Base(policyDir)
		t.Run(name, func(t *testing.T) {
			data, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			var kt struct {
				Results []struct {
					Policy    string   `json:"policy"`
					Kind      string   `json:"kind"`
					Resources []string `json:"resources"`
					Result    string   `json:"result"`
				} `json:"results"`
			}
			if err := sigsyaml.Unmarshal(data, &kt); err != nil {
				t.Fatal(err)
			}
			want := map[string]string{}
			for _, r := range kt.Results {
				if r.Policy != name {
					continue
				}
				for _, res := range r.Resources {
					want[r.Kind+"/"+res] = r.Result
				}
			}
			docs, err := Read([]string{filepath.Join(policyDir, name+".yaml")}, nil)
			if err != nil {
				t.Fatal(err)
			}
			res, err := Kyverno(docs, KyvernoOptions{ExceptionsNamespace: "podsieve-system"})
			if err != nil || len(res.Objects) != 1 {
				t.Fatalf("not converted: %v %v", err, res.Notes)
			}
			sp := res.Objects[0].Object.(*policyv1alpha1.SecurityPolicy).DeepCopy()
			sp.Spec.Action, sp.Generation = policyv1alpha1.ActionEnforce, 1
			policy, err := engine.CompilePolicy(sp)
			if err != nil {
				t.Fatal(err)
			}
			// Decoded as Kyverno's CLI reads them: a field the API
			// server does not know (one of these pods has one) is dropped.
			decided := 0
			for raw, err := range manifest.Read([]string{filepath.Join(filepath.Dir(file), "resource.yaml")}, nil) {
				if err != nil {
					t.Fatal(err)
				}
				obj, _, err := clientgoscheme.Codecs.UniversalDeserializer().Decode(raw.JSON, nil, nil)
				if err != nil {
					t.Fatalf("%s: %v", raw.Loc.Where(), err)
				}
				o, err := engine.NewObject(obj)
				if err != nil {
					continue // not pod-bearing
				}
				if o.Namespace == "" {
					o.Namespace = "default"
				}
				expected, ok := want[o.Kind+"/"+o.Name]
				if !ok {
					continue
				}
				d := engine.Decide([]*engine.Policy{policy}, engine.AllExceptions(nil), o, map[string]string{engine.NamespaceNameLabel: o.Namespace}, time.Now(), engine.Admission)
				if got := map[bool]string{true: "pass", false: "fail"}[d.Allowed]; got != expected {
					t.Errorf("%s %s: Kyverno's test expects %s, podsieve decides %s: %s", o.Kind, o.Name, expected, got, findings(d))
				}
				decided++
			}
			if decided != len(want) {
				t.Errorf("decided %d of the %d resources the test names", decided, len(want))
			}
			total += decided
		})
	}
	t.Logf("%d resources of %d Kyverno CLI tests decided as they expect", total, len(tests))
}

// policyAndExceptions are a conversion's SecurityPolicy (the last, when
// several) and its PolicyExceptions.
func policyAndExceptions(res *Result) (*policyv1alpha1.SecurityPolicy, []*policyv1alpha1.PolicyException) {
	var sp *policyv1alpha1.SecurityPolicy
	var pes []*policyv1alpha1.PolicyException
	for _, o := range res.Objects {
		switch obj := o.Object.(type) {
		case *policyv1alpha1.SecurityPolicy:
			sp = obj
		case *policyv1alpha1.PolicyException:
			pes = append(pes, obj)
		}
	}
	return sp, pes
}
