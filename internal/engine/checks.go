package engine

import (
	"cmp"
	"fmt"
	"slices"
	"sync"

	"k8s.io/pod-security-admission/api"
	"k8s.io/pod-security-admission/policy"

	policyv1alpha1 "github.com/podsieve/podsieve/api/v1alpha1"
)

// check is one upstream check at the implementation that applies at a version.
type check struct {
	id      policy.CheckID
	control policyv1alpha1.ControlName
	fn      policy.CheckPodFn
}

// checkSet is the ordered list of checks that run at one level and version.
type checkSet struct {
	lv     api.LevelVersion
	checks []check
}

// registry holds the check sets of every level and version, built once from
// upstream's policy.DefaultChecks(). It selects checks the way upstream's
// evaluator does (the newest implementation whose MinimumVersion is not after
// the version; at restricted, baseline checks minus those a restricted check
// overrides; nothing at privileged) but keeps each check's ID, which upstream's
// evaluator drops and attribution needs.
type registry struct {
	max  api.Version
	sets map[api.LevelVersion]*checkSet
}

// defaultRegistry is built on first use, not while the package
// initialises: the check_<id>.go files fill attributions from init
// functions, which run in file order, and every one of them has run before
// a caller can compile a policy.
var defaultRegistry = sync.OnceValue(func() *registry { return mustRegistry(policy.DefaultChecks()) })

func mustRegistry(checks []policy.Check) *registry {
	r, err := newRegistry(checks)
	if err != nil {
		panic(err)
	}
	return r
}

func newRegistry(checks []policy.Check) (*registry, error) {
	r := &registry{sets: map[api.LevelVersion]*checkSet{}}
	for _, c := range checks {
		if controlOf(c.ID) == "" {
			return nil, fmt.Errorf("upstream check %q has no PSS control in podsieve; attribution must learn it", c.ID)
		}
		if last := c.Versions[len(c.Versions)-1].MinimumVersion; r.max.Older(last) {
			r.max = last
		}
	}
	// Upstream orders baseline IDs, then restricted IDs, each sorted.
	byLevel := func(l api.Level) []policy.Check {
		var out []policy.Check
		for _, c := range checks {
			if c.Level == l {
				out = append(out, c)
			}
		}
		slices.SortFunc(out, func(a, b policy.Check) int { return cmp.Compare(a.ID, b.ID) })
		return out
	}
	baseline, restricted := byLevel(api.LevelBaseline), byLevel(api.LevelRestricted)
	for minor := 0; minor <= r.max.Minor(); minor++ {
		v := api.MajorMinorVersion(1, minor)
		overridden := map[policy.CheckID]bool{}
		var restrictedAt []check
		for _, c := range restricted {
			if vc, ok := versionedAt(c, v); ok {
				restrictedAt = append(restrictedAt, check{id: c.ID, control: controlOf(c.ID), fn: vc.CheckPod})
				for _, o := range vc.OverrideCheckIDs {
					overridden[o] = true
				}
			}
		}
		var baselineAt, restrictedBase []check
		for _, c := range baseline {
			if vc, ok := versionedAt(c, v); ok {
				ck := check{id: c.ID, control: controlOf(c.ID), fn: vc.CheckPod}
				baselineAt = append(baselineAt, ck)
				if !overridden[c.ID] {
					restrictedBase = append(restrictedBase, ck)
				}
			}
		}
		r.sets[api.LevelVersion{Level: api.LevelBaseline, Version: v}] = &checkSet{
			lv: api.LevelVersion{Level: api.LevelBaseline, Version: v}, checks: baselineAt}
		r.sets[api.LevelVersion{Level: api.LevelRestricted, Version: v}] = &checkSet{
			lv: api.LevelVersion{Level: api.LevelRestricted, Version: v}, checks: append(restrictedBase, restrictedAt...)}
	}
	return r, nil
}

// versionedAt returns the implementation of c that applies at v.
func versionedAt(c policy.Check, v api.Version) (policy.VersionedCheck, bool) {
	for i := len(c.Versions) - 1; i >= 0; i-- {
		if !v.Older(c.Versions[i].MinimumVersion) {
			return c.Versions[i], true
		}
	}
	return policy.VersionedCheck{}, false
}

// set returns the checks for a level and version; "latest" and versions newer
// than podsieve knows use the newest checks, as upstream does. Privileged has
// no checks.
func (r *registry) set(lv api.LevelVersion) *checkSet {
	if lv.Level == api.LevelPrivileged {
		return &checkSet{lv: lv}
	}
	v := lv.Version
	if v.Latest() || r.max.Older(v) {
		v = r.max
	}
	return r.sets[api.LevelVersion{Level: lv.Level, Version: v}]
}

// Checks returns the upstream checks the rule runs, in the order it runs
// them, and the version whose revisions apply: the rule's own, or the
// newest podsieve knows for latest and newer versions. Nothing runs at
// privileged. A second form of the checks (the CEL of
// internal/admissionpolicy) is generated from this list, so that it runs
// exactly the checks the engine runs.
func (r *Rule) Checks() (api.Version, []policy.CheckID) {
	ids := make([]policy.CheckID, len(r.checks.checks))
	for i := range r.checks.checks {
		ids[i] = r.checks.checks[i].id
	}
	return r.checks.lv.Version, ids
}

// CheckControl is the control an upstream check implements, "" for a check
// podsieve does not know.
func CheckControl(id policy.CheckID) policyv1alpha1.ControlName { return controlOf(id) }
