package report

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	policyv1alpha1 "github.com/podsieve/podsieve/api/v1alpha1"
	reportv1alpha2 "github.com/podsieve/podsieve/api/wgpolicyk8s/v1alpha2"
	"github.com/podsieve/podsieve/internal/engine"
	"github.com/podsieve/podsieve/internal/words"
)

// Entry is one rule's result on one object, with what the status counters
// need.
type Entry struct {
	// Policy is the SecurityPolicy's name.
	Policy string
	Result reportv1alpha2.PolicyReportResult
	// Violations counts the uncovered violations (0 unless Result is fail
	// or warn).
	Violations int
	// Exceptions are the namespace/name of the PolicyExceptions that covered
	// at least one violation.
	Exceptions []string
	// Signature is what the result says of the pod spec, whatever object
	// holds it: a hash of the outcome and of every finding (control,
	// container, image without tag or digest, pod-relative field, values,
	// what covered it), but not of the field's prefix or the object's
	// identity. A pod's result that has its
	// controller's signature repeats the controller's (Differing).
	Signature string
}

// Differing returns the entries of a controlled pod that say something its
// controller's entries for the same policy and rule do not: another
// outcome, another violation (a container a mutating webhook injected, such
// as a mesh's init container), another exception; or a rule that the
// controller does not match at all. A pod whose results all repeat its
// controller's has none, so that a Deployment with N violating replicas is
// one result, not N+1.
func Differing(pod, controller []Entry) []Entry {
	seen := make(map[[2]string]string, len(controller))
	for i := range controller {
		seen[[2]string{controller[i].Policy, controller[i].Result.Rule}] = controller[i].Signature
	}
	var out []Entry
	for i := range pod {
		sig, ok := seen[[2]string{pod[i].Policy, pod[i].Result.Rule}]
		if !ok || sig != pod[i].Signature {
			out = append(out, pod[i])
		}
	}
	return out
}

// signature is Entry.Signature of one rule's result. It is a cryptographic
// hash of an unambiguous encoding (each field prefixed with its length):
// whoever writes a pod (and may claim a controller in its ownerReferences)
// must not be able to make a different result compare equal to a
// controller's, and so leave it unreported. The image is hashed without its
// tag or digest, so that a webhook pinning images to digests changes
// nothing, and another image with the same violations does.
func signature(res *engine.RuleResult, result reportv1alpha2.PolicyResult) string {
	h := sha256.New()
	var n [8]byte
	field := func(s string) {
		binary.BigEndian.PutUint64(n[:], uint64(len(s)))
		h.Write(n[:])
		h.Write([]byte(s))
	}
	count := func(k int) { field(strconv.Itoa(k)) }
	field(string(result))
	count(len(res.Findings))
	for i := range res.Findings {
		f := &res.Findings[i]
		field(string(f.Control))
		field(f.CheckID)
		field(string(f.Scope))
		field(string(f.ContainerType))
		field(strconv.FormatBool(f.Sidecar))
		field(f.Container)
		field(imageRepository(f.Image))
		field(f.Field)
		field(f.Detail)
		count(len(f.Values))
		for _, v := range f.Values {
			field(v)
		}
		count(len(f.ExemptedBy))
		for _, src := range f.ExemptedBy {
			field(src.String())
		}
	}
	count(len(res.Exceptions))
	for _, src := range res.Exceptions {
		field(src.String())
	}
	count(len(res.Refused))
	for _, rf := range res.Refused {
		field(rf.Source.String())
		field(rf.Message)
	}
	return hex.EncodeToString(h.Sum(nil)[:16])
}

// imageRepository is an image reference without its digest and tag:
// registry.example/app:1 and registry.example/app@sha256:... are both
// registry.example/app.
func imageRepository(image string) string {
	if i := strings.IndexByte(image, '@'); i >= 0 {
		image = image[:i]
	}
	if i := strings.LastIndexByte(image, ':'); i > strings.LastIndexByte(image, '/') {
		image = image[:i]
	}
	return image
}

// Entries turns a background decision on one object into one entry per
// matching rule. ref identifies the object in the report; at is the
// result's timestamp.
//
// The outcome, per rule:
//   - fail: a violation no policy exclusion or exception covers (warn when
//     the policy's action is Warn, which only warns);
//   - skip: every violation is covered and a PolicyException covered at
//     least one, or an exception waived the whole rule;
//   - pass: no violation, or only violations the policy itself excludes.
//
// Its severity and category are the rule's (engine.RuleResult.Reporting):
// for a fail or warn, the highest severity among the uncovered violations'
// controls, as spec.rules[].controlSeverities and severity set them.
func Entries(d engine.Decision, ref corev1.ObjectReference, at time.Time) []Entry {
	out := make([]Entry, 0, len(d.Results))
	for i := range d.Results {
		out = append(out, ruleEntry(&d.Results[i], d.Object, ref, at))
	}
	return out
}

