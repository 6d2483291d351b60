package v1alpha1

// Condition types.
const (
	// ConditionReady is True when the object is in force: a SecurityPolicy is
	// compiled and enforced, a PolicyException is honoured.
	ConditionReady = "Ready"
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
)

// Event reasons, on both kinds.
const (
	EventReasonCompiled  = "Compiled"
	EventReasonActivated = "Activated"
	EventReasonRefused   = "Refused"
	EventReasonExpired   = "Expired"
)
