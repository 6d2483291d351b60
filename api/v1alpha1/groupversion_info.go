// Package v1alpha1 holds the podsieve API types of group policy.podsieve.dev:
// the cluster-scoped SecurityPolicy and the namespaced PolicyException.
//
// It contains types, constants and generated deep-copy code only. It must not
// import controller-runtime so that the engine, which reads these types, stays
// free of it.
//
// +kubebuilder:object:generate=true
// +groupName=policy.podsieve.dev
package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	// GroupVersion is the group and version of these types.
	GroupVersion = schema.GroupVersion{Group: "policy.podsieve.dev", Version: "v1alpha1"}

	// SchemeBuilder registers the types of this package with a scheme.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)

	// AddToScheme adds the types of this package to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

func addKnownTypes(scheme *runtime.Scheme) error {
	scheme.AddKnownTypes(GroupVersion,
		&SecurityPolicy{}, &SecurityPolicyList{},
		&PolicyException{}, &PolicyExceptionList{},
		&PodSecurityParams{}, &PodSecurityParamsList{},
	)
	metav1.AddToGroupVersion(scheme, GroupVersion)
	return nil
}
