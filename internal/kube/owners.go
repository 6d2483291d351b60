package kube

import policyv1alpha1 "github.com/podsieve/podsieve/api/v1alpha1"

// The writers of SecurityPolicy status: each field and condition type has
// exactly one (TestStatusOwnersCoverEachFieldOnce holds them to it).
var (
	// SecurityPolicyStatus is the SecurityPolicy controller's part; locked,
	// so that a copy from a cache that is behind cannot move
	// observedGeneration and lastValidSpec back to an older spec.
	SecurityPolicyStatus = StatusOwner{
		Manager:    policyv1alpha1.FieldManagerSecurityPolicy,
		Fields:     []string{"observedGeneration", "rules", "activeExceptions", "lastValidSpec"},
		Conditions: []string{policyv1alpha1.ConditionReady, policyv1alpha1.ConditionStalled},
		Locked:     true,
	}
	// PolicyScanHealth is the background scan's Scanned condition.
	PolicyScanHealth = StatusOwner{
		Manager:    policyv1alpha1.FieldManagerBackgroundScan,
		Conditions: []string{policyv1alpha1.ConditionScanned},
	}
	// PolicyScanCounters is the background scan's violations counter.
	PolicyScanCounters = StatusOwner{
		Manager: policyv1alpha1.FieldManagerBackgroundCounters,
		Fields:  []string{"violations"},
	}
	// PolicyAdmissionPolicies is the admission policies controller's
	// EnforcedByAPIServer condition.
	PolicyAdmissionPolicies = StatusOwner{
		Manager:    policyv1alpha1.FieldManagerAdmissionPolicies,
		Conditions: []string{policyv1alpha1.ConditionEnforcedByAPIServer},
	}
)

// The writers of PolicyException status, likewise.
var (
	// PolicyExceptionStatus is the PolicyException controller's part;
	// locked, so that a copy from a cache that is behind cannot move
	// observedGeneration back.
	PolicyExceptionStatus = StatusOwner{
		Manager:    policyv1alpha1.FieldManagerPolicyException,
		Fields:     []string{"observedGeneration", "policies", "controls"},
		Conditions: []string{policyv1alpha1.ConditionReady, policyv1alpha1.ConditionStalled},
		Locked:     true,
	}
	// ExceptionScanCounters is the background scan's matchedObjects
	// counter.
	ExceptionScanCounters = StatusOwner{
		Manager: policyv1alpha1.FieldManagerBackgroundCounters,
		Fields:  []string{"matchedObjects"},
	}
	// ExceptionUsage is lastAppliedTime, written from every replica's
	// record of admissions and scans; locked, so that a replica whose copy
	// is behind cannot move it back.
	ExceptionUsage = StatusOwner{
		Manager: policyv1alpha1.FieldManagerExceptionUsage,
		Fields:  []string{"lastAppliedTime"},
		Locked:  true,
	}
)

// SecurityPolicyStatusOwners are the writers of SecurityPolicy status.
func SecurityPolicyStatusOwners() []StatusOwner {
	return []StatusOwner{SecurityPolicyStatus, PolicyScanHealth, PolicyScanCounters, PolicyAdmissionPolicies}
}

// PolicyExceptionStatusOwners are the writers of PolicyException status.
func PolicyExceptionStatusOwners() []StatusOwner {
	return []StatusOwner{PolicyExceptionStatus, ExceptionScanCounters, ExceptionUsage}
}
