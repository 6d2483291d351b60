package render

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"sigs.k8s.io/yaml"

	policyv1alpha1 "github.com/podsieve/podsieve/api/v1alpha1"
	"github.com/podsieve/podsieve/internal/generate"
	"github.com/podsieve/podsieve/internal/offline"
	"github.com/podsieve/podsieve/internal/words"
)

// NothingToWaive writes podsieve exception generate's answer for a workload
// that needs no exception, or whose refusal no entry can waive: a comment,
// and the violations left unwaived because they do not refuse.
func NothingToWaive(out io.Writer, w offline.Workload, plan generate.Plan) {
	switch {
	case len(plan.Unwaivable) > 0:
		fmt.Fprintf(out, "# %s: no PolicyException entry can waive what refuses it (see the warnings).\n", w)
	default:
		fmt.Fprintf(out, "# %s is admitted: nothing to waive.\n", w)
	}
	writeNotWaived(out, plan.NotWaived)
}

func writeNotWaived(out io.Writer, notWaived []string) {
	for _, n := range notWaived {
		fmt.Fprintf(out, "# Not waived, as it reports and does not refuse (use --include-audit): %s.\n", n)
	}
}

// GeneratedException writes one exception podsieve exception generate
// prints: comments that say what it waives and whether the cluster will
// honour it, then the object as YAML, keys in the order a person reads them,
// with each entry the guardrails refuse marked. notWaived are the
// workload's violations left out because they do not refuse.
func GeneratedException(out io.Writer, w offline.Workload, ex generate.Exception, notWaived []string, opts generate.Options) {
	writeWaives(out, w, ex)
	writeNotWaived(out, notWaived)
	if !ex.Permitted() {
		writeRefusal(out, ex, opts)
	}
	writeExceptionYAML(out, ex)
}

// writeWaives is the comment that says what the exception is for and what
// it waives, with generate's notes.
func writeWaives(out io.Writer, w offline.Workload, ex generate.Exception) {
	if ex.Of != "" {
		fmt.Fprintf(out, "# PolicyException for the %s that %s creates; the one above matches the %s itself, by its exact name.\n", ex.Of, w, w.Object.Kind)
	} else {
		fmt.Fprintf(out, "# PolicyException for %s.\n", w)
	}
	verb := "waives"
	if !ex.Permitted() {
		verb = "would waive"
	}
	fmt.Fprintf(out, "# It %s, for SecurityPolicy %q %s %s:\n", verb, ex.Policy.Name, words.Plural(len(ex.Rules), "rule"), strings.Join(words.Quote(ex.Rules), ", "))
	for _, s := range ex.Waives {
		fmt.Fprintf(out, "#   %s\n", s)
	}
	for _, n := range ex.Notes {
		fmt.Fprintf(out, "# Note: %s.\n", n)
	}
}

// writeRefusal is the comment on an exception the policy's guardrails would
// not let apply: why, and what to do.
func writeRefusal(out io.Writer, ex generate.Exception, opts generate.Options) {
	fmt.Fprintf(out, "# REFUSED: policy %q's guardrails will not let this exception apply:\n", ex.Policy.Name)
	for _, r := range ex.Refused {
		fmt.Fprintf(out, "#   %s\n", r)
	}
	switch n := len(ex.RefusedEntries); n {
	case 0:
	case 1:
		fmt.Fprintln(out, "#   1 entry of spec.podSecurity goes beyond what the policy allows exceptions for (marked below)")
	default:
		fmt.Fprintf(out, "#   %d entries of spec.podSecurity go beyond what the policy allows exceptions for (marked below)\n", n)
	}
	g := ex.Policy.Guardrails()
	if g != nil && g.RequireJustification != nil && *g.RequireJustification && strings.TrimSpace(opts.Justification) == "" {
		fmt.Fprintln(out, "# Rerun with --justification TEXT to say why it is needed.")
	}
	if len(ex.RefusedEntries) > 0 || !ex.Policy.PermitsAny() {
		fmt.Fprintln(out, "# For what the policy does not allow, change the workload, or ask a cluster admin.")
	}
}

