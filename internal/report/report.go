// Package report turns the engine's decisions on existing objects into
// PolicyReport results (wgpolicyk8s.io/v1alpha2), the format Policy Reporter
// and `kubectl get polr` read, and groups them into reports: one per judged
// object, whose scope it is (Kyverno's per-resource reports), split when it
// would grow past MaxResults results. Differing drops a controlled pod's
// results that repeat its controller's.
//
// It is pure: the background scan (controllers) reads objects and writes
// reports; this package only computes them, so that what a report says is
// tested without an API server. It must not import controller-runtime.
package report

import (
	"cmp"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"

	policyv1alpha1 "github.com/podsieve/podsieve/api/v1alpha1"
	reportv1alpha2 "github.com/podsieve/podsieve/api/wgpolicyk8s/v1alpha2"
	"github.com/podsieve/podsieve/internal/engine"
	"github.com/podsieve/podsieve/internal/words"
)

const (
	// Source is the results' source.
	Source = "podsieve"
	// LabelManagedBy marks the reports podsieve writes; the scan deletes
	// only reports that carry it.
	LabelManagedBy = "app.kubernetes.io/managed-by"
	// ManagedBy is LabelManagedBy's value.
	ManagedBy = "podsieve"
	// LabelScopeKind and LabelScopeUID say which object a report is about
	// (its scope), for kubectl get polr -l.
	LabelScopeKind = "podsieve.dev/scope-kind"
	LabelScopeUID  = "podsieve.dev/scope-uid"
	// LabelPolicyPrefix + <policy> (value "") marks a report that holds
	// results of that SecurityPolicy, when the name fits in a label key (63
	// characters), so that kubectl get polr -l policy.podsieve.dev/<policy>
	// lists them.
	LabelPolicyPrefix = "policy.podsieve.dev/"
	// MaxResults and MaxBytes bound one report, so that it stays well within
	// the API server's request and object size limits (about 1.5 MiB); a
	// namespace with more results for one policy gets more reports.
	MaxResults = 500
	MaxBytes   = 512 << 10
	// MaxMessage bounds a result's message, and MaxProperty each property
	// value, in bytes.
	MaxMessage  = 2048
	MaxProperty = 1024
)

