// Package report turns the engine's decisions on existing objects into
// PolicyReport results (wgpolicyk8s.io/v1alpha2), the format Policy Reporter
// and `kubectl get polr` read, and groups them into bounded reports: one
// report per namespace and SecurityPolicy, split when it would grow past
// MaxResults results.
//
// It is pure: the background scan (controllers) reads objects and writes
// reports; this package only computes them, so that what a report says is
// tested without an API server. It must not import controller-runtime.
package report

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	policyv1alpha1 "github.com/podsieve/podsieve/api/v1alpha1"
	reportv1alpha2 "github.com/podsieve/podsieve/api/wgpolicyk8s/v1alpha2"
	"github.com/podsieve/podsieve/internal/engine"
)

const (
	// Source is the results' source.
	Source = "podsieve"
	// LabelManagedBy marks the reports podsieve writes; the scan deletes
	// only reports that carry it.
	LabelManagedBy = "app.kubernetes.io/managed-by"
	// ManagedBy is LabelManagedBy's value.
	ManagedBy = "podsieve"
	// AnnotationPolicy names the SecurityPolicy a report holds results of
	// (a label value could not hold every policy name).
	AnnotationPolicy = "podsieve.dev/policy"
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
			msg = fmt.Sprintf("%s of %s: %s", plural(e.Violations, "violation"), r.LevelVersion(), strings.Join(uncovered, "; "))
			props[PropertyViolations] = fmt.Sprint(e.Violations)
		case len(e.Exceptions) > 0:
			result = reportv1alpha2.ResultSkip
			msg = fmt.Sprintf("%s of %s waived by PolicyException %s", plural(excluded, "violation"), r.LevelVersion(), strings.Join(e.Exceptions, ", "))
		default:
			result = reportv1alpha2.ResultPass
			msg = "meets " + r.LevelVersion()
			if excluded > 0 {
				msg += fmt.Sprintf(" (%s excluded by the policy)", plural(excluded, "violation"))
			}
		}
		props[PropertyResultID] = ResultID(ref, r.Policy.Name, r.Name, result)
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
		e.Result = reportv1alpha2.PolicyReportResult{
			Source:    Source,
			Policy:    r.Policy.Name,
			Rule:      r.Name,
			Category:  category(r),
			Severity:  severity(r),
			Timestamp: metav1.Timestamp{Seconds: at.Unix()},
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

// category names the standard and level, as Policy Reporter groups by it.
func category(r *engine.Rule) string {
	level := string(r.Level)
	if level != "" {
		level = strings.ToUpper(level[:1]) + level[1:]
	}
	return "Pod Security Standards (" + level + ")"
}

// severity: a baseline violation is a known privilege escalation; a
// restricted one is a missing hardening.
func severity(r *engine.Rule) reportv1alpha2.PolicySeverity {
	if r.Level == "baseline" {
		return reportv1alpha2.SeverityHigh
	}
	return reportv1alpha2.SeverityMedium
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

// Policy is what a report needs of the SecurityPolicy it belongs to: its
// name, and its UID for the owner reference.
type Policy struct {
	Name string
	UID  types.UID
}

// Reports groups one namespace's entries into reports: per policy, results
// ordered by resource then rule, at most MaxResults per report. Every report
// is owned by its SecurityPolicy, so that deleting the policy (or the
// namespace) deletes its reports. policies must hold every entry's policy.
func Reports(namespace string, entries []Entry, policies map[string]Policy) []*reportv1alpha2.PolicyReport {
	byPolicy := map[string][]reportv1alpha2.PolicyReportResult{}
	for i := range entries {
		byPolicy[entries[i].Policy] = append(byPolicy[entries[i].Policy], entries[i].Result)
	}
	names := make([]string, 0, len(byPolicy))
	for p := range byPolicy {
		names = append(names, p)
	}
	slices.Sort(names)
	var out []*reportv1alpha2.PolicyReport
	for _, name := range names {
		results := byPolicy[name]
		slices.SortStableFunc(results, compareResults)
		p := policies[name]
		for chunk, part := range chunks(results) {
			out = append(out, &reportv1alpha2.PolicyReport{
				TypeMeta: reportTypeMeta(),
				ObjectMeta: metav1.ObjectMeta{
					Namespace:   namespace,
					Name:        Name(name, chunk),
					Labels:      map[string]string{LabelManagedBy: ManagedBy},
					Annotations: map[string]string{AnnotationPolicy: name},
					OwnerReferences: []metav1.OwnerReference{{
						APIVersion: policyv1alpha1.GroupVersion.String(),
						Kind:       "SecurityPolicy",
						Name:       p.Name,
						UID:        p.UID,
					}},
				},
				Summary: Summarize(part),
				Results: slices.Clone(part),
			})
		}
	}
	return out
}

// chunks splits a policy's sorted results into reports of at most
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

// Name is the name of a policy's chunk-th report in a namespace:
// podsieve-<policy> for the first, and for the others podsieve-<hash>-<n>,
// where hash is of the policy name. Policy and report names share one
// alphabet, so a suffix on the policy's name could spell another policy's
// report name; the hash keeps them apart. A policy name too long to fit is
// shortened and suffixed with its hash.
func Name(policy string, chunk int) string {
	sum := sha256.Sum256([]byte(policy))
	hash := hex.EncodeToString(sum[:])[:12]
	if chunk > 0 {
		return fmt.Sprintf("podsieve-%s-%d", hash, chunk+1)
	}
	base := "podsieve-" + policy
	if len(base) > 240 {
		base = base[:220] + "-" + hash
	}
	return base
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
	ra, rb := a.Resources[0], b.Resources[0]
	return cmp.Or(cmp.Compare(ra.Kind, rb.Kind), cmp.Compare(ra.Name, rb.Name), cmp.Compare(a.Rule, b.Rule))
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

func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
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