// writeExceptionYAML is the PolicyException itself, each entry the
// guardrails refuse marked.
func writeExceptionYAML(out io.Writer, ex generate.Exception) {
	pe := ex.Object
	fmt.Fprintf(out, "apiVersion: %s\nkind: %s\nmetadata:\n  name: %s\n  namespace: %s\nspec:\n",
		yamlScalar(pe.APIVersion), yamlScalar(pe.Kind), yamlScalar(pe.Name), yamlScalar(pe.Namespace))
	fmt.Fprintln(out, "  exceptions:")
	for _, t := range pe.Spec.Exceptions {
		fmt.Fprintf(out, "  - policyName: %s\n    ruleNames: %s\n", yamlScalar(t.PolicyName), yamlList(t.RuleNames))
	}
	if m := pe.Spec.Match; m != nil {
		writeMatch(out, m)
	}
	fmt.Fprintln(out, "  podSecurity:")
	for j, e := range pe.Spec.PodSecurity {
		if r, ok := ex.RefusedEntries[j]; ok {
			fmt.Fprintf(out, "  # REFUSED: %s\n", r)
		}
		if n, ok := ex.EntryNotes[j]; ok {
			fmt.Fprintf(out, "  # Note: %s.\n", n)
		}
		writeEntry(out, e)
	}
	if pe.Spec.Justification != "" {
		fmt.Fprintf(out, "  justification: %s\n", yamlScalar(pe.Spec.Justification))
	}
	if pe.Spec.ExpiresAt != nil {
		fmt.Fprintf(out, "  expiresAt: %s\n", yamlScalar(pe.Spec.ExpiresAt.UTC().Format(time.RFC3339)))
	}
}

// writeMatch is the exception's spec.match.
func writeMatch(out io.Writer, m *policyv1alpha1.ExceptionMatch) {
	fmt.Fprintln(out, "  match:")
	if len(m.Namespaces) > 0 {
		fmt.Fprintf(out, "    namespaces: %s\n", yamlList(m.Namespaces))
	}
	if len(m.Names) > 0 {
		fmt.Fprintf(out, "    names: %s\n", yamlList(m.Names))
	}
	if len(m.Kinds) > 0 {
		fmt.Fprintf(out, "    kinds: %s\n", yamlList(stringsOf(m.Kinds)))
	}
	if m.Selector != nil && len(m.Selector.MatchLabels) > 0 {
		fmt.Fprintln(out, "    selector:\n      matchLabels:")
		for _, k := range slices.Sorted(maps.Keys(m.Selector.MatchLabels)) {
			fmt.Fprintf(out, "        %s: %s\n", yamlScalar(k), yamlScalar(m.Selector.MatchLabels[k]))
		}
	}
}

// writeEntry is one entry of the exception's spec.podSecurity.
func writeEntry(out io.Writer, e policyv1alpha1.PodSecurityExclusion) {
	fmt.Fprintf(out, "  - controlName: %s\n", yamlScalar(string(e.ControlName)))
	if len(e.ContainerKinds) > 0 {
		fmt.Fprintf(out, "    containerKinds: [%s]\n", strings.Join(stringsOf(e.ContainerKinds), ", "))
	}
	if len(e.ContainerNames) > 0 {
		fmt.Fprintf(out, "    containerNames: %s\n", yamlList(e.ContainerNames))
	}
	if len(e.Images) > 0 {
		fmt.Fprintf(out, "    images: %s\n", yamlList(e.Images))
	}
	fmt.Fprintf(out, "    restrictedField: %s\n", yamlScalar(e.RestrictedField))
	if len(e.Values) > 0 {
		fmt.Fprintf(out, "    values: %s\n", yamlList(e.Values))
	}
}

// stringsOf converts typed strings (kinds, container kinds) to strings.
func stringsOf[S ~string](ss []S) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = string(s)
	}
	return out
}

// yamlScalar writes a string as a YAML scalar: plain when YAML reads it back
// as the same string, else double-quoted (a JSON string is a valid YAML
// double-quoted scalar).
func yamlScalar(s string) string {
	if b, err := yaml.Marshal(s); err == nil {
		plain := strings.TrimSuffix(string(b), "\n")
		var back string
		if !strings.ContainsAny(plain, "\n\"'") && yaml.Unmarshal([]byte(plain), &back) == nil && back == s {
			return plain
		}
	}
	return jsonString(s)
}

// yamlList writes a flow sequence of double-quoted strings, as the samples
// are written.
func yamlList(ss []string) string {
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = jsonString(s)
	}
	return "[" + strings.Join(q, ", ") + "]"
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
