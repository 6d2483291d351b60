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
)

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
