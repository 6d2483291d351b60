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
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"

	reportv1alpha2 "github.com/podsieve/podsieve/api/wgpolicyk8s/v1alpha2"
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
	// LabelScopeUID is the UID of the report's scope (see LabelScopeKind).
	LabelScopeUID = "podsieve.dev/scope-uid"
	// LabelPolicyPrefix + <policy> (value "") marks a report that holds
	// results of that SecurityPolicy, when the name fits in a label key (63
	// characters), so that kubectl get polr -l policy.podsieve.dev/<policy>
	// lists them.
	LabelPolicyPrefix = "policy.podsieve.dev/"
	// MaxResults and MaxBytes bound one report, so that it stays well within
	// the API server's request and object size limits (about 1.5 MiB); a
	// namespace with more results for one policy gets more reports.
	MaxResults = 500
	// MaxBytes bounds one report's size (see MaxResults).
	MaxBytes = 512 << 10
	// MaxMessage bounds a result's message, and MaxProperty each property
	// value, in bytes.
	MaxMessage = 2048
	// MaxProperty bounds each property value (see MaxMessage).
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
	byObject := map[objectID]*object{}
	var keys []objectID
	for i := range entries {
		r := &entries[i].Result
		ref := r.Resources[0]
		k := idOf(ref)
		o := byObject[k]
		if o == nil {
			o = &object{ref: ref}
			byObject[k] = o
			keys = append(keys, k)
		}
		o.results = append(o.results, *r)
	}
	slices.SortFunc(keys, func(a, b objectID) int { return strings.Compare(a.String(), b.String()) })
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

// objectID identifies a result's object: its UID, or its kind and name
// when it has none (only objects that never reached an API server).
type objectID struct {
	uid              types.UID
	apiVersion, kind string
	name             types.NamespacedName
}

// idOf is the identity of the object a result is about.
func idOf(ref corev1.ObjectReference) objectID {
	if ref.UID != "" {
		return objectID{uid: ref.UID}
	}
	return objectID{apiVersion: ref.APIVersion, kind: ref.Kind, name: types.NamespacedName{Namespace: ref.Namespace, Name: ref.Name}}
}

// String is the UID, or <apiVersion>/<kind>/<namespace>/<name>: what the
// reports are sorted by, and what names a report of an object without a
// UID (Name).
func (id objectID) String() string {
	if id.uid != "" {
		return string(id.uid)
	}
	return id.apiVersion + "/" + id.kind + "/" + id.name.Namespace + "/" + id.name.Name
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
		sum := sha256.Sum256([]byte(idOf(ref).String()))
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
