package convert

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	sigsyaml "sigs.k8s.io/yaml"

	policyv1alpha1 "github.com/podsieve/podsieve/api/v1alpha1"
	"github.com/podsieve/podsieve/internal/engine"
	"github.com/podsieve/podsieve/internal/manifest"
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
			c := &kyvernoConverter{res: &Result{}, vpolRefs: map[vpolID]vpolRef{}}
			g := &vpolGroup{action: policyv1alpha1.ActionEnforce}
			for _, name := range tc.checks {
				d := &Document{}
				vp := &kyvernoVPol{}
				vp.Metadata.Name = name
				g.members = append(g.members, &vpolMember{d: d, vp: vp, n: newNoter(c.res, d), check: byName[name], key: vpolIDOf("ValidatingPolicy", "", name), name: name})
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
