package engine

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/pod-security-admission/api"
	"k8s.io/pod-security-admission/policy"

	policyv1alpha1 "github.com/podsieve/podsieve/api/v1alpha1"
)

// checkRestrictedVolumes is upstream's restrictedVolumes check (policy/check_restrictedVolumes.go).
const checkRestrictedVolumes policy.CheckID = "restrictedVolumes"

func init() {
	addAttribution(checkRestrictedVolumes, attribution{
		control:   policyv1alpha1.ControlVolumeTypes,
		revisions: []api.Version{api.MajorMinorVersion(1, 0)},
		attribute: attributeRestrictedVolumes,
	})
}

func attributeRestrictedVolumes(a attributor, v api.Version, _ *metav1.ObjectMeta, spec *corev1.PodSpec) []Finding {
	if !since(v, 0) {
		return nil
	}
	// at[t] is the index in a.out of the violation for volume type t, so each
	// type gets one violation, in order of first appearance, without a map;
	// values[t] are its values, set on it once every volume is seen.
	var at [len(forbiddenVolumeTypes) + 1]int
	var values [len(forbiddenVolumeTypes) + 1]uniqueValues
	for i := range at {
		at[i] = -1
	}
	for i := range spec.Volumes {
		vol := &spec.Volumes[i]
		t := restrictedVolumeType(vol)
		if t < 0 {
			continue
		}
		// hostPath is reported by path, like the baseline hostPathVolumes
		// check, so that one exclusion covers a hostPath at both levels.
		value := vol.Name
		if t == 0 {
			value = vol.HostPath.Path
		}
		if at[t] < 0 {
			at[t] = len(a.out)
			a.pod(fRestrictedVolume[t], nil)
		}
		values[t].add(value)
	}
	for t, i := range at {
		if i >= 0 {
			a.out[i].Values = values[t].values
		}
	}
	return a.out
}

// restrictedVolumeType returns the index into forbiddenVolumeTypes of the
// source upstream blames a volume on, len(forbiddenVolumeTypes) when upstream
// would call it "unknown", or -1 when the volume is allowed. Its cases are
// allowedVolumeTypes and forbiddenVolumeTypes, in order, as Go fields
// (TestVolumeTypeLists holds them equal).
func restrictedVolumeType(vol *corev1.Volume) int {
	switch {
	case vol.ConfigMap != nil,
		vol.CSI != nil,
		vol.DownwardAPI != nil,
		vol.EmptyDir != nil,
		vol.Ephemeral != nil,
		vol.Image != nil,
		vol.PersistentVolumeClaim != nil,
		vol.Projected != nil,
		vol.Secret != nil:
		return -1
	case vol.HostPath != nil:
		return 0
	case vol.GCEPersistentDisk != nil:
		return 1
	case vol.AWSElasticBlockStore != nil:
		return 2
	case vol.GitRepo != nil:
		return 3
	case vol.NFS != nil:
		return 4
	case vol.ISCSI != nil:
		return 5
	case vol.Glusterfs != nil:
		return 6
	case vol.RBD != nil:
		return 7
	case vol.FlexVolume != nil:
		return 8
	case vol.Cinder != nil:
		return 9
	case vol.CephFS != nil:
		return 10
	case vol.Flocker != nil:
		return 11
	case vol.FC != nil:
		return 12
	case vol.AzureFile != nil:
		return 13
	case vol.VsphereVolume != nil:
		return 14
	case vol.Quobyte != nil:
		return 15
	case vol.AzureDisk != nil:
		return 16
	case vol.PhotonPersistentDisk != nil:
		return 17
	case vol.PortworxVolume != nil:
		return 18
	case vol.ScaleIO != nil:
		return 19
	case vol.StorageOS != nil:
		return 20
	}
	return len(forbiddenVolumeTypes)
}

// allowedVolumeTypes are the volume sources (their JSON field names) the
// restricted level admits, tested before the forbidden ones, as upstream
// does.
var allowedVolumeTypes = [...]string{
	"configMap",
	"csi",
	"downwardAPI",
	"emptyDir",
	"ephemeral",
	"image",
	"persistentVolumeClaim",
	"projected",
	"secret",
}

// forbiddenVolumeTypes are the volume sources upstream's restrictedVolumes
// check names, in the order of its switch: a volume that sets several sources
// is reported under the first one, as upstream does.
var forbiddenVolumeTypes = [...]string{
	"hostPath",
	"gcePersistentDisk",
	"awsElasticBlockStore",
	"gitRepo",
	"nfs",
	"iscsi",
	"glusterfs",
	"rbd",
	"flexVolume",
	"cinder",
	"cephfs",
	"flocker",
	"fc",
	"azureFile",
	"vsphereVolume",
	"quobyte",
	"azureDisk",
	"photonPersistentDisk",
	"portworxVolume",
	"scaleIO",
	"storageos",
}

// AllowedVolumeTypes are the volume sources (JSON field names) the
// restricted level admits, in the order upstream tests them. The slice is
// the caller's to keep.
func AllowedVolumeTypes() []string { return slices.Clone(allowedVolumeTypes[:]) }

// ForbiddenVolumeTypes are the volume sources the restricted level refuses,
// in the order upstream tests them; a volume with none of these and none of
// AllowedVolumeTypes is of type "unknown" (field spec.volumes[*]). The slice
// is the caller's to keep.
func ForbiddenVolumeTypes() []string { return slices.Clone(forbiddenVolumeTypes[:]) }