// ruleEntry is the report entry of one rule's result on object o.
func ruleEntry(res *engine.RuleResult, o *engine.Object, ref corev1.ObjectReference, at time.Time) Entry {
	r := res.Rule
	e := Entry{Policy: r.Policy.Name, Exceptions: exceptionNames(res.Exceptions)}
	sum := summarise(res, o)
	e.Violations = sum.violations
	props := map[string]string{
		PropertyLevel:    string(r.Level),
		PropertyStandard: string(r.Level),
		PropertyVersion:  r.Version,
		PropertyAction:   string(r.Policy.Action),
		PropertyProcess:  ProcessBackground,
	}
	result, msg := outcome(res, o, e.Exceptions, sum)
	if res.Outcome == engine.Fail {
		props[PropertyViolations] = fmt.Sprint(e.Violations)
	}
	props[PropertyResultID] = ResultID(ref, r.Policy.Name, r.Name, result)
	e.Signature = signature(res, result)
	for _, rf := range res.Refused {
		msg += fmt.Sprintf("; %s does not apply: %s", rf.Source, rf.Message)
		props[PropertyRefusedExceptions] = joinNew(props[PropertyRefusedExceptions], rf.Source.NamespacedName())
	}
	if len(sum.controls) > 0 {
		props[PropertyControls] = strings.Join(sum.controls, ",")
	}
	if fs := strings.Join(slices.DeleteFunc(sum.fields, func(s string) bool { return s == "" }), ","); fs != "" {
		props[PropertyFields] = fs
	}
	if len(e.Exceptions) > 0 {
		props[PropertyExceptions] = strings.Join(e.Exceptions, ",")
	}
	for k, v := range props {
		props[k] = truncate(v, MaxProperty)
	}
	severity, category := res.Reporting()
	e.Result = reportv1alpha2.PolicyReportResult{
		Source:    Source,
		Policy:    r.Policy.Name,
		Rule:      r.Name,
		Category:  category,
		Severity:  reportv1alpha2.PolicySeverity(severity),
		Timestamp: timestamp(at),
		Result:    result,
		// The report specification scores pass and fail; warn is
		// advisory (Kyverno marks it the same way).
		Scored:     result != reportv1alpha2.ResultWarn,
		Resources:  []corev1.ObjectReference{ref},
		Message:    truncate(msg, MaxMessage),
		Properties: props,
	}
	return e
}

// findingsSummary is what one rule's findings add up to in its entry.
type findingsSummary struct {
	// controls and fields are those of the uncovered findings, and of the
	// covered ones too unless the rule failed; each once, in order.
	controls, fields []string
	// uncovered describes each uncovered finding.
	uncovered []string
	// violations counts the uncovered findings, excluded the covered ones.
	violations, excluded int
}

// summarise adds up the findings of one rule's result on object o.
func summarise(res *engine.RuleResult, o *engine.Object) findingsSummary {
	var sum findingsSummary
	for j := range res.Findings {
		f := &res.Findings[j]
		if f.Covered() {
			if res.Outcome != engine.Fail {
				sum.controls = appendNew(sum.controls, string(f.Control))
				sum.fields = appendNew(sum.fields, f.FieldPath(o))
			}
			sum.excluded++
			continue
		}
		sum.violations++
		sum.uncovered = append(sum.uncovered, f.Describe(o))
		sum.controls = appendNew(sum.controls, string(f.Control))
		sum.fields = appendNew(sum.fields, f.FieldPath(o))
	}
	return sum
}

// outcome is the report's result for one rule and its message, before the
// refused exceptions are added to it.
func outcome(res *engine.RuleResult, o *engine.Object, exceptions []string, sum findingsSummary) (reportv1alpha2.PolicyResult, string) {
	r := res.Rule
	switch {
	case res.Outcome == engine.Fail:
		result := reportv1alpha2.ResultFail
		if r.Policy.Action == policyv1alpha1.ActionWarn {
			result = reportv1alpha2.ResultWarn
		}
		msg := fmt.Sprintf("%s of %s: %s", words.Count(sum.violations, "violation"), r.LevelVersion(), strings.Join(sum.uncovered, "; "))
		if fixes := res.PodLevelFixes(o); len(fixes) > 0 {
			msg += ". " + strings.Join(fixes, " ")
		}
		return result, msg
	case len(exceptions) > 0:
		return reportv1alpha2.ResultSkip, fmt.Sprintf("%s of %s waived by PolicyException %s", words.Count(sum.excluded, "violation"), r.LevelVersion(), strings.Join(exceptions, ", "))
	default:
		msg := "meets " + r.LevelVersion()
		if sum.excluded > 0 {
			msg += fmt.Sprintf(" (%s excluded by the policy)", words.Count(sum.excluded, "violation"))
		}
		return reportv1alpha2.ResultPass, msg
	}
}

// ResultID is the stable identity of the result of one rule on one object:
// a hash of the object's UID (its kind, namespace and name when it has no
// UID), the policy, the rule and the outcome. It does not change when other
// objects are added or results move between reports; it changes when the
// outcome does, so that a pass turned fail is announced.
func ResultID(ref corev1.ObjectReference, policy, rule string, result reportv1alpha2.PolicyResult) string {
	object := string(ref.UID)
	if object == "" {
		object = ref.APIVersion + "/" + ref.Kind + "/" + ref.Namespace + "/" + ref.Name
	}
	sum := sha256.Sum256([]byte(object + "\x00" + policy + "\x00" + rule + "\x00" + string(result)))
	return hex.EncodeToString(sum[:16])
}

func exceptionNames(sources []engine.Source) []string {
	if len(sources) == 0 {
		return nil
	}
	out := make([]string, len(sources))
	for i, s := range sources {
		out[i] = s.NamespacedName()
	}
	return out
}