// Result properties, for tools that filter on them.
const (
	PropertyControls          = "controls"
	PropertyFields            = "fields"
	PropertyExceptions        = "exceptions"
	PropertyRefusedExceptions = "refusedExceptions"
	PropertyLevel             = "level"
	PropertyVersion           = "version"
	PropertyAction            = "action"
	PropertyViolations        = "violations"
	// PropertyStandard and PropertyProcess are the keys Kyverno's results
	// carry (the Pod Security level; "background scan"), so that Policy
	// Reporter filters and metric labels written for Kyverno carry over.
	PropertyStandard = "standard"
	PropertyProcess  = "process"
	// PropertyResultID is a result's identity: the same object, policy,
	// rule and outcome give the same ID in every scan and every report,
	// which Policy Reporter takes as the result's ID (so a result is
	// announced once, and again when its outcome changes).
	PropertyResultID = "resultID"
	// ProcessBackground is PropertyProcess's value.
	ProcessBackground = "background scan"
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
	o := d.Object
	out := make([]Entry, 0, len(d.Results))
	for i := range d.Results {
		res := &d.Results[i]
		r := res.Rule
		e := Entry{Policy: r.Policy.Name, Exceptions: exceptionNames(res.Exceptions)}
		var controls, fields, uncovered []string
		excluded := 0
		for j := range res.Findings {
			f := &res.Findings[j]
			if f.Covered() {
				if res.Outcome != engine.Fail {
					controls = appendNew(controls, string(f.Control))
					fields = appendNew(fields, f.FieldPath(o))
				}
				excluded++
				continue
			}
			e.Violations++
			uncovered = append(uncovered, f.Describe(o))
			controls = appendNew(controls, string(f.Control))
			fields = appendNew(fields, f.FieldPath(o))
		}
		props := map[string]string{
			PropertyLevel:    string(r.Level),
			PropertyStandard: string(r.Level),
			PropertyVersion:  r.Version,
			PropertyAction:   string(r.Policy.Action),
			PropertyProcess:  ProcessBackground,
		}
		var result reportv1alpha2.PolicyResult
		var msg string
		switch {
		case res.Outcome == engine.Fail:
			result = reportv1alpha2.ResultFail
			if r.Policy.Action == policyv1alpha1.ActionWarn {
				result = reportv1alpha2.ResultWarn
			}
			msg = fmt.Sprintf("%s of %s: %s", words.Count(e.Violations, "violation"), r.LevelVersion(), strings.Join(uncovered, "; "))
			if fixes := res.PodLevelFixes(o); len(fixes) > 0 {
				msg += ". " + strings.Join(fixes, " ")
			}
			props[PropertyViolations] = fmt.Sprint(e.Violations)
		case len(e.Exceptions) > 0:
			result = reportv1alpha2.ResultSkip
			msg = fmt.Sprintf("%s of %s waived by PolicyException %s", words.Count(excluded, "violation"), r.LevelVersion(), strings.Join(e.Exceptions, ", "))
		default:
			result = reportv1alpha2.ResultPass
			msg = "meets " + r.LevelVersion()
			if excluded > 0 {
				msg += fmt.Sprintf(" (%s excluded by the policy)", words.Count(excluded, "violation"))
			}
		}
		props[PropertyResultID] = ResultID(ref, r.Policy.Name, r.Name, result)
		e.Signature = signature(res, result)
		for _, rf := range res.Refused {
			msg += fmt.Sprintf("; %s does not apply: %s", rf.Source, rf.Message)
			props[PropertyRefusedExceptions] = joinNew(props[PropertyRefusedExceptions], rf.Source.NamespacedName())
		}
		if len(controls) > 0 {
			props[PropertyControls] = strings.Join(controls, ",")
		}
		if fs := strings.Join(slices.DeleteFunc(fields, func(s string) bool { return s == "" }), ","); fs != "" {
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
		out = append(out, e)
	}
	return out
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

// Reports groups one namespace's entries into reports, one per judged object
// (Kyverno's per-resource reports): the report's scope is the object, it is
// owned by the object (so the garbage collector deletes it with the object)
// and it holds the results of every policy's rules on it, ordered by policy
// and rule. An object with more than MaxResults results, or about MaxBytes,
// gets more reports (Name).
func Reports(namespace string, entries []Entry) []*reportv1alpha2.PolicyReport {
	type object struct {
		ref     corev1.ObjectReference
		results []reportv1alpha2.PolicyReportResult
	}
	byObject := map[string]*object{}
	var keys []string
	for i := range entries {
		r := &entries[i].Result
		ref := r.Resources[0]
		k := objectKey(ref)
		o := byObject[k]
		if o == nil {
			o = &object{ref: ref}
			byObject[k] = o
			keys = append(keys, k)
		}
		o.results = append(o.results, *r)
	}
	slices.Sort(keys)
	out := make([]*reportv1alpha2.PolicyReport, 0, len(keys))
	for _, k := range keys {
		o := byObject[k]
		slices.SortStableFunc(o.results, compareResults)
		for chunk, part := range chunks(o.results) {
			scope := o.ref
			scope.Namespace = namespace
			labels := map[string]string{LabelManagedBy: ManagedBy, LabelScopeKind: scope.Kind}
			if scope.UID != "" {
				labels[LabelScopeUID] = string(scope.UID)
			}
			for i := range part {
				if k := LabelPolicyPrefix + part[i].Policy; len(validation.IsQualifiedName(k)) == 0 {
					labels[k] = ""
				}
			}
			r := &reportv1alpha2.PolicyReport{
				TypeMeta: reportTypeMeta(),
				ObjectMeta: metav1.ObjectMeta{
					Namespace: namespace,
					Name:      Name(scope, chunk),
					Labels:    labels,
				},
				Scope:   &scope,
				Summary: Summarize(part),
				Results: slices.Clone(part),
			}
			if scope.UID != "" {
				r.OwnerReferences = []metav1.OwnerReference{{
					APIVersion: scope.APIVersion, Kind: scope.Kind, Name: scope.Name, UID: scope.UID,
				}}
			}
			out = append(out, r)
		}
	}
	return out
}

// OwnLabel reports whether podsieve writes label k on its reports
// (Reports): other tools may label a report too, and those labels are
// theirs.
func OwnLabel(k string) bool {
	return k == LabelManagedBy || k == LabelScopeKind || k == LabelScopeUID || strings.HasPrefix(k, LabelPolicyPrefix)
}

// objectKey identifies a result's object: its UID, or its kind and name
// when it has none (only objects that never reached an API server).
func objectKey(ref corev1.ObjectReference) string {
	if ref.UID != "" {
		return string(ref.UID)
	}
	return ref.APIVersion + "/" + ref.Kind + "/" + ref.Namespace + "/" + ref.Name
}

// chunks splits an object's sorted results into reports of at most
// MaxResults results and about MaxBytes.
func chunks(results []reportv1alpha2.PolicyReportResult) [][]reportv1alpha2.PolicyReportResult {
	var out [][]reportv1alpha2.PolicyReportResult
	start, size := 0, 0
	for i := range results {
		n := approxSize(&results[i])
		if i > start && (i-start == MaxResults || size+n > MaxBytes) {
			out = append(out, results[start:i])
			start, size = i, 0
		}
		size += n
	}
	if start < len(results) {
		out = append(out, results[start:])
	}
	return out
}

// approxSize is a generous estimate of a result's size in JSON.
func approxSize(r *reportv1alpha2.PolicyReportResult) int {
	n := 400 + len(r.Policy) + len(r.Rule) + len(r.Message)
	for _, ref := range r.Resources {
		n += len(ref.Name) + len(ref.Namespace) + len(ref.APIVersion) + len(ref.Kind) + len(ref.UID)
	}
	for k, v := range r.Properties {
		n += len(k) + len(v) + 8
	}
	return n
}

// Name is the name of the chunk-th report of an object: podsieve-<uid> for
// the first and podsieve-<uid>-<n> for the others (an object's UID never
// ends in -<n>, so no object's report takes another's name). An object
// without a UID is named by a hash of its kind and name instead. The
// podsieve- prefix keeps the name apart from Kyverno's per-resource report
// of the same object, which is named by the bare UID.
func Name(ref corev1.ObjectReference, chunk int) string {
	id := string(ref.UID)
	if id == "" {
		sum := sha256.Sum256([]byte(objectKey(ref)))
		id = hex.EncodeToString(sum[:16])
	}
	if chunk > 0 {
		return fmt.Sprintf("podsieve-%s-%d", id, chunk+1)
	}
	return "podsieve-" + id
}

// Summarize counts results by outcome.
func Summarize(results []reportv1alpha2.PolicyReportResult) reportv1alpha2.PolicyReportSummary {
	var s reportv1alpha2.PolicyReportSummary
	for i := range results {
		switch results[i].Result {
		case reportv1alpha2.ResultPass:
			s.Pass++
		case reportv1alpha2.ResultFail:
			s.Fail++
		case reportv1alpha2.ResultWarn:
			s.Warn++
		case reportv1alpha2.ResultError:
			s.Error++
		case reportv1alpha2.ResultSkip:
			s.Skip++
		}
	}
	return s
}

func compareResults(a, b reportv1alpha2.PolicyReportResult) int {
	return cmp.Or(cmp.Compare(a.Policy, b.Policy), cmp.Compare(a.Rule, b.Rule))
}

// timestamp is a result's timestamp at a time.
func timestamp(at time.Time) metav1.Timestamp { return metav1.Timestamp{Seconds: at.Unix()} }

// Stamped returns entries, decided earlier, as if decided at at: their
// results carry at's timestamp (KeepTimestamps then keeps a report's older
// one where it already holds the same result). entries are not changed.
func Stamped(entries []Entry, at time.Time) []Entry {
	out := slices.Clone(entries)
	for i := range out {
		out[i].Result.Timestamp = timestamp(at)
	}
	return out
}

// KeepTimestamps gives each result of next that an old report already holds,
// unchanged but for its timestamp, the old timestamp: a timestamp says since
// when a result has been what it is, and rewriting it on every scan would
// rewrite every report on every scan.
func KeepTimestamps(next []*reportv1alpha2.PolicyReport, old []reportv1alpha2.PolicyReport) {
	type key struct {
		uid        types.UID
		kind, name string
		policy     string
		rule       string
	}
	keyOf := func(r *reportv1alpha2.PolicyReportResult) key {
		ref := r.Resources[0]
		return key{ref.UID, ref.Kind, ref.Name, r.Policy, r.Rule}
	}
	prev := map[key]*reportv1alpha2.PolicyReportResult{}
	for i := range old {
		for j := range old[i].Results {
			if r := &old[i].Results[j]; len(r.Resources) == 1 {
				prev[keyOf(r)] = r
			}
		}
	}
	for _, rep := range next {
		for j := range rep.Results {
			r := &rep.Results[j]
			p := prev[keyOf(r)]
			if p == nil {
				continue
			}
			ts := r.Timestamp
			r.Timestamp = p.Timestamp
			if !equalResults(r, p) {
				r.Timestamp = ts
			}
		}
	}
}

func equalResults(a, b *reportv1alpha2.PolicyReportResult) bool {
	return a.Source == b.Source && a.Policy == b.Policy && a.Rule == b.Rule && a.Category == b.Category &&
		a.Severity == b.Severity && a.Timestamp == b.Timestamp && a.Result == b.Result && a.Scored == b.Scored &&
		slices.Equal(a.Resources, b.Resources) && a.Message == b.Message && mapsEqual(a.Properties, b.Properties)
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

func appendNew(ss []string, s string) []string {
	if slices.Contains(ss, s) {
		return ss
	}
	return append(ss, s)
}

func joinNew(list, s string) string {
	if list == "" {
		return s
	}
	if slices.Contains(strings.Split(list, ","), s) {
		return list
	}
	return list + "," + s
}

// truncate keeps s within n bytes, on a rune boundary.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n - len("...")
	for cut > 0 && s[cut]&0xC0 == 0x80 {
		cut--
	}
	return s[:cut] + "..."
}
