package engine

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"unsafe"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

// TestExemptionRecordsTheCoveringEntry: each source that covers a finding
// is recorded with the first of its entries that covers it, where the
// source stopped, so that podsieve explain can name the entry without
// testing the entries again.
func TestExemptionRecordsTheCoveringEntry(t *testing.T) {
	hostPID := mkPod(withSpec(func(s *corev1.PodSpec) { s.HostPID = true }), withContainers(ctr("app", nil)))
	privileged := mkPod(withContainers(ctr("shell", &corev1.SecurityContext{Privileged: ptr.To(true)})))
	hostPath := restrictedPod(withContainers(ctr("app", restrictedSC())), withSpec(func(s *corev1.PodSpec) {
		s.Volumes = []corev1.Volume{{Name: "logs", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/var/log"}}}}
	}))
	const (
		baseline = "exceptions: {}\n" + baselineRule
		names    = "exceptions: [{policyName: p, ruleNames: [r]}]\n"
	)
	tests := []struct {
		name       string
		policy     string
		exceptions []string // specs, in namespace ns, named e0, e1, ...
		pod        *corev1.Pod
		// want maps "<control> <field>" of each covered finding to its
		// ExemptedBy as "<source>[<entry>]".
		want map[string][]string
	}{
		{
			name: "the rule's first covering entry, not a later one that covers too",
			policy: `exceptions: {}
rules:
- name: r
  podSecurity:
    level: baseline
    exclude:
    - {controlName: Host Namespaces, restrictedField: spec.hostNetwork}
    - {controlName: Host Namespaces, restrictedField: spec.hostPID}
    - {controlName: Host Namespaces}`,
			pod:  hostPID,
			want: map[string][]string{"Host Namespaces spec.hostPID": {"policy/p/r[1]"}},
		},
		{
			name:   "an exception's first covering entry",
			policy: baseline,
			exceptions: []string{names + `podSecurity:
- {controlName: Privileged Containers, containerNames: [other]}
- {controlName: Privileged Containers, containerNames: [shell]}
- {controlName: Privileged Containers}`},
			pod:  privileged,
			want: map[string][]string{"Privileged Containers spec.containers[*].securityContext.privileged": {"exception/ns/e0[1]"}},
		},
		{
			name: "each source that covers is recorded with its own entry",
			policy: `exceptions: {}
rules:
- name: r
  podSecurity:
    level: baseline
    exclude:
    - {controlName: Host Namespaces, restrictedField: spec.hostPID}`,
			exceptions: []string{
				names + "podSecurity:\n- {controlName: Capabilities}\n- {controlName: Host Namespaces}",
				names + "podSecurity:\n- {controlName: Host Namespaces, restrictedField: spec.hostNetwork}",
				names + "podSecurity:\n- {controlName: Host Namespaces, restrictedField: spec.hostPID}",
			},
			pod:  hostPID,
			want: map[string][]string{"Host Namespaces spec.hostPID": {"policy/p/r[0]", "exception/ns/e0[1]", "exception/ns/e2[0]"}},
		},
		{
			// A Volume Types entry never covers a hostPath volume; the
			// HostPath Volumes entry after it covers restricted's finding.
			name: "restricted's hostPath finding names the HostPath Volumes entry",
			policy: `rules:
- name: r
  podSecurity:
    level: restricted
    exclude:
    - {controlName: Volume Types}
    - {controlName: HostPath Volumes, restrictedField: "spec.volumes[*].hostPath", values: ["/var/log"]}`,
			pod:  hostPath,
			want: map[string][]string{"Volume Types spec.volumes[*].hostPath": {"policy/p/r[1]"}},
		},
		{
			name:       "an exception with an empty podSecurity waives the whole rule: no entry",
			policy:     baseline,
			exceptions: []string{names},
			pod:        privileged,
			want: map[string][]string{
				"Privileged Containers spec.containers[*].securityContext.privileged": {fmt.Sprintf("exception/ns/e0[%d]", WholeRuleEntry)},
			},
		},
		{
			name:       "the same exception offered twice is recorded once",
			policy:     baseline,
			exceptions: []string{names + "podSecurity: [{controlName: Privileged Containers}]", "same as e0"},
			pod:        privileged,
			want:       map[string][]string{"Privileged Containers spec.containers[*].securityContext.privileged": {"exception/ns/e0[0]"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := mustPolicy(t, "p", tt.policy).Rules[0]
			var excs []*Exception
			for i, spec := range tt.exceptions {
				if spec == "same as e0" {
					excs = append(excs, excs[0])
					continue
				}
				excs = append(excs, mustException(t, "ns", fmt.Sprintf("e%d", i), spec))
			}
			res := r.Evaluate(podObject("ns", tt.pod), excs)
			got := map[string][]string{}
			for _, f := range res.Findings {
				for _, ex := range f.ExemptedBy {
					key := string(f.Control) + " " + f.Field
					got[key] = append(got[key], fmt.Sprintf("%s[%d]", ex.Source, ex.Entry))
				}
			}
			if fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Errorf("exempted by\n  %v\nwant\n  %v\nfindings:\n%s", got, tt.want, dumpFindings(res.Findings))
			}
		})
	}
}

// TestExemptionJSON: a finding's exemptedBy stays a list of sources in
// JSON, as it was before the entry was recorded next to each.
func TestExemptionJSON(t *testing.T) {
	f := Finding{
		Violation: Violation{Control: "Host Namespaces", Scope: ScopePod, Field: "spec.hostPID", Values: []string{"true"}},
		ExemptedBy: []Exemption{
			{Source: PolicyRuleSource("p", "r"), Entry: 2},
			{Source: ExceptionSource("ns", "e"), Entry: WholeRuleEntry},
		},
	}
	b, err := json.Marshal(&f)
	if err != nil {
		t.Fatal(err)
	}
	if want := `"exemptedBy":["policy/p/r","exception/ns/e"]`; !strings.Contains(string(b), want) {
		t.Errorf("JSON %s lacks %s", b, want)
	}
}

// TestExemptionSize keeps Exemption's claim: next to a Source, the entry
// index still fits the 64-byte size class that a finding covered by one
// source allocates for its ExemptedBy.
func TestExemptionSize(t *testing.T) {
	if size := unsafe.Sizeof(Exemption{}); size > 64 {
		t.Errorf("Exemption is %d bytes; ExemptedBy of one source would allocate more than the 64 bytes of a Source", size)
	}
}
