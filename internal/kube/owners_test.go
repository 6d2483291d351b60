package kube

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	policyv1alpha1 "github.com/podsieve/podsieve/api/v1alpha1"
)

// TestStatusOwnersCoverEachFieldOnce: every field of a status, and every
// condition type written on the kind, has exactly one writer. A field added
// to a status type fails here until a writer is named for it.
func TestStatusOwnersCoverEachFieldOnce(t *testing.T) {
	cases := []struct {
		name       string
		status     any
		conditions []string
		owners     []StatusOwner
	}{
		{
			name:   "SecurityPolicy",
			status: policyv1alpha1.SecurityPolicyStatus{},
			conditions: []string{policyv1alpha1.ConditionReady, policyv1alpha1.ConditionStalled, policyv1alpha1.ConditionScanned,
				policyv1alpha1.ConditionEnforcedByAPIServer},
			owners: SecurityPolicyStatusOwners(),
		},
		{
			name:       "PolicyException",
			status:     policyv1alpha1.PolicyExceptionStatus{},
			conditions: []string{policyv1alpha1.ConditionReady, policyv1alpha1.ConditionStalled},
			owners:     PolicyExceptionStatusOwners(),
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var parts []string
			st := reflect.TypeOf(tc.status)
			for i := range st.NumField() {
				name, _, _ := strings.Cut(st.Field(i).Tag.Get("json"), ",")
				if name != "conditions" {
					parts = append(parts, name)
				}
			}
			for _, c := range tc.conditions {
				parts = append(parts, "conditions["+c+"]")
			}
			managers := map[string]bool{}
			for _, o := range tc.owners {
				if managers[o.Manager] {
					t.Errorf("two writers under field manager %s", o.Manager)
				}
				managers[o.Manager] = true
			}
			for _, part := range parts {
				var writers []string
				for _, o := range tc.owners {
					if o.Owns(part) {
						writers = append(writers, o.Manager)
					}
				}
				if len(writers) != 1 {
					t.Errorf("status part %s has writers %v, want exactly one", part, writers)
				}
			}
			for _, o := range tc.owners {
				for _, f := range o.Fields {
					if !slices.Contains(parts, f) {
						t.Errorf("%s owns %s, which the status does not have", o.Manager, f)
					}
				}
			}
		})
	}
}
