package engine

import (
	"slices"
	"testing"

	policyv1alpha1 "github.com/podsieve/podsieve/api/v1alpha1"
)

func TestKindsCreate(t *testing.T) {
	tests := []struct {
		kind        policyv1alpha1.PodBearingKind
		descendants []policyv1alpha1.PodBearingKind
		creator     policyv1alpha1.PodBearingKind // "" when none or several create it
	}{
		{policyv1alpha1.KindPod, nil, ""},
		{policyv1alpha1.KindPodTemplate, nil, ""},
		{policyv1alpha1.KindDeployment, []policyv1alpha1.PodBearingKind{policyv1alpha1.KindReplicaSet, policyv1alpha1.KindPod}, ""},
		{policyv1alpha1.KindReplicaSet, []policyv1alpha1.PodBearingKind{policyv1alpha1.KindPod}, policyv1alpha1.KindDeployment},
		{policyv1alpha1.KindCronJob, []policyv1alpha1.PodBearingKind{policyv1alpha1.KindJob, policyv1alpha1.KindPod}, ""},
		{policyv1alpha1.KindJob, []policyv1alpha1.PodBearingKind{policyv1alpha1.KindPod}, policyv1alpha1.KindCronJob},
		{policyv1alpha1.KindStatefulSet, []policyv1alpha1.PodBearingKind{policyv1alpha1.KindPod}, ""},
		{policyv1alpha1.KindDaemonSet, []policyv1alpha1.PodBearingKind{policyv1alpha1.KindPod}, ""},
		{policyv1alpha1.KindReplicationController, []policyv1alpha1.PodBearingKind{policyv1alpha1.KindPod}, ""},
	}
	if len(tests) != len(PodBearingKinds) {
		t.Errorf("%d cases for %d kinds", len(tests), len(PodBearingKinds))
	}
	for _, tt := range tests {
		t.Run(string(tt.kind), func(t *testing.T) {
			k, ok := KindNamed(tt.kind)
			if !ok {
				t.Fatal("not a pod-bearing kind")
			}
			if got := k.Descendants(); !slices.Equal(got, tt.descendants) {
				t.Errorf("Descendants() = %v, want %v", got, tt.descendants)
			}
			creator, ok := CreatorOf(tt.kind)
			if ok != (tt.creator != "") || creator.Kind != tt.creator {
				t.Errorf("CreatorOf() = %v, %v, want %q", creator.Kind, ok, tt.creator)
			}
		})
	}
}
