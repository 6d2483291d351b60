package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	policyv1alpha1 "github.com/podsieve/podsieve/api/v1alpha1"
	"github.com/podsieve/podsieve/internal/engine"
	"github.com/podsieve/podsieve/internal/generate"
	"github.com/podsieve/podsieve/internal/manifest"
)

func newExceptionCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "exception",
		Short: "Write PolicyExceptions",
		Args:  cobra.NoArgs,
	}
	cmd.AddCommand(newExceptionGenerateCommand())
	return cmd
}

// exceptionGenerateOptions are podsieve exception generate's flags.
type exceptionGenerateOptions struct {
	inputFlags
	name          string
	expiresIn     time.Duration
	justification string
	anyTag        bool
	includeAudit  bool
}

func newExceptionGenerateCommand() *cobra.Command {
	o := &exceptionGenerateOptions{}
	cmd := &cobra.Command{
		Use:   "generate -f WORKLOAD [-f POLICIES ...] [--expires-in DURATION] [--justification TEXT]",
		Short: "Print the PolicyException that waives exactly what refuses a workload",
		Long: `generate decides each pod-bearing object in the input as podsieve eval does
and prints, for each policy that refuses it, the PolicyException that waives
exactly the uncovered violations: one podSecurity entry per control, field,
image and set of values, naming the containers; match narrowed to the workload
(for a controller, two exceptions: one for the controller by its exact name
and kind, one for the objects it creates by name-* and kind; both select its
pod template labels); in the workload's namespace. An entry for a missing
setting (no values) also waives any value of its field; a comment says so. Violations already
covered by a policy's exclusions or by an exception in the input are left out.

The policy's guardrails shape it: expiresAt is set within maxDuration (from
--expires-in, or the longest permitted), --justification fills a required
justification. When the guardrails would still refuse it (a control they do
not allow, a missing justification), the exception is printed with a comment
saying why.

Exit status: 0 when the exceptions printed are all permitted, or nothing
needed waiving (a comment says so); 1 when a policy's guardrails would refuse
what is needed, or a violation cannot be waived field by field; 2 on bad
input.`,
		Example: `  # The exception an Istio-injected Deployment needs, for review
  podsieve exception generate -f deploy.yaml -f policies/ --justification "Istio sidecar, SEC-123" > polex.yaml

  # Any tag of the same images, for 30 days
  podsieve exception generate -f deploy.yaml -f policies/ --any-tag --expires-in 720h`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return o.run(cmd.InOrStdin(), cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	f := cmd.Flags()
	o.bind(f, false)
	f.StringVar(&o.name, "name", "", "metadata.name of the exception (default <workload>-<policy>); -<policy> is appended when several policies need one, and -pods to a controller's second exception")
	f.DurationVar(&o.expiresIn, "expires-in", 0, "set expiresAt this long from now, for example 720h (default: only when a policy requires it, the longest it permits)")
	f.StringVar(&o.justification, "justification", "", "spec.justification: why the exception is needed, for its reviewers")
	f.BoolVar(&o.anyTag, "any-tag", false, "match each image's repository with any tag (docker.io/istio/proxyv2:*) instead of the image as written")
	f.BoolVar(&o.includeAudit, "include-audit", false, "waive the violations of Audit and Warn policies too, which report but do not refuse")
	_ = cmd.MarkFlagRequired("filename")
	return cmd
}

// maxJustification is spec.justification's MaxLength in the CRD.
const maxJustification = 1024

func (o *exceptionGenerateOptions) run(stdin io.Reader, stdout, stderr io.Writer) error {
	if o.expiresIn < 0 || (o.expiresIn > 0 && o.expiresIn < time.Minute) {
		return fmt.Errorf("--expires-in %s: use a duration of at least 1m, for example 720h", o.expiresIn)
	}
	if n := utf8.RuneCountInString(o.justification); n > maxJustification {
		return fmt.Errorf("--justification: %d characters, and spec.justification holds at most %d; shorten it and link to the details", n, maxJustification)
	}
	set, in, now, err := o.load(stdin)
	if err != nil {
		return err
	}
	if err := requireWorkloads(in); err != nil {
		return err
	}
	if o.name != "" && len(in.workloads) > 1 {
		return fmt.Errorf("--name %s names the exception of one workload, and the input holds %d; generate for one workload at a time, or leave out --name", o.name, len(in.workloads))
	}
	if len(set.Policies) == 0 {
		fmt.Fprintln(stderr, "Warning: the input holds no SecurityPolicy, so nothing is refused and nothing needs waiving; add the cluster's policies with -f")
	}
	opts := generate.Options{
		Name: o.name, Now: now, ExpiresIn: o.expiresIn, Justification: o.justification,
		AnyTag: o.anyTag, IncludeAudit: o.includeAudit, ExceptionsNamespace: o.exceptionsNamespace,
	}
	snap := in.index.Snapshot()
	refused, unwaivable := 0, 0
	first := true
	// Two workloads of one name and namespace (a Deployment and a Pod) must
	// not print two exceptions of one name, which would replace each other.
	names := map[string]bool{}
	unique := func(pe *policyv1alpha1.PolicyException, kind string) {
		name := pe.Name
		for i := 1; names[pe.Namespace+"/"+name]; i++ {
			name = fmt.Sprintf("%s-%s", pe.Name, strings.ToLower(kind))
			if i > 1 {
				name = fmt.Sprintf("%s-%d", name, i)
			}
		}
		names[pe.Namespace+"/"+name] = true
		pe.Name = name
	}
	for _, w := range in.workloads {
		d := snap.Decide(w.object, now, engine.Admission)
		plan, err := generate.For(d, opts)
		if err != nil {
			return err
		}
		for _, u := range plan.Unwaivable {
			fmt.Fprintf(stderr, "Warning: %s %s/%s: %s: this failure could not be placed on a field, so no podSecurity entry can waive it; only a PolicyException with an empty podSecurity (the whole rule) can, which is for a cluster admin to decide\n",
				w.object.Kind, w.object.Namespace, w.object.Name, u)
			unwaivable++
		}
		if len(plan.Exceptions) == 0 {
			if !first {
				fmt.Fprintln(stdout, "---")
			}
			first = false
			writeNothingToWaive(stdout, w, plan)
			continue
		}
		for i, ex := range plan.Exceptions {
			if !first {
				fmt.Fprintln(stdout, "---")
			}
			first = false
			unique(ex.Object, w.object.Kind)
			var notWaived []string
			if i == 0 {
				notWaived = plan.NotWaived
			}
			writeGenerated(stdout, w, ex, notWaived, opts)
			if !ex.Permitted() {
				refused++
			}
		}
		if len(plan.Unwaivable) == 0 && !anyRefused(plan) {
			if err := verifyGenerated(set, w, plan, o, now); err != nil {
				return err
			}
		}
	}
	var problems []string
	if refused > 0 {
		problems = append(problems, fmt.Sprintf("the guardrails of its policy would refuse %s (see the comments)", plural(refused, "exception")))
	}
	if unwaivable > 0 {
		problems = append(problems, fmt.Sprintf("%s cannot be waived field by field", plural(unwaivable, "violation")))
	}
	if len(problems) > 0 {
		return &exitError{code: exitDenied, err: errors.New(strings.Join(problems, "; "))}
	}
	return nil
}

// parseNow is --now: RFC3339, or the current time when empty.
func anyRefused(plan generate.Plan) bool {
	for _, ex := range plan.Exceptions {
		if !ex.Permitted() {
			return true
		}
	}
	return false
}

func describeWorkload(w workload) string {
	return fmt.Sprintf("%s %s/%s (%s)", w.object.Kind, w.object.Namespace, w.object.Name, w.doc.Where())
}

func writeNothingToWaive(out io.Writer, w workload, plan generate.Plan) {
	switch {
	case len(plan.Unwaivable) > 0:
		fmt.Fprintf(out, "# %s: no PolicyException entry can waive what refuses it (see the warnings).\n", describeWorkload(w))
	default:
		fmt.Fprintf(out, "# %s is admitted: nothing to waive.\n", describeWorkload(w))
	}
	writeNotWaived(out, plan.NotWaived)
}

func writeNotWaived(out io.Writer, notWaived []string) {
	for _, n := range notWaived {
		fmt.Fprintf(out, "# Not waived, as it reports and does not refuse (use --include-audit): %s.\n", n)
	}
}

// writeGenerated prints one exception: comments that say what it waives and
// whether the cluster will honour it, then the object, keys in the order a
// person reads them, with each entry the guardrails refuse marked.
func writeGenerated(out io.Writer, w workload, ex generate.Exception, notWaived []string, opts generate.Options) {
	if ex.Of != "" {
		fmt.Fprintf(out, "# PolicyException for the %s that %s creates; the one above matches the %s itself, by its exact name.\n", ex.Of, describeWorkload(w), w.object.Kind)
	} else {
		fmt.Fprintf(out, "# PolicyException for %s.\n", describeWorkload(w))
	}
	verb := "waives"
	if !ex.Permitted() {
		verb = "would waive"
	}
	fmt.Fprintf(out, "# It %s, for SecurityPolicy %q %s %s:\n", verb, ex.Policy.Name, pluralWord(len(ex.Rules), "rule"), strings.Join(quoteEach(ex.Rules), ", "))
	for _, s := range ex.Waives {
		fmt.Fprintf(out, "#   %s\n", s)
	}
	for _, n := range ex.Notes {
		fmt.Fprintf(out, "# Note: %s.\n", n)
	}
	writeNotWaived(out, notWaived)
	if !ex.Permitted() {
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
	pe := ex.Object
	fmt.Fprintf(out, "apiVersion: %s\nkind: %s\nmetadata:\n  name: %s\n  namespace: %s\nspec:\n",
		yamlScalar(pe.APIVersion), yamlScalar(pe.Kind), yamlScalar(pe.Name), yamlScalar(pe.Namespace))
	fmt.Fprintln(out, "  exceptions:")
	for _, t := range pe.Spec.Exceptions {
		fmt.Fprintf(out, "  - policyName: %s\n    ruleNames: %s\n", yamlScalar(t.PolicyName), yamlList(t.RuleNames))
	}
	if m := pe.Spec.Match; m != nil {
		fmt.Fprintln(out, "  match:")
		if len(m.Names) > 0 {
			fmt.Fprintf(out, "    names: %s\n", yamlList(m.Names))
		}
		if len(m.Kinds) > 0 {
			kinds := make([]string, len(m.Kinds))
			for i, k := range m.Kinds {
				kinds[i] = string(k)
			}
			fmt.Fprintf(out, "    kinds: %s\n", yamlList(kinds))
		}
		if m.Selector != nil && len(m.Selector.MatchLabels) > 0 {
			fmt.Fprintln(out, "    selector:\n      matchLabels:")
			for _, k := range slices.Sorted(maps.Keys(m.Selector.MatchLabels)) {
				fmt.Fprintf(out, "        %s: %s\n", yamlScalar(k), yamlScalar(m.Selector.MatchLabels[k]))
			}
		}
	}
	fmt.Fprintln(out, "  podSecurity:")
	for j, e := range pe.Spec.PodSecurity {
		if r, ok := ex.RefusedEntries[j]; ok {
			fmt.Fprintf(out, "  # REFUSED: %s\n", r)
		}
		if n, ok := ex.EntryNotes[j]; ok {
			fmt.Fprintf(out, "  # Note: %s.\n", n)
		}
		fmt.Fprintf(out, "  - controlName: %s\n", yamlScalar(string(e.ControlName)))
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
	if pe.Spec.Justification != "" {
		fmt.Fprintf(out, "  justification: %s\n", yamlScalar(pe.Spec.Justification))
	}
	if pe.Spec.ExpiresAt != nil {
		fmt.Fprintf(out, "  expiresAt: %s\n", yamlScalar(pe.Spec.ExpiresAt.UTC().Format(time.RFC3339)))
	}
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

// verifyGenerated decides the workload again with the generated exceptions
// in the input (replacing any of the same name), through the same compile
// path as eval: the rules they target must now pass. It guards against the
// generator and the engine drifting apart.
func verifyGenerated(set *manifest.Set, w workload, plan generate.Plan, o *exceptionGenerateOptions, now time.Time) error {
	check := &manifest.Set{Policies: set.Policies, Namespaces: set.Namespaces, Workloads: []manifest.Document{*w.doc}}
	generated := map[string]bool{}
	for i, ex := range plan.Exceptions {
		generated[ex.Object.Namespace+"/"+ex.Object.Name] = true
		check.Exceptions = append(check.Exceptions, manifest.Document{Source: "<generated>", Index: i + 1, Object: ex.Object.DeepCopy()})
	}
	for _, d := range set.Exceptions {
		pe := d.Object.(*policyv1alpha1.PolicyException)
		if !generated[pe.Namespace+"/"+pe.Name] {
			check.Exceptions = append(check.Exceptions, d)
		}
	}
	in, err := compileSet(check, o.namespace, o.exceptionsNamespace, now)
	if err != nil {
		return fmt.Errorf("podsieve bug: the generated exceptions for %s do not load: %w", describeWorkload(w), err)
	}
	d := in.index.Snapshot().Decide(in.workloads[0].object, now, engine.Admission)
	for i := range d.Results {
		res := &d.Results[i]
		if res.Outcome == engine.Fail && (res.Enforced() || o.includeAudit) {
			return &exitError{code: exitDenied, err: fmt.Errorf("podsieve bug: the generated exceptions do not waive what refuses %s under %s/%s; please report it with the input",
				describeWorkload(w), res.Rule.Policy.Name, res.Rule.Name)}
		}
	}
	return nil
}

func quoteEach[S ~string](ss []S) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = fmt.Sprintf("%q", s)
	}
	return out
}

func pluralWord(n int, noun string) string {
	if n == 1 {
		return noun
	}
	return noun + "s"
}
