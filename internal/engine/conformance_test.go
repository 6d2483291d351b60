package engine

import (
	"slices"
	"strings"
	"testing"

	"k8s.io/pod-security-admission/api"
	"k8s.io/pod-security-admission/policy"
)

// TestDecisionConformanceFixtures: with nothing exempted, podsieve's decision
// equals upstream's evaluator on every upstream fixture, at the fixture's own
// level and version and at latest; a fail fixture is denied with the check it
// is named after among the findings.
func TestDecisionConformanceFixtures(t *testing.T) {
	fixtures, err := loadFixtures()
	if err != nil {
		t.Fatal(err)
	}
	if len(fixtures) != 4537 {
		t.Fatalf("loaded %d fixtures, want the 4,537 upstream ships", len(fixtures))
	}
	upstream, err := policy.NewEvaluator(policy.DefaultChecks(), nil)
	if err != nil {
		t.Fatal(err)
	}
	rules := map[string]*Rule{}
	rule := func(level, version string) *Rule {
		key := level + ":" + version
		if rules[key] == nil {
			rules[key] = mustPolicy(t, "p", "rules:\n- name: r\n  podSecurity: {level: "+level+", version: "+version+"}").Rules[0]
		}
		return rules[key]
	}
	for _, f := range fixtures {
		level := strings.SplitN(f.rel, "/", 2)[0]
		o := podObject("ns", f.pod)
		for _, lv := range []struct{ level, version string }{
			{level, f.version.String()}, {"baseline", "latest"}, {"restricted", "latest"},
		} {
			r := rule(lv.level, lv.version)
			got := r.Evaluate(o, nil)
			parsed, _ := api.ParseVersion(lv.version)
			want := policy.AggregateCheckResults(upstream.EvaluatePod(api.LevelVersion{Level: api.Level(lv.level), Version: parsed}, &f.pod.ObjectMeta, &f.pod.Spec)).Allowed
			if (got.Outcome == Pass) != want {
				t.Errorf("%s at %s:%s: podsieve %s, upstream allowed=%v", f.rel, lv.level, lv.version, got.Outcome, want)
			}
		}
		got := rule(level, f.version.String()).Evaluate(o, nil)
		if f.fail != (got.Outcome == Fail) {
			t.Errorf("%s: outcome %s", f.rel, got.Outcome)
		}
		// At restricted, a fixture named after a baseline check that a
		// restricted check overrides fails the overriding check, which
		// reports under the same control (or the hostPath field).
		attributed := func(x Finding) bool {
			return x.Field != "" && (x.CheckID == string(f.check) || x.Control == controlOf(f.check) ||
				(f.check == checkHostPathVolumes && x.Field == fHostPathVolume))
		}
		if f.fail && !slices.ContainsFunc(got.Findings, attributed) {
			t.Errorf("%s: check %s not attributed; findings %+v", f.rel, f.check, got.Findings)
		}
	}
}
