package admissionpolicy

import (
	"testing"

	"k8s.io/pod-security-admission/api"
)

// TestEveryCheckSaysWhenItViolates: a rule builds its checks' lists only
// when one of their conditions holds, so a check that runs at a version
// must give them (podCond makes one that does not always built, which this
// test still refuses, as a slower and unintended form).
func TestEveryCheckSaysWhenItViolates(t *testing.T) {
	lv := api.LatestVersion()
	latest := lv.Minor()
	for id, c := range celChecks {
		for minor := 0; minor <= latest; minor++ {
			v := c(builder{id: id}, minor)
			if v.list == "" {
				if v.pod != "" || v.ctr != "" {
					t.Errorf("%s at v1.%d: does not run, but has conditions", id, minor)
				}
				continue
			}
			if v.pod == "" && v.ctr == "" {
				t.Errorf("%s at v1.%d: a list without conditions", id, minor)
			}
		}
	}
}

// TestPodCondOfAListWithoutConditions: such a list is never skipped.
func TestPodCondOfAListWithoutConditions(t *testing.T) {
	for _, c := range []struct {
		name string
		v    violations
		want string
	}{
		{"no list", violations{}, ""},
		{"a list without conditions", violations{list: "[1]"}, "true"},
		{"a list with a pod condition", violations{list: "[1]", pod: "p"}, "p"},
		{"a list with a container condition", violations{list: "[1]", ctr: "c"}, ""},
		{"concatenated with a list that has one", concat(violations{list: "[1]"}, violations{list: "[2]", pod: "p"}), "((true) || (p))"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := c.v.podCond(); got != c.want {
				t.Errorf("podCond() = %q, want %q", got, c.want)
			}
		})
	}
}
