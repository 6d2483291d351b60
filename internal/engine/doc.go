// Package engine is podsieve's decision: whether a pod-bearing object passes
// the Pod Security Standards rules of the SecurityPolicies that select it,
// with the waivers (a rule's exclude entries and PolicyExceptions) that cover
// its violations. The webhook, the background scan and every CLI command
// decide through this package, with the same compiled objects; none of them
// re-implements a part of it.
//
// # What it owns
//
//   - Compilation (policy.go, exclusion.go, guardrails.go): CompilePolicy and
//     CompileException turn the API objects into Policy and Exception, with
//     globs compiled (glob.go), entries grouped by control and the guardrails
//     of spec.exceptions resolved. Every error names the field and what to
//     change; a compiled object never fails later for its spec.
//   - The vocabulary of fields (fields.go): the field paths each control can
//     report, which restrictedField and allowedFields accept. Control names
//     and pod-bearing kinds are api/v1alpha1's; PodBearingKinds (kinds.go) adds
//     where each kind keeps its pod template.
//   - The checks (checks.go, check_*.go): upstream k8s.io/pod-security-admission
//     runs every check of a rule's level and version once; each failing check
//     is attributed (attribute.go) to violations of one control, each on one
//     field, container and set of values. One file per check registers its
//     control and attributor.
//   - Selection and decision (decide.go, evaluate.go): SelectExceptions
//     chooses the exceptions that count for a rule; Rule.evaluate covers each
//     violation entry by entry; Decide runs every rule of every policy.
//   - The record of a decision: Decision, RuleResult and Finding say what
//     failed, which sources (Source) covered what, which exceptions were
//     tested (Selected) and which reached the object but did not count
//     (Refused). Renderers print it; explain.go answers "why not" from the
//     same tests the decision ran.
//   - Bounds (budget.go): every decision runs within Limits, a work budget and
//     a cancel channel, and fails closed when it reaches them.
//
// # How a request flows
//
// The caller wraps the object (NewAdmissionObject in the webhook, NewObject
// elsewhere), then asks index.Snapshot.DecideWithin, which passes the
// policies that may apply in the object's namespace and a Candidates function
// (the namespace's exceptions keyed by the names they match) to DecideWithin.
// The engine only ever sees compiled exceptions: a caller that stores them
// in another form compiles them for the decision and reports that work
// through Candidates, which the decision charges to its budget.
// For each rule that matches the object, DecideWithin runs the upstream
// checks and attributes the failures; only when there is a violation to
// waive does it select the exceptions (targets the rule, reaches the object,
// not expired, permitted by the policy's guardrails) and cover each
// violation with the rule's exclusions and the selected exceptions' entries. An Enforce rule that fails refuses the object; its
// DenyMessage and Hint say what to change.
//
// # What it must not import
//
// No controller-runtime and no client-go: the engine decides on values it is
// given, offline as in the cluster. Nothing of podsieve but api/v1alpha1. The
// linter's depguard rules enforce both (.golangci.yml).
package engine
