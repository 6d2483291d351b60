package v1alpha1

// Condition types.
const (
	// ConditionReady is True when the object is in force: a SecurityPolicy is
	// compiled and enforced, a PolicyException is honoured.
	ConditionReady = "Ready"
	// ConditionScanned, on a SecurityPolicy with background: true, says
	// whether the background scan keeps its reports current: True when a
	// full scan completed recently, False when none has for too long. The
	// background scan writes it (server-side apply, field manager
	// FieldManagerBackgroundScan); it is absent while the scan is off.
	ConditionScanned = "Scanned"
	// ConditionEnforcedByAPIServer, on a SecurityPolicy, says whether the
	// API server enforces it itself, through the ValidatingAdmissionPolicy
	// podsieve compiled from it, so that it holds while no podsieve replica
	// answers: True when the policy in force is compiled and applied, False
	// with the reason when it is not. The manager's leader writes it
	// (server-side apply, field manager FieldManagerAdmissionPolicies) when
	// --admission-policies is on, and Disabled when it is off.
	ConditionEnforcedByAPIServer = "EnforcedByAPIServer"
	// ConditionStalled is True, with the Ready condition's reason and
	// message, when the object will not reach Ready without a change by a
	// person: a SecurityPolicy that is InvalidSpec or Degraded, a
	// PolicyException that is Expired, NotPermitted, Invalid,
	// LimitExceeded, or PolicyNotFound or RuleNotFound once it is a minute
	// old (before, a GitOps tool applying a policy and its exceptions
	// together meets those for a moment). It is absent otherwise. It is kstatus' abnormal-true
	// condition, so that tools that follow kstatus (Flux) reach a verdict
	// (Failed) instead of waiting out their timeout; while the controllers
	// have not observed a
	// generation (status.observedGeneration lags metadata.generation, and
	// a new object's status reads observedGeneration 0), kstatus says
	// InProgress.
	ConditionStalled = "Stalled"
)

// Reasons of the SecurityPolicy EnforcedByAPIServer condition.
const (
	// ReasonAdmissionPolicyApplied: the ValidatingAdmissionPolicy and its
	// bindings of the policy's current generation are in the API server.
	ReasonAdmissionPolicyApplied = "Applied"
	// ReasonAdmissionPolicyDisabled: the manager runs with
	// --admission-policies=false, or the API server does not serve
	// ValidatingAdmissionPolicy v1: only the webhook enforces.
	ReasonAdmissionPolicyDisabled = "Disabled"
	// ReasonAdmissionPolicyNotInForce: the policy is not in force (its
	// Ready condition says why), so nothing of it is compiled.
	ReasonAdmissionPolicyNotInForce = "NotInForce"
	// ReasonAdmissionPolicyDegraded: the policy is enforced in a form other
	// than its current spec (Degraded); the API server's form is removed
	// until the spec compiles, and only the webhook enforces.
	ReasonAdmissionPolicyDegraded = "PolicyDegraded"
	// ReasonAdmissionPolicyUnsupported: a part of the policy has no exact
	// CEL form; the message names it. Only the webhook enforces.
	ReasonAdmissionPolicyUnsupported = "Unsupported"
	// ReasonAdmissionPolicyFailed: the API server refused the compiled
	// objects; the message says why.
	ReasonAdmissionPolicyFailed = "ApplyFailed"
)

// FieldManagerAdmissionPolicies is the field manager of the
// EnforcedByAPIServer condition.
const FieldManagerAdmissionPolicies = "podsieve-admission-policies"

// Reasons of the SecurityPolicy Scanned condition.
const (
	// ReasonScanComplete: a full background scan (every namespace scanned
	// and its reports written) completed within the stall threshold.
	ReasonScanComplete = "ScanComplete"
	// ReasonScanStalled: no full scan has completed for longer than twice
	// the resync period plus ten minutes; reports may be stale.
	ReasonScanStalled = "ScanStalled"
)

// FieldManagerBackgroundScan is the field manager of the Scanned condition.
const FieldManagerBackgroundScan = "podsieve-background-scan"

// Field managers of the other parts of SecurityPolicy and PolicyException
// status. Each part of a status has one writer, which writes it by
// server-side apply under its own field manager (docs/architecture.md lists
// who writes what).
const (
	// FieldManagerSecurityPolicy writes a SecurityPolicy's Ready and Stalled
	// conditions, observedGeneration, rules, activeExceptions and
	// lastValidSpec: the SecurityPolicy controller, on the leader.
	FieldManagerSecurityPolicy = "podsieve-securitypolicy"
	// FieldManagerPolicyException writes a PolicyException's Ready and
	// Stalled conditions, observedGeneration, policies and controls: the
	// PolicyException controller, on the leader.
	FieldManagerPolicyException = "podsieve-policyexception"
	// FieldManagerBackgroundCounters writes the background scan's counters:
	// a SecurityPolicy's violations, a PolicyException's matchedObjects.
	FieldManagerBackgroundCounters = "podsieve-background-counters"
	// FieldManagerExceptionUsage writes a PolicyException's
	// lastAppliedTime, from every replica.
	FieldManagerExceptionUsage = "podsieve-exception-usage"
)

// Reasons of the SecurityPolicy Ready condition.
const (
	// ReasonCompiled: the policy compiled and is enforced as written.
	ReasonCompiled = "Compiled"
	// ReasonInvalidSpec: the policy never compiled and is not enforced.
	ReasonInvalidSpec = "InvalidSpec"
	// ReasonDegraded: the current spec does not compile; the last valid
	// compiled form stays in force.
	ReasonDegraded = "Degraded"
)

// Reasons of the PolicyException Ready condition.
const (
	// ReasonActive: the exception is honoured.
	ReasonActive = "Active"
	// ReasonPolicyNotFound: a named SecurityPolicy does not exist.
	ReasonPolicyNotFound = "PolicyNotFound"
	// ReasonRuleNotFound: no rule of a named policy matches ruleNames.
	ReasonRuleNotFound = "RuleNotFound"
	// ReasonNotPermitted: a named policy's exception guardrails refuse it.
	ReasonNotPermitted = "NotPermitted"
	// ReasonExpired: expiresAt has passed.
	ReasonExpired = "Expired"
	// ReasonInvalid: the exception contradicts itself or its namespace, for
	// example a restrictedField that is not a field of its control.
	ReasonInvalid = "Invalid"
	// ReasonLimitExceeded: its namespace holds more PolicyExceptions than the
	// manager's --max-exceptions-per-namespace, and this one is among the
	// newest (by creationTimestamp, then name); it is not in force.
	ReasonLimitExceeded = "LimitExceeded"
	// ReasonDeleting: the exception is being deleted (it has a
	// deletionTimestamp, and finalizers hold it): it is not honoured.
	ReasonDeleting = "Deleting"
)

// Event reasons, on both kinds.
const (
	EventReasonCompiled  = "Compiled"
	EventReasonActivated = "Activated"
	EventReasonRefused   = "Refused"
	EventReasonExpired   = "Expired"
)
