// Package v1alpha2 holds the PolicyReport and ClusterPolicyReport kinds of
// group wgpolicyk8s.io, version v1alpha2: the report format of the Kubernetes
// Policy Working Group, which Policy Reporter and `kubectl get polr` read.
// podsieve's background scan writes PolicyReports; the CRDs generated from
// these types are shipped in config/policyreport for clusters that do not
// have them yet.
//
// It contains types and generated deep-copy code only; it must not import
// controller-runtime.
//
// +kubebuilder:object:generate=true
// +groupName=wgpolicyk8s.io
package v1alpha2

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	// GroupVersion is the group and version of these types.
	GroupVersion = schema.GroupVersion{Group: "wgpolicyk8s.io", Version: "v1alpha2"}

	// SchemeBuilder registers the types of this package with a scheme.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)

	// AddToScheme adds the types of this package to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

func addKnownTypes(scheme *runtime.Scheme) error {
	scheme.AddKnownTypes(GroupVersion,
		&PolicyReport{}, &PolicyReportList{},
		&ClusterPolicyReport{}, &ClusterPolicyReportList{},
	)
	metav1.AddToGroupVersion(scheme, GroupVersion)
	return nil
}
