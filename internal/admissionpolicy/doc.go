// Package admissionpolicy compiles SecurityPolicies and PolicyExceptions
// into ValidatingAdmissionPolicies: the same decisions as the engine's,
// evaluated in CEL by the API server itself, so that enforcement does not
// stop when no podsieve replica answers.
//
// It is the engine's second form, generated from the engine's own tables:
// the checks a rule runs (engine.Rule.Checks), the fields and controls of
// the vocabulary, the globs (engine.GlobRegexp). Each upstream check has its
// CEL mirror in checks.go, written after the engine's check_<id>.go;
// compile.go assembles a policy and its bindings, and rule.go compiles each
// rule in named steps (its checks, what covers a violation, what is left
// uncovered, the refusal's wording). A rule's exclusions are inlined as
// constants; PolicyExceptions in force are the parameters of the policy, one
// object per namespace. The differential tests (differential_test.go, and
// the envtest suite in test) evaluate the CEL with Kubernetes' own
// libraries and compare every decision with the engine's.
//
// What the CEL form cannot say exactly is refused (Compile returns an
// *Unsupported error naming the object and field), never compiled looser.
//
// It imports the engine and the API types; never controller-runtime.
package admissionpolicy
